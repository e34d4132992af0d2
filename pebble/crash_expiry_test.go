package pebble_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/crashtest"
	"github.com/partmap/partmap/pebble"
)

// expiryChildEnv names the data directory and seed of a child that
// TestExpiryCrash kills.
const expiryChildEnv = "PARTMAP_EXPIRY_CHILD"

func TestMain(m *testing.M) {
	if v := os.Getenv(expiryChildEnv); v != "" {
		os.Exit(expiryChild(v))
	}
	os.Exit(m.Run())
}

func expiryChild(v string) int {
	var dir string
	var seed uint64
	if _, err := fmt.Sscanf(v, "%d %s", &seed, &dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	opts := pebble.Options{}
	opts.Partitions, opts.SweepInterval = 16, 100*time.Millisecond
	s, err := pebble.Open(dir, &opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Fprintln(os.Stderr, crashtest.ExpiryChild(context.Background(), s, os.Stdout, seed))
	return 3
}

// Clients set profile and field deadlines a few hundred milliseconds
// ahead while the process holding the store is SIGKILLed and restarted:
// after each restart nothing expired is visible, nothing acknowledged and
// unexpired is lost, and the sweeper reclaims the expired profiles from
// the counts without drift.
func TestExpiryCrash(t *testing.T) {
	dir := t.TempDir()
	cycles := 8
	if n, err := strconv.Atoi(os.Getenv("PARTMAP_CRASH_CYCLES")); err == nil && n > 0 {
		cycles = n
	}
	res, err := crashtest.RunExpiry(context.Background(), crashtest.ExpiryConfig{
		Cycles: cycles, Seed: 1, Logf: t.Logf,
		Child: func(cycle int, seed uint64) *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %s", expiryChildEnv, seed, dir))
			cmd.Stderr = os.Stderr
			return cmd
		},
		Open: func(clock func() time.Time, sweep time.Duration) (partmap.Store, func(), error) {
			opts := pebble.Options{}
			opts.Partitions, opts.Clock, opts.SweepInterval = 16, clock, sweep
			s, err := pebble.Open(dir, &opts)
			if err != nil {
				return nil, nil, err
			}
			return s, func() { s.Close() }, nil
		},
	})
	t.Log(res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Expired == 0 || res.InFlight == 0 {
		t.Fatal("no deadline passed across a restart, or no operation was in flight at a kill: nothing was tested")
	}
}
