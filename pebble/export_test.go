package pebble

import (
	"context"
	"testing"

	"github.com/partmap/partmap/internal/engine"
)

// Engine is the directory's engine, for tests that hold a partition's lock
// or invoke the engine directly.
func (s *Store) Engine() *engine.Engine { return s.dir.Engine() }

// DelayedSyncs counts the fsyncs held back for companions (CommitDelay).
func (s *Store) DelayedSyncs() int64 { return s.backend.delayed.Load() }

// MustOpen opens a store in a fresh temporary directory, closed at the end.
func MustOpen(t testing.TB, opts *Options) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	return MustReopen(t, dir, opts), dir
}

// MustReopen opens the store at dir, closed at the end of the test.
func MustReopen(t testing.TB, dir string, opts *Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// MustStart opens a store in a fresh temporary directory, closed at the
// end, and starts it.
func MustStart(t testing.TB, opts *Options) *Store {
	t.Helper()
	s, _ := MustOpen(t, opts)
	if _, err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}
