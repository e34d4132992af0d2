package redis_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/internal/redistest"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/redis"
)

// cluster is the Redis Cluster TestMain starts.
var cluster struct {
	*redistest.Cluster
	ns atomic.Int64
}

// openCluster returns a store on the cluster, in a namespace of its own.
func openCluster(t *testing.T, opts *redis.Options) *redis.Store {
	t.Helper()
	o := redis.Options{}
	if opts != nil {
		o = *opts
	}
	o.Namespace = fmt.Sprintf("t%d", cluster.ns.Add(1))
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cluster.Addrs})
	s := mustOpen(t, c, &o)
	return s
}

func TestClusterConformance(t *testing.T) {
	storetest.RunStore(t, func(t *testing.T) partmap.Store { return openCluster(t, nil) })
}

func TestClusterSearchIndexConformance(t *testing.T) {
	storetest.RunSearchIndexes(t, func(t *testing.T) partmap.Store { return openCluster(t, nil) })
}

func TestClusterDeleteAll(t *testing.T) {
	storetest.RunDeleteAll(t, func(t *testing.T) storetest.EmptierStore { return openCluster(t, nil) })
}

func TestClusterEngine(t *testing.T) {
	storetest.RunEngine(t, func(t *testing.T, wait time.Duration) *engine.Engine {
		if wait == 0 {
			wait = -1
		}
		return openCluster(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: wait}}).Engine()
	})
}

func TestClusterModel(t *testing.T) {
	storetest.RunModel(t, func(t *testing.T) partmap.Store { return openCluster(t, modelOptions()) })
}

// With MinReplicasAck, a commit returns only once a replica has it; on a
// server without replicas the write is answered as unavailable.
func TestReplicaAcknowledgements(t *testing.T) {
	ctx := context.Background()
	p := partmap.Profile{partmap.FieldEmail: "acked@example.com", "fullName": "A"}
	s := openCluster(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}, MinReplicasAck: 1})
	s.Start(ctx)
	if _, _, err := partmap.UpsertProfile(ctx, s, p, partmap.Condition{}); err != nil {
		t.Fatalf("cluster with one replica per master: %v", err)
	}
	alone := open(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}, MinReplicasAck: 1, ReplicaAckTimeout: 50 * time.Millisecond})
	alone.Start(ctx)
	if _, _, err := partmap.UpsertProfile(ctx, alone, p, partmap.Condition{}); partmap.ErrorCode(err) != partmap.EUNAVAILABLE {
		t.Fatalf("server without replicas: got %v, want unavailable", err)
	}
}

func TestClusterResize(t *testing.T) {
	storetest.RunResize(t, func(t *testing.T) partmap.Store {
		return openCluster(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}})
	})
}

func TestClusterExpiry(t *testing.T) {
	var namespaces sync.Map // *redis.Store → its namespace
	storetest.RunExpiry(t, func(t *testing.T, clock func() time.Time) (partmap.Store, func(context.Context) error) {
		s := openCluster(t, clocked(clock))
		namespaces.Store(s, fmt.Sprintf("t%d", cluster.ns.Load()))
		return s, sweeper(s)
	}, func(t *testing.T, old partmap.Store, clock func() time.Time) (partmap.Store, func(context.Context) error) {
		ns, _ := namespaces.Load(old)
		if err := old.(*redis.Store).Close(); err != nil {
			t.Fatal(err)
		}
		o := clocked(clock)
		o.Namespace = ns.(string)
		s := mustOpen(t, goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cluster.Addrs}), o)
		namespaces.Store(s, ns)
		return s, sweeper(s)
	})
}
