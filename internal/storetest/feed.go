package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partmap/partmap"
)

// FeedStore is a store that publishes its changes.
type FeedStore interface {
	partmap.Store
	partmap.Feeder
}

// FeedOptions configure a store a FeedOpener opens.
type FeedOptions struct {
	Partitions int                // 0: partmap.DefaultPartitions
	Retention  *partmap.Retention // nil: the store's default
	Clock      func() time.Time   // nil: time.Now; the feed's retention is measured against it
}

// FeedTraits say how a backend's feed may differ from another's where
// the contract leaves it open.
type FeedTraits struct {
	// RetentionPerPartition: a count of events to keep is shared evenly
	// between the partitions' feeds, each trimmed to its share (Redis),
	// rather than kept of the feed as a whole (Pebble).
	RetentionPerPartition bool
	// MirrorClock: a write during a resize stamps its copy in the next
	// generation, which has no event, with that partition's own clock at
	// its own commit step (Redis), not with its event's time, so that a
	// profile last written during a resize may know a slightly different
	// commit time once the resize is over.
	MirrorClock bool
}

// FeedOpener returns a new, empty store configured by o, closed when the
// test ends, and a function that trims its feed to o.Retention now.
type FeedOpener func(t *testing.T, o FeedOptions) (s FeedStore, trim func(context.Context) error)

// FeedReopener closes old, a store of the FeedOpener it goes with, and
// opens its data again with o, as a restarted server would.
type FeedReopener func(t *testing.T, old FeedStore, o FeedOptions) FeedStore

// RunFeed runs the change feed suite: every write that changes a profile
// is exactly one event holding the profile after it, replaying the feed
// rebuilds the store, a cursor resumes without gap or repeat (across pages,
// concurrent writers, a resize and a restart), the filters select what they
// say, a page says truly whether it caught up, and retention expires
// cursors instead of skipping changes.
func RunFeed(t *testing.T, open FeedOpener, reopen FeedReopener, traits FeedTraits) {
	ctx := context.Background()
	start := func(t *testing.T, o FeedOptions) (FeedStore, func(context.Context) error) {
		s, trim := open(t, o)
		if _, err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return s, trim
	}
	started := func(t *testing.T) FeedStore {
		s, _ := start(t, FeedOptions{Partitions: 16})
		return s
	}

	t.Run("EveryWriteOneEvent", func(t *testing.T) { runFeedWrites(t, started(t)) })
	t.Run("ReplayRebuildsTheStore", func(t *testing.T) {
		s := started(t)
		mixedWrites(t, s, 300, 20, 1)
		assertReplay(t, s, feedAll(t, s, partmap.ChangeQuery{}))
	})
	t.Run("Resume", func(t *testing.T) { runFeedResume(t, started(t)) })
	t.Run("LongPoll", func(t *testing.T) { runFeedLongPoll(t, started(t)) })
	t.Run("CaughtUp", func(t *testing.T) { runFeedCaughtUp(t, started(t)) })
	t.Run("Filters", func(t *testing.T) { runFeedFilters(t, started(t)) })
	t.Run("ErrInvalid", func(t *testing.T) { runFeedInvalid(t, started(t)) })
	t.Run("Concurrent", func(t *testing.T) { runFeedConcurrent(t, started(t)) })
	t.Run("Resize", func(t *testing.T) { runFeedResize(t, started(t)) })
	t.Run("RecordsKnowTheirCommit", func(t *testing.T) { runFeedCommitTimes(t, started(t), traits) })
	t.Run("RetentionEvents", func(t *testing.T) {
		const keep = 10
		s, trim := start(t, FeedOptions{Partitions: 16, Retention: &partmap.Retention{Events: keep}})
		runFeedRetention(t, s, trim, keep, traits)
	})
	t.Run("RetentionAge", func(t *testing.T) {
		var fixed atomic.Pointer[time.Time]
		clock := func() time.Time {
			if at := fixed.Load(); at != nil {
				return *at
			}
			return time.Now()
		}
		const age = time.Hour
		s, trim := start(t, FeedOptions{Partitions: 16, Retention: &partmap.Retention{Age: age}, Clock: clock})
		mixedWrites(t, s, 20, 10, 2)
		old := feedAll(t, s, partmap.ChangeQuery{})
		time.Sleep(5 * time.Millisecond) // the next commit is in a later millisecond
		mixedWrites(t, s, 20, 10, 3)
		all := feedAll(t, s, partmap.ChangeQuery{})
		kept := all[len(old):]
		if !kept[0].Time.After(old[len(old)-1].Time) {
			t.Fatalf("a change 5 ms later has time %v, not after %v", kept[0].Time, old[len(old)-1].Time)
		}
		at := kept[0].Time.Add(age)
		fixed.Store(&at) // changes before kept[0] are now older than age
		if err := trim(ctx); err != nil {
			t.Fatalf("trim: %v", err)
		}
		assertTrimmed(t, s, all, all[len(old):])
	})
	t.Run("Expiry", func(t *testing.T) {
		var skew atomic.Int64
		clock := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
		s, _ := start(t, FeedOptions{Partitions: 16, Clock: clock})
		runFeedExpiry(t, s, &skew)
	})
	t.Run("Restart", func(t *testing.T) {
		o := FeedOptions{Partitions: 16}
		s, _ := start(t, o)
		mixedWrites(t, s, 60, 10, 4)
		before := feedAll(t, s, partmap.ChangeQuery{})
		now := feedNow(t, s)
		s = reopen(t, s, o)
		if _, err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if got := feedAll(t, s, partmap.ChangeQuery{}); !sameChanges(got, before) {
			t.Fatalf("after the restart the feed holds %d changes, before it %d:\n%s", len(got), len(before), diffChanges(got, before))
		}
		mixedWrites(t, s, 40, 10, 5)
		all := feedAll(t, s, partmap.ChangeQuery{})
		if len(all) <= len(before) || !sameChanges(all[:len(before)], before) {
			t.Fatalf("the writes after the restart did not follow the feed before it: %d then %d changes", len(before), len(all))
		}
		if got := feedAll(t, s, partmap.ChangeQuery{After: now}); !sameChanges(got, all[len(before):]) {
			t.Fatalf("from the newest cursor before the restart: %d changes, want the %d after it:\n%s",
				len(got), len(all)-len(before), diffChanges(got, all[len(before):]))
		}
		for i, c := range before {
			if got := feedAll(t, s, partmap.ChangeQuery{After: c.Cursor, Limit: 7}); !sameChanges(got, all[i+1:]) {
				t.Fatalf("from cursor %d (%s) of before the restart:\n%s", i, c.Cursor, diffChanges(got, all[i+1:]))
			}
		}
		assertReplay(t, s, all)
	})
}

// feedAll reads the feed from q.After, page by page, until a page is
// caught up.
func feedAll(t testing.TB, s partmap.Feeder, q partmap.ChangeQuery) []partmap.Change {
	t.Helper()
	out, _ := feedFrom(t, s, q)
	return out
}

// feedAllErr is feedAll that returns the first error instead of failing.
func feedAllErr(s partmap.Feeder, q partmap.ChangeQuery) ([]partmap.Change, error) {
	var out []partmap.Change
	for {
		page, err := s.Changes(context.Background(), q)
		if err != nil {
			return out, err
		}
		out = append(out, page.Changes...)
		if page.CaughtUp {
			return out, nil
		}
		q.After = page.Next
	}
}

// feedFrom is feedAll that also returns the Next of every page that held
// changes, in order. The feeds of the suite are small, so a page that is
// not caught up is never empty: a filter passes over at most 50,000
// changes per page.
func feedFrom(t testing.TB, s partmap.Feeder, q partmap.ChangeQuery) ([]partmap.Change, []string) {
	t.Helper()
	var out []partmap.Change
	var nexts []string
	for {
		page, err := s.Changes(context.Background(), q)
		if err != nil {
			t.Fatalf("changes after %q: %v", q.After, err)
		}
		if page.Next == "" {
			t.Fatalf("changes after %q: no Next", q.After)
		}
		if q.Limit > 0 && len(page.Changes) > q.Limit {
			t.Fatalf("changes with limit %d: got %d", q.Limit, len(page.Changes))
		}
		if len(page.Changes) == 0 && !page.CaughtUp {
			t.Fatalf("changes after %q: an empty page that is not caught up", q.After)
		}
		if len(page.Changes) > 0 {
			out = append(out, page.Changes...)
			nexts = append(nexts, page.Next)
		}
		if page.CaughtUp {
			return out, nexts
		}
		q.After = page.Next
	}
}

// feedNow returns the cursor of the feed's newest change.
func feedNow(t testing.TB, s partmap.Feeder) string {
	t.Helper()
	page, err := s.Changes(context.Background(), partmap.ChangeQuery{After: partmap.FeedNow})
	if err != nil || len(page.Changes) != 0 || page.Next == "" || !page.CaughtUp {
		t.Fatalf("changes from now: %d changes, next %q, caught up %v, %v; want none, a cursor, caught up", len(page.Changes), page.Next, page.CaughtUp, err)
	}
	return page.Next
}

// SameRecord reports whether a and b hold the same profile, version and
// deadlines (nil for a deleted profile).
func SameRecord(a, b *partmap.Record) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Version == b.Version && maps.Equal(a.Profile, b.Profile) &&
		a.Deadlines.Profile == b.Deadlines.Profile && maps.Equal(a.Deadlines.Fields, b.Deadlines.Fields)
}

func sameChange(a, b partmap.Change) bool {
	return a.Cursor == b.Cursor && a.Time.Equal(b.Time) && a.Op == b.Op && a.Email == b.Email && SameRecord(a.Record, b.Record)
}

func sameChanges(a, b []partmap.Change) bool { return slices.EqualFunc(a, b, sameChange) }

func showChange(c partmap.Change) string {
	if c.Record == nil {
		return fmt.Sprintf("%s %s %s deleted", c.Cursor, c.Op, c.Email)
	}
	return fmt.Sprintf("%s %s %s v%x %v %+v", c.Cursor, c.Op, c.Email, uint64(c.Record.Version), c.Record.Profile, c.Record.Deadlines)
}

// diffChanges describes the first difference between got and want.
func diffChanges(got, want []partmap.Change) string {
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			return fmt.Sprintf("missing from #%d: %s", i, showChange(want[i]))
		case i >= len(want):
			return fmt.Sprintf("extra from #%d: %s", i, showChange(got[i]))
		case !sameChange(got[i], want[i]):
			return fmt.Sprintf("#%d: got %s, want %s", i, showChange(got[i]), showChange(want[i]))
		}
	}
	return "no difference"
}

// Replay applies changes in order to an empty map of records by email.
func Replay(changes []partmap.Change) map[string]partmap.Record {
	state := map[string]partmap.Record{}
	ReplayOnto(state, changes)
	return state
}

// ReplayOnto applies changes in order to state.
func ReplayOnto(state map[string]partmap.Record, changes []partmap.Change) {
	for _, c := range changes {
		if c.Record == nil {
			delete(state, c.Email)
		} else {
			state[c.Email] = *c.Record
		}
	}
}

// StoreState reads every record of s, versions included: the profiles
// and deadlines from one export, the versions by batched lookups, which
// must agree with it (nothing may be written meanwhile).
func StoreState(ctx context.Context, s partmap.Store) (map[string]partmap.Record, error) {
	state := map[string]partmap.Record{}
	var emails []string
	err := s.ExportProfiles(ctx, func(rec partmap.Record) error {
		state[rec.Profile.Email()] = rec
		emails = append(emails, rec.Profile.Email())
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	for len(emails) > 0 {
		batch := emails[:min(len(emails), partmap.MaxBatchEmails)]
		emails = emails[len(batch):]
		recs, err := s.FindProfiles(ctx, batch)
		if err != nil {
			return nil, fmt.Errorf("find: %w", err)
		}
		for i, rec := range recs {
			exported := state[batch[i]]
			if rec == nil || !maps.Equal(rec.Profile, exported.Profile) {
				return nil, fmt.Errorf("%s changed between the export and the lookup: %v, then %v", batch[i], exported.Profile, rec)
			}
			exported.Version = rec.Version
			state[batch[i]] = exported
		}
	}
	return state, nil
}

// DiffStates describes how got differs from want, "" when it does not.
func DiffStates(got, want map[string]partmap.Record) string {
	var diffs []string
	for _, e := range slices.Sorted(maps.Keys(want)) {
		w := want[e]
		g, ok := got[e]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s missing (want v%x %v)", e, uint64(w.Version), w.Profile))
		case !SameRecord(&g, &w):
			diffs = append(diffs, fmt.Sprintf("%s: got v%x %v %+v, want v%x %v %+v", e,
				uint64(g.Version), g.Profile, g.Deadlines, uint64(w.Version), w.Profile, w.Deadlines))
		}
	}
	for _, e := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[e]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s extra: v%x %v", e, uint64(got[e].Version), got[e].Profile))
		}
	}
	n := len(diffs)
	if n == 0 {
		return ""
	}
	if n > 10 {
		diffs = append(diffs[:10], fmt.Sprintf("and %d more", n-10))
	}
	return fmt.Sprint(n, " differences: ", diffs)
}

// assertReplay checks that replaying changes from nothing gives exactly the
// store's content.
func assertReplay(t *testing.T, s partmap.Store, changes []partmap.Change) {
	t.Helper()
	want, err := StoreState(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if d := DiffStates(Replay(changes), want); d != "" {
		t.Fatalf("replaying %d changes does not give the store's %d profiles: %s", len(changes), len(want), d)
	}
	if len(want) == 0 {
		t.Fatal("the store is empty: the replay proved nothing")
	}
}

// mixedWrites makes n writes of every kind to emails of a pool of size
// pool, retrying lock conflicts: puts, patches, increments, deletes,
// renames, transactions and expiry operations.
func mixedWrites(t *testing.T, s partmap.Store, n, pool int, seed uint64) {
	t.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(seed, 17))
	email := func() string { return fmt.Sprintf("mixed%d@example.com", r.IntN(pool)) }
	far := time.Now().Add(24 * time.Hour).UnixMilli()
	for i := range n {
		e := email()
		var err error
		write := func(f func() error) {
			err = retry(f)
			if errors.Is(err, partmap.ErrNotFound) || partmap.ErrorCode(err) == partmap.EEXISTS {
				// the profile is missing (or the rename's target exists): create it instead
				err = retry(func() error {
					_, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e, "n": "0", "i": strconv.Itoa(i)}, partmap.Condition{})
					return err
				})
			}
		}
		switch r.IntN(8) {
		case 0:
			write(func() error {
				_, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e, "n": "0", "i": strconv.Itoa(i)}, partmap.Condition{})
				return err
			})
		case 1:
			v := strconv.Itoa(i)
			write(func() error {
				_, err := partmap.PatchProfile(ctx, s, e, partmap.Patch{"i": &v, "gone": nil}, partmap.Condition{})
				return err
			})
		case 2:
			write(func() error { _, err := partmap.IncrementField(ctx, s, e, "n", 1, partmap.Condition{}); return err })
		case 3:
			write(func() error { return partmap.DeleteProfile(ctx, s, e, partmap.Condition{}) })
		case 4:
			to := email()
			if to == e {
				to = "renamed-" + e
			}
			write(func() error { _, err := partmap.RenameProfile(ctx, s, e, to, partmap.Condition{}); return err })
		case 5:
			other := email()
			v := strconv.Itoa(i)
			write(func() error {
				_, err := s.Transact(ctx, []partmap.Operation{
					{Op: partmap.OpPatch, Email: e, Patch: partmap.Patch{"t": &v}},
					{Op: partmap.OpPut, Profile: partmap.Profile{partmap.FieldEmail: other, "n": "0", "tx": v}},
				})
				return err
			})
		case 6:
			write(func() error {
				_, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpExpire, Email: e, Fields: []string{"i"}, When: at(far + int64(i))})
				return err
			})
		case 7:
			v := strconv.Itoa(i)
			write(func() error {
				_, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpSetFields, Email: e, Set: partmap.Patch{"s": &v},
					Expiry: partmap.FieldExpiry{When: ptrWhen(at(far + int64(i)))}})
				return err
			})
		}
		if err != nil {
			t.Fatalf("write %d to %s: %v", i, e, err)
		}
	}
}

// runFeedWrites checks the event of each kind of write.
func runFeedWrites(t *testing.T, s FeedStore) {
	ctx := context.Background()
	// expect runs write and checks that it emitted exactly want (in any
	// order), each event within write's wall-clock window; a nil Record in
	// want is a deletion, and a want Record without a Version is the
	// profile as FindProfile reads it after the write.
	expect := func(t *testing.T, what string, write func() error, want ...partmap.Change) {
		t.Helper()
		mark := feedNow(t, s)
		t0 := time.Now().Truncate(time.Millisecond)
		if err := retry(write); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t1 := time.Now()
		got := feedAll(t, s, partmap.ChangeQuery{After: mark})
		if len(got) != len(want) {
			t.Fatalf("%s: %d events, want %d:\n%s", what, len(got), len(want), diffChanges(got, want))
		}
		for _, w := range want {
			if w.Record != nil && w.Record.Version == 0 {
				rec, err := s.FindProfile(ctx, w.Email)
				if err != nil {
					t.Fatalf("%s: find %s: %v", what, w.Email, err)
				}
				w.Record = &rec
			}
			i := slices.IndexFunc(got, func(c partmap.Change) bool { return c.Email == w.Email })
			if i < 0 {
				t.Fatalf("%s: no event of %s among %d", what, w.Email, len(got))
			}
			g := got[i]
			if g.Op != w.Op || !SameRecord(g.Record, w.Record) {
				t.Fatalf("%s: event %s, want %s", what, showChange(g), showChange(w))
			}
			if g.Time.Before(t0) || g.Time.After(t1) {
				t.Fatalf("%s: event time %v outside the write's window [%v, %v]", what, g.Time, t0, t1)
			}
			if g.Cursor == "" {
				t.Fatalf("%s: event without a cursor", what)
			}
			got = slices.Delete(got, i, i+1)
		}
	}
	none := func(t *testing.T, what string, write func() error, code partmap.Code) {
		t.Helper()
		mark := feedNow(t, s)
		if err := retry(write); partmap.ErrorCode(err) != code && !(code == "" && err == nil) {
			t.Fatalf("%s: got %v, want %q", what, err, code)
		}
		if got := feedAll(t, s, partmap.ChangeQuery{After: mark}); len(got) != 0 {
			t.Fatalf("%s changed nothing but emitted %d events: %s", what, len(got), showChange(got[0]))
		}
	}
	change := func(op partmap.OpKind, email string, rec *partmap.Record) partmap.Change {
		return partmap.Change{Op: op, Email: email, Record: rec}
	}
	found := &partmap.Record{} // the record FindProfile reads after the write
	emails := Spread(6, "feedw")
	a, b, c, d := emails[0], emails[1], emails[2], emails[3]

	var rec partmap.Record
	t.Run("Upsert", func(t *testing.T) {
		expect(t, "create", func() (err error) {
			rec, _, err = partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: " Feedw0@Example.COM ", "n": "1", "k": "v"}, partmap.Condition{})
			return err
		}, change(partmap.OpPut, a, &rec))
		expect(t, "replace", func() (err error) {
			rec, _, err = partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: a, "n": "2", "k": "v", "gone": "x"}, partmap.IfMatch(rec.Version))
			return err
		}, change(partmap.OpPut, a, &rec))
	})
	t.Run("Patch", func(t *testing.T) {
		v := "w"
		expect(t, "patch", func() error {
			res, err := partmap.PatchProfile(ctx, s, a, partmap.Patch{"k": &v, "new": &v}, partmap.Condition{})
			rec = res.Record
			return err
		}, change(partmap.OpPatch, a, &rec))
		expect(t, "patch deleting a field", func() error {
			res, err := partmap.PatchProfile(ctx, s, strings.ToUpper(a), partmap.Patch{"gone": nil}, partmap.Condition{})
			rec = res.Record
			return err
		}, change(partmap.OpPatch, a, &rec))
		none(t, "patch with the values it has", func() error {
			res, err := partmap.PatchProfile(ctx, s, a, partmap.Patch{"k": &v}, partmap.Condition{})
			if err == nil && res.Record.Version != rec.Version {
				return fmt.Errorf("an identical patch changed the version")
			}
			return err
		}, "")
		none(t, "patch deleting a missing field", func() error {
			_, err := partmap.PatchProfile(ctx, s, a, partmap.Patch{"never": nil}, partmap.Condition{})
			return err
		}, "")
		none(t, "patch whose condition fails", func() error {
			_, err := partmap.PatchProfile(ctx, s, a, partmap.Patch{"k": ptr("z")}, partmap.IfMatch(rec.Version+1))
			return err
		}, partmap.EPRECONDITION)
		none(t, "patch of a missing profile", func() error {
			_, err := partmap.PatchProfile(ctx, s, "nobody@example.com", partmap.Patch{"k": ptr("z")}, partmap.Condition{})
			return err
		}, partmap.ENOTFOUND)
	})
	t.Run("Increment", func(t *testing.T) {
		var inc partmap.Increment
		expect(t, "increment", func() (err error) {
			inc, err = partmap.IncrementField(ctx, s, a, "n", 5, partmap.Condition{})
			return err
		}, change(partmap.OpIncrement, a, found))
		if got := mustFind(t, s, a); got.Version != inc.Version || got.Profile["n"] != "7" {
			t.Fatalf("after the increment: %+v, answered version %x", got, uint64(inc.Version))
		}
		none(t, "increment of a field that is no integer", func() error {
			_, err := partmap.IncrementField(ctx, s, a, "k", 1, partmap.Condition{})
			return err
		}, partmap.ENOTINTEGER)
	})
	t.Run("Delete", func(t *testing.T) {
		put(t, s, d, "to delete")
		expect(t, "delete", func() error { return partmap.DeleteProfile(ctx, s, d, partmap.Condition{}) }, change(partmap.OpDelete, d, nil))
		none(t, "delete of a missing profile", func() error { return partmap.DeleteProfile(ctx, s, d, partmap.Condition{}) }, partmap.ENOTFOUND)
	})
	t.Run("Rename", func(t *testing.T) {
		put(t, s, d, "to rename")
		var moved partmap.Record
		expect(t, "rename", func() (err error) {
			moved, err = partmap.RenameProfile(ctx, s, d, " "+strings.ToUpper(emails[4]), partmap.Condition{})
			return err
		}, change(partmap.OpRename, d, nil), change(partmap.OpRename, emails[4], &moved))
		none(t, "rename onto an existing profile", func() error {
			_, err := partmap.RenameProfile(ctx, s, emails[4], a, partmap.Condition{})
			return err
		}, partmap.EEXISTS)
	})
	t.Run("Copy", func(t *testing.T) {
		var copied, moved partmap.Record
		apply := func(op partmap.Operation, rec *partmap.Record) func() error {
			return func() error {
				res, err := s.Apply(ctx, op)
				if err == nil {
					*rec = *res.Record
				}
				return err
			}
		}
		expect(t, "copy", apply(partmap.Operation{Op: partmap.OpCopy, Email: emails[4], To: d}, &copied), change(partmap.OpCopy, d, &copied))
		none(t, "copy onto an existing profile", apply(partmap.Operation{Op: partmap.OpCopy, Email: emails[4], To: a}, &copied), partmap.EEXISTS)
		// Replacing a profile is one event on it, as the write it is.
		expect(t, "rename that replaces", apply(partmap.Operation{Op: partmap.OpRename, Email: d, To: emails[4], Replace: true}, &moved),
			change(partmap.OpRename, d, nil), change(partmap.OpRename, emails[4], &moved))
	})
	t.Run("Transact", func(t *testing.T) {
		put(t, s, c, "to delete in a transaction")
		put(t, s, b, "to increment")
		var res []partmap.OperationResult
		v := "tx"
		expect(t, "transaction", func() (err error) {
			res, err = s.Transact(ctx, []partmap.Operation{
				{Op: partmap.OpPut, Profile: partmap.Profile{partmap.FieldEmail: emails[5], "n": "1"}},
				{Op: partmap.OpIncrement, Email: b, Field: "n", By: 3},
				{Op: partmap.OpPatch, Email: emails[5], Patch: partmap.Patch{"t": &v}},
				{Op: partmap.OpDelete, Email: c},
			})
			return err
		}, change(partmap.OpPatch, emails[5], found), change(partmap.OpIncrement, b, found), change(partmap.OpDelete, c, nil))
		if got := mustFind(t, s, emails[5]); got.Version != res[2].Record.Version {
			t.Fatalf("the transaction answered version %x, the store holds %x", uint64(res[2].Record.Version), uint64(got.Version))
		}
		none(t, "transaction whose last operation fails", func() error {
			_, err := s.Transact(ctx, []partmap.Operation{
				{Op: partmap.OpPatch, Email: emails[5], Patch: partmap.Patch{"t": ptr("no")}},
				{Op: partmap.OpDelete, Email: c},
			})
			return err
		}, partmap.ENOTFOUND)
	})
	t.Run("Bulk", func(t *testing.T) {
		bulk := []partmap.Profile{
			{partmap.FieldEmail: "bulk0@example.com", "k": "0"},
			{partmap.FieldEmail: "BULK1@example.com", "k": "1"},
			{partmap.FieldEmail: a, "k": "replaced"},
		}
		var res []partmap.BulkResult
		expect(t, "bulk upsert", func() (err error) {
			res, err = s.UpsertProfiles(ctx, bulk)
			for _, r := range res {
				err = errors.Join(err, r.Err)
			}
			return err
		}, change(partmap.OpPut, "bulk0@example.com", found), change(partmap.OpPut, "bulk1@example.com", found), change(partmap.OpPut, a, found))
		for i, r := range res {
			if got := mustFind(t, s, r.Record.Profile.Email()); got.Version != r.Record.Version {
				t.Fatalf("bulk result %d: version %x, stored %x", i, uint64(r.Record.Version), uint64(got.Version))
			}
		}
	})
	t.Run("Apply", func(t *testing.T) {
		far := time.Now().Add(time.Hour).UnixMilli()
		s1, s2 := "1.5", "x"
		e := "apply@example.com"
		putProfile(t, s, partmap.Profile{partmap.FieldEmail: e, "f": "1", "g": "2", "h": "3"})
		for _, tc := range []struct {
			op     partmap.Operation
			change bool
		}{
			{partmap.Operation{Op: partmap.OpExpire, Email: e, Fields: []string{"f", "g"}, When: at(far)}, true},
			{partmap.Operation{Op: partmap.OpExpire, Email: e, Fields: []string{"f"}, When: at(far + 1), ExpireCond: partmap.ExpireIfNone}, false},
			{partmap.Operation{Op: partmap.OpExpire, Email: e, When: at(far + 2)}, true},
			{partmap.Operation{Op: partmap.OpPersist, Email: e, Fields: []string{"g"}}, true},
			{partmap.Operation{Op: partmap.OpPersist, Email: e, Fields: []string{"g"}}, false},
			{partmap.Operation{Op: partmap.OpPersist, Email: e}, true},
			{partmap.Operation{Op: partmap.OpIncrementFloat, Email: e, Field: "h", ByFloat: s1}, true},
			{partmap.Operation{Op: partmap.OpSetIfAbsent, Email: e, Field: "new", Value: s2}, true},
			{partmap.Operation{Op: partmap.OpSetIfAbsent, Email: e, Field: "new", Value: "other"}, false},
			{partmap.Operation{Op: partmap.OpGetDelete, Email: e, Fields: []string{"new"}}, true},
			{partmap.Operation{Op: partmap.OpGetDelete, Email: e, Fields: []string{"new"}}, false},
			{partmap.Operation{Op: partmap.OpGetExpire, Email: e, Fields: []string{"h"}, Expiry: partmap.FieldExpiry{When: ptrWhen(at(far + 3))}}, true},
			{partmap.Operation{Op: partmap.OpGetExpire, Email: e, Fields: []string{"h"}, Expiry: partmap.FieldExpiry{Persist: true}}, true},
			{partmap.Operation{Op: partmap.OpSetFields, Email: e, Set: partmap.Patch{"s": &s2}, Expiry: partmap.FieldExpiry{When: ptrWhen(at(far + 4))}}, true},
			{partmap.Operation{Op: partmap.OpSetFields, Email: e, Set: partmap.Patch{"s": &s2}, FieldSet: partmap.SetIfNoFieldExist}, false},
		} {
			what := fmt.Sprintf("%s %q %v", tc.op.Op, tc.op.Fields, tc.op.ExpireCond+partmap.ExpireCondition(tc.op.FieldSet))
			before := mustFind(t, s, e)
			write := func() error { _, err := s.Apply(ctx, tc.op); return err }
			if !tc.change {
				none(t, what, write, "")
				if got := mustFind(t, s, e); got.Version != before.Version {
					t.Fatalf("%s changed nothing, yet the version moved", what)
				}
				continue
			}
			expect(t, what, write, change(tc.op.Op, e, found))
			if got := mustFind(t, s, e); got.Version == before.Version {
				t.Fatalf("%s: the version did not move", what)
			}
		}
	})
	t.Run("Replay", func(t *testing.T) { assertReplay(t, s, feedAll(t, s, partmap.ChangeQuery{})) })
}

// runFeedResume checks that every cursor, of a change or of a page,
// resumes exactly after what it covered.
func runFeedResume(t *testing.T, s FeedStore) {
	ctx := context.Background()
	if got := feedAll(t, s, partmap.ChangeQuery{}); len(got) != 0 {
		t.Fatalf("a new store's feed holds %d changes", len(got))
	}
	empty := feedNow(t, s)
	mixedWrites(t, s, 40, 8, 6)
	all := feedAll(t, s, partmap.ChangeQuery{})
	if len(all) < 40 {
		t.Fatalf("40 writes that each change a profile made %d changes", len(all))
	}
	if got := feedAll(t, s, partmap.ChangeQuery{After: empty}); !sameChanges(got, all) {
		t.Fatalf("from the empty feed's cursor: %s", diffChanges(got, all))
	}
	seen := map[string]bool{}
	for i, c := range all {
		if seen[c.Cursor] {
			t.Fatalf("cursor %s twice", c.Cursor)
		}
		seen[c.Cursor] = true
		if got := feedAll(t, s, partmap.ChangeQuery{After: c.Cursor}); !sameChanges(got, all[i+1:]) {
			t.Fatalf("from change %d's cursor: %s", i, diffChanges(got, all[i+1:]))
		}
	}
	for _, limit := range []int{1, 2, 7} {
		got, nexts := feedFrom(t, s, partmap.ChangeQuery{Limit: limit})
		if !sameChanges(got, all) {
			t.Fatalf("pages of %d: %s", limit, diffChanges(got, all))
		}
		read := 0
		for _, next := range nexts {
			read += min(limit, len(all)-read)
			if rest := feedAll(t, s, partmap.ChangeQuery{After: next, Limit: limit}); !sameChanges(rest, all[read:]) {
				t.Fatalf("pages of %d, from the Next after %d changes: %s", limit, read, diffChanges(rest, all[read:]))
			}
		}
		if read != len(all) {
			t.Fatalf("pages of %d covered %d of %d changes", limit, read, len(all))
		}
	}
	now := feedNow(t, s)
	if page, err := s.Changes(ctx, partmap.ChangeQuery{After: now}); err != nil || len(page.Changes) != 0 {
		t.Fatalf("from now, nothing written: %d changes, %v", len(page.Changes), err)
	}
	put(t, s, "later@example.com", "later")
	got := feedAll(t, s, partmap.ChangeQuery{After: now})
	full := feedAll(t, s, partmap.ChangeQuery{})
	if len(got) != 1 || got[0].Email != "later@example.com" || !sameChanges(got, full[len(all):]) {
		t.Fatalf("from now, after one write: %d changes", len(got))
	}
}

// runFeedExpiry checks that the sweeper's work is in the feed: a profile
// past its deadline is one expired deletion, a record that lost fields one
// expired change to the record as lookups show it; and that a deadline set
// is an expire change.
func runFeedExpiry(t *testing.T, s FeedStore, skew *atomic.Int64) {
	ctx := context.Background()
	sweeper, ok := s.(interface {
		Sweep(context.Context) (partmap.SweepStats, error)
	})
	if !ok {
		t.Fatalf("%T has no Sweep", s)
	}
	gone, part := "gone@example.com", "part@example.com"
	put(t, s, gone, "gone soon")
	if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: part, "a": "1", "b": "2"}, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	mark := feedNow(t, s)
	in := partmap.When{Millis: 60_000, Relative: true}
	for _, op := range []partmap.Operation{{Op: partmap.OpExpire, Email: gone, When: in}, {Op: partmap.OpExpire, Email: part, Fields: []string{"a"}, When: in}} {
		if _, err := s.Apply(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	// Two partitions' changes: the feed orders them by commit time first.
	set := feedAll(t, s, partmap.ChangeQuery{After: mark})
	deadline := map[string]int64{}
	for _, c := range set {
		if c.Op == partmap.OpExpire && c.Record != nil {
			deadline[c.Email] = max(c.Record.Deadlines.Profile, c.Record.Deadlines.Fields["a"])
		}
	}
	if len(set) != 2 || deadline[gone] == 0 || deadline[part] == 0 {
		t.Fatalf("two deadlines set: %d changes, want two expire changes with their deadlines:\n%s", len(set), diffChanges(set, nil))
	}
	mark = set[len(set)-1].Cursor
	skew.Store(int64(2 * time.Minute))
	if _, err := sweeper.Sweep(ctx); err != nil { // the background sweeper may have done it first
		t.Fatal(err)
	}
	swept := feedAll(t, s, partmap.ChangeQuery{After: mark})
	rec, err := s.FindProfile(ctx, part)
	if err != nil {
		t.Fatal(err)
	}
	byEmail := map[string]partmap.Change{}
	for _, c := range swept {
		if c.Op != partmap.OpExpired || byEmail[c.Email].Email != "" {
			t.Fatalf("after the deadlines passed: %s, want one expired change for each profile", showChange(c))
		}
		byEmail[c.Email] = c
	}
	if c, ok := byEmail[gone]; len(swept) != 2 || !ok || c.Record != nil {
		t.Fatalf("after the deadlines passed: %d changes, want 2 with %s deleted:\n%s", len(swept), gone, diffChanges(swept, nil))
	}
	if c := byEmail[part]; c.Record == nil || !SameRecord(c.Record, &rec) || c.Record.Profile["a"] != "" {
		t.Fatalf("the record that lost a field: %s, lookups show v%x %v", showChange(c), uint64(rec.Version), rec.Profile)
	}
	if again := feedAll(t, s, partmap.ChangeQuery{After: swept[len(swept)-1].Cursor}); len(again) != 0 {
		t.Fatalf("a second sweep wrote %d changes", len(again))
	}
	assertReplay(t, s, feedAll(t, s, partmap.ChangeQuery{}))
}

// runFeedLongPoll checks that a waiting reader wakes for a write.
func runFeedLongPoll(t *testing.T, s FeedStore) {
	ctx := context.Background()
	now := feedNow(t, s)
	const wait = 5 * time.Second
	type answer struct {
		page partmap.ChangePage
		err  error
		took time.Duration
	}
	done := make(chan answer, 1)
	go func() {
		began := time.Now()
		page, err := s.Changes(ctx, partmap.ChangeQuery{After: now, Wait: wait})
		done <- answer{page, err, time.Since(began)}
	}()
	time.Sleep(100 * time.Millisecond)
	rec := put(t, s, "poll@example.com", "wake up")
	a := <-done
	if a.err != nil {
		t.Fatal(a.err)
	}
	if len(a.page.Changes) != 1 || a.page.Changes[0].Email != "poll@example.com" || a.page.Changes[0].Record.Version != rec.Version {
		t.Fatalf("the waiting reader got %d changes", len(a.page.Changes))
	}
	if a.took >= wait {
		t.Fatalf("the waiting reader returned after %v, not before its wait of %v expired", a.took, wait)
	}
	// Nothing to wait for: an empty page once the wait is over, with a
	// cursor that resumes at the same place.
	page, err := s.Changes(ctx, partmap.ChangeQuery{After: a.page.Next, Wait: 50 * time.Millisecond})
	if err != nil || len(page.Changes) != 0 {
		t.Fatalf("a wait with nothing written: %d changes, %v", len(page.Changes), err)
	}
	put(t, s, "poll@example.com", "again")
	if got := feedAll(t, s, partmap.ChangeQuery{After: page.Next}); len(got) != 1 || got[0].Record.Profile["fullName"] != "again" {
		t.Fatalf("after an empty wait: %d changes", len(got))
	}
}

// runFeedCaughtUp checks that a page says truly whether it reached the
// end of the feed: pages cut short by their limit do not, the last one and
// every read after it with nothing new do, with a filter too, so that a
// reader that stops at the first caught-up page has read everything and
// reads no empty page more than it must.
func runFeedCaughtUp(t *testing.T, s FeedStore) {
	ctx := context.Background()
	read := func(q partmap.ChangeQuery) partmap.ChangePage {
		t.Helper()
		page, err := s.Changes(ctx, q)
		if err != nil {
			t.Fatalf("changes %+v: %v", q, err)
		}
		return page
	}
	if page := read(partmap.ChangeQuery{}); len(page.Changes) != 0 || !page.CaughtUp {
		t.Fatalf("a new store's feed: %d changes, caught up %v", len(page.Changes), page.CaughtUp)
	}
	emails := Spread(10, "caught")
	for _, e := range emails {
		put(t, s, e, "one")
	}
	pages := 0
	var got []partmap.Change
	q := partmap.ChangeQuery{Limit: 3}
	for {
		page := read(q)
		pages++
		got = append(got, page.Changes...)
		q.After = page.Next
		if page.CaughtUp {
			break
		}
		// Without a filter only a limit cuts a page short, and a page
		// that is not the end moves on by at least one change.
		if len(page.Changes) == 0 || pages > len(emails) {
			t.Fatalf("page %d of 3: %d changes and not caught up", pages, len(page.Changes))
		}
	}
	if len(got) != len(emails) || pages < len(emails)/3 {
		t.Fatalf("pages of 3 until caught up: %d changes in %d pages, want %d", len(got), pages, len(emails))
	}
	for _, w := range []time.Duration{0, 30 * time.Millisecond} {
		if page := read(partmap.ChangeQuery{After: q.After, Wait: w}); len(page.Changes) != 0 || !page.CaughtUp {
			t.Fatalf("after the caught-up page, wait %v: %d changes, caught up %v", w, len(page.Changes), page.CaughtUp)
		}
	}
	if page := read(partmap.ChangeQuery{Limit: 1}); len(page.Changes) != 1 || page.CaughtUp {
		t.Fatalf("one of ten changes: %d changes, caught up %v", len(page.Changes), page.CaughtUp)
	}
	// Filtered: the changes of one profile, and of a range, in one page
	// each, caught up; a profile never written, an empty page caught up.
	put(t, s, emails[4], "two")
	p := partmap.PartitionOf(emails[4], 16)
	for _, q := range []partmap.ChangeQuery{{Email: emails[4]}, {Email: "never@example.com"}, {From: p, To: p + 1}} {
		page := read(q)
		want := 0
		for _, c := range feedAll(t, s, partmap.ChangeQuery{}) {
			if c.Email == q.Email || (q.Email == "" && partmap.PartitionOf(c.Email, 16) == p) {
				want++
			}
		}
		if q.Email != "never@example.com" && want < 2 {
			t.Fatalf("filtered %+v: %d changes to read: a poor test", q, want)
		}
		if len(page.Changes) != want || !page.CaughtUp {
			t.Fatalf("filtered %+v: %d changes, caught up %v; want %d, caught up", q, len(page.Changes), page.CaughtUp, want)
		}
	}
}

// runFeedFilters checks the profile and partition filters.
func runFeedFilters(t *testing.T, s FeedStore) {
	mixedWrites(t, s, 120, 30, 7)
	all := feedAll(t, s, partmap.ChangeQuery{})
	st, err := s.ResizeStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := st.Partitions
	keep := func(f func(partmap.Change) bool) []partmap.Change {
		var out []partmap.Change
		for _, c := range all {
			if f(c) {
				out = append(out, c)
			}
		}
		return out
	}
	for _, limit := range []int{0, 1, 3} {
		for _, spelling := range []string{"mixed3@example.com", " MIXED3@Example.com\t"} {
			want := keep(func(c partmap.Change) bool { return c.Email == "mixed3@example.com" })
			if len(want) == 0 {
				t.Fatal("no change of mixed3@example.com to filter")
			}
			if got := feedAll(t, s, partmap.ChangeQuery{Email: spelling, Limit: limit}); !sameChanges(got, want) {
				t.Fatalf("email %q, limit %d: %s", spelling, limit, diffChanges(got, want))
			}
		}
		for _, r := range [][2]partmap.Partition{{0, 5}, {5, 11}, {11, 0}, {0, partmap.Partition(n)}, {3, 4}} {
			to := r[1]
			if to == 0 {
				to = partmap.Partition(n)
			}
			want := keep(func(c partmap.Change) bool {
				p := partmap.PartitionOf(c.Email, n)
				return p >= r[0] && p < to
			})
			if len(want) == 0 || (len(want) == len(all) && (r[0] != 0 || to != partmap.Partition(n))) {
				t.Fatalf("range %v selects %d of %d changes: a poor test", r, len(want), len(all))
			}
			if got := feedAll(t, s, partmap.ChangeQuery{From: r[0], To: r[1], Limit: limit}); !sameChanges(got, want) {
				t.Fatalf("partitions [%d, %d) of %d, limit %d: %s", r[0], r[1], n, limit, diffChanges(got, want))
			}
		}
	}
	if got := feedAll(t, s, partmap.ChangeQuery{Email: "never@example.com"}); len(got) != 0 {
		t.Fatalf("a profile never written has %d changes", len(got))
	}
}

// runFeedInvalid checks that bad queries are refused.
func runFeedInvalid(t *testing.T, s FeedStore) {
	ctx := context.Background()
	put(t, s, "x@example.com", "x")
	now := feedNow(t, s)
	st, err := s.ResizeStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := partmap.Partition(st.Partitions)
	ahead := aheadOf(now)
	for _, tc := range []struct {
		name string
		q    partmap.ChangeQuery
		code partmap.Code
	}{
		{"LimitNegative", partmap.ChangeQuery{Limit: -1}, partmap.EINVALID},
		{"LimitTooLarge", partmap.ChangeQuery{Limit: partmap.MaxChangesPage + 1}, partmap.EINVALID},
		{"WaitNegative", partmap.ChangeQuery{Wait: -time.Second}, partmap.EINVALID},
		{"WaitTooLong", partmap.ChangeQuery{Wait: partmap.MaxChangesWait + time.Second}, partmap.EINVALID},
		{"FromNotBeforeTo", partmap.ChangeQuery{From: 5, To: 5}, partmap.EINVALID},
		{"FromAfterTo", partmap.ChangeQuery{From: 6, To: 5}, partmap.EINVALID},
		{"ToBeyondPartitions", partmap.ChangeQuery{From: 0, To: n + 1}, partmap.EINVALID},
		{"FromBeyondPartitions", partmap.ChangeQuery{From: n}, partmap.EINVALID},
		{"EmailAndRange", partmap.ChangeQuery{Email: "x@example.com", From: 1}, partmap.EINVALID},
		{"EmailAndTo", partmap.ChangeQuery{Email: "x@example.com", To: 3}, partmap.EINVALID},
		{"BadEmail", partmap.ChangeQuery{Email: "   "}, partmap.EINVALIDEMAIL},
		{"GarbageCursor", partmap.ChangeQuery{After: "garbage!"}, partmap.EINVALID},
		{"CursorAheadOfTheFeed", partmap.ChangeQuery{After: ahead}, partmap.EINVALID},
	} {
		t.Run("Err"+tc.name, func(t *testing.T) {
			page, err := s.Changes(ctx, tc.q)
			if got := partmap.ErrorCode(err); got != tc.code {
				t.Fatalf("got %q (%v, %d changes), want %q", got, err, len(page.Changes), tc.code)
			}
		})
	}
	t.Run("OK", func(t *testing.T) {
		for _, q := range []partmap.ChangeQuery{{Limit: partmap.MaxChangesPage}, {Wait: time.Millisecond}, {From: n - 1}, {To: n}, {From: 0, To: 1}} {
			if _, err := s.Changes(ctx, q); err != nil {
				t.Fatalf("%+v: %v", q, err)
			}
		}
	})
}

// aheadOf returns a cursor past now, of the shapes the backends issue: a
// number (Pebble) or a Redis stream ID, milliseconds-sequence.
func aheadOf(now string) string {
	// An hour: Redis's cursors are milliseconds, and it takes one a little
	// ahead of its horizon (a failover to a replica whose clock is behind).
	if v, err := strconv.ParseUint(now, 10, 64); err == nil {
		return strconv.FormatUint(v+3_600_000, 10)
	}
	if ms, seq, ok := strings.Cut(now, "-"); ok {
		if v, err := strconv.ParseUint(ms, 10, 64); err == nil {
			return strconv.FormatUint(v+3_600_000, 10) + "-" + seq
		}
	}
	return now + "0"
}

// runFeedConcurrent has writers race on a few profiles while a reader pages
// the feed, and checks the feed against what the writers were told.
func runFeedConcurrent(t *testing.T, s FeedStore) {
	ctx := context.Background()
	const writers, writes, profiles = 16, 100, 8
	emails := Spread(profiles/2, "conc")
	same, _ := Colliding(profiles-len(emails), 16, "conc-same")
	emails = append(emails, same...)
	type acked struct {
		email   string
		version partmap.Version
	}
	var mu sync.Mutex
	var acks []acked
	ack := func(email string, v partmap.Version) {
		mu.Lock()
		acks = append(acks, acked{email, v})
		mu.Unlock()
	}
	stop := make(chan struct{})
	var read []partmap.Change
	readerDone := make(chan error, 1)
	// A drainer reads until a page is caught up, again and again: each time
	// it must have read every write acknowledged before it began.
	drainerDone := make(chan error, 1)
	drains := 0
	go func() {
		seen := map[acked]bool{}
		q := partmap.ChangeQuery{Limit: 100}
		for last := false; !last; drains++ {
			select {
			case <-stop:
				last = true
			case <-time.After(time.Millisecond): // leave the writers the CPU
			}
			mu.Lock()
			before := slices.Clone(acks)
			mu.Unlock()
			for caughtUp := false; !caughtUp; {
				page, err := s.Changes(ctx, q)
				if err != nil {
					drainerDone <- err
					return
				}
				for _, c := range page.Changes {
					if c.Record != nil {
						seen[acked{c.Email, c.Record.Version}] = true
					}
				}
				q.After, caughtUp = page.Next, page.CaughtUp
			}
			for _, a := range before {
				if !seen[a] {
					drainerDone <- fmt.Errorf("drain %d: version %x of %s, acknowledged before it began, is not in the feed read until caught up", drains, uint64(a.version), a.email)
					return
				}
			}
		}
		drainerDone <- nil
	}()
	go func() {
		q := partmap.ChangeQuery{Limit: 3}
		stopping := false
		for {
			page, err := s.Changes(ctx, q)
			if err != nil {
				readerDone <- err
				return
			}
			read = append(read, page.Changes...)
			q.After = page.Next
			if len(page.Changes) == 0 {
				if stopping {
					readerDone <- nil
					return
				}
				select {
				case <-stop:
					stopping = true // one more pass: read what the last writes left
				default:
				}
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	// Lone writers each count on profiles of their own, spread over the
	// partitions, so that many commits race to the feed at once.
	for w := range writers {
		wg.Go(func() {
			counts := map[string]int{}
			for i := range writes {
				e := fmt.Sprintf("lone%d-%d@example.com", w, i%10)
				n, ok := counts[e]
				if ok {
					n++
				}
				counts[e] = n
				err := retry(func() error {
					rec, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e, "n": strconv.Itoa(n)}, partmap.Condition{})
					if err == nil {
						ack(e, rec.Version)
					}
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for w := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 99))
			for range writes {
				e := emails[r.IntN(len(emails))]
				var err error
				switch r.IntN(5) {
				case 0: // create, counting from 0
					err = retry(func() error {
						rec, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e, "n": "0", "w": strconv.Itoa(w)}, partmap.Condition{IfNoneMatch: true})
						if err == nil {
							ack(e, rec.Version)
						}
						return err
					})
				case 1:
					err = retry(func() error {
						inc, err := partmap.IncrementField(ctx, s, e, "n", 1, partmap.Condition{})
						if err == nil {
							ack(e, inc.Version)
						}
						return err
					})
				case 2: // a transaction on two profiles: counts one on each
					other := emails[r.IntN(len(emails))]
					if other == e {
						continue
					}
					v := strconv.Itoa(w)
					err = retry(func() error {
						res, err := s.Transact(ctx, []partmap.Operation{
							{Op: partmap.OpIncrement, Email: e, Field: "n", By: 1},
							{Op: partmap.OpPatch, Email: e, Patch: partmap.Patch{"w": &v}},
							{Op: partmap.OpIncrement, Email: other, Field: "n", By: 1},
						})
						if err == nil {
							ack(e, res[1].Record.Version)
							ack(other, res[2].Record.Version)
						}
						return err
					})
				case 3: // a read-modify-write that counts one
					err = retry(func() error {
						rec, err := s.FindProfile(ctx, e)
						if err != nil {
							return err
						}
						n, _ := strconv.Atoi(rec.Profile["n"])
						p := rec.Profile.Clone()
						p["n"] = strconv.Itoa(n + 1)
						rec, _, err = partmap.UpsertProfile(ctx, s, p, partmap.IfMatch(rec.Version))
						if err == nil {
							ack(e, rec.Version)
						}
						return err
					})
				case 4:
					err = retry(func() error { return partmap.DeleteProfile(ctx, s, e, partmap.Condition{}) })
				}
				if err != nil && !errors.Is(err, partmap.ErrNotFound) && partmap.ErrorCode(err) != partmap.EEXISTS && !errors.Is(err, partmap.ErrPrecondition) {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := <-readerDone; err != nil {
		t.Fatalf("reader: %v", err)
	}
	if err := <-drainerDone; err != nil {
		t.Fatal(err)
	}
	t.Logf("the drainer caught up %d times", drains)
	all := feedAll(t, s, partmap.ChangeQuery{})
	if !sameChanges(read, all) {
		t.Fatalf("the reader that paged during the writes read %d changes, the feed holds %d: %s", len(read), len(all), diffChanges(read, all))
	}
	versions := map[acked]bool{}
	last := map[string]*partmap.Record{}
	for i, c := range all {
		prev, seen := last[c.Email]
		switch {
		case c.Record == nil && (!seen || prev == nil):
			t.Fatalf("change %d deletes %s, which the previous change of it left deleted", i, c.Email)
		case c.Record != nil && (!seen || prev == nil):
			if c.Record.Profile["n"] != "0" {
				t.Fatalf("change %d creates %s counting %s, not from 0", i, c.Email, c.Record.Profile["n"])
			}
		case c.Record != nil:
			n, _ := strconv.Atoi(prev.Profile["n"])
			if c.Record.Profile["n"] != strconv.Itoa(n+1) || c.Record.Version == prev.Version {
				t.Fatalf("change %d of %s: %s follows v%x counting %d; want one write more", i, c.Email, showChange(c), uint64(prev.Version), n)
			}
		}
		last[c.Email] = c.Record
		if c.Record != nil {
			versions[acked{c.Email, c.Record.Version}] = true
		}
	}
	for _, a := range acks {
		if !versions[a] {
			t.Fatalf("acknowledged version %x of %s is not in the feed", uint64(a.version), a.email)
		}
	}
	if len(acks) < writers*writes/4 {
		t.Fatalf("only %d writes were acknowledged: a poor test", len(acks))
	}
	for e := range last {
		rec, err := s.FindProfile(ctx, e)
		var got *partmap.Record
		switch {
		case err == nil:
			got = &rec
		case !errors.Is(err, partmap.ErrNotFound):
			t.Fatal(err)
		}
		if !SameRecord(last[e], got) {
			t.Fatalf("the last change of %s holds %v, the store %v", e, last[e], got)
		}
	}
	assertReplay(t, s, all)
}

// counters upserts n profiles, the i-th's email format with i, each with
// a counter n at 0, and returns them.
func counters(t *testing.T, s partmap.Store, format string, n int) []partmap.Profile {
	t.Helper()
	profiles := make([]partmap.Profile, n)
	for i := range profiles {
		profiles[i] = partmap.Profile{partmap.FieldEmail: fmt.Sprintf(format, i), "n": "0"}
	}
	MustUpsert(t, s, profiles)
	return profiles
}

// whileResizing calls write(i), i = 0, 1, 2..., until the resize s runs
// is over.
func whileResizing(t *testing.T, s partmap.Store, write func(i int)) {
	t.Helper()
	for i := 0; ; i++ {
		st, err := s.ResizeStatus(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !st.Running {
			return
		}
		write(i)
	}
}

// runFeedResize checks that a resize emits nothing and that a cursor from
// before it resumes across it.
func runFeedResize(t *testing.T, s FeedStore) {
	ctx := context.Background()
	profiles := counters(t, s, "rs%05d@example.com", 2000)
	mark := feedNow(t, s)
	want := map[string]partmap.Version{} // cursor-free: email#version of every write after mark
	writes := 0
	write := func(i int) {
		e := fmt.Sprintf("rs%05d@example.com", i%len(profiles))
		err := retry(func() error {
			inc, err := partmap.IncrementField(ctx, s, e, "n", 1, partmap.Condition{})
			if err == nil {
				want[fmt.Sprintf("%s#%x", e, uint64(inc.Version))] = inc.Version
			}
			return err
		})
		if err != nil {
			t.Fatalf("write during the resize: %v", err)
		}
		writes++
	}
	for i := range 50 {
		write(i * 37)
	}
	if _, err := s.Resize(ctx, 24); err != nil {
		t.Fatal(err)
	}
	during := 0
	whileResizing(t, s, func(i int) {
		write(i * 13)
		during++
	})
	if st := WaitResized(t, s); st.Partitions != 24 {
		t.Fatalf("resized to %d partitions, want 24", st.Partitions)
	}
	for i := range 50 {
		write(i*7 + 3)
	}
	got := feedAll(t, s, partmap.ChangeQuery{After: mark, Limit: 5})
	seen := map[string]bool{}
	for _, c := range got {
		if c.Record == nil || c.Op != partmap.OpIncrement {
			t.Fatalf("an event no write made: %s", showChange(c))
		}
		k := fmt.Sprintf("%s#%x", c.Email, uint64(c.Record.Version))
		if seen[k] {
			t.Fatalf("a change twice: %s", showChange(c))
		}
		seen[k] = true
		if _, ok := want[k]; !ok {
			t.Fatalf("an event no write made: %s", showChange(c))
		}
	}
	if len(got) != writes {
		t.Fatalf("%d writes (%d during the resize), %d events after the cursor saved before it", writes, during, len(got))
	}
	t.Logf("%d writes during the resize", during)
	assertReplay(t, s, feedAll(t, s, partmap.ChangeQuery{}))
	// The partition filter follows the new layout.
	want24 := 0
	for _, c := range got {
		if partmap.PartitionOf(c.Email, 24) >= 20 {
			want24++
		}
	}
	if part := feedAll(t, s, partmap.ChangeQuery{After: mark, From: 20}); len(part) != want24 {
		t.Fatalf("partitions 20 to 24 after the resize: %d changes, want %d", len(part), want24)
	}
}

// runFeedRetention writes more than keep changes, trims, and checks the
// cursors. A feed kept as a whole keeps between keep and twice keep of the
// newest; one kept per partition keeps the newest ceil(keep/partitions) of
// each partition.
func runFeedRetention(t *testing.T, s FeedStore, trim func(context.Context) error, keep int, traits FeedTraits) {
	mixedWrites(t, s, 3*keep, 10, 8)
	all := feedAll(t, s, partmap.ChangeQuery{})
	if err := trim(context.Background()); err != nil {
		t.Fatalf("trim: %v", err)
	}
	kept := feedAll(t, s, partmap.ChangeQuery{})
	if !traits.RetentionPerPartition {
		if len(kept) < keep || len(kept) > 2*keep {
			t.Fatalf("retention of %d changes kept %d of %d", keep, len(kept), len(all))
		}
		assertTrimmed(t, s, all, nil)
		return
	}
	st, err := s.ResizeStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := st.Partitions
	share := (keep + n - 1) / n
	var want []partmap.Change
	left := map[partmap.Partition]int{}
	for i := len(all) - 1; i >= 0; i-- {
		if p := partmap.PartitionOf(all[i].Email, n); left[p] < share {
			left[p]++
			want = append(want, all[i])
		}
	}
	slices.Reverse(want)
	assertTrimmed(t, s, all, want)
}

// assertTrimmed checks a feed that held all, from which a trim has
// removed some changes. want is what it must hold now; nil means any
// subsequence of all, in its order, with at least two changes gone: a
// backend may trim each partition's feed to its share of a count (Redis)
// rather than the feed as a whole (Pebble). A cursor goes on with exactly
// the changes after it when none of them is gone, and is cursor-expired
// otherwise: never a silent gap.
func assertTrimmed(t *testing.T, s FeedStore, all, want []partmap.Change) {
	t.Helper()
	ctx := context.Background()
	kept := feedAll(t, s, partmap.ChangeQuery{})
	if want != nil && !sameChanges(kept, want) {
		t.Fatalf("from the oldest kept after the trim: %s", diffChanges(kept, want))
	}
	isKept := make([]bool, len(all))
	k := 0
	for i, c := range all {
		if k < len(kept) && sameChange(c, kept[k]) {
			isKept[i] = true
			k++
		}
	}
	if k != len(kept) {
		t.Fatalf("the trimmed feed is not what the feed held less some changes: %s", showChange(kept[k]))
	}
	if trimmed := len(all) - len(kept); trimmed < 2 {
		t.Fatalf("only %d changes trimmed: a poor test", trimmed)
	}
	for i, c := range all {
		gone, goneOfProfile := false, false
		for j := i + 1; j < len(all); j++ {
			if !isKept[j] {
				gone = true
				goneOfProfile = goneOfProfile || all[j].Email == c.Email
			}
		}
		q := partmap.ChangeQuery{After: c.Cursor}
		if gone {
			if _, err := s.Changes(ctx, q); partmap.ErrorCode(err) != partmap.ECURSOREXPIRED {
				t.Fatalf("cursor of change %d, some of whose followers are trimmed: %v, want %q", i, err, partmap.ECURSOREXPIRED)
			}
			q.Email = c.Email
			_, err := s.Changes(ctx, q)
			if goneOfProfile && partmap.ErrorCode(err) != partmap.ECURSOREXPIRED {
				t.Fatalf("cursor of change %d, filtered to a profile whose later changes are trimmed: %v, want %q", i, err, partmap.ECURSOREXPIRED)
			}
			continue
		}
		got, err := feedAllErr(s, q)
		// The cursor of the newest change trimmed loses nothing: it may go
		// on or expire.
		if !isKept[i] && partmap.ErrorCode(err) == partmap.ECURSOREXPIRED {
			continue
		}
		if err != nil {
			t.Fatalf("cursor of change %d: %v", i, err)
		}
		if !sameChanges(got, all[i+1:]) {
			t.Fatalf("cursor of change %d, none of whose followers is trimmed: %s", i, diffChanges(got, all[i+1:]))
		}
	}
}

// runFeedCommitTimes checks that every record read knows the commit time
// of the last write that changed it, the time of its last event: by every
// kind of write, through every read, and across a resize, whose copies
// keep the times they copy.
func runFeedCommitTimes(t *testing.T, s FeedStore, traits FeedTraits) {
	ctx := context.Background()
	bulk := counters(t, s, "ct%03d@example.com", 200)
	mixedWrites(t, s, 300, 20, 5)
	// check compares each profile's commit time, as every read gives it,
	// with its last event's; slack allows a profile of written (the
	// emails written during a resize) that much difference.
	check := func(t *testing.T, written map[string]bool, slack time.Duration) {
		t.Helper()
		last := map[string]partmap.Change{}
		for _, c := range feedAll(t, s, partmap.ChangeQuery{}) {
			last[c.Email] = c
		}
		near := func(e string, got int64) bool {
			want := last[e].Time.UnixMilli()
			if written[e] {
				return got != 0 && time.Duration(abs(got-want))*time.Millisecond <= slack
			}
			return got == want
		}
		listed := listAll(t, s, 97)
		if len(listed) < len(bulk) {
			t.Fatalf("listed %d profiles", len(listed))
		}
		emails := make([]string, len(listed))
		for i, rec := range listed {
			e := rec.Profile.Email()
			emails[i] = e
			if c := last[e]; c.Record == nil || c.Record.Version != rec.Version || c.Record.Committed != c.Time.UnixMilli() {
				t.Fatalf("%s: listed at %s, its last change is %s (record committed %d)", e, rec.Version.ETag(), showChange(c), c.Record.Committed)
			}
			if !near(e, rec.Committed) {
				t.Fatalf("%s: listed committed at %d, its last change at %d", e, rec.Committed, last[e].Time.UnixMilli())
			}
			if one := mustFind(t, s, e); !near(e, one.Committed) {
				t.Fatalf("%s: found committed at %d, its last change at %d", e, one.Committed, last[e].Time.UnixMilli())
			}
		}
		for batch := range slices.Chunk(emails, partmap.MaxBatchEmails) {
			recs, err := s.FindProfiles(ctx, batch)
			if err != nil {
				t.Fatal(err)
			}
			for i, rec := range recs {
				if rec == nil || !near(batch[i], rec.Committed) {
					t.Fatalf("%s: found in a batch as %+v, its last change at %d", batch[i], rec, last[batch[i]].Time.UnixMilli())
				}
			}
		}
		if err := s.ExportProfiles(ctx, func(rec partmap.Record) error {
			if e := rec.Profile.Email(); !near(e, rec.Committed) {
				return fmt.Errorf("%s: exported committed at %d, its last change at %d", e, rec.Committed, last[e].Time.UnixMilli())
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	check(t, nil, 0)

	// A resize copies every record with its time; a write meanwhile is
	// stamped in both generations.
	if _, err := s.Resize(ctx, 24); err != nil {
		t.Fatal(err)
	}
	written := map[string]bool{}
	whileResizing(t, s, func(i int) {
		e := bulk[(i*37)%len(bulk)].Email()
		if err := retry(func() error { _, err := partmap.IncrementField(ctx, s, e, "n", 1, partmap.Condition{}); return err }); err != nil {
			t.Fatalf("write during the resize: %v", err)
		}
		written[e] = true
	})
	if st := WaitResized(t, s); st.Partitions != 24 {
		t.Fatalf("resized to %d partitions, want 24", st.Partitions)
	}
	slack := time.Duration(0)
	if traits.MirrorClock {
		slack = 10 * time.Second
	}
	check(t, written, slack)
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
