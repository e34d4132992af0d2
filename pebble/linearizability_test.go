package pebble

import (
	"context"
	"errors"
	"fmt"
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

// slowReads widens the window between a read and the write that depends
// on it.
type slowReads struct{ *backend }

func (s slowReads) Get(ctx context.Context, part engine.Part, emails []string) ([]*partmap.Record, error) {
	time.Sleep(time.Millisecond)
	return s.backend.Get(ctx, part, emails)
}

// The linearizability check is only worth something if it fails for a store
// that loses updates: here, two directories over one database, whose
// writers each take only their own directory's partition locks, as if they
// skipped the lock.
func TestLinearizabilityCheckerCatchesSkippedLocks(t *testing.T) {
	s, _ := MustOpen(t, nil)
	var urls []string
	for range 2 {
		broken, err := directory.Open(context.Background(), slowReads{&backend{db: s.db, feed: s.backend.feed, present: s.backend.present}}, directory.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, SweepInterval: -1}})
		if err != nil {
			t.Fatal(err)
		}
		defer broken.Close() // before s closes the database: its feed trimmer reads it
		if _, err := broken.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(pmhttp.NewServer(broken, nil))
		defer srv.Close()
		urls = append(urls, srv.URL)
	}
	catches(t, "histories of a store without locks", "a lost update", func(int) porcupine.CheckResult {
		history := storetest.RecordHistory(t, func(i int) partmap.Store {
			c, err := pmhttp.NewClient(urls[i%len(urls)], nil)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}, storetest.LinearizabilityOptions{Clients: 8, OpsPerClient: 200, Emails: 2})
		return storetest.CheckHistory(t, history)
	})
}

// catches runs check, a history of a broken store, until porcupine finds
// one illegal, and fails the test if five are not: what it should find,
// a race, is likely in one history, not certain.
func catches(t *testing.T, histories, found string, check func(attempt int) porcupine.CheckResult) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		res := check(attempt)
		if res == porcupine.Illegal {
			t.Logf("found %s in history %d", found, attempt)
			return
		}
		if attempt == 5 {
			t.Fatalf("porcupine found %v in %d %s; it should have found %s", res, attempt, histories, found)
		}
	}
}

// splitTransactions commits each operation of a transaction as a
// transaction of its own, a little apart: a store whose transactions are
// not atomic. Its answers name the failing operation as a real one would.
type splitTransactions struct{ partmap.Store }

func (s splitTransactions) Transact(ctx context.Context, ops []partmap.Operation) ([]partmap.OperationResult, error) {
	var results []partmap.OperationResult
	for i, op := range ops {
		if i > 0 {
			time.Sleep(200 * time.Microsecond)
		}
		r, err := s.Store.Transact(ctx, []partmap.Operation{op})
		if err != nil {
			return nil, atOperation(err, i)
		}
		results = append(results, r...)
	}
	return results, nil
}

// The transaction check is only worth something if it fails for a store
// whose transactions are not all or nothing.
func TestTxLinearizabilityCheckerCatchesSplitTransactions(t *testing.T) {
	s := MustStart(t, nil)
	broken := splitTransactions{s}
	// A reader must fall into the gap, or a later step must see a
	// failed transaction's first half.
	catches(t, "histories of a store with split transactions", "a half-applied transaction", func(attempt int) porcupine.CheckResult {
		history := storetest.RecordTxHistory(t, func(int) partmap.Store { return broken },
			storetest.TxLinearizabilityOptions{Clients: 6, CallsPerClient: 40, Emails: storetest.Spread(4, fmt.Sprintf("split%d-", attempt))})
		return storetest.CheckTxHistory(t, history)
	})
}

// atOperation names the i-th operation (from 0) in err, as a real
// transaction's error does.
func atOperation(err error, i int) error {
	var e *partmap.Error
	if errors.As(err, &e) {
		tagged := *e
		tagged.Operation = i + 1
		return &tagged
	}
	return err
}

// copyThenDelete renames by a put of the new address, then a delete of the
// old one, a little apart: a rename that is not atomic for readers. Its
// transactions are split as splitTransactions', renames included.
type copyThenDelete struct{ partmap.Store }

func (s copyThenDelete) Apply(ctx context.Context, op partmap.Operation) (partmap.OperationResult, error) {
	if op.Op != partmap.OpRename {
		return s.Store.Apply(ctx, op)
	}
	rec, err := s.rename(ctx, op.Email, op.To)
	if err != nil {
		return partmap.OperationResult{}, err
	}
	return partmap.OperationResult{Op: op.Op, Email: rec.Profile.Email(), Record: &rec}, nil
}

func (s copyThenDelete) rename(ctx context.Context, from, to string) (partmap.Record, error) {
	rec, err := s.FindProfile(ctx, from)
	if err != nil {
		return partmap.Record{}, err
	}
	moved := rec.Profile.Clone()
	moved[partmap.FieldEmail] = to
	put, _, err := partmap.UpsertProfile(ctx, s, moved, partmap.Condition{IfNoneMatch: true})
	if err != nil {
		if partmap.ErrorCode(err) == partmap.EPRECONDITION {
			err = &partmap.Error{Code: partmap.EEXISTS}
		}
		return partmap.Record{}, err
	}
	time.Sleep(200 * time.Microsecond)
	if err := partmap.DeleteProfile(ctx, s, from, partmap.Condition{}); err != nil {
		return partmap.Record{}, err
	}
	return put, nil
}

func (s copyThenDelete) Transact(ctx context.Context, ops []partmap.Operation) ([]partmap.OperationResult, error) {
	var results []partmap.OperationResult
	for i, op := range ops {
		if op.Op != partmap.OpRename {
			r, err := splitTransactions{s.Store}.Transact(ctx, []partmap.Operation{op})
			if err != nil {
				return nil, err
			}
			results = append(results, r...)
			continue
		}
		rec, err := partmap.RenameProfile(ctx, s, op.Email, op.To, op.Cond)
		if err != nil {
			return nil, atOperation(err, i)
		}
		results = append(results, partmap.OperationResult{Op: op.Op, Email: op.To, Record: &rec})
	}
	return results, nil
}

// The rename race is only worth something if it catches a rename that
// shows a profile under both addresses for a moment.
func TestRenameRaceCatchesCopyThenDelete(t *testing.T) {
	s, _ := MustOpen(t, nil)
	catches(t, "rename races of a copy-then-delete rename", "a profile under two addresses", func(int) porcupine.CheckResult {
		if _, err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		// Each attempt starts from the race's setup: no profiles.
		for _, e := range storetest.Spread(4, "race") {
			partmap.DeleteProfile(context.Background(), s, e, partmap.Condition{})
		}
		history := storetest.RecordRenameRace(t, func(int) partmap.Store { return copyThenDelete{s} }, 40)
		return storetest.CheckTxHistory(t, history)
	})
}
