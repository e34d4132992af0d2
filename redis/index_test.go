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

// The check finds entries in sorted sets of fields that no index uses,
// up to the last of the fields an index of partmap.Indexes can have
// (the deadlines'): the check reads only the sets that exist, and must
// still name each one's field. Search slots no index uses are left out by
// design (their entries may be a dropped index's, being removed).
func TestCheckReportsStrayEntries(t *testing.T) {
	ctx := context.Background()
	s := open(t, nil)
	s.Start(ctx)
	c := rawClient()
	defer c.Close()
	const email = "stray@example.com"
	p := partmap.PartitionOf(email, partmap.DefaultPartitions)
	if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: email, "companyName": "Acme"}, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	key := func(field int) string { return fmt.Sprintf("{%s}::x:%d", p, field) }
	member := func(value, email string) string {
		return string(binary.BigEndian.AppendUint32(nil, uint32(len(value)))) + value + email
	}
	// Field 2 is past the two indexed fields, 16 the deadlines' (no
	// profile has one), 40 a search slot no index uses.
	c.ZAdd(ctx, key(2), goredis.Z{Member: member("a", "ghost2@example.com")})
	c.ZAdd(ctx, key(partmap.MaxIndexes), goredis.Z{Member: member("123", "ghost16@example.com")})
	c.ZAdd(ctx, key(40), goredis.Z{Member: "dropped\x00ghost40@example.com"})
	got, err := s.CheckPartition(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	want := []partmap.IndexDrift{
		{Email: "ghost16@example.com", Field: "(expiry)", Value: "123"},
		{Email: "ghost2@example.com", Field: "#2", Value: "a"},
	}
	if got.OK() || got.Profiles != 1 || got.IndexEntries != 3 || !slices.Equal(got.Drift, want) {
		t.Fatalf("got %+v, want the drift %+v", got, want)
	}
}
