package partmap_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/pebble"
)

// gatedStore holds its first write until gate opens, and records how many
// operations each write call carries; reads pass.
type gatedStore struct {
	partmap.Store
	entered, gate chan struct{}
	once          sync.Once
	mu            sync.Mutex
	calls         []int
	groupErr      error // what a transaction of several fails with, when set
}

func (g *gatedStore) wrote(n int) {
	g.mu.Lock()
	g.calls = append(g.calls, n)
	g.mu.Unlock()
	g.once.Do(func() {
		close(g.entered)
		<-g.gate
	})
}

func (g *gatedStore) Apply(ctx context.Context, op partmap.Operation) (partmap.OperationResult, error) {
	if op.Op != partmap.OpGet {
		g.wrote(1)
	}
	return g.Store.Apply(ctx, op)
}

func (g *gatedStore) Transact(ctx context.Context, ops []partmap.Operation) ([]partmap.OperationResult, error) {
	g.wrote(len(ops))
	if g.groupErr != nil && len(ops) > 1 {
		return nil, g.groupErr
	}
	return g.Store.Transact(ctx, ops)
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
	g := &gatedStore{Store: store, entered: make(chan struct{}), gate: make(chan struct{})}
	grouped := partmap.GroupWrites(g)
	first := make(chan error, 1)
	go func() {
		_, err := grouped.Apply(ctx, partmap.Operation{Op: partmap.OpPut, Profile: partmap.Profile{partmap.FieldEmail: "first@x.io"}})
		first <- err
	}()
	<-g.entered
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
	for i, op := range writes {
		go func() {
			res, err := grouped.Apply(ctx, op)
			results <- result{i, res, err}
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); partmap.QueuedWrites(grouped) < len(writes); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want %d", partmap.QueuedWrites(grouped), len(writes))
		}
	}
	// These pass by while the first group holds the lead.
	if res, err := grouped.Apply(ctx, partmap.Operation{Op: partmap.OpGet, Email: "nobody@x.io"}); err != nil || res.Record != nil {
		t.Fatalf("a read beside the groups: %+v %v", res, err)
	}
	close(g.gate)
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
	g.mu.Lock()
	calls := slices.Clone(g.calls)
	g.mu.Unlock()
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
			store := startedPebble(t, nil)
			g := &gatedStore{Store: store, entered: make(chan struct{}), gate: make(chan struct{}), groupErr: tc.err}
			grouped := partmap.GroupWrites(g)
			first := make(chan error, 1)
			go func() {
				_, err := grouped.Apply(ctx, partmap.Operation{Op: partmap.OpPut, Profile: partmap.Profile{partmap.FieldEmail: "first@x.io"}})
				first <- err
			}()
			<-g.entered
			errs := make(chan error, 6)
			for i := range 6 {
				go func() {
					_, err := grouped.Apply(ctx, partmap.Operation{Op: partmap.OpIncrement, Email: fmt.Sprintf("l%d@x.io", i), Field: "n", By: 1, Create: true})
					errs <- err
				}()
			}
			for partmap.QueuedWrites(grouped) < 6 {
				time.Sleep(time.Millisecond)
			}
			close(g.gate)
			if err := <-first; err != nil {
				t.Fatal(err)
			}
			for range 6 {
				if err := <-errs; partmap.ErrorCode(err) != tc.wantErr {
					t.Errorf("a write of the failed group: %v, want %q", err, tc.wantErr)
				}
			}
			g.mu.Lock()
			calls := slices.Clone(g.calls)
			g.mu.Unlock()
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
