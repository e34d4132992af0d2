package pebble_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/pebble"
)

// Every acknowledged write was fsync'd: after a simulated power loss that
// drops all unsynced data, each one is still there. Pebble's crashable
// in-memory filesystem makes the loss exact, which a process kill cannot.
func TestAcknowledgedWritesSurvivePowerLoss(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		unsynced int
		minSync  time.Duration // delayed syncs must not weaken durability
	}{{0, 0}, {50, 0}, {0, 500 * time.Microsecond}} {
		unsynced := tc.unsynced
		t.Run(fmt.Sprintf("Keep%dPercentUnsynced/CommitDelay%v", unsynced, tc.minSync), func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			// Negative: sync at once, and hold a sync back for any number
			// of companions (0 would mean the defaults).
			opts := pebble.Options{}
			opts.FS, opts.CommitDelay, opts.CommitSiblings = fs, cmp.Or(tc.minSync, -1), -1
			s, err := pebble.Open("/data", &opts)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Start(ctx); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			acked := map[string]string{}
			stop := storetest.UntilStopped(8, func(w, i int) bool {
				if w%2 == 1 {
					// Bulk writes wait for their fsyncs together,
					// after committing: none may be acknowledged
					// before that.
					bulk := make([]partmap.Profile, 40)
					for k := range bulk {
						bulk[k] = partmap.Profile{partmap.FieldEmail: fmt.Sprintf("b%d-%d-%d@example.com", w, i%5, k), "fullName": fmt.Sprint(i)}
					}
					res, err := s.UpsertProfiles(ctx, bulk)
					if err != nil {
						return true
					}
					mu.Lock()
					for k, r := range res {
						if r.Err == nil {
							acked[bulk[k].Email()] = bulk[k]["fullName"]
						}
					}
					mu.Unlock()
					return true
				}
				email := fmt.Sprintf("w%d-%d@example.com", w, i%25)
				name := fmt.Sprint(i)
				if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: email, "fullName": name}, partmap.Condition{}); err != nil {
					return true // a lock conflict: not acknowledged
				}
				mu.Lock()
				acked[email] = name
				mu.Unlock()
				return true
			})
			for {
				mu.Lock()
				n := len(acked)
				mu.Unlock()
				if n >= 300 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			// Crash while writes are in flight: everything acknowledged so
			// far must be in the crashed image, at that value or a later one.
			mu.Lock()
			want := make(map[string]string, len(acked))
			for k, v := range acked {
				want[k] = v
			}
			mu.Unlock()
			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced, RNG: rand.New(rand.NewPCG(1, 2))})
			stop()
			if held := s.DelayedSyncs(); (tc.minSync > 0) != (held > 0) {
				t.Errorf("%d fsyncs held back with CommitDelay %v: the case does not test what it names", held, tc.minSync)
			}
			s.Close()

			s2, err := pebble.Open("/data", &pebble.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}, FS: crashed})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			for email, name := range want {
				rec, err := s2.FindProfile(ctx, email)
				if err != nil {
					t.Fatalf("%s acknowledged as %q is lost: %v", email, name, err)
				}
				var got, min int
				fmt.Sscan(rec.Profile["fullName"], &got)
				fmt.Sscan(name, &min)
				if got < min {
					t.Fatalf("%s: found write %d, but write %d was acknowledged", email, got, min)
				}
			}
			t.Logf("%d acknowledged profiles survived the crash", len(want))
		})
	}
}
