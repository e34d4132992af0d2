package storetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/partmap/partmap"
)

// apart returns two canonical emails, built from prefixes, that live in
// different partitions.
func apart(a, b string) (string, string) {
	for i := 0; ; i++ {
		x, y := fmt.Sprintf("%s%d@example.com", a, i), fmt.Sprintf("%s%d@example.com", b, i)
		if partitionOf(x) != partitionOf(y) {
			return x, y
		}
	}
}

func wantCode(t *testing.T, err error, code partmap.Code, operation int) {
	t.Helper()
	var e *partmap.Error
	if partmap.ErrorCode(err) != code || !errors.As(err, &e) || e.Operation != operation {
		t.Fatalf("got %v (operation %d), want %s naming operation %d", err, func() int {
			if e != nil {
				return e.Operation
			}
			return -1
		}(), code, operation)
	}
}

func mustFind(t *testing.T, s partmap.Store, email string) partmap.Record {
	t.Helper()
	rec, err := s.FindProfile(context.Background(), email)
	if err != nil {
		t.Fatalf("find %s: %v", email, err)
	}
	return rec
}

func mustBeGone(t *testing.T, s partmap.Store, email string) {
	t.Helper()
	if _, err := s.FindProfile(context.Background(), email); !errors.Is(err, partmap.ErrNotFound) {
		t.Fatalf("find %s: %v, want not-found", email, err)
	}
}

func runTransactions(t *testing.T, started func(*testing.T) partmap.Store) {
	ctx := context.Background()

	t.Run("RenameMovesAProfile", func(t *testing.T) {
		s := started(t)
		from, to := apart("old", "new")
		old := put(t, s, from, "Ada")
		// The new address is canonicalised as any other.
		rec, err := partmap.RenameProfile(ctx, s, " "+from, "  NEW"+to[len("new"):], partmap.IfMatch(old.Version))
		if err != nil {
			t.Fatal(err)
		}
		assertProfile(t, rec.Profile, partmap.Profile{partmap.FieldEmail: to, "fullName": "Ada"})
		if rec.Version == old.Version || rec.Version == 0 {
			t.Fatalf("version %v after a rename from %v: a renamed profile is a new one", rec.Version, old.Version)
		}
		if got := mustFind(t, s, to); got.Version != rec.Version {
			t.Fatalf("stored version %v, rename answered %v", got.Version, rec.Version)
		}
		mustBeGone(t, s, from)
		wantPartitions(t, s, map[string]int64{partitionOf(to): 1})
		page, err := s.ListProfiles(ctx, partmap.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Profiles) != 1 || page.Profiles[0].Profile.Email() != to {
			t.Fatalf("listing after a rename: %v", page.Profiles)
		}
	})

	t.Run("RenameFollowsTheIndexes", func(t *testing.T) {
		s := started(t)
		stats, err := s.ListPartitions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		field := "companyName"
		if len(stats.Indexes) > 0 {
			field = stats.Indexes[0]
		}
		from, to := apart("idxold", "idxnew")
		if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: from, field: "v"}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		if _, err := partmap.RenameProfile(ctx, s, from, to, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		if len(stats.Indexes) > 0 {
			found := listWhere(t, s, 10, []partmap.Match{{Field: field, Value: "v"}}, true)
			if len(found) != 1 || found[0].Profile.Email() != to {
				t.Fatalf("search after a rename found %v, want only %s", emailsOf(found), to)
			}
		}
		// The check counts index entries of indexed fields, and the count.
		for _, p := range []string{partitionOf(from), partitionOf(to)} {
			n, _ := strconv.Atoi(p[len("partition-"):])
			check, err := s.CheckPartition(ctx, partmap.Partition(n))
			if err != nil {
				t.Fatal(err)
			}
			if !check.OK() {
				t.Fatalf("%s drifted after a rename: %+v", p, check)
			}
		}
	})

	t.Run("RenameErrors", func(t *testing.T) {
		s := started(t)
		from, to := apart("a", "b")
		a := put(t, s, from, "A")
		b := put(t, s, to, "B")
		if _, err := partmap.RenameProfile(ctx, s, "nobody@example.com", "x@example.com", partmap.Condition{}); !errors.Is(err, partmap.ErrNotFound) {
			t.Fatalf("rename of a missing profile: %v, want not-found", err)
		}
		if _, err := partmap.RenameProfile(ctx, s, from, to, partmap.Condition{}); partmap.ErrorCode(err) != partmap.EEXISTS {
			t.Fatalf("rename onto an existing profile: %v, want exists", err)
		}
		if _, err := partmap.RenameProfile(ctx, s, from, " "+from, partmap.Condition{}); partmap.ErrorCode(err) != partmap.EINVALID {
			t.Fatalf("rename to the same canonical email: %v, want invalid", err)
		}
		if _, err := partmap.RenameProfile(ctx, s, from, "   ", partmap.Condition{}); partmap.ErrorCode(err) != partmap.EINVALIDEMAIL {
			t.Fatalf("rename to a bad email: %v, want invalid-email", err)
		}
		if _, err := partmap.RenameProfile(ctx, s, from, "c@example.com", partmap.IfMatch(b.Version)); !errors.Is(err, partmap.ErrPrecondition) {
			t.Fatalf("rename with another profile's ETag: %v, want precondition-failed", err)
		}
		var e *partmap.Error
		if _, err := partmap.RenameProfile(ctx, s, from, to, partmap.Condition{}); errors.As(err, &e) && e.Operation != 0 {
			t.Fatalf("a rename's error names operation %d: it is no transaction", e.Operation)
		}
		// Nothing moved.
		if got := mustFind(t, s, from); got.Version != a.Version {
			t.Fatal("a failed rename changed its source")
		}
		if got := mustFind(t, s, to); got.Version != b.Version {
			t.Fatal("a failed rename changed its target")
		}
		mustBeGone(t, s, "c@example.com")
	})

	// Readers of the two addresses never see the profile under both, or
	// under neither: reading from, then to, a miss of from means the
	// rename is done, so to must be there; reading to, then from, a hit
	// of to means from must be gone.
	t.Run("RenameIsAtomicForReaders", func(t *testing.T) {
		s := started(t)
		const rounds = 30
		for r := range rounds {
			from, to := apart(fmt.Sprintf("r%dfrom", r), fmt.Sprintf("r%dto", r))
			put(t, s, from, "moving")
			var done atomic.Bool
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for reader := range 4 {
				wg.Go(func() {
					for !done.Load() {
						first, second := from, to
						if reader%2 == 1 {
							first, second = to, from
						}
						_, err1 := s.FindProfile(ctx, first)
						_, err2 := s.FindProfile(ctx, second)
						for _, err := range []error{err1, err2} {
							if err != nil && !errors.Is(err, partmap.ErrNotFound) {
								errs <- err
								return
							}
						}
						switch {
						case first == from && err1 != nil && err2 != nil:
							errs <- fmt.Errorf("%s was gone, then %s was missing too: the profile was nowhere", from, to)
							return
						case first == to && err1 == nil && err2 == nil:
							errs <- fmt.Errorf("%s was there, then %s was still there: the profile was in two places", to, from)
							return
						}
					}
				})
			}
			if err := retry(func() error { _, err := partmap.RenameProfile(ctx, s, from, to, partmap.Condition{}); return err }); err != nil {
				t.Fatal(err)
			}
			done.Store(true)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
		}
	})

	// Concurrent single-profile operations, renames and transactions over
	// four profiles in four partitions make a linearizable history.
	t.Run("TransactionsAreLinearizable", func(t *testing.T) {
		s := started(t)
		CheckTxLinearizable(t, func(int) partmap.Store { return s },
			TxLinearizabilityOptions{Clients: 6, CallsPerClient: TxCalls(t, 40)})
	})

	// Clients rename two profiles back and forth among four addresses
	// while readers look the addresses up (RecordRenameRace).
	t.Run("RenameRaceIsLinearizable", func(t *testing.T) {
		s := started(t)
		history := RecordRenameRace(t, func(int) partmap.Store { return s }, TxCalls(t, 40))
		if t.Failed() {
			return
		}
		logAnswers(t, history)
		if res := CheckTxHistory(t, history); res != porcupine.Ok {
			t.Fatalf("porcupine: %v", res)
		}
	})

	t.Run("TransactionAppliesInOrder", func(t *testing.T) {
		s := started(t)
		x, y := apart("x", "y")
		z, w := apart("z", "w")
		old := put(t, s, y, "Y")
		put(t, s, w, "W")
		one := "1"
		results, err := s.Transact(ctx, []partmap.Operation{
			{Op: partmap.OpPut, Profile: partmap.Profile{partmap.FieldEmail: x, "fullName": "X"}, Cond: partmap.Condition{IfNoneMatch: true}},
			{Op: partmap.OpIncrement, Email: x, Field: "visits", By: 1},
			{Op: partmap.OpIncrement, Email: x, Field: "visits", By: 2},
			{Op: partmap.OpPatch, Email: y, Patch: partmap.Patch{"fullName": nil, "tier": &one}, Cond: partmap.IfMatch(old.Version)},
			{Op: partmap.OpDelete, Email: w, Cond: partmap.Condition{IfExists: true}},
			{Op: partmap.OpRename, Email: y, To: z},
			{Op: partmap.OpPut, Profile: partmap.Profile{partmap.FieldEmail: w, "fullName": "W again"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(results) != 7 {
			t.Fatalf("%d results for 7 operations", len(results))
		}
		if r := results[0]; r.Op != partmap.OpPut || !r.Created || r.Email != x || r.Record == nil {
			t.Fatalf("put: %+v", r)
		}
		if results[1].Value != 1 || results[2].Value != 3 {
			t.Fatalf("two increments answered %d and %d, want 1 and 3", results[1].Value, results[2].Value)
		}
		if r := results[3]; r.FieldsAdded != 1 || r.FieldsDeleted != 1 {
			t.Fatalf("patch counted %d added, %d deleted; want 1 and 1", r.FieldsAdded, r.FieldsDeleted)
		}
		if r := results[4]; r.Op != partmap.OpDelete || r.Record != nil {
			t.Fatalf("delete: %+v", r)
		}
		if r := results[5]; r.Email != z || r.Record == nil || r.Record.Profile["tier"] != "1" {
			t.Fatalf("rename after the patch: %+v", r)
		}
		if r := results[6]; !r.Created {
			t.Fatalf("a put after a delete of the same profile did not create it: %+v", r)
		}
		assertProfile(t, mustFind(t, s, x).Profile, partmap.Profile{partmap.FieldEmail: x, "fullName": "X", "visits": "3"})
		assertProfile(t, mustFind(t, s, z).Profile, partmap.Profile{partmap.FieldEmail: z, "tier": "1"})
		assertProfile(t, mustFind(t, s, w).Profile, partmap.Profile{partmap.FieldEmail: w, "fullName": "W again"})
		mustBeGone(t, s, y)
		if got := mustFind(t, s, x); got.Version != results[2].Record.Version {
			t.Fatalf("stored version %v, the last operation on it answered %v", got.Version, results[2].Record.Version)
		}
		want := map[string]int64{}
		for _, e := range []string{x, z, w} {
			want[partitionOf(e)]++
		}
		wantPartitions(t, s, want)
	})

	t.Run("TransactionIsAllOrNothing", func(t *testing.T) {
		s := started(t)
		x, y := apart("p", "q")
		yRec := put(t, s, y, "Y")
		name := "changed"
		ops := []partmap.Operation{
			{Op: partmap.OpPut, Profile: partmap.Profile{partmap.FieldEmail: x}},
			{Op: partmap.OpPatch, Email: y, Patch: partmap.Patch{"fullName": &name}},
			{Op: partmap.OpIncrement, Email: "missing@example.com", Field: "n", By: 1},
		}
		_, err := s.Transact(ctx, ops)
		wantCode(t, err, partmap.ENOTFOUND, 3)
		ops[2] = partmap.Operation{Op: partmap.OpDelete, Email: y, Cond: partmap.IfMatch(yRec.Version)}
		_, err = s.Transact(ctx, ops) // the patch changed y's version first
		wantCode(t, err, partmap.EPRECONDITION, 3)
		ops[2] = partmap.Operation{Op: partmap.OpIncrement, Email: y, Field: "fullName", By: 1}
		_, err = s.Transact(ctx, ops)
		wantCode(t, err, partmap.ENOTINTEGER, 3)
		ops[2] = partmap.Operation{Op: partmap.OpRename, Email: x, To: y}
		_, err = s.Transact(ctx, ops)
		wantCode(t, err, partmap.EEXISTS, 3)
		mustBeGone(t, s, x)
		if got := mustFind(t, s, y); got.Version != yRec.Version {
			t.Fatal("a failed transaction changed a profile")
		}
		wantPartitions(t, s, map[string]int64{partitionOf(y): 1})
	})

	t.Run("TransactionInput", func(t *testing.T) {
		s := started(t)
		if _, err := s.Transact(ctx, nil); partmap.ErrorCode(err) != partmap.EINVALID {
			t.Fatalf("no operations: %v, want invalid", err)
		}
		many := make([]partmap.Operation, partmap.MaxTransactionOps+1)
		for i := range many {
			many[i] = partmap.Operation{Op: partmap.OpPut, Profile: partmap.Profile{partmap.FieldEmail: fmt.Sprintf("m%d@example.com", i)}}
		}
		if _, err := s.Transact(ctx, many); partmap.ErrorCode(err) != partmap.EINVALID {
			t.Fatalf("%d operations: %v, want invalid", len(many), err)
		}
		_, err := s.Transact(ctx, []partmap.Operation{{Op: partmap.OpDelete, Email: "ok@example.com"}, {Op: partmap.OpDelete, Email: "  "}})
		wantCode(t, err, partmap.EINVALIDEMAIL, 2)
		_, err = s.Transact(ctx, []partmap.Operation{{Op: partmap.OpIncrement, Email: "ok@example.com", Field: partmap.FieldEmail, By: 1}})
		wantCode(t, err, partmap.EKEYFIELD, 1)
		_, err = s.Transact(ctx, []partmap.Operation{{Op: partmap.OpRename, Email: "ok@example.com", To: "OK@example.com"}})
		wantCode(t, err, partmap.EINVALID, 1)
		// The whole batch is checked before anything is written.
		_, err = s.Transact(ctx, []partmap.Operation{{Op: partmap.OpPut, Profile: partmap.Profile{partmap.FieldEmail: "first@example.com"}}, {Op: "upsert", Email: "x@example.com"}})
		wantCode(t, err, partmap.EINVALID, 2)
		mustBeGone(t, s, "first@example.com")
		many = many[:partmap.MaxTransactionOps]
		if _, err := s.Transact(ctx, many); err != nil {
			t.Fatalf("%d operations: %v", len(many), err)
		}
	})

	// Transfers between accounts in many partitions keep the total, and
	// every transfer is all or nothing, whatever runs beside it.
	t.Run("TransfersKeepTheTotal", func(t *testing.T) {
		s := started(t)
		const accounts, workers, transfers = 12, 8, 25
		emails := make([]string, accounts)
		for i := range emails {
			emails[i] = fmt.Sprintf("account%d@example.com", i)
			if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: emails[i], "balance": "100"}, partmap.Condition{}); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for wk := range workers {
			wg.Go(func() {
				for n := range transfers {
					a, b := emails[(wk+n)%accounts], emails[(wk*5+n*7+1)%accounts]
					if a == b {
						continue
					}
					amount := int64(n%9 + 1)
					err := retry(func() error {
						_, err := s.Transact(ctx, []partmap.Operation{
							{Op: partmap.OpIncrement, Email: a, Field: "balance", By: -amount},
							{Op: partmap.OpIncrement, Email: b, Field: "balance", By: amount},
						})
						return err
					})
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		var total int64
		for _, e := range emails {
			n, err := strconv.ParseInt(mustFind(t, s, e).Profile["balance"], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			total += n
		}
		if total != 100*accounts {
			t.Fatalf("the balances sum to %d after the transfers, want %d", total, 100*accounts)
		}
	})
}
