package pebble_test

import (
	"context"
	"testing"

	"github.com/partmap/partmap/internal/crashtest"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/pebble"
)

// openSearch opens the store in the data directory dir, on 256
// partitions: every restart checks each one.
func openSearch(dir string) (crashtest.ExpiryStore, error) {
	opts := pebble.Options{}
	opts.Partitions = 256
	return pebble.Open(dir, &opts)
}

// The process that holds the store is SIGKILLed while a search index
// builds over 1,000 profiles, another's entries are being removed, and
// clients write: after each restart the build resumes and ends, every
// acknowledged write is there with its entries, every index answers
// exactly, and nothing drifts.
func TestSearchCrash(t *testing.T) {
	cycles := storetest.CrashCycles(t, 4)
	res, err := crashtest.RunSearch(context.Background(), crashtest.SearchConfig{
		Cycles: cycles, Seed: 3, Logf: t.Logf, Open: openSearch, Where: t.TempDir(), Preload: 1000,
	})
	t.Log(res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed == 0 || res.InFlight == 0 {
		t.Fatal("no restart found a build to resume, or no write was in flight at a kill: nothing was tested")
	}
}
