package pebble

import (
	"context"
	"testing"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// A partition's count follows its profiles, and the partition disappears
// with its last profile.
func TestPartitionCountFollowsProfiles(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := newBackend(s.db, partmap.DefaultPartitions)
	const p = partmap.Partition(278)
	inv := engine.Invocation{Load: []partmap.Partition{p}, Lock: []partmap.Partition{p}}
	write := func(fn func(tx *engine.Tx) error) {
		t.Helper()
		if err := s.Engine().Invoke(ctx, inv, fn); err != nil {
			t.Fatal(err)
		}
	}
	wantCount := func(want int64) {
		t.Helper()
		if got, err := b.count(p); err != nil || got != want {
			t.Fatalf("count: got %d, %v; want %d", got, err, want)
		}
		_, closer, err := s.db.Get(countKey(nil, p))
		if exists := err == nil; exists != (want > 0) {
			t.Fatalf("count key exists=%v with %d profiles", exists, want)
		}
		if closer != nil {
			closer.Close()
		}
	}
	rec := partmap.Record{Profile: partmap.Profile{"x": "y"}, Version: 9}
	write(func(tx *engine.Tx) error {
		tx.Put(p, "a", rec)
		tx.Put(p, "b", rec)
		return tx.Put(p, "a", rec) // twice in one invocation counts once
	})
	wantCount(2)
	write(func(tx *engine.Tx) error { return tx.Put(p, "a", rec) }) // replace
	wantCount(2)
	write(func(tx *engine.Tx) error { return tx.Delete(p, "nobody") })
	wantCount(2)
	write(func(tx *engine.Tx) error {
		tx.Put(p, "c", rec)
		return tx.Delete(p, "c") // created and deleted in one invocation
	})
	wantCount(2)
	write(func(tx *engine.Tx) error { tx.Delete(p, "a"); return tx.Delete(p, "b") })
	wantCount(0)
}
