package http_test

import (
	"context"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/pebble"
)

// Searches through the client equal the model's, as on the store behind
// it: the route, its paging and its errors lose nothing.
func TestSearchModel(t *testing.T) {
	storetest.RunSearchModel(t, func(t *testing.T, clock func() time.Time) (partmap.Store, func(context.Context) error) {
		o := pebble.Options{}
		o.Clock, o.SweepInterval, o.Partitions = clock, -1, 16
		srv, store := newServer(t, &o)
		return newClient(t, srv.URL, nil), func(ctx context.Context) error { _, err := store.Sweep(ctx); return err }
	})
}
