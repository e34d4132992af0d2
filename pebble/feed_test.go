package pebble_test

import (
	"context"
	"sync"
	"testing"

	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/pebble"
)

func feedOptions(o storetest.FeedOptions) *pebble.Options {
	opts := pebble.DefaultOptions()
	opts.Partitions, opts.FeedRetention, opts.Clock = o.Partitions, o.Retention, o.Clock
	return &opts
}

func TestFeed(t *testing.T) {
	var dirs sync.Map // *pebble.Store → its data directory
	storetest.RunFeed(t, func(t *testing.T, o storetest.FeedOptions) (storetest.FeedStore, func(context.Context) error) {
		s, dir := MustOpen(t, feedOptions(o))
		dirs.Store(s, dir)
		return s, func(ctx context.Context) error { _, err := s.TrimFeed(ctx); return err }
	}, func(t *testing.T, old storetest.FeedStore, o storetest.FeedOptions) storetest.FeedStore {
		dir, _ := dirs.Load(old)
		if err := old.(*pebble.Store).Close(); err != nil {
			t.Fatal(err)
		}
		s := MustReopen(t, dir.(string), feedOptions(o))
		dirs.Store(s, dir)
		return s
	})
}
