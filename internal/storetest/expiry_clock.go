package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partmap/partmap"
)

// ClockOpener returns a new, empty store, closed when the test ends, whose
// deadlines are measured against clock and which sweeps only when told:
// sweep runs one pass of its sweeper.
type ClockOpener func(t *testing.T, clock func() time.Time) (store partmap.Store, sweep func(context.Context) error)

// ClockReopener closes old, a store of the ClockOpener it goes with, and
// opens its data again, as a restarted server would.
type ClockReopener func(t *testing.T, old partmap.Store, clock func() time.Time) (store partmap.Store, sweep func(context.Context) error)

// Clock is a clock that moves only when a test moves it, or, ticking,
// by a millisecond each time it is read.
type Clock struct {
	ms   atomic.Int64
	tick atomic.Bool
}

// Now is the clock's time, for a store's DirectoryOptions.Clock.
func (c *Clock) Now() time.Time {
	if c.tick.Load() {
		return time.UnixMilli(c.ms.Add(1) - 1)
	}
	return time.UnixMilli(c.ms.Load())
}

// Set moves the clock to ms, in Unix milliseconds.
func (c *Clock) Set(ms int64) { c.ms.Store(ms) }

// NewClock is a Clock at ms, in Unix milliseconds.
func NewClock(ms int64) *Clock {
	c := &Clock{}
	c.Set(ms)
	return c
}

// T0 is when the clock suite starts, a round and unremarkable instant,
// in Unix milliseconds.
var T0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// startClocked opens a started store on a clock of its own, at T0.
func startClocked(t *testing.T, open ClockOpener) (partmap.Store, func(context.Context) error, *Clock) {
	c := NewClock(T0)
	s, sweep := open(t, c.Now)
	if _, err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, sweep, c
}

func mustSweep(t *testing.T, sweep func(context.Context) error) {
	t.Helper()
	if err := sweep(context.Background()); err != nil {
		t.Fatalf("sweep: %v", err)
	}
}

// RunExpiry runs the expiry suite that needs a clock it controls: that what
// expires is gone at its deadline on every read path, swept or not; that
// the sweeper reclaims it without changing what a reader sees; and that
// deadlines survive a restart (reopen) and a resize.
func RunExpiry(t *testing.T, open ClockOpener, reopen ClockReopener) {
	ctx := context.Background()
	start := func(t *testing.T) (partmap.Store, func(context.Context) error, *Clock) {
		return startClocked(t, open)
	}

	t.Run("GoneAtTheDeadlineOnEveryPath", func(t *testing.T) {
		s, sweep, clock := start(t)
		emails, p := Colliding(3, partmap.DefaultPartitions, "due")
		e0, e1, e2 := emails[0], emails[1], emails[2]
		lone := Spread(2, "lone")[0]
		for partitionOf(lone) == p.String() {
			lone = "x" + lone
		}
		gold := func(e string) partmap.Profile {
			return partmap.Profile{partmap.FieldEmail: e, partmap.FieldCustomerTier: "gold", "fullName": "name of " + e}
		}
		for _, e := range []string{e0, e1, e2, lone} {
			putProfile(t, s, gold(e))
		}
		wantCodes(t, "field", expireFields(t, s, e0, at(T0+1000), "", partmap.FieldCustomerTier), 1)
		wantCodes(t, "later field", expireFields(t, s, e2, at(T0+5000), "", "fullName"), 1)
		for _, e := range []string{e1, lone} {
			wantCodes(t, "profile", apply(t, s, partmap.Operation{Op: partmap.OpExpire, Email: e, When: at(T0 + 1000)}).Codes, 1)
		}
		all := []string{e0, e1, e2, lone}

		// view checks every read path, before (expired false) or from the
		// deadline on, and returns e0's version.
		view := func(t *testing.T, expired bool) partmap.Version {
			t.Helper()
			want := map[string]partmap.Profile{e0: gold(e0), e1: gold(e1), e2: gold(e2), lone: gold(lone)}
			golds := []string{e0, e1, e2, lone}
			parts := map[string]int64{p.String(): 3, partitionOf(lone): 1}
			if expired {
				delete(want[e0], partmap.FieldCustomerTier)
				delete(want, e1)
				delete(want, lone)
				golds = []string{e2}
				parts = map[string]int64{p.String(): 2}
			}
			for _, e := range all {
				rec, err := s.FindProfile(ctx, e)
				if w, ok := want[e]; ok {
					if err != nil {
						t.Fatalf("find %s: %v", e, err)
					}
					assertProfile(t, rec.Profile, w)
				} else if !errors.Is(err, partmap.ErrNotFound) {
					t.Fatalf("find %s: %v, want not-found", e, err)
				}
			}
			v := mustFind(t, s, e0).Version
			proj, err := s.ProjectProfile(ctx, e0, []string{partmap.FieldCustomerTier, "fullName"})
			if err != nil {
				t.Fatal(err)
			}
			if (proj.Values[0] == nil) != expired || proj.Values[1] == nil || proj.Version != v {
				t.Fatalf("projection of %s: %s %s, version %v (find: %v)", e0, show(proj.Values[0]), show(proj.Values[1]), proj.Version, v)
			}
			if _, err := s.ProjectProfile(ctx, e1, []string{"fullName"}); errors.Is(err, partmap.ErrNotFound) != expired {
				t.Fatalf("projection of %s: %v", e1, err)
			}
			recs, err := s.FindProfiles(ctx, all)
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range all {
				if w, ok := want[e]; !ok {
					if recs[i] != nil {
						t.Fatalf("batch find of %s: %v, want none", e, recs[i].Profile)
					}
				} else if recs[i] == nil {
					t.Fatalf("batch find of %s: none", e)
				} else {
					assertProfile(t, recs[i].Profile, w)
				}
			}
			if recs[0].Version != v {
				t.Fatalf("batch find of %s: version %v, find %v", e0, recs[0].Version, v)
			}
			projs, err := s.ProjectProfiles(ctx, []string{e0, e1}, []string{partmap.FieldCustomerTier})
			if err != nil || projs[0] == nil || (projs[0].Values[0] == nil) != expired || (projs[1] == nil) != expired {
				t.Fatalf("batch projection: %v %v", projs, err)
			}
			listed := map[string]partmap.Record{}
			for _, rec := range listAll(t, s, 2) {
				listed[rec.Profile.Email()] = rec
			}
			if len(listed) != len(want) {
				t.Fatalf("listed %d profiles, want %d", len(listed), len(want))
			}
			for e, w := range want {
				assertProfile(t, listed[e].Profile, w)
			}
			if listed[e0].Version != v {
				t.Fatalf("listed version %v, find %v", listed[e0].Version, v)
			}
			found := emailsOf(listWhere(t, s, 10, []partmap.Match{{Field: partmap.FieldCustomerTier, Value: "gold"}}, false))
			slices.Sort(found)
			slices.Sort(golds)
			if !slices.Equal(found, golds) {
				t.Fatalf("search for gold: %q, want %q", found, golds)
			}
			exported := exportAll(t, s)
			if len(exported) != len(want) {
				t.Fatalf("exported %d profiles, want %d", len(exported), len(want))
			}
			for _, rec := range exported {
				assertProfile(t, rec.Profile, want[rec.Profile.Email()])
			}
			wantPartitions(t, s, parts)
			for _, q := range []partmap.Partition{p, partmap.PartitionOf(lone, partmap.DefaultPartitions)} {
				if c, err := s.CheckPartition(ctx, q); err != nil || !c.OK() {
					t.Fatalf("check of %s: %+v, %v", q, c, err)
				}
			}
			if d := deadlinesOf(t, s, e0, partmap.FieldCustomerTier); expired != (d.Deadlines[0] == partmap.ExpiryNoField) {
				t.Fatalf("deadline of %s's field: %d", e0, d.Deadlines[0])
			}
			return v
		}

		v0 := view(t, false)
		clock.Set(T0 + 999)
		if v := view(t, false); v != v0 {
			t.Fatalf("version %v a ms before the deadline, %v before", v, v0)
		}
		clock.Set(T0 + 1000)
		v1 := view(t, true)
		if v1 == v0 {
			t.Fatal("a field expired and the version stayed")
		}
		before, err := s.CheckPartition(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		mustSweep(t, sweep)
		if v := view(t, true); v != v1 {
			t.Fatalf("version %v after the sweep, %v before it", v, v1)
		}
		after, err := s.CheckPartition(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		// The sweep deleted e1's record and e0's expired field with its
		// index entry.
		if before.Profiles != 3 || after.Profiles != 2 || after.Counted != 2 || after.IndexEntries >= before.IndexEntries {
			t.Fatalf("check of %s before the sweep %+v, after %+v", p, before, after)
		}
		// Nothing of e0's expired field is left stored: writing e0's live
		// profile again (it has no other deadline) changes no entry.
		live := mustFind(t, s, e0)
		if _, _, err := partmap.UpsertProfile(ctx, s, live.Profile, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		if rewritten, err := s.CheckPartition(ctx, p); err != nil || rewritten.IndexEntries != after.IndexEntries {
			t.Fatalf("the sweep left %d index entries in %s; rewriting %s's live profile leaves %d (%v)", after.IndexEntries, p, e0, rewritten.IndexEntries, err)
		}
		if c, err := s.CheckPartition(ctx, partmap.PartitionOf(lone, partmap.DefaultPartitions)); err != nil || c.Profiles != 0 || c.Counted != 0 || c.IndexEntries != 0 {
			t.Fatalf("check of the lone profile's partition after the sweep: %+v, %v", c, err)
		}
		mustSweep(t, sweep)
		view(t, true)

		// e2's later field: gone at its own deadline, swept or not.
		v2 := mustFind(t, s, e2).Version
		clock.Set(T0 + 5000)
		rec := mustFind(t, s, e2)
		if _, ok := rec.Profile["fullName"]; ok || rec.Version == v2 {
			t.Fatalf("%s after its field's deadline: %v, version %v (was %v)", e2, rec.Profile, rec.Version, v2)
		}
		mustSweep(t, sweep)
		if got := mustFind(t, s, e2); got.Version != rec.Version || len(got.Profile) != 2 {
			t.Fatalf("%s after the sweep: %v, version %v (was %v)", e2, got.Profile, got.Version, rec.Version)
		}
		CheckAll(t, s)
	})

	// A profile whose every field but emailAddress expires is gone at the
	// last one's deadline, as Redis deletes a hash whose last field
	// expires: on every read path and in the counts before a sweep, and
	// from the store after one. A field that stays, or is written again
	// without a deadline, keeps the profile.
	t.Run("GoneWithItsLastField", func(t *testing.T) {
		s, sweep, clock := start(t)
		emails, p := Colliding(3, partmap.DefaultPartitions, "last")
		gone, kept, rewritten := emails[0], emails[1], emails[2]
		for _, e := range emails {
			putProfile(t, s, partmap.Profile{partmap.FieldEmail: e, partmap.FieldCustomerTier: "gold", "a": "1"})
			expireFields(t, s, e, at(T0+1000), "", partmap.FieldCustomerTier)
		}
		expireFields(t, s, gone, at(T0+2000), "", "a")
		apply(t, s, partmap.Operation{Op: partmap.OpExpire, Email: gone, When: at(T0 + 9000)}) // later: the fields end it first
		expireFields(t, s, rewritten, at(T0+2000), "", "a")
		apply(t, s, partmap.Operation{Op: partmap.OpSetFields, Email: rewritten, Set: partmap.Patch{"a": ptr("2")}}) // no deadline now, as after HSET
		stored := func() int64 {
			c, err := s.CheckPartition(ctx, p)
			if err != nil || !c.OK() {
				t.Fatalf("check of %s: %+v, %v", p, c, err)
			}
			return c.Profiles
		}
		clock.Set(T0 + 1999)
		assertProfile(t, mustFind(t, s, gone).Profile, partmap.Profile{partmap.FieldEmail: gone, "a": "1"})
		wantPartitions(t, s, map[string]int64{p.String(): 3})
		clock.Set(T0 + 2000)
		view := func(t *testing.T) {
			t.Helper()
			mustBeGone(t, s, gone)
			if _, err := s.Deadlines(ctx, gone, nil); !errors.Is(err, partmap.ErrNotFound) {
				t.Fatalf("deadlines of %s: %v, want not-found", gone, err)
			}
			recs, err := s.FindProfiles(ctx, emails)
			if err != nil || recs[0] != nil || recs[1] == nil || recs[2] == nil {
				t.Fatalf("batch find: %v, %v", recs, err)
			}
			assertProfile(t, recs[1].Profile, partmap.Profile{partmap.FieldEmail: kept, "a": "1"})
			assertProfile(t, recs[2].Profile, partmap.Profile{partmap.FieldEmail: rewritten, "a": "2"})
			want := []string{kept, rewritten}
			slices.Sort(want)
			for what, got := range map[string][]string{"listed": emailsOf(listAll(t, s, 2)), "exported": emailsOf(exportAll(t, s))} {
				if slices.Sort(got); !slices.Equal(got, want) {
					t.Fatalf("%s %q, want %q", what, got, want)
				}
			}
			wantPartitions(t, s, map[string]int64{p.String(): 2})
		}
		view(t)
		if n := stored(); n != 3 {
			t.Fatalf("%d records stored before the sweep, want 3", n)
		}
		mustSweep(t, sweep)
		view(t)
		if n := stored(); n != 2 {
			t.Fatalf("%d records stored after the sweep, want 2", n)
		}
		CheckAll(t, s)
	})

	t.Run("WritesStartFromTheLiveProfile", func(t *testing.T) {
		s, sweep, clock := start(t)
		emails, p := Colliding(5, partmap.DefaultPartitions, "rew")
		e, f, g, h, k := emails[0], emails[1], emails[2], emails[3], emails[4]
		for _, x := range emails {
			putProfile(t, s, partmap.Profile{partmap.FieldEmail: x, partmap.FieldCustomerTier: "gold", "a": "1", "b": "2"})
		}
		for _, x := range []string{e, g, h, k} {
			apply(t, s, partmap.Operation{Op: partmap.OpExpire, Email: x, When: at(T0 + 1000)})
		}
		expireFields(t, s, f, at(T0+1000), "", "a")
		src := Spread(1, "src")[0]
		for partitionOf(src) == p.String() {
			src = "x" + src
		}
		putProfile(t, s, partmap.Profile{partmap.FieldEmail: src, "z": "26"})
		clock.Set(T0 + 1000)

		// A put creates the expired profile anew; the count, which still
		// holds the unswept one, stays right.
		rec, created, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e, partmap.FieldCustomerTier: "silver"}, partmap.Condition{})
		if err != nil || !created {
			t.Fatalf("put over an expired profile: created %v, %v", created, err)
		}
		assertProfile(t, rec.Profile, partmap.Profile{partmap.FieldEmail: e, partmap.FieldCustomerTier: "silver"})
		wantDeadlines(t, s, e, -1, []string{"a"}, -2)
		// A patch, as any write but the creating ones, finds no profile.
		if _, err := partmap.PatchProfile(ctx, s, g, partmap.Patch{"a": ptr("x")}, partmap.Condition{}); !errors.Is(err, partmap.ErrNotFound) {
			t.Fatalf("patch of an expired profile: %v, want not-found", err)
		}
		// HSETEX creates it, with none of the expired fields.
		if res := apply(t, s, partmap.Operation{Op: partmap.OpSetFields, Email: g, Set: partmap.Patch{"c": ptr("3")}}); !res.Set || !res.Created {
			t.Fatalf("HSETEX on an expired profile: set %v, created %v", res.Set, res.Created)
		}
		assertProfile(t, mustFind(t, s, g).Profile, partmap.Profile{partmap.FieldEmail: g, "c": "3"})
		// A rename into an expired profile's address takes it.
		if _, err := partmap.RenameProfile(ctx, s, src, h, partmap.Condition{}); err != nil {
			t.Fatalf("rename onto an expired profile: %v", err)
		}
		assertProfile(t, mustFind(t, s, h).Profile, partmap.Profile{partmap.FieldEmail: h, "z": "26"})
		wantDeadlines(t, s, h, -1, nil)
		// A write to a profile with an expired field starts without it.
		if _, err := partmap.PatchProfile(ctx, s, f, partmap.Patch{"b": ptr("3")}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		if res := apply(t, s, partmap.Operation{Op: partmap.OpSetIfAbsent, Email: f, Field: "a", Value: "new"}); !res.Set {
			t.Fatal("HSETNX of an expired field did not set")
		}
		wantDeadlines(t, s, f, -1, []string{"a", "b"}, -1, -1)

		// A bulk upsert creates an expired profile anew too, and says so.
		results, err := s.UpsertProfiles(ctx, []partmap.Profile{{partmap.FieldEmail: k, "c": "3"}})
		if err != nil || len(results) != 1 || results[0].Err != nil {
			t.Fatalf("bulk upsert: %+v, %v", results, err)
		}
		if !results[0].Created {
			t.Errorf("a bulk upsert of an expired, unswept profile answered created=false; UpsertProfile answers true")
		}

		check := func() {
			t.Helper()
			wantPartitions(t, s, map[string]int64{p.String(): 5})
			found := emailsOf(listWhere(t, s, 10, []partmap.Match{{Field: partmap.FieldCustomerTier, Value: "gold"}}, false))
			if !slices.Equal(found, []string{f}) {
				t.Fatalf("search for gold: %q, want %q", found, f)
			}
			found = emailsOf(listWhere(t, s, 10, []partmap.Match{{Field: partmap.FieldCustomerTier, Value: "silver"}}, false))
			if !slices.Equal(found, []string{e}) {
				t.Fatalf("search for silver: %q, want %q", found, e)
			}
			CheckAll(t, s)
		}
		check()
		mustSweep(t, sweep)
		check()
		for _, x := range emails {
			mustFind(t, s, x)
		}
		clock.Set(T0 + 1_000_000)
		mustSweep(t, sweep)
		check()
	})

	// A condition holds against the version a reader sees: the one a
	// field's expiry gave, swept or not.
	t.Run("ConditionsSeeTheLiveVersion", func(t *testing.T) {
		s, sweep, clock := start(t)
		const e = "ifmatch@example.com"
		// c stays: a profile whose last field expires is gone.
		putProfile(t, s, partmap.Profile{partmap.FieldEmail: e, "a": "1", "b": "2", "c": "0"})
		expireFields(t, s, e, at(T0+1000), "", "a")
		v0 := mustFind(t, s, e).Version
		clock.Set(T0 + 1000)
		v1 := mustFind(t, s, e).Version
		if _, err := partmap.PatchProfile(ctx, s, e, partmap.Patch{"b": ptr("3")}, partmap.IfMatch(v0)); !errors.Is(err, partmap.ErrPrecondition) {
			t.Fatalf("If-Match of the version before the field expired: %v, want precondition failed", err)
		}
		if _, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpExpire, Email: e, When: at(T0 + 9000), Cond: partmap.IfMatch(v1)}); err != nil {
			t.Fatalf("If-Match of the live version: %v", err)
		}
		expireFields(t, s, e, at(T0+2000), "", "b")
		v2 := mustFind(t, s, e).Version
		clock.Set(T0 + 2000)
		v3 := mustFind(t, s, e).Version
		mustSweep(t, sweep)
		if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e}, partmap.IfMatch(v2)); !errors.Is(err, partmap.ErrPrecondition) {
			t.Fatalf("If-Match of the version before the field expired, after a sweep: %v, want precondition failed", err)
		}
		if _, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: e, "c": "3"}, partmap.IfMatch(v3)); err != nil {
			t.Fatalf("If-Match of the live version after a sweep: %v", err)
		}
		wantDeadlines(t, s, e, -1, []string{"a", "b", "c"}, -2, -2, -1)
	})

	// Deadlines answers as of one instant, the Now it reports: a field it
	// reports with a deadline has not reached it, whatever the clock does
	// during the call.
	t.Run("DeadlinesAtOneInstant", func(t *testing.T) {
		s, _, clock := start(t)
		const e = "instant@example.com"
		// b stays, so that the profile outlives a: a profile whose last
		// field is gone is gone too.
		putProfile(t, s, partmap.Profile{partmap.FieldEmail: e, "a": "1", "b": "2"})
		apply(t, s, partmap.Operation{Op: partmap.OpExpire, Email: e, When: at(T0 + 10_000)})
		for k := int64(1); k <= 5; k++ {
			clock.Set(T0)
			expireFields(t, s, e, at(T0+k), "", "a")
			clock.tick.Store(true)
			d, err := s.Deadlines(ctx, e, []string{"a"})
			clock.tick.Store(false)
			if err != nil {
				t.Fatal(err)
			}
			if at := d.Deadlines[0]; at >= 0 && at <= d.Now {
				t.Fatalf("deadline %d of a field reported present, at or before the reported now %d", at, d.Now)
			}
			if d.Profile <= d.Now {
				t.Fatalf("profile deadline %d, now %d", d.Profile, d.Now)
			}
		}
	})

	// The partitions' counts leave out what is due, swept or not, also
	// while the sweeper removes it: a sweep between reading the counts and
	// reading what is due must not leave a swept profile counted live.
	// With nothing else written, a sweep between two reads changes what
	// they read, and its few commits are fewer than ListPartitions' tries,
	// so this misses what a writer adds: a put that offsets a sweep in one
	// partition, or writes that change a count between any two reads.
	// Those need the reads interleaved exactly, as pebble's
	// TestPartitionCountsBetweenReads does, one interleaving at a time.
	t.Run("CountsWhileSweeping", func(t *testing.T) {
		s, sweep, clock := start(t)
		const live, rounds = 20, 15
		for i := range live {
			putProfile(t, s, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("stays%d@example.com", i)})
		}
		for round := range rounds {
			now := T0 + int64(round)*10_000
			clock.Set(now)
			for i := range 40 {
				e := fmt.Sprintf("goes%d-%d@example.com", round, i)
				putProfile(t, s, partmap.Profile{partmap.FieldEmail: e})
				apply(t, s, partmap.Operation{Op: partmap.OpExpire, Email: e, When: at(now + 1000)})
			}
			clock.Set(now + 2000)
			done := make(chan error, 1)
			go func() { done <- sweep(ctx) }()
			var bad error // reported once the sweep is over, not under it
			for swept := false; !swept; {
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("sweep: %v", err)
					}
					swept = true
				default:
				}
				st, err := s.ListPartitions(ctx)
				switch {
				case err != nil && bad == nil:
					bad = err
				case err == nil && st.TotalProfiles != live && bad == nil:
					bad = fmt.Errorf("round %d, while sweeping: the partitions count %d profiles, %d are live", round, st.TotalProfiles, live)
				}
			}
			if bad != nil {
				t.Fatal(bad)
			}
		}
	})

	// CountDeadlines (Redis's INFO keyspace expires= and subexpiry=)
	// follows every way a deadline comes and goes: set, replaced, removed
	// with its field, persisted, passed, and swept.
	t.Run("CountsDeadlines", func(t *testing.T) {
		s, sweep, clock := start(t)
		counter, ok := s.(partmap.DeadlineCounter)
		if !ok {
			t.Skip("this store counts no deadlines")
		}
		want := func(what string, ending, fields int64) {
			t.Helper()
			got, err := counter.CountDeadlines(ctx)
			if w := (partmap.DeadlineCounts{Ending: ending, FieldExpiry: fields}); err != nil || got != w {
				t.Fatalf("%s: %+v %v, want %+v", what, got, err, w)
			}
		}
		want("none", 0, 0)
		emails := Spread(5, "counted")
		a, b, c, d, e := emails[0], emails[1], emails[2], emails[3], emails[4]
		for _, email := range emails {
			putProfile(t, s, partmap.Profile{partmap.FieldEmail: email, "f": "1", "g": "2"})
		}
		want("profiles without deadlines", 0, 0)
		apply(t, s, partmap.Operation{Op: partmap.OpExpire, Email: a, When: at(T0 + 60_000)})
		want("a profile's deadline", 1, 0)
		apply(t, s, partmap.Operation{Op: partmap.OpExpire, Email: a, When: at(T0 + 90_000)})
		want("a profile's deadline replaced", 1, 0)
		expireFields(t, s, b, at(T0+60_000), "", "f")
		expireFields(t, s, b, at(T0+70_000), "", "g")
		want("every field of a profile (it ends with the last)", 2, 1)
		expireFields(t, s, c, at(T0+1000), "", "f")
		expireFields(t, s, d, at(T0+60_000), "", "f", "g")
		expireFields(t, s, e, at(T0+60_000), "", "f")
		want("fields of three more", 3, 4)
		apply(t, s, partmap.Operation{Op: partmap.OpGetDelete, Email: e, Fields: []string{"f"}})
		want("the field with the deadline deleted", 3, 3)
		apply(t, s, partmap.Operation{Op: partmap.OpPersist, Email: d, Fields: []string{"g"}})
		want("one of two field deadlines persisted: the profile no longer ends", 2, 3)
		apply(t, s, partmap.Operation{Op: partmap.OpPersist, Email: a})
		want("the profile's deadline persisted", 1, 3)
		clock.Set(T0 + 2000)
		want("c's field deadline passed, not swept", 1, 3)
		mustSweep(t, sweep)
		want("c's field swept", 1, 2)
		clock.Set(T0 + 70_000)
		want("b ended, not swept", 0, 1)
		mustSweep(t, sweep)
		want("everything due swept", 0, 0)
	})

	t.Run("SurvivesReopen", func(t *testing.T) {
		if reopen == nil {
			t.Skip("this store has no data to open again")
		}
		s, sweep, clock := start(t)
		e, x := apart("durable", "doomed")
		putProfile(t, s, partmap.Profile{partmap.FieldEmail: e, "a": "1", "b": "2", "c": "3"})
		putProfile(t, s, partmap.Profile{partmap.FieldEmail: x, "a": "1"})
		expireFields(t, s, e, at(T0+1000), "", "a")
		expireFields(t, s, e, at(T0+5000), "", "b")
		apply(t, s, partmap.Operation{Op: partmap.OpExpire, Email: e, When: at(T0 + 10_000)})
		apply(t, s, partmap.Operation{Op: partmap.OpExpire, Email: x, When: at(T0 + 1000)})
		fields := []string{"a", "b", "c"}
		again := func() {
			t.Helper()
			s, sweep = reopen(t, s, clock.Now)
			if _, err := s.Start(ctx); err != nil {
				t.Fatal(err)
			}
		}
		again()
		wantDeadlines(t, s, e, T0+10_000, fields, T0+1000, T0+5000, -1)
		wantDeadlines(t, s, x, T0+1000, nil)

		clock.Set(T0 + 1000)
		v := mustFind(t, s, e).Version
		again()
		wantVersion(t, s, e, v, true)
		wantDeadlines(t, s, e, T0+10_000, fields, -2, T0+5000, -1)
		mustBeGone(t, s, x)
		wantPartitions(t, s, map[string]int64{partitionOf(e): 1})
		mustSweep(t, sweep)
		again()
		wantVersion(t, s, e, v, true)
		assertProfile(t, mustFind(t, s, e).Profile, partmap.Profile{partmap.FieldEmail: e, "b": "2", "c": "3"})
		wantDeadlines(t, s, e, T0+10_000, fields, -2, T0+5000, -1)
		mustBeGone(t, s, x)
		wantPartitions(t, s, map[string]int64{partitionOf(e): 1})
		CheckAll(t, s)

		// The sweep after a restart finds what expired since.
		clock.Set(T0 + 10_000)
		mustSweep(t, sweep)
		mustBeGone(t, s, e)
		wantPartitions(t, s, map[string]int64{})
		if c, err := s.CheckPartition(ctx, partmap.PartitionOf(e, partmap.DefaultPartitions)); err != nil || c.Profiles != 0 || c.IndexEntries != 0 {
			t.Fatalf("check after the sweep: %+v, %v", c, err)
		}
	})

	t.Run("SurvivesResize", func(t *testing.T) {
		s, sweep, clock := start(t)
		const n = 24
		emails := Spread(n, "rsz")
		fields := []string{"a", "b", "c"}
		for i, e := range emails {
			putProfile(t, s, partmap.Profile{partmap.FieldEmail: e, partmap.FieldCustomerTier: "gold", "a": "1", "b": "2", "c": "3"})
			expireFields(t, s, e, at(T0+1000), "", "a", partmap.FieldCustomerTier)
			expireFields(t, s, e, at(T0+2000), "", "b")
			switch i % 3 {
			case 1: // expired before the resize
				apply(t, s, partmap.Operation{Op: partmap.OpExpire, Email: e, When: at(T0 + 1000)})
			case 2: // expires after it
				apply(t, s, partmap.Operation{Op: partmap.OpExpire, Email: e, When: at(T0 + 2000)})
			}
		}
		clock.Set(T0 + 1000)
		versions := map[string]partmap.Version{}
		for i, e := range emails {
			if i%3 != 1 {
				versions[e] = mustFind(t, s, e).Version
			}
		}
		// live checks every profile at the clock's time, and counts.
		live := func(t *testing.T, partitions int) {
			t.Helper()
			now := clock.ms.Load()
			alive := 0
			for i, e := range emails {
				gone := i%3 == 1 || (i%3 == 2 && now >= T0+2000)
				if gone {
					mustBeGone(t, s, e)
					continue
				}
				alive++
				want := partmap.Profile{partmap.FieldEmail: e, "b": "2", "c": "3"}
				profile, b := int64(-1), int64(T0+2000)
				if i%3 == 2 {
					profile = T0 + 2000
				}
				if now >= T0+2000 {
					delete(want, "b")
					b = -2
				}
				assertProfile(t, mustFind(t, s, e).Profile, want)
				wantDeadlines(t, s, e, profile, fields, -2, b, -1)
				if now < T0+2000 {
					wantVersion(t, s, e, versions[e], true)
				}
			}
			stats, err := s.ListPartitions(ctx)
			if err != nil || stats.TotalPartitions != partitions || stats.TotalProfiles != int64(alive) {
				t.Fatalf("partitions: %d of them, %d profiles, %v; want %d, %d", stats.TotalPartitions, stats.TotalProfiles, err, partitions, alive)
			}
			if got := listAll(t, s, 5); len(got) != alive {
				t.Fatalf("listed %d, want %d", len(got), alive)
			}
			if got := listWhere(t, s, 5, []partmap.Match{{Field: partmap.FieldCustomerTier, Value: "gold"}}, false); len(got) != 0 {
				t.Fatalf("search found %d profiles by an expired field", len(got))
			}
			if got := exportAll(t, s); len(got) != alive {
				t.Fatalf("exported %d, want %d", len(got), alive)
			}
			CheckAll(t, s)
		}
		// stored counts the records in store, swept or not.
		stored := func() int64 {
			var n int64
			if err := s.CheckPartitions(ctx, 0, 0, func(c partmap.PartitionCheck) error { n += c.Profiles; return nil }); err != nil {
				t.Fatal(err)
			}
			return n
		}
		live(t, partmap.DefaultPartitions)
		if _, err := s.Resize(ctx, 7); err != nil {
			t.Fatal(err)
		}
		if st := WaitResized(t, s); st.Partitions != 7 {
			t.Fatalf("resize ended at %+v", st)
		}
		live(t, 7)
		if got := stored(); got != n {
			t.Fatalf("%d records stored before a sweep, want %d", got, n)
		}
		mustSweep(t, sweep)
		live(t, 7)
		if got := stored(); got != n-n/3 {
			t.Fatalf("%d records stored after a sweep, want %d", got, n-n/3)
		}
		// The expiry entries moved with the records: the next deadlines
		// pass, and are swept, in the new layout.
		clock.Set(T0 + 2000)
		live(t, 7)
		mustSweep(t, sweep)
		live(t, 7)
		if got := stored(); got != n/3 {
			t.Fatalf("%d records stored after the second sweep, want %d", got, n/3)
		}

		// And back, with an expired, unswept field in every record.
		for _, e := range emails[:3] {
			if _, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpSetFields, Email: e, Set: partmap.Patch{"d": ptr("4")}, Expiry: partmap.FieldExpiry{When: ptrWhen(at(T0 + 3000))}}); err != nil {
				t.Fatal(err)
			}
		}
		clock.Set(T0 + 3000)
		if _, err := s.Resize(ctx, partmap.DefaultPartitions); err != nil {
			t.Fatal(err)
		}
		// Sweeps while the records move: what is due is due in both
		// layouts.
		for {
			st, err := s.ResizeStatus(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := retry(func() error { return sweep(ctx) }); err != nil {
				t.Fatalf("sweep during a resize: %v", err)
			}
			if !st.Running {
				break
			}
		}
		WaitResized(t, s)
		noD := func(when string) {
			t.Helper()
			for i, e := range emails[:3] {
				if i > 0 { // expired at T0+1000 or T0+2000, then made of d alone: gone with it
					mustBeGone(t, s, e)
					continue
				}
				if rec := mustFind(t, s, e); rec.Profile["d"] != "" {
					t.Fatalf("%s: an expired field came back %s: %v", e, when, rec.Profile)
				}
			}
		}
		noD("after a resize")
		mustSweep(t, sweep)
		noD("after a sweep")
		CheckAll(t, s)
	})

	t.Run("ExportAndImportKeepDeadlines", func(t *testing.T) { RunExportDeadlines(t, open) })
}

// RunExportDeadlines checks that an export carries every deadline that has
// not passed, and that an import of it (UpsertRecords) restores them. One
// that passes between the export and the import is imported already
// expired: what it ends is never seen again, and the sweeper reclaims it.
// A profile already expired replaces the one its email had, as any line of
// an import replaces it. RunExpiry runs it; a front door that exports and
// imports (HTTP) runs it too.
func RunExportDeadlines(t *testing.T, open ClockOpener) {
	ctx := context.Background()
	src, _, srcClock := startClocked(t, open)
	fields, whole, both, plain, early := "fields@example.com", "whole@example.com", "both@example.com", "plain@example.com", "early@example.com"
	for _, e := range []string{fields, whole, both, plain, early} {
		putProfile(t, src, partmap.Profile{partmap.FieldEmail: e, "soon": "1", "later": "2", "never": "3"})
	}
	expireFields(t, src, fields, at(T0+1000), "", "soon")
	expireFields(t, src, fields, at(T0+5000), "", "later")
	apply(t, src, partmap.Operation{Op: partmap.OpExpire, Email: whole, When: at(T0 + 1000)})
	apply(t, src, partmap.Operation{Op: partmap.OpExpire, Email: both, When: at(T0 + 5000)})
	expireFields(t, src, both, at(T0+1000), "", "soon")
	expireFields(t, src, both, at(T0+5000), "", "later")
	expireFields(t, src, early, at(T0+500), "", "soon") // passes before the export
	srcClock.Set(T0 + 500)
	exported := exportAll(t, src)
	all := partmap.Profile{"soon": "1", "later": "2", "never": "3"}
	want := map[string]partmap.Record{
		fields: {Profile: all, Deadlines: partmap.Deadlines{Fields: map[string]int64{"soon": T0 + 1000, "later": T0 + 5000}}},
		whole:  {Profile: all, Deadlines: partmap.Deadlines{Profile: T0 + 1000}},
		both:   {Profile: all, Deadlines: partmap.Deadlines{Profile: T0 + 5000, Fields: map[string]int64{"soon": T0 + 1000, "later": T0 + 5000}}},
		plain:  {Profile: all},
		early:  {Profile: partmap.Profile{"later": "2", "never": "3"}},
	}
	// wantExport compares an export with want, emails aside.
	wantExport := func(t *testing.T, got []partmap.Record, want map[string]partmap.Record) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("exported %d profiles, want %d", len(got), len(want))
		}
		for _, rec := range got {
			e := rec.Profile.Email()
			w, ok := want[e]
			p := rec.Profile.Clone()
			delete(p, partmap.FieldEmail)
			if !ok || !maps.Equal(p, w.Profile) || rec.Deadlines.Profile != w.Deadlines.Profile || !maps.Equal(rec.Deadlines.Fields, w.Deadlines.Fields) {
				t.Fatalf("exported %s: %v %+v, want %v %+v", e, p, rec.Deadlines, w.Profile, w.Deadlines)
			}
		}
	}
	wantExport(t, exported, want)

	dst, sweep, clock := startClocked(t, open)
	putProfile(t, dst, partmap.Profile{partmap.FieldEmail: whole, "mine": "x"}) // replaced by an expired one
	clock.Set(T0 + 1000)                                                        // the deadlines at T0+1000 pass
	results, err := dst.UpsertRecords(ctx, exported)
	if err != nil || len(results) != len(exported) {
		t.Fatalf("import: %d results, %v", len(results), err)
	}
	for i, r := range results {
		if r.Err != nil {
			t.Fatalf("import of %s: %v", exported[i].Profile.Email(), r.Err)
		}
	}
	now := map[string]partmap.Record{
		fields: {Profile: partmap.Profile{"later": "2", "never": "3"}, Deadlines: partmap.Deadlines{Fields: map[string]int64{"later": T0 + 5000}}},
		both:   {Profile: partmap.Profile{"later": "2", "never": "3"}, Deadlines: partmap.Deadlines{Profile: T0 + 5000, Fields: map[string]int64{"later": T0 + 5000}}},
		plain:  want[plain],
		early:  want[early],
	}
	seen := func(t *testing.T, now map[string]partmap.Record) {
		t.Helper()
		for e, w := range now {
			p := partmap.Profile{partmap.FieldEmail: e}
			maps.Copy(p, w.Profile)
			assertProfile(t, mustFind(t, dst, e).Profile, p)
			d := w.Deadlines.Profile
			if d == 0 {
				d = partmap.ExpiryNone
			}
			ttl := func(f string) int64 {
				if _, ok := p[f]; !ok {
					return partmap.ExpiryNoField
				}
				if at, ok := w.Deadlines.Fields[f]; ok {
					return at
				}
				return partmap.ExpiryNone
			}
			wantDeadlines(t, dst, e, d, []string{"soon", "later", "never"}, ttl("soon"), ttl("later"), ttl("never"))
		}
		for _, e := range []string{fields, whole, both, plain, early} {
			if _, ok := now[e]; !ok {
				mustBeGone(t, dst, e)
			}
		}
		if got := listAll(t, dst, 2); len(got) != len(now) {
			t.Fatalf("listed %d, want %d", len(got), len(now))
		}
		if stats, err := dst.ListPartitions(ctx); err != nil || stats.TotalProfiles != int64(len(now)) {
			t.Fatalf("partitions count %d profiles, %v; want %d", stats.TotalProfiles, err, len(now))
		}
		wantExport(t, exportAll(t, dst), now)
	}
	seen(t, now)
	mustSweep(t, sweep)
	seen(t, now)
	CheckAll(t, dst)
	clock.Set(T0 + 5000)
	delete(now, both)
	now[fields] = partmap.Record{Profile: partmap.Profile{"never": "3"}}
	seen(t, now)
	mustSweep(t, sweep)
	seen(t, now)
	CheckAll(t, dst)

	// Deadlines a store cannot keep fail their profile alone.
	e := "bad@example.com"
	results, err = dst.UpsertRecords(ctx, []partmap.Record{
		{Profile: partmap.Profile{partmap.FieldEmail: e}, Deadlines: partmap.Deadlines{Fields: map[string]int64{partmap.FieldEmail: T0 + 9000}}},
		{Profile: partmap.Profile{partmap.FieldEmail: e}, Deadlines: partmap.Deadlines{Fields: map[string]int64{"absent": T0 + 9000}}},
		{Profile: partmap.Profile{partmap.FieldEmail: e, "a": "1"}, Deadlines: partmap.Deadlines{Fields: map[string]int64{"a": partmap.MaxFieldDeadline + 1}}},
		{Profile: partmap.Profile{partmap.FieldEmail: e}, Deadlines: partmap.Deadlines{Profile: -1}},
		{Profile: partmap.Profile{partmap.FieldEmail: "good@example.com", "a": "1"}, Deadlines: partmap.Deadlines{Fields: map[string]int64{"a": T0 + 9000}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, code := range []partmap.Code{partmap.EKEYFIELD, partmap.EINVALID, partmap.EINVALID, partmap.EINVALID} {
		if got := partmap.ErrorCode(results[i].Err); got != code {
			t.Errorf("bad deadlines %d: %v, want %s", i, results[i].Err, code)
		}
	}
	mustBeGone(t, dst, e)
	if results[4].Err != nil {
		t.Fatalf("good deadlines beside bad ones: %v", results[4].Err)
	}
	wantDeadlines(t, dst, "good@example.com", partmap.ExpiryNone, []string{"a"}, T0+9000)
}

func ptrWhen(w partmap.When) *partmap.When { return &w }
