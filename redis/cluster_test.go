package redis_test

import (
	"context"
	"fmt"
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
	o := redis.DefaultOptions()
	if opts != nil {
		o = *opts
	}
	o.Namespace = fmt.Sprintf("t%d", cluster.ns.Add(1))
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cluster.Addrs})
	s, err := redis.Open(context.Background(), c, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestClusterConformance(t *testing.T) {
	storetest.RunStore(t, func(t *testing.T) partmap.Store { return openCluster(t, nil) })
}

func TestClusterEngine(t *testing.T) {
	storetest.RunEngine(t, func(t *testing.T, wait time.Duration) *engine.Engine {
		if wait == 0 {
			wait = -1
		}
		return openCluster(t, &redis.Options{LockWait: wait}).Engine()
	})
}

func TestClusterModel(t *testing.T) {
	storetest.RunModel(t, func(t *testing.T) partmap.Store { return openCluster(t, nil) })
}

// With MinReplicasAck, a commit returns only once a replica has it; on a
// server without replicas the write is answered as unavailable.
func TestReplicaAcknowledgements(t *testing.T) {
	ctx := context.Background()
	p := partmap.Profile{partmap.FieldEmail: "acked@example.com", "fullName": "A"}
	s := openCluster(t, &redis.Options{MinReplicasAck: 1})
	s.Start(ctx)
	if _, _, err := s.UpsertProfile(ctx, p, partmap.Condition{}); err != nil {
		t.Fatalf("cluster with one replica per master: %v", err)
	}
	alone := open(t, &redis.Options{MinReplicasAck: 1, ReplicaAckTimeout: 50 * time.Millisecond})
	alone.Start(ctx)
	if _, _, err := alone.UpsertProfile(ctx, p, partmap.Condition{}); partmap.ErrorCode(err) != partmap.EUNAVAILABLE {
		t.Fatalf("server without replicas: got %v, want unavailable", err)
	}
}

func TestClusterResize(t *testing.T) {
	storetest.RunResize(t, func(t *testing.T) partmap.Store { return openCluster(t, &redis.Options{}) })
}
