package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partmap/partmap"
)

// look reads the addresses of a rename race once and says whether it saw
// the profile at the first and at the second.
type look func(ctx context.Context) (atA, atB bool, err error)

// renameRace renames one profile back and forth between a and b from
// several goroutines while others look at both addresses, and fails t at
// a look that sees the profile at both, or (unless onlyBoth) at neither:
// a rename moves it in one atomic step. It runs until every reader has
// looked reads times and the renamers have moved the profile often, so
// that looks fall between renames, and the readers have seen the profile
// at each address (20 s at most); it fails if they never saw it at both,
// one after the other, since then nothing raced.
func renameRace(t *testing.T, s partmap.Store, a, b string, reads int, onlyBoth bool, see look) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: a, "fullName": "Moving"}, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	const renamers, readers, minRenames = 4, 4, 100
	var renames, readersDone, sawA, sawB atomic.Int64
	var (
		mu    sync.Mutex
		first error // the first thing wrong
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
		cancel()
	}
	var wg sync.WaitGroup
	for r := range renamers {
		wg.Go(func() {
			from, to := a, b
			if r%2 == 1 {
				from, to = b, a
			}
			for ctx.Err() == nil && readersDone.Load() < readers {
				_, err := partmap.RenameProfile(ctx, s, from, to, partmap.Condition{})
				switch code := partmap.ErrorCode(err); {
				case err == nil:
					renames.Add(1)
				case ctx.Err() != nil:
				case code == partmap.ENOTFOUND, code == partmap.EEXISTS, code == partmap.ELOCKCONFLICT:
					// Another renamer moved it first, or holds a partition.
				default:
					fail(fmt.Errorf("rename %s to %s: %w", from, to, err))
					return
				}
				from, to = to, from
			}
		})
	}
	// Until each address has been seen too, for a while: on two loaded
	// cores a Redis Cluster's readers once made 922 looks between
	// renames, all while the profile was at b.
	seenBoth := time.Now().Add(20 * time.Second)
	for r := range readers {
		wg.Go(func() {
			defer readersDone.Add(1)
			for n := 0; ctx.Err() == nil && (n < reads || renames.Load() < minRenames ||
				(sawA.Load() == 0 || sawB.Load() == 0) && time.Now().Before(seenBoth)); n++ {
				atA, atB, err := see(ctx)
				switch {
				case ctx.Err() != nil:
				case err != nil:
					fail(fmt.Errorf("reader %d: %w", r, err))
				case atA && atB:
					fail(fmt.Errorf("reader %d, look %d (after %d renames): the profile is at both %s and %s", r, n, renames.Load(), a, b))
				case !atA && !atB && !onlyBoth:
					fail(fmt.Errorf("reader %d, look %d (after %d renames): the profile is at neither %s nor %s", r, n, renames.Load(), a, b))
				case atA:
					sawA.Add(1)
				case atB:
					sawB.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
	if sawA.Load() == 0 || sawB.Load() == 0 {
		t.Fatalf("the readers saw the profile %d times at %s and %d at %s: it never moved while they looked", sawA.Load(), a, sawB.Load(), b)
	}
	t.Logf("%d renames; the readers saw it %d times at %s and %d at %s", renames.Load(), sawA.Load(), a, sawB.Load(), b)
}

// batchLook looks at a and b with one batch lookup.
func batchLook(s partmap.Store, a, b string) look {
	return func(ctx context.Context) (bool, bool, error) {
		got, err := s.FindProfiles(ctx, []string{a, b})
		if err != nil {
			return false, false, err
		}
		if len(got) != 2 {
			return false, false, fmt.Errorf("%d answers for 2 emails", len(got))
		}
		return got[0] != nil, got[1] != nil, nil
	}
}

// txLook looks at a and b with a transaction that only reads (getExpire
// without a time): it answers both, or fails naming the first missing.
func txLook(s partmap.Store, a, b string) look {
	return func(ctx context.Context) (bool, bool, error) {
		read := func(email string) partmap.Operation {
			return partmap.Operation{Op: partmap.OpGetExpire, Email: email, Fields: []string{"fullName"}}
		}
		_, err := s.Transact(ctx, []partmap.Operation{read(a), read(b)})
		var perr *partmap.Error
		switch {
		case err == nil:
			return true, true, nil
		case errors.Is(err, partmap.ErrLockConflict):
			return false, false, nil // saw nothing; onlyBoth lets it pass
		case errors.As(err, &perr) && perr.Code == partmap.ENOTFOUND && perr.Operation == 1:
			// a was missing, and b not read: counted as seen at b, which
			// only a look at both, never made, would contradict.
			return false, true, nil
		case errors.As(err, &perr) && perr.Code == partmap.ENOTFOUND && perr.Operation == 2:
			return true, false, nil
		}
		return false, false, err
	}
}

// runRenameRaces checks what every store promises readers of a rename:
// a batch lookup of two addresses in one partition, and a transaction
// that reads two in different partitions, see the profile at one of them.
func runRenameRaces(t *testing.T, started func(*testing.T) partmap.Store) {
	t.Run("RenameRaceInOnePartition", func(t *testing.T) {
		s := started(t)
		same, _ := Colliding(2, partmap.DefaultPartitions, "race1p")
		renameRace(t, s, same[0], same[1], 150, false, batchLook(s, same[0], same[1]))
	})
	t.Run("RenameRaceReadInTransactions", func(t *testing.T) {
		s := started(t)
		a, b := apart("racetx-a", "racetx-b")
		renameRace(t, s, a, b, 50, true, txLook(s, a, b))
	})
}

// RunBatchAtOneInstant checks the stores whose batch lookups read every
// partition from one view of the store (the embedded one, and the HTTP
// client in front of it): a batch lookup of a profile's two addresses in
// different partitions, while it is renamed back and forth, sees it at
// exactly one of them.
func RunBatchAtOneInstant(t *testing.T, open Opener) {
	started := startedBy(open)
	t.Run("RenameRaceAcrossPartitions", func(t *testing.T) {
		s := started(t)
		a, b := apart("race-a", "race-b")
		renameRace(t, s, a, b, 1000, false, batchLook(s, a, b))
	})
	t.Run("RenameRaceAmongOthers", func(t *testing.T) {
		// The two addresses among others in other partitions, of which a
		// batch reads several at once.
		s := started(t)
		a, b := apart("crowd-a", "crowd-b")
		others := Spread(40, "crowd-other")
		for _, e := range others {
			put(t, s, e, "Other")
		}
		ask := append([]string{a}, others...)
		ask = append(ask, b)
		renameRace(t, s, a, b, 300, false, func(ctx context.Context) (bool, bool, error) {
			got, err := s.FindProfiles(ctx, ask)
			if err != nil {
				return false, false, err
			}
			for i, rec := range got[1 : len(got)-1] {
				if rec == nil {
					return false, false, fmt.Errorf("%s is missing", others[i])
				}
			}
			return got[0] != nil, got[len(got)-1] != nil, nil
		})
	})
}
