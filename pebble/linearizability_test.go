package pebble

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/internal/directory"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/internal/storetest"
)

// noLocks is a deliberately broken backend: every lock is granted at once,
// as if writers skipped the lock, and reads are slowed to widen the window
// between a read and the write that depends on it.
type noLocks struct{ *backend }

type nobody struct{}

func (nobody) Release() {}

func (noLocks) Lock(context.Context, []partmap.Partition, time.Duration) (engine.Lease, error) {
	return nobody{}, nil
}

func (n noLocks) Get(ctx context.Context, p partmap.Partition, email string) (partmap.Record, bool, error) {
	time.Sleep(time.Millisecond)
	return n.backend.Get(ctx, p, email)
}

// The linearizability check is only worth something if it fails for a store
// that loses updates: here, one whose writers skip the partition lock.
func TestLinearizabilityCheckerCatchesSkippedLocks(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	broken := directory.New(noLocks{newBackend(s.db, partmap.DefaultPartitions)}, partmap.DefaultPartitions, directory.Options{})
	if _, err := broken.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(pmhttp.NewServer(broken, nil))
	defer srv.Close()
	// A race is likely in one history, not certain, so allow a few.
	for attempt := 1; ; attempt++ {
		history := storetest.RecordHistory(t, func(int) partmap.Store {
			c, err := pmhttp.NewClient(srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}, storetest.LinearizabilityOptions{Clients: 8, OpsPerClient: 200, Emails: 2})
		res := storetest.CheckHistory(t, history)
		if res == porcupine.Illegal {
			t.Logf("found a lost update in history %d", attempt)
			return
		}
		if attempt == 5 {
			t.Fatalf("porcupine found %v in %d histories of a store without locks; it should have found a lost update", res, attempt)
		}
	}
}
