package pebble_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/partmap/partmap/internal/crashtest"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/pebble"
)

func TestMain(m *testing.M) {
	crashtest.ExpiryChildMain(openExpiry) // a writer TestExpiryCrash kills
	crashtest.SearchChildMain(openSearch) // a writer TestSearchCrash kills
	os.Exit(m.Run())
}

// openExpiry opens the store in the data directory dir, on 16 partitions:
// every check reads each one.
func openExpiry(dir string, clock func() time.Time, sweep time.Duration) (crashtest.ExpiryStore, error) {
	opts := pebble.Options{}
	opts.Partitions, opts.Clock, opts.SweepInterval = 16, clock, sweep
	return pebble.Open(dir, &opts)
}

// Clients set profile and field deadlines a few hundred milliseconds
// ahead while the process holding the store is SIGKILLed and restarted:
// after each restart nothing expired is visible, nothing acknowledged and
// unexpired is lost, and the sweeper reclaims the expired profiles from
// the counts without drift.
func TestExpiryCrash(t *testing.T) {
	cycles := storetest.CrashCycles(t, 8)
	res, err := crashtest.RunExpiry(context.Background(), crashtest.ExpiryConfig{
		Cycles: cycles, Seed: 1, Logf: t.Logf, Open: openExpiry, Where: t.TempDir(),
	})
	t.Log(res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Expired == 0 || res.InFlight == 0 {
		t.Fatal("no deadline passed across a restart, or no operation was in flight at a kill: nothing was tested")
	}
}
