//go:build !fuzzsmoke

// make fuzz builds with the tag fuzzsmoke, which leaves this file out: it
// imports the Pebble store and storetest, and the package's fuzzing
// binary would compile them again, coverage-instrumented, as test
// variants.

package partmap_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/pebble"
)

// leadGated groups the writes of a gated store (groupErr failing its
// transactions of several, when set), and starts a first write, which
// leads a group of its own and waits in the store until g.Gate closes.
func leadGated(t *testing.T, store partmap.Store, groupErr error) (g *storetest.Gated, grouped partmap.Store, first <-chan error) {
	t.Helper()
	g = storetest.NewGated(store)
	g.GroupErr = groupErr
	grouped = partmap.GroupWrites(g)
	done := make(chan error, 1)
	go func() {
		_, err := grouped.Apply(context.Background(), partmap.Operation{Op: partmap.OpPut, Profile: partmap.Profile{partmap.FieldEmail: "first@x.io"}})
		done <- err
	}()
	<-g.Entered
	return g, grouped, done
}

// waitQueued waits until n writes wait for the next group.
func waitQueued(t *testing.T, grouped partmap.Store, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); partmap.QueuedWrites(grouped) < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want %d", partmap.QueuedWrites(grouped), n)
		}
	}
}

func startedPebble(t *testing.T, opts *pebble.Options) *pebble.Store {
	t.Helper()
	s, err := pebble.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

var tagX = "x"

// Writes that arrive while a group runs commit together as the next
// group, each with its own result; a second write of a profile waits for
// the group after, and reads, conditional writes and renames pass by.
func TestGroupWrites(t *testing.T) {
	ctx := context.Background()
	store := startedPebble(t, nil)
	g, grouped, first := leadGated(t, store, nil)
	type result struct {
		i   int
		res partmap.OperationResult
		err error
	}
	results := make(chan result, 20)
	var writes []partmap.Operation
	for i := range 12 {
		writes = append(writes, partmap.Operation{Op: partmap.OpIncrement, Email: fmt.Sprintf("c%d@x.io", i), Field: "n", By: int64(i + 1), Create: true})
	}
	// The same profile twice: the second waits for the next group. Its
	// increment fails alone (not an integer), the others apply.
	writes = append(writes,
		partmap.Operation{Op: partmap.OpPatch, Email: "C0@x.io", Patch: partmap.Patch{"tag": &tagX}},
		partmap.Operation{Op: partmap.OpIncrement, Email: "first@x.io", Field: "emailAddress", By: 1})
	// The patch of c0 starts once the increments have queued, so that it
	// is c0's second write whatever order the goroutines run in.
	for i, op := range writes {
		if i == 12 {
			waitQueued(t, grouped, 12)
		}
		go func() {
			res, err := grouped.Apply(ctx, op)
			results <- result{i, res, err}
		}()
	}
	waitQueued(t, grouped, len(writes))
	// These pass by while the first group holds the lead.
	if res, err := grouped.Apply(ctx, partmap.Operation{Op: partmap.OpGet, Email: "nobody@x.io"}); err != nil || res.Record != nil {
		t.Fatalf("a read beside the groups: %+v %v", res, err)
	}
	close(g.Gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range writes {
		r := <-results
		switch {
		case r.i < 12 && (r.err != nil || r.res.Value != int64(r.i+1)):
			t.Errorf("increment %d: %+v %v", r.i, r.res, r.err)
		case r.i == 12 && r.err != nil:
			t.Errorf("the patch of c0: %v", r.err)
		case r.i == 13 && r.err == nil:
			t.Errorf("an increment of emailAddress succeeded: %+v", r.res)
		}
	}
	calls := g.Calls()
	// The read passed by (no write call); the first alone; then a group
	// of the thirteen profiles, and the second write of c0 alone.
	if !slices.Equal(calls, []int{1, 13, 1}) {
		t.Fatalf("write calls of %v operations, want [1 13 1]", calls)
	}
	rec, err := store.FindProfile(ctx, "c0@x.io")
	if err != nil || rec.Profile["n"] != "1" || rec.Profile["tag"] != "x" {
		t.Fatalf("c0: %v %v", rec.Profile, err)
	}
}

// A group that meets a lock conflict wrote nothing: each write runs
// again alone, within its own wait; one that fails otherwise (it may have
// committed) is not run again, and each write gets the failure.
func TestGroupWritesThatFail(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		err       error
		wantErr   partmap.Code
		reapplied int
	}{
		{&partmap.Error{Code: partmap.ELOCKCONFLICT, Message: "held"}, "", 6},
		{&partmap.Error{Code: partmap.EUNAVAILABLE, Message: "no answer"}, partmap.EUNAVAILABLE, 0},
	} {
		t.Run(string(partmap.ErrorCode(tc.err)), func(t *testing.T) {
			g, grouped, first := leadGated(t, startedPebble(t, nil), tc.err)
			errs := make(chan error, 6)
			for i := range 6 {
				go func() {
					_, err := grouped.Apply(ctx, partmap.Operation{Op: partmap.OpIncrement, Email: fmt.Sprintf("l%d@x.io", i), Field: "n", By: 1, Create: true})
					errs <- err
				}()
			}
			waitQueued(t, grouped, 6)
			close(g.Gate)
			if err := <-first; err != nil {
				t.Fatal(err)
			}
			for range 6 {
				if err := <-errs; partmap.ErrorCode(err) != tc.wantErr {
					t.Errorf("a write of the failed group: %v, want %q", err, tc.wantErr)
				}
			}
			calls := g.Calls()
			want := []int{1, 6}
			for range tc.reapplied {
				want = append(want, 1)
			}
			if !slices.Equal(calls, want) {
				t.Fatalf("write calls of %v operations, want %v", calls, want)
			}
		})
	}
}
