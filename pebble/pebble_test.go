package pebble_test

import (
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
