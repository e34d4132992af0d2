package pebble_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/pebble"
)

// openStore opens a store in a fresh temporary directory, closed at the end.
func openStore(t *testing.T) partmap.Store {
	s, _ := pebble.MustOpen(t, nil)
	return s
}

func TestConformance(t *testing.T) {
	storetest.RunStore(t, openStore)
}

func TestSearchIndexConformance(t *testing.T) {
	storetest.RunSearchIndexes(t, openStore)
}

// Every partition is in one database, so a batch lookup reads them all
// from one view of it.
func TestBatchAtOneInstant(t *testing.T) {
	storetest.RunBatchAtOneInstant(t, openStore)
}

func TestEngine(t *testing.T) {
	storetest.RunEngine(t, func(t *testing.T, wait time.Duration) *engine.Engine {
		s, _ := pebble.MustOpen(t, &pebble.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: wait}})
		return s.Engine()
	})
}

func TestModel(t *testing.T) {
	storetest.RunModel(t, openStore)
}

func TestResize(t *testing.T) {
	storetest.RunResize(t, func(t *testing.T) partmap.Store {
		s, _ := pebble.MustOpen(t, &pebble.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}})
		return s
	})
}

// The whole-map lock is kept in the store: a server that restarts holds
// it again until it is released or ends.
func TestWholeMapLockSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	s, dir := pebble.MustOpen(t, &pebble.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}})
	if _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	lock, err := s.LockWholeMap(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = pebble.MustReopen(t, dir, &pebble.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}})
	alice := partmap.Profile{partmap.FieldEmail: "alice@example.com"}
	if _, _, err := partmap.UpsertProfile(ctx, s, alice, partmap.Condition{}); !errors.Is(err, partmap.ErrLockConflict) {
		t.Fatalf("a write after the restart: %v, want a conflict", err)
	}
	if err := s.UnlockWholeMap(ctx, lock.Lease); err != nil {
		t.Fatal(err)
	}
	if _, _, err := partmap.UpsertProfile(ctx, s, alice, partmap.Condition{}); err != nil {
		t.Fatalf("a write after the release: %v", err)
	}
}

func TestExpiryModel(t *testing.T) {
	storetest.RunExpiryModel(t, func(t *testing.T, clock func() time.Time) (partmap.Store, func(context.Context) error) {
		opts := pebble.Options{}
		opts.Clock, opts.SweepInterval, opts.Partitions = clock, -1, 16
		s, _ := pebble.MustOpen(t, &opts)
		return s, func(ctx context.Context) error { _, err := s.Sweep(ctx); return err }
	})
}

func TestExpiry(t *testing.T) {
	options := func(clock func() time.Time) *pebble.Options {
		o := pebble.Options{}
		o.Clock, o.SweepInterval = clock, -1 // the suite sweeps when it says
		return &o
	}
	sweeper := func(s *pebble.Store) func(context.Context) error {
		return func(ctx context.Context) error { _, err := s.Sweep(ctx); return err }
	}
	var dirs sync.Map // *pebble.Store → its data directory
	storetest.RunExpiry(t, func(t *testing.T, clock func() time.Time) (partmap.Store, func(context.Context) error) {
		s, dir := pebble.MustOpen(t, options(clock))
		dirs.Store(s, dir)
		return s, sweeper(s)
	}, func(t *testing.T, old partmap.Store, clock func() time.Time) (partmap.Store, func(context.Context) error) {
		dir, _ := dirs.Load(old)
		if err := old.(*pebble.Store).Close(); err != nil {
			t.Fatal(err)
		}
		s := pebble.MustReopen(t, dir.(string), options(clock))
		dirs.Store(s, dir)
		return s, sweeper(s)
	})
}

// The background sweeper reclaims what expires without being asked.
func TestSweeperRunsByItself(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.T0)
	o := pebble.Options{}
	o.Clock = clock.Now
	o.SweepInterval = 5 * time.Millisecond
	s := pebble.MustStart(t, &o)
	const e, f = "sweep-profile@example.com", "sweep-field@example.com"
	for _, email := range []string{e, f} {
		// fullName stays: f loses a field, not the profile.
		if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: email, partmap.FieldCustomerTier: "gold", partmap.FieldFullName: "F"}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, op := range []partmap.Operation{
		{Op: partmap.OpExpire, Email: e, When: partmap.When{Millis: storetest.T0 + 1000}},
		{Op: partmap.OpExpire, Email: f, Fields: []string{partmap.FieldCustomerTier}, When: partmap.When{Millis: storetest.T0 + 1000}},
	} {
		if _, err := s.Apply(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	pe, pf := partmap.PartitionOf(e, partmap.DefaultPartitions), partmap.PartitionOf(f, partmap.DefaultPartitions)
	check := func(p partmap.Partition) partmap.PartitionCheck {
		c, err := s.CheckPartition(ctx, p)
		if err != nil || !c.OK() {
			t.Fatalf("check of %s: %+v, %v", p, c, err)
		}
		return c
	}
	time.Sleep(50 * time.Millisecond) // passes that find nothing due
	if c := check(pe); c.Profiles != 1 {
		t.Fatalf("swept before the deadline: %+v", c)
	}
	if c := check(pf); c.IndexEntries != 2 { // customerTier, and its expiry
		t.Fatalf("swept before the deadline: %+v", c)
	}
	clock.Set(storetest.T0 + 1000)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if check(pe).Profiles == 0 && check(pf).IndexEntries == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not swept after 10 s: %+v, %+v", check(pe), check(pf))
		}
	}
}

func TestSearchModel(t *testing.T) {
	storetest.RunSearchModel(t, func(t *testing.T, clock func() time.Time) (partmap.Store, func(context.Context) error) {
		opts := pebble.Options{}
		opts.Clock, opts.SweepInterval, opts.Partitions = clock, -1, 16
		s, _ := pebble.MustOpen(t, &opts)
		return s, func(ctx context.Context) error { _, err := s.Sweep(ctx); return err }
	})
}
