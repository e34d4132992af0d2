package redis_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/redis"
)

// The check reports entries that went missing, entries no profile backs,
// and a count that disagrees.
func TestCheckReportsDrift(t *testing.T) {
	ctx := context.Background()
	s := open(t, nil)
	s.Start(ctx)
	c := rawClient()
	defer c.Close()
	const email = "drift@example.com"
	p := partmap.PartitionOf(email, partmap.DefaultPartitions)
	if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: email, "companyName": "Acme", "customerTier": "gold"}, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	member := func(value, email string) string {
		return string(binary.BigEndian.AppendUint32(nil, uint32(len(value)))) + value + email
	}
	key := func(field int) string { return fmt.Sprintf("{%s}::x:%d", p, field) }
	if n, err := c.ZRem(ctx, key(1), member("gold", email)).Result(); err != nil || n != 1 {
		t.Fatalf("the index key layout changed (%d, %v): update this test", n, err)
	}
	c.ZAdd(ctx, key(0), goredis.Z{Member: member("Globex", "ghost@example.com")})
	c.Set(ctx, fmt.Sprintf("{%s}::count", p), "3", 0)
	storetest.WantDrift(t, s, p, email)
}

// Servers that open an existing directory share its indexed fields; one
// asking for others is refused.
func TestIndexesArePersisted(t *testing.T) {
	ctx := context.Background()
	a := open(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, Indexes: []string{"city"}}})
	c := rawClient()
	defer c.Close()
	a.Start(ctx)
	if _, err := redis.Open(ctx, c, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, Indexes: []string{"companyName"}}}); err == nil {
		t.Fatal("opened with other indexes")
	}
	b := mustOpen(t, c, nil)
	if stats, err := b.ListPartitions(ctx); err != nil || !slices.Equal(stats.Indexes, []string{"city"}) {
		t.Fatalf("indexes %v, %v", stats.Indexes, err)
	}
}
