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

// MustOpen opens a store in a fresh temporary directory, closed at the end.
func MustOpen(t testing.TB, opts *pebble.Options) (*pebble.Store, string) {
	t.Helper()
	dir := t.TempDir()
	return MustReopen(t, dir, opts), dir
}

// MustReopen opens the store at dir, closed at the end of the test.
func MustReopen(t testing.TB, dir string, opts *pebble.Options) *pebble.Store {
	t.Helper()
	s, err := pebble.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.RunStore(t, func(t *testing.T) partmap.Store {
		s, _ := MustOpen(t, nil)
		return s
	})
}

func TestEngine(t *testing.T) {
	storetest.RunEngine(t, func(t *testing.T, wait time.Duration) *engine.Engine {
		s, _ := MustOpen(t, &pebble.Options{LockWait: wait})
		return s.Engine()
	})
}

func TestModel(t *testing.T) {
	storetest.RunModel(t, func(t *testing.T) partmap.Store {
		s, _ := MustOpen(t, nil)
		return s
	})
}

func TestResize(t *testing.T) {
	storetest.RunResize(t, func(t *testing.T) partmap.Store {
		s, err := pebble.Open(t.TempDir(), &pebble.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// The whole-map lock is kept in the store: a server that restarts holds
// it again until it is released or ends.
func TestWholeMapLockSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	s, dir := MustOpen(t, &pebble.Options{})
	if _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	lock, err := s.LockWholeMap(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = MustReopen(t, dir, &pebble.Options{})
	alice := partmap.Profile{partmap.FieldEmail: "alice@example.com"}
	if _, _, err := s.UpsertProfile(ctx, alice, partmap.Condition{}); !errors.Is(err, partmap.ErrLockConflict) {
		t.Fatalf("a write after the restart: %v, want a conflict", err)
	}
	if err := s.UnlockWholeMap(ctx, lock.Lease); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.UpsertProfile(ctx, alice, partmap.Condition{}); err != nil {
		t.Fatalf("a write after the release: %v", err)
	}
}

func TestExpiry(t *testing.T) {
	options := func(clock func() time.Time) *pebble.Options {
		o := pebble.DefaultOptions()
		o.Clock, o.SweepInterval = clock, -1 // the suite sweeps when it says
		return &o
	}
	sweeper := func(s *pebble.Store) func(context.Context) error {
		return func(ctx context.Context) error { _, err := s.Sweep(ctx); return err }
	}
	var dirs sync.Map // *pebble.Store → its data directory
	storetest.RunExpiry(t, func(t *testing.T, clock func() time.Time) (partmap.Store, func(context.Context) error) {
		s, dir := MustOpen(t, options(clock))
		dirs.Store(s, dir)
		return s, sweeper(s)
	}, func(t *testing.T, old partmap.Store, clock func() time.Time) (partmap.Store, func(context.Context) error) {
		dir, _ := dirs.Load(old)
		if err := old.(*pebble.Store).Close(); err != nil {
			t.Fatal(err)
		}
		s := MustReopen(t, dir.(string), options(clock))
		dirs.Store(s, dir)
		return s, sweeper(s)
	})
}
