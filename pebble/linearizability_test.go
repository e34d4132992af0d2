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
	time.Sleep(200 * time.Microsecond)
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
	broken := directory.New(noLocks{&backend{db: s.db}}, partmap.DefaultPartitions, directory.Options{})
	if _, err := broken.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(pmhttp.NewServer(broken, nil))
	defer srv.Close()
	history := storetest.RecordHistory(t, func(int) partmap.Store {
		c, err := pmhttp.NewClient(srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}, storetest.LinearizabilityOptions{Clients: 8, OpsPerClient: 150, Emails: 3})
	if res := storetest.CheckHistory(t, history); res != porcupine.Illegal {
		t.Fatalf("porcupine found %v for a store without locks; it should have found a lost update", res)
	}
}
