package redis

import (
	"context"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

func (b *backend) Feed(context.Context, string, int) ([]engine.Event, string, error) {
	return nil, "", partmap.Errorf(partmap.EUNSUPPORTED, "the change feed on Redis is not built yet")
}

func (b *backend) TrimFeed(context.Context, int64, int64) (engine.FeedStats, error) {
	return engine.FeedStats{}, nil
}
