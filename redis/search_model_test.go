package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/redis"
)

// The search model on 16 partitions, on one redis-server and on the
// cluster, where a query reads the partitions of every master.
func TestSearchModel(t *testing.T) {
	storetest.RunSearchModel(t, func(t *testing.T, clock func() time.Time) (partmap.Store, func(context.Context) error) {
		s := open(t, searchModelOptions(clock))
		return s, sweeper(s)
	})
}

func TestClusterSearchModel(t *testing.T) {
	storetest.RunSearchModel(t, func(t *testing.T, clock func() time.Time) (partmap.Store, func(context.Context) error) {
		s := openCluster(t, searchModelOptions(clock))
		return s, sweeper(s)
	})
}

func searchModelOptions(clock func() time.Time) *redis.Options {
	o := redis.Options{}
	o.Clock, o.SweepInterval, o.Partitions = clock, -1, 16
	return &o
}
