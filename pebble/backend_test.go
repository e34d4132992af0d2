package pebble

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// A partition's count follows its profiles, and the partition disappears
// with its last profile.
func TestPartitionCountFollowsProfiles(t *testing.T) {
	ctx := context.Background()
	s, _ := MustOpen(t, nil)
	b := &backend{db: s.db, feed: s.backend.feed, present: s.backend.present}
	p := engine.Part{Partition: 278}
	inv := engine.Invocation{Load: []engine.Part{p}, Lock: []engine.Part{p}}
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
		_, closer, err := s.db.Get(countKey(nil, p.Partition))
		if exists := err == nil; exists != (want > 0) {
			t.Fatalf("count key exists=%v with %d profiles", exists, want)
		}
		if closer != nil {
			closer.Close()
		}
	}
	rec := partmap.Record{Profile: partmap.Profile{"x": "y"}, Version: 9}
	write(func(tx *engine.Tx) error {
		tx.Put(p, "a", rec, partmap.OpPut)
		tx.Put(p, "b", rec, partmap.OpPut)
		return tx.Put(p, "a", rec, partmap.OpPut) // twice in one invocation counts once
	})
	wantCount(2)
	write(func(tx *engine.Tx) error { return tx.Put(p, "a", rec, partmap.OpPut) }) // replace
	wantCount(2)
	write(func(tx *engine.Tx) error { return tx.Delete(p, "nobody", partmap.OpDelete) })
	wantCount(2)
	write(func(tx *engine.Tx) error {
		tx.Put(p, "c", rec, partmap.OpPut)
		return tx.Delete(p, "c", partmap.OpDelete) // created and deleted in one invocation
	})
	wantCount(2)
	write(func(tx *engine.Tx) error {
		tx.Delete(p, "a", partmap.OpDelete)
		return tx.Delete(p, "b", partmap.OpDelete)
	})
	wantCount(0)
}

// A bulk write covers several partitions per invocation; a lock conflict
// on one of them must fail only that partition's profiles.
func TestBulkConflictFailsOnlyTheBusyPartition(t *testing.T) {
	ctx := context.Background()
	s := MustStart(t, &Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}}) // fail fast
	var profiles []partmap.Profile
	for i := range 500 {
		profiles = append(profiles, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("p%d@example.com", i)})
	}
	busy := partmap.PartitionOf(profiles[0].Email(), partmap.DefaultPartitions)
	locked, unlock, done := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		done <- s.Engine().Invoke(ctx, engine.Invocation{Lock: []engine.Part{{Partition: busy}}}, func(*engine.Tx) error {
			close(locked)
			<-unlock
			return nil
		})
	}()
	<-locked
	res, err := s.UpsertProfiles(ctx, profiles)
	close(unlock)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for i, r := range res {
		inBusy := partmap.PartitionOf(profiles[i].Email(), partmap.DefaultPartitions) == busy
		switch {
		case inBusy && !errors.Is(r.Err, partmap.ErrLockConflict):
			t.Fatalf("%s in the busy %s: %v, want a lock conflict", profiles[i].Email(), busy, r.Err)
		case !inBusy && r.Err != nil:
			t.Fatalf("%s outside the busy partition: %v", profiles[i].Email(), r.Err)
		case inBusy:
			failed++
		}
	}
	if failed == 0 || failed == len(res) {
		t.Fatalf("%d of %d profiles failed: the test shows nothing", failed, len(res))
	}
}
