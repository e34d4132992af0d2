package http_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/redistest"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/redis"
)

// The HTTP semantics hold on every store: the conformance suite runs through
// the Go client and the server against a Redis server, as it does against
// Pebble (TestConformance). Not against a Redis Cluster too: what a cluster
// changes is the Redis store's, whose own tests run the suite on one
// (redis.TestClusterConformance), and the HTTP layer cannot tell the two
// apart; the suite's minute there is the CI's to spend elsewhere.
var shared = redistest.Shared{Prefix: "partmap-http-redis-"}

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

var namespaces atomic.Int64

func TestConformanceOnRedis(t *testing.T) {
	// open opens a store in a namespace of its own on the shared server,
	// closed at the end of the test.
	open := func(t *testing.T, opts redis.Options) *redis.Store {
		srv, err := shared.Server()
		if err != nil {
			t.Fatal(err)
		}
		opts.Namespace = fmt.Sprintf("http%d", namespaces.Add(1))
		opts.IndexPoll = -1 // alone on its Redis: its index builds need not wait for other servers
		store, err := redis.Open(context.Background(), goredis.NewClient(&goredis.Options{Network: "unix", Addr: srv.Socket}), &opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		return store
	}
	t.Run("Server/ExportDeadlines", func(t *testing.T) {
		storetest.RunExportDeadlines(t, func(t *testing.T, clock func() time.Time) (partmap.Store, func(context.Context) error) {
			store := open(t, redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, Clock: clock, SweepInterval: -1}})
			return newClient(t, serveStore(t, store, nil).URL, nil), func(ctx context.Context) error { _, err := store.Sweep(ctx); return err }
		})
	})
	t.Run("Server", func(t *testing.T) {
		storetest.RunStore(t, func(t *testing.T) partmap.Store {
			store := open(t, redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}})
			return newClient(t, serveStore(t, store, nil).URL, nil)
		})
	})
}
