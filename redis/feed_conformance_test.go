package redis_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/redis"
)

// The change feed's conformance suite, the one Pebble runs, on one server
// and (TestClusterFeedConformance) on the cluster. A reopened store is a
// new client on the same database (or namespace), as a restarted server
// would be.
func TestFeedConformance(t *testing.T) {
	t.Run("Server", func(t *testing.T) {
		runFeedConformance(t, func(t *testing.T) (func() goredis.UniversalClient, string) {
			db := int(server.nextDB.Add(1) % databases)
			dial := func() goredis.UniversalClient {
				return goredis.NewClient(&goredis.Options{Network: "unix", Addr: server.socket, DB: db})
			}
			c := dial()
			defer c.Close()
			if err := c.FlushDB(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			return dial, ""
		})
	})
}

func TestClusterFeedConformance(t *testing.T) {
	t.Run("Cluster", func(t *testing.T) {
		runFeedConformance(t, func(t *testing.T) (func() goredis.UniversalClient, string) {
			return func() goredis.UniversalClient {
				return goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cluster.Addrs})
			}, fmt.Sprintf("t%d", cluster.ns.Add(1))
		})
	})
}

// runFeedConformance runs storetest.RunFeed on stores that fresh opens:
// a dialer of an empty database and the namespace to use in it.
func runFeedConformance(t *testing.T, fresh func(t *testing.T) (func() goredis.UniversalClient, string)) {
	type where struct {
		dial      func() goredis.UniversalClient
		namespace string
	}
	var places sync.Map // *redis.Store → where
	openAt := func(t *testing.T, w where, o storetest.FeedOptions) *redis.Store {
		t.Helper()
		opts := redis.Options{}
		opts.Namespace, opts.Partitions, opts.FeedRetention, opts.Clock = w.namespace, o.Partitions, o.Retention, o.Clock
		s := mustOpen(t, w.dial(), &opts)
		places.Store(s, w)
		return s
	}
	storetest.RunFeed(t, func(t *testing.T, o storetest.FeedOptions) (storetest.FeedStore, func(context.Context) error) {
		dial, ns := fresh(t)
		s := openAt(t, where{dial, ns}, o)
		return s, func(ctx context.Context) error { _, err := s.TrimFeed(ctx); return err }
	}, func(t *testing.T, old storetest.FeedStore, o storetest.FeedOptions) storetest.FeedStore {
		w, _ := places.Load(old)
		if err := old.(*redis.Store).Close(); err != nil {
			t.Fatal(err)
		}
		return openAt(t, w.(where), o)
	}, storetest.FeedTraits{RetentionPerPartition: true, MirrorClock: true})
}
