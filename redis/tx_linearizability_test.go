package redis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/redis"
)

// openClusterShared returns two stores in one namespace of the cluster, as
// two partmap servers sharing it would be.
func openClusterShared(t *testing.T, opts *redis.Options) (*redis.Store, *redis.Store) {
	t.Helper()
	a := openCluster(t, opts)
	o := *opts
	o.Namespace = fmt.Sprintf("t%d", cluster.ns.Load())
	b := mustOpen(t, goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cluster.Addrs}), &o)
	return a, b
}

// Two servers commit transactions across partitions through the protocol
// in Redis, beside single-profile calls and renames; their locks wait
// only briefly, so they meet each other's lock conflicts. The clients'
// history is linearizable, on one server and on the cluster.
// PARTMAP_TX_CALLS sets the calls per client.
func TestTxTwoServersAreLinearizable(t *testing.T) {
	for name, shared := range map[string]func(*testing.T, *redis.Options) (*redis.Store, *redis.Store){
		"Single":  openShared,
		"Cluster": openClusterShared,
	} {
		t.Run(name, func(t *testing.T) {
			a, b := shared(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: 20 * time.Millisecond}})
			if _, err := a.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			storetest.CheckTxLinearizable(t, func(i int) partmap.Store {
				if i%2 == 0 {
					return a
				}
				return b
			}, storetest.TxLinearizabilityOptions{Clients: 8, CallsPerClient: storetest.TxCalls(t, 40)})
		})
	}
}
