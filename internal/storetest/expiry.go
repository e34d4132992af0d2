package storetest

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partmap/partmap"
)

// Deadlines that need no clock control: far in the future, and already
// passed.
var (
	year2100 = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	year2101 = time.Date(2101, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	year2102 = time.Date(2102, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	year2103 = time.Date(2103, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	past     = partmap.When{Millis: 1}                 // 1 ms after the epoch
	nowTTL   = partmap.When{Millis: 0, Relative: true} // now: due at once
)

func at(ms int64) partmap.When { return partmap.When{Millis: ms} }

func apply(t *testing.T, s partmap.Store, op partmap.Operation) partmap.OperationResult {
	t.Helper()
	res, err := s.Apply(context.Background(), op)
	if err != nil {
		t.Fatalf("%s %s %q: %v", op.Op, op.Email, op.Fields, err)
	}
	return res
}

func expireFields(t *testing.T, s partmap.Store, email string, w partmap.When, cond partmap.ExpireCondition, fields ...string) []int {
	t.Helper()
	return apply(t, s, partmap.Operation{Op: partmap.OpExpire, Email: email, Fields: fields, When: w, ExpireCond: cond}).Codes
}

func wantCodes(t *testing.T, what string, got []int, want ...int) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: codes %v, want %v", what, got, want)
	}
}

func deadlinesOf(t *testing.T, s partmap.Store, email string, fields ...string) partmap.TTLs {
	t.Helper()
	d, err := s.Deadlines(context.Background(), email, fields)
	if err != nil {
		t.Fatalf("deadlines of %s %q: %v", email, fields, err)
	}
	if len(d.Deadlines) != len(fields) {
		t.Fatalf("deadlines of %s %q: %d answers", email, fields, len(d.Deadlines))
	}
	return d
}

// wantDeadlines checks the deadlines of fields, and the profile's (want[0]).
func wantDeadlines(t *testing.T, s partmap.Store, email string, profile int64, fields []string, want ...int64) {
	t.Helper()
	d := deadlinesOf(t, s, email, fields...)
	if d.Profile != profile || !slices.Equal(d.Deadlines, want) {
		t.Fatalf("deadlines of %s: profile %d, fields %q %v; want %d, %v", email, d.Profile, fields, d.Deadlines, profile, want)
	}
}

func putProfile(t *testing.T, s partmap.Store, p partmap.Profile) partmap.Record {
	t.Helper()
	rec, _, err := partmap.UpsertProfile(context.Background(), s, p, partmap.Condition{})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func wantValues(t *testing.T, what string, got []*string, want ...*string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if (got[i] == nil) != (want[i] == nil) || (got[i] != nil && *got[i] != *want[i]) {
			t.Fatalf("%s: value %d is %s, want %s", what, i, show(got[i]), show(want[i]))
		}
	}
}

func wantVersion(t *testing.T, s partmap.Store, email string, v partmap.Version, same bool) partmap.Record {
	t.Helper()
	rec := mustFind(t, s, email)
	if (rec.Version == v) != same {
		t.Fatalf("%s: version %v after %v; want the same: %v", email, rec.Version, v, same)
	}
	return rec
}

func runExpiryReplies(t *testing.T, started func(*testing.T) partmap.Store) {
	ctx := context.Background()
	abc := func(email string) partmap.Profile {
		return partmap.Profile{partmap.FieldEmail: email, "a": "1", "b": "2", "c": "3"}
	}

	t.Run("ExpireFields", func(t *testing.T) {
		s := started(t)
		const e = "hexpire@example.com"
		putProfile(t, s, abc(e))
		wantCodes(t, "HEXPIREAT a nope", expireFields(t, s, e, at(year2100), partmap.ExpireAlways, "a", "nope"), 1, -2)
		wantDeadlines(t, s, e, -1, []string{"a", "b", "nope"}, year2100, -1, -2)
		wantCodes(t, "NX a b", expireFields(t, s, e, at(year2101), partmap.ExpireIfNone, "a", "b"), 0, 1)
		wantCodes(t, "XX a c", expireFields(t, s, e, at(year2102), partmap.ExpireIfSet, "a", "c"), 1, 0)
		wantDeadlines(t, s, e, -1, []string{"a", "b", "c"}, year2102, year2101, -1)

		// GT never sets a deadline on a field without one; nothing
		// changes, so nothing is written.
		v := mustFind(t, s, e).Version
		wantCodes(t, "GT earlier a, c", expireFields(t, s, e, at(year2100), partmap.ExpireIfLater, "a", "c", "nope"), 0, 0, -2)
		wantVersion(t, s, e, v, true)
		wantCodes(t, "GT later a", expireFields(t, s, e, at(year2103), partmap.ExpireIfLater, "a"), 1)
		v = wantVersion(t, s, e, v, false).Version
		// LT always sets one on a field without one.
		wantCodes(t, "LT a b c", expireFields(t, s, e, at(year2101), partmap.ExpireIfSooner, "a", "b", "c"), 1, 0, 1)
		wantVersion(t, s, e, v, false)
		wantDeadlines(t, s, e, -1, []string{"a", "b", "c"}, year2101, year2101, year2101)
		// Setting the deadline a field already has is still "set".
		wantCodes(t, "same deadline", expireFields(t, s, e, at(year2101), partmap.ExpireAlways, "a"), 1)

		// A condition is checked before a past time deletes.
		wantCodes(t, "NX past on b", expireFields(t, s, e, past, partmap.ExpireIfNone, "b"), 0)
		wantCodes(t, "past a nope", expireFields(t, s, e, past, partmap.ExpireAlways, "a", "nope"), 2, -2)
		wantCodes(t, "now c", expireFields(t, s, e, nowTTL, partmap.ExpireAlways, "c"), 2)
		assertProfile(t, mustFind(t, s, e).Profile, partmap.Profile{partmap.FieldEmail: e, "b": "2"})
		wantDeadlines(t, s, e, -1, []string{"a", "b", "c"}, -2, year2101, -2)

		// emailAddress is the key: it never expires, and has no deadline
		// to remove.
		for _, fields := range [][]string{{partmap.FieldEmail}, {"b", partmap.FieldEmail}} {
			_, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpExpire, Email: e, Fields: fields, When: at(year2100)})
			if partmap.ErrorCode(err) != partmap.EKEYFIELD {
				t.Fatalf("HEXPIRE %q: got %v, want key-field", fields, err)
			}
		}
		wantCodes(t, "HPERSIST emailAddress", apply(t, s, partmap.Operation{Op: partmap.OpPersist, Email: e, Fields: []string{partmap.FieldEmail}}).Codes, -1)
		wantDeadlines(t, s, e, -1, []string{"b", partmap.FieldEmail}, year2101, -1)

		// A field's latest deadline is Redis's, (2^48-1)/4 ms; a profile's,
		// the latest an int64 holds.
		wantCodes(t, "at the latest deadline", expireFields(t, s, e, at(partmap.MaxFieldDeadline), partmap.ExpireAlways, "b"), 1)
		wantDeadlines(t, s, e, -1, []string{"b"}, partmap.MaxFieldDeadline)
		wantCodes(t, "the profile's latest", apply(t, s, partmap.Operation{Op: partmap.OpExpire, Email: e, When: at(math.MaxInt64)}).Codes, 1)
		wantDeadlines(t, s, e, math.MaxInt64, []string{"b"}, partmap.MaxFieldDeadline)
		apply(t, s, partmap.Operation{Op: partmap.OpPersist, Email: e})

		// Relative times count from the store's clock.
		before := time.Now().UnixMilli()
		wantCodes(t, "relative", expireFields(t, s, e, partmap.In(time.Hour), partmap.ExpireAlways, "b"), 1)
		d := deadlinesOf(t, s, e, "b")
		if got := d.Deadlines[0]; got < before+3_600_000-60_000 || got > time.Now().UnixMilli()+3_600_000+60_000 {
			t.Fatalf("a deadline in an hour is at %d; now is %d", got, before)
		}
		if ttl := d.TTL(d.Deadlines[0]); ttl <= 0 || ttl > 3_600_000 {
			t.Fatalf("TTL of a deadline in an hour: %d ms", ttl)
		}
	})

	t.Run("ExpireProfile", func(t *testing.T) {
		s := started(t)
		const e = "expire@example.com"
		putProfile(t, s, abc(e))
		profile := func(w partmap.When, cond partmap.ExpireCondition) []int {
			return apply(t, s, partmap.Operation{Op: partmap.OpExpire, Email: e, When: w, ExpireCond: cond}).Codes
		}
		wantCodes(t, "GT without a deadline", profile(at(year2100), partmap.ExpireIfLater), 0)
		wantCodes(t, "XX without a deadline", profile(at(year2100), partmap.ExpireIfSet), 0)
		wantDeadlines(t, s, e, -1, nil)
		wantCodes(t, "EXPIREAT", profile(at(year2100), partmap.ExpireAlways), 1)
		wantDeadlines(t, s, e, year2100, []string{"a"}, -1)
		wantCodes(t, "NX", profile(at(year2101), partmap.ExpireIfNone), 0)
		wantCodes(t, "XX", profile(at(year2102), partmap.ExpireIfSet), 1)
		wantCodes(t, "GT earlier", profile(at(year2101), partmap.ExpireIfLater), 0)
		wantCodes(t, "LT", profile(at(year2101), partmap.ExpireIfSooner), 1)
		wantDeadlines(t, s, e, year2101, nil)
		wantCodes(t, "PERSIST", apply(t, s, partmap.Operation{Op: partmap.OpPersist, Email: e}).Codes, 1)
		wantCodes(t, "PERSIST again", apply(t, s, partmap.Operation{Op: partmap.OpPersist, Email: e}).Codes, -1)
		wantDeadlines(t, s, e, -1, nil)
		wantCodes(t, "LT without a deadline", profile(at(year2101), partmap.ExpireIfSooner), 1)
		wantCodes(t, "NX past with a deadline", profile(past, partmap.ExpireIfNone), 0)
		wantCodes(t, "past", profile(past, partmap.ExpireAlways), 2)
		mustBeGone(t, s, e)
		wantPartitions(t, s, map[string]int64{})
		if _, err := s.Deadlines(ctx, e, nil); !errors.Is(err, partmap.ErrNotFound) {
			t.Fatalf("deadlines of a deleted profile: %v, want not-found", err)
		}
		if page := listAll(t, s, 10); len(page) != 0 {
			t.Fatalf("list after the profile expired: %d profiles", len(page))
		}

		putProfile(t, s, abc(e))
		wantCodes(t, "relative now", profile(nowTTL, partmap.ExpireAlways), 2)
		mustBeGone(t, s, e)
	})

	// EXPIREAT key 0 deletes the key, as any time in the past does; 0 is
	// no "no deadline" here.
	t.Run("ExpireProfileAtTheEpoch", func(t *testing.T) {
		s := started(t)
		const e, f = "epoch@example.com", "epoch-ttl@example.com"
		for _, x := range []string{e, f} {
			putProfile(t, s, abc(x))
		}
		apply(t, s, partmap.Operation{Op: partmap.OpExpire, Email: f, When: at(year2100)})
		for _, x := range []string{e, f} {
			res := apply(t, s, partmap.Operation{Op: partmap.OpExpire, Email: x, When: partmap.When{Millis: 0}})
			wantCodes(t, "EXPIREAT 0", res.Codes, 2)
			if rec, err := s.FindProfile(ctx, x); !errors.Is(err, partmap.ErrNotFound) {
				d, _ := s.Deadlines(ctx, x, nil)
				t.Errorf("%s after EXPIREAT 0 answered 2: %v, %v; its deadline is now %d", x, rec.Profile, err, d.Profile)
			}
		}
	})

	t.Run("Persist", func(t *testing.T) {
		s := started(t)
		const e = "hpersist@example.com"
		putProfile(t, s, abc(e))
		expireFields(t, s, e, at(year2100), partmap.ExpireAlways, "a")
		v := mustFind(t, s, e).Version
		res := apply(t, s, partmap.Operation{Op: partmap.OpPersist, Email: e, Fields: []string{"b", "nope"}})
		wantCodes(t, "HPERSIST b nope", res.Codes, -1, -2)
		wantVersion(t, s, e, v, true)
		res = apply(t, s, partmap.Operation{Op: partmap.OpPersist, Email: e, Fields: []string{"a", "b", "nope"}})
		wantCodes(t, "HPERSIST a b nope", res.Codes, 1, -1, -2)
		wantVersion(t, s, e, v, false)
		wantDeadlines(t, s, e, -1, []string{"a", "b"}, -1, -1)
		assertProfile(t, mustFind(t, s, e).Profile, abc(e))
	})

	t.Run("Deadlines", func(t *testing.T) {
		s := started(t)
		const e = "ttl@example.com"
		if _, err := s.Deadlines(ctx, e, []string{"a"}); !errors.Is(err, partmap.ErrNotFound) {
			t.Fatalf("deadlines of a missing profile: %v, want not-found", err)
		}
		rec := putProfile(t, s, abc(e))
		before := time.Now().UnixMilli()
		d := deadlinesOf(t, s, e, "a", "nope", partmap.FieldEmail)
		if d.Profile != -1 || !slices.Equal(d.Deadlines, []int64{-1, -2, -1}) || d.Version != rec.Version {
			t.Fatalf("deadlines of a profile without any: %+v (version %v)", d, rec.Version)
		}
		if d.Now < before-60_000 || d.Now > time.Now().UnixMilli()+60_000 {
			t.Fatalf("the store's now is %d, the test's %d", d.Now, before)
		}
		if d.TTL(-2) != -2 || d.TTL(-1) != -1 || d.TTL(d.Now-5) != 0 || d.TTL(d.Now+5) != 5 {
			t.Fatal("TTL does not pass codes through or clamps wrong")
		}
		// A field named twice is answered twice (RepeatedFieldsInTurn).
		for _, bad := range [][]string{{""}, {"a", ""}} {
			if _, err := s.Deadlines(ctx, e, bad); partmap.ErrorCode(err) != partmap.EINVALID {
				t.Errorf("deadlines of %q: got %v, want invalid", bad, err)
			}
		}
	})

	t.Run("SetIfAbsent", func(t *testing.T) {
		s := started(t)
		const e = "hsetnx@example.com"
		setnx := func(field, value string) partmap.OperationResult {
			return apply(t, s, partmap.Operation{Op: partmap.OpSetIfAbsent, Email: " HSETNX@example.com", Field: field, Value: value})
		}
		if res := setnx("a", "1"); !res.Set {
			t.Fatal("HSETNX on a missing profile did not set")
		}
		rec := mustFind(t, s, e)
		assertProfile(t, rec.Profile, partmap.Profile{partmap.FieldEmail: e, "a": "1"})
		wantPartitions(t, s, map[string]int64{partitionOf(e): 1})
		if res := setnx("a", "2"); res.Set {
			t.Fatal("HSETNX over an existing field set it")
		}
		wantVersion(t, s, e, rec.Version, true)
		expireFields(t, s, e, at(year2100), partmap.ExpireAlways, "a")
		rec = mustFind(t, s, e)
		if res := setnx("a", "3"); res.Set {
			t.Fatal("HSETNX over an expiring field set it")
		}
		wantDeadlines(t, s, e, -1, []string{"a"}, year2100)
		wantVersion(t, s, e, rec.Version, true)
		if res := setnx("b", "2"); !res.Set {
			t.Fatal("HSETNX of a new field did not set")
		}
		rec = wantVersion(t, s, e, rec.Version, false)
		assertProfile(t, rec.Profile, partmap.Profile{partmap.FieldEmail: e, "a": "1", "b": "2"})
		wantDeadlines(t, s, e, -1, []string{"a", "b"}, year2100, -1)
		if res := setnx(partmap.FieldEmail, "other@example.com"); res.Set {
			t.Fatal("HSETNX of emailAddress set it")
		}
		wantPartitions(t, s, map[string]int64{partitionOf(e): 1})
	})

	t.Run("GetDelete", func(t *testing.T) {
		s := started(t)
		const e = "hgetdel@example.com"
		getdel := func(fields ...string) partmap.OperationResult {
			return apply(t, s, partmap.Operation{Op: partmap.OpGetDelete, Email: e, Fields: fields})
		}
		if _, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpGetDelete, Email: e, Fields: []string{"a"}}); !errors.Is(err, partmap.ErrNotFound) {
			t.Fatalf("HGETDEL of a missing profile: %v, want not-found", err)
		}
		putProfile(t, s, abc(e))
		expireFields(t, s, e, at(year2100), partmap.ExpireAlways, "a")
		v := mustFind(t, s, e).Version
		wantValues(t, "HGETDEL nope", getdel("nope").Values, nil)
		wantVersion(t, s, e, v, true)
		wantValues(t, "HGETDEL a nope b", getdel("a", "nope", "b").Values, ptr("1"), nil, ptr("2"))
		rec := wantVersion(t, s, e, v, false)
		assertProfile(t, rec.Profile, partmap.Profile{partmap.FieldEmail: e, "c": "3"})
		wantDeadlines(t, s, e, -1, []string{"a", "b"}, -2, -2)
		wantValues(t, "HGETDEL a again", getdel("a").Values, nil)
		// A field written again has no deadline: the old one went with it.
		if _, err := partmap.PatchProfile(ctx, s, e, partmap.Patch{"a": ptr("x")}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		wantDeadlines(t, s, e, -1, []string{"a"}, -1)
		for _, fields := range [][]string{{partmap.FieldEmail}, {"c", partmap.FieldEmail}} {
			_, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpGetDelete, Email: e, Fields: fields})
			if partmap.ErrorCode(err) != partmap.EKEYFIELD {
				t.Fatalf("HGETDEL %q: got %v, want key-field", fields, err)
			}
		}
		assertProfile(t, mustFind(t, s, e).Profile, partmap.Profile{partmap.FieldEmail: e, "a": "x", "c": "3"})
	})

	// Redis's field operations that take a profile's last field but
	// emailAddress delete the profile in the same commit, as Redis deletes
	// a hash it empties; a patch (HTTP's PATCH) leaves the key alone.
	t.Run("LastFieldDeletesProfile", func(t *testing.T) {
		s := started(t)
		w := at(year2100)
		for _, tc := range []struct {
			name string
			op   partmap.Operation
		}{
			{"GetDelete", partmap.Operation{Op: partmap.OpGetDelete, Fields: []string{"a", "nope", "b"}}},
			{"ExpirePast", partmap.Operation{Op: partmap.OpExpire, Fields: []string{"b", "a"}, When: past}},
			{"ExpireNow", partmap.Operation{Op: partmap.OpExpire, Fields: []string{"a", "b"}, When: nowTTL}},
			{"GetExpirePast", partmap.Operation{Op: partmap.OpGetExpire, Fields: []string{"a", "b"}, Expiry: partmap.FieldExpiry{When: &past}}},
			{"SetFieldsPast", partmap.Operation{Op: partmap.OpSetFields, Set: partmap.Patch{"a": ptr("x"), "b": ptr("y")}, Expiry: partmap.FieldExpiry{When: &past}}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e := "last-" + tc.name + "@example.com"
				putProfile(t, s, partmap.Profile{partmap.FieldEmail: e, "a": "1", "b": "2"})
				expireFields(t, s, e, w, "", "a") // a deadline goes with its field
				tc.op.Email = e
				if res := apply(t, s, tc.op); res.Record != nil {
					t.Fatalf("the result holds a profile: %v", res.Record.Profile)
				}
				mustBeGone(t, s, e)
			})
		}
		wantPartitions(t, s, map[string]int64{})
		CheckAll(t, s)

		// One field left keeps the profile; a patch that takes it keeps
		// the key alone, and a field operation that takes nothing of
		// that keeps it too.
		const e = "last-patch@example.com"
		putProfile(t, s, abc(e))
		wantValues(t, "getDelete of two of three", apply(t, s, partmap.Operation{Op: partmap.OpGetDelete, Email: e, Fields: []string{"a", "b"}}).Values, ptr("1"), ptr("2"))
		if _, err := partmap.PatchProfile(ctx, s, e, partmap.Patch{"c": nil}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		assertProfile(t, mustFind(t, s, e).Profile, partmap.Profile{partmap.FieldEmail: e})
		wantCodes(t, "expire of a missing field", expireFields(t, s, e, past, "", "c"), -2)
		wantValues(t, "getDelete of a missing field", apply(t, s, partmap.Operation{Op: partmap.OpGetDelete, Email: e, Fields: []string{"c"}}).Values, nil)
		assertProfile(t, mustFind(t, s, e).Profile, partmap.Profile{partmap.FieldEmail: e})

		// In a transaction, a later operation sees the profile gone, and
		// may make it again.
		const f = "last-tx@example.com"
		putProfile(t, s, partmap.Profile{partmap.FieldEmail: f, "a": "1"})
		results, err := s.Transact(ctx, []partmap.Operation{
			{Op: partmap.OpGetDelete, Email: f, Fields: []string{"a"}},
			{Op: partmap.OpGet, Email: f},
			{Op: partmap.OpSetFields, Email: f, Set: partmap.Patch{"b": ptr("2")}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if results[1].Record != nil || !results[2].Created {
			t.Fatalf("after the getDelete, a get read %v and the setFields created %v", results[1].Record, results[2].Created)
		}
		assertProfile(t, mustFind(t, s, f).Profile, partmap.Profile{partmap.FieldEmail: f, "b": "2"})
	})

	t.Run("GetExpire", func(t *testing.T) {
		s := started(t)
		const e = "hgetex@example.com"
		getex := func(x partmap.FieldExpiry, fields ...string) partmap.OperationResult {
			return apply(t, s, partmap.Operation{Op: partmap.OpGetExpire, Email: e, Fields: fields, Expiry: x})
		}
		if _, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpGetExpire, Email: e, Fields: []string{"a"}}); !errors.Is(err, partmap.ErrNotFound) {
			t.Fatalf("HGETEX of a missing profile: %v, want not-found", err)
		}
		putProfile(t, s, abc(e))
		v := mustFind(t, s, e).Version
		wantValues(t, "HGETEX a nope", getex(partmap.FieldExpiry{}, "a", "nope").Values, ptr("1"), nil)
		wantVersion(t, s, e, v, true)

		for _, tc := range []struct {
			name string
			w    partmap.When
			lo   int64 // the deadline, or with a relative time, its offset from now
		}{
			{"EX", partmap.When{Millis: 3600 * 1000, Relative: true}, 3_600_000},
			{"PX", partmap.When{Millis: 7_200_500, Relative: true}, 7_200_500}, // long enough for a slow machine
			{"EXAT", at(year2100), year2100},
			{"PXAT", at(year2101 + 7), year2101 + 7},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := time.Now().UnixMilli()
				wantValues(t, tc.name, getex(partmap.FieldExpiry{When: &tc.w}, "a", "nope").Values, ptr("1"), nil)
				d := deadlinesOf(t, s, e, "a", "b", "nope")
				if tc.w.Relative {
					if got := d.Deadlines[0] - before; got < tc.lo-60_000 || got > tc.lo+60_000 {
						t.Fatalf("a deadline %d ms from now is %d ms away", tc.lo, got)
					}
				} else if d.Deadlines[0] != tc.lo {
					t.Fatalf("deadline %d, want %d", d.Deadlines[0], tc.lo)
				}
				if d.Deadlines[1] != -1 || d.Deadlines[2] != -2 {
					t.Fatalf("untouched fields' deadlines: %v", d.Deadlines)
				}
			})
		}
		v = mustFind(t, s, e).Version
		wantValues(t, "PERSIST", getex(partmap.FieldExpiry{Persist: true}, "a", "b").Values, ptr("1"), ptr("2"))
		v = wantVersion(t, s, e, v, false).Version
		wantDeadlines(t, s, e, -1, []string{"a", "b"}, -1, -1)
		wantValues(t, "PERSIST without deadlines", getex(partmap.FieldExpiry{Persist: true}, "a", "b").Values, ptr("1"), ptr("2"))
		wantVersion(t, s, e, v, true)

		// A past time reads the values and deletes the fields.
		wantValues(t, "past", getex(partmap.FieldExpiry{When: &past}, "a", "nope", "b").Values, ptr("1"), nil, ptr("2"))
		assertProfile(t, mustFind(t, s, e).Profile, partmap.Profile{partmap.FieldEmail: e, "c": "3"})
		wantDeadlines(t, s, e, -1, []string{"a", "b"}, -2, -2)

		// emailAddress reads, but never takes a deadline.
		wantValues(t, "emailAddress", getex(partmap.FieldExpiry{}, partmap.FieldEmail).Values, ptr(e))
		w := at(year2100)
		for _, x := range []partmap.FieldExpiry{{When: &w}, {When: &past}} {
			_, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpGetExpire, Email: e, Fields: []string{"c", partmap.FieldEmail}, Expiry: x})
			if partmap.ErrorCode(err) != partmap.EKEYFIELD {
				t.Fatalf("HGETEX emailAddress with a time: got %v, want key-field", err)
			}
		}
		for _, x := range []partmap.FieldExpiry{{When: &w, Persist: true}, {KeepTTL: true}} {
			_, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpGetExpire, Email: e, Fields: []string{"c"}, Expiry: x})
			if partmap.ErrorCode(err) != partmap.EINVALID {
				t.Fatalf("HGETEX %+v: got %v, want invalid", x, err)
			}
		}
		wantDeadlines(t, s, e, -1, []string{"c"}, -1)
	})

	t.Run("SetFields", func(t *testing.T) {
		s := started(t)
		const e = "hsetex@example.com"
		setex := func(set partmap.Patch, fs partmap.FieldSetCondition, x partmap.FieldExpiry) partmap.OperationResult {
			return apply(t, s, partmap.Operation{Op: partmap.OpSetFields, Email: e, Set: set, FieldSet: fs, Expiry: x})
		}
		w2100, w2101 := at(year2100), at(year2101)
		if res := setex(partmap.Patch{"a": ptr("1")}, partmap.SetIfAllExist, partmap.FieldExpiry{}); res.Set {
			t.Fatal("FXX on a missing profile set")
		}
		mustBeGone(t, s, e)
		if res := setex(partmap.Patch{"a": ptr("1"), "b": ptr("2")}, partmap.SetIfNoFieldExist, partmap.FieldExpiry{When: &w2100}); !res.Set || res.FieldsAdded != 2 {
			t.Fatalf("FNX on a missing profile: set %v, %d fields added; want true and 2", res.Set, res.FieldsAdded)
		}
		rec := mustFind(t, s, e)
		assertProfile(t, rec.Profile, partmap.Profile{partmap.FieldEmail: e, "a": "1", "b": "2"})
		wantDeadlines(t, s, e, -1, []string{"a", "b"}, year2100, year2100)
		wantPartitions(t, s, map[string]int64{partitionOf(e): 1})

		if res := setex(partmap.Patch{"a": ptr("x"), "c": ptr("3")}, partmap.SetIfNoFieldExist, partmap.FieldExpiry{}); res.Set {
			t.Fatal("FNX with one field present set")
		}
		if res := setex(partmap.Patch{"a": ptr("x"), "c": ptr("3")}, partmap.SetIfAllExist, partmap.FieldExpiry{}); res.Set {
			t.Fatal("FXX with one field missing set")
		}
		rec = wantVersion(t, s, e, rec.Version, true)

		// KEEPTTL keeps the deadline of a field it writes.
		if res := setex(partmap.Patch{"a": ptr("x")}, partmap.SetIfAllExist, partmap.FieldExpiry{KeepTTL: true}); !res.Set {
			t.Fatal("FXX KEEPTTL did not set")
		}
		rec = wantVersion(t, s, e, rec.Version, false)
		wantDeadlines(t, s, e, -1, []string{"a", "b"}, year2100, year2100)
		// EX sets new deadlines; a field not written keeps its own. A
		// field replaced is not added (HSET's count).
		if res := setex(partmap.Patch{"a": ptr("x"), "c": ptr("3")}, "", partmap.FieldExpiry{When: &w2101}); res.FieldsAdded != 1 {
			t.Fatalf("setting a present and a new field added %d, want 1", res.FieldsAdded)
		}
		wantDeadlines(t, s, e, -1, []string{"a", "b", "c"}, year2101, year2100, year2101)
		// By default, a written field loses its deadline, even with its
		// value unchanged.
		setex(partmap.Patch{"a": ptr("x")}, "", partmap.FieldExpiry{})
		wantDeadlines(t, s, e, -1, []string{"a", "b", "c"}, -1, year2100, year2101)
		// A past time sets the fields and deletes them at once.
		if res := setex(partmap.Patch{"b": ptr("22"), "d": ptr("4")}, "", partmap.FieldExpiry{When: &past}); !res.Set {
			t.Fatal("HSETEX with a past time did not answer set")
		}
		assertProfile(t, mustFind(t, s, e).Profile, partmap.Profile{partmap.FieldEmail: e, "a": "x", "c": "3"})
		wantDeadlines(t, s, e, -1, []string{"b", "d"}, -2, -2)
		// On a missing profile too; and as Redis leaves no key, no profile
		// of the email alone is made.
		const ghost = "ghost-setex@example.com"
		res := apply(t, s, partmap.Operation{Op: partmap.OpSetFields, Email: ghost, Set: partmap.Patch{"a": ptr("1")}, Expiry: partmap.FieldExpiry{When: &past}})
		if !res.Set || res.Created || res.Record != nil {
			t.Fatalf("HSETEX with a past time on a missing profile: %+v", res)
		}
		if _, err := s.FindProfile(ctx, ghost); !errors.Is(err, partmap.ErrNotFound) {
			t.Fatalf("HSETEX with a past time made a profile: %v", err)
		}

		// emailAddress may be written with its own value, but never expire.
		setex(partmap.Patch{partmap.FieldEmail: ptr(e)}, "", partmap.FieldExpiry{})
		for _, x := range []partmap.FieldExpiry{{When: &w2100}, {When: &past}} {
			_, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpSetFields, Email: e, Set: partmap.Patch{"a": ptr("y"), partmap.FieldEmail: ptr(e)}, Expiry: x})
			if partmap.ErrorCode(err) != partmap.EKEYFIELD {
				t.Fatalf("HSETEX emailAddress with a time: got %v, want key-field", err)
			}
		}
		_, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpSetFields, Email: e, Set: partmap.Patch{partmap.FieldEmail: ptr("other@example.com")}})
		if partmap.ErrorCode(err) != partmap.EKEYFIELD {
			t.Fatalf("HSETEX of another emailAddress: got %v, want key-field", err)
		}
		for name, op := range map[string]partmap.Operation{
			"ErrNilValue":       {Set: partmap.Patch{"a": nil}},
			"ErrNoFields":       {},
			"ErrCondition":      {Set: partmap.Patch{"a": ptr("y")}, FieldSet: "NX"},
			"ErrPersist":        {Set: partmap.Patch{"a": ptr("y")}, Expiry: partmap.FieldExpiry{Persist: true}},
			"ErrKeepTTLAndWhen": {Set: partmap.Patch{"a": ptr("y")}, Expiry: partmap.FieldExpiry{KeepTTL: true, When: &w2100}},
		} {
			op.Op, op.Email = partmap.OpSetFields, e
			if _, err := s.Apply(ctx, op); partmap.ErrorCode(err) != partmap.EINVALID {
				t.Errorf("%s: got %v, want invalid", name, err)
			}
		}
		assertProfile(t, mustFind(t, s, e).Profile, partmap.Profile{partmap.FieldEmail: e, "a": "x", "c": "3"})
	})

	// An operation that changes nothing writes nothing: HSETEX of the
	// values a profile already has, none of which expires, is one.
	t.Run("SetFieldsUnchangedKeepsVersion", func(t *testing.T) {
		s := started(t)
		const e = "hsetex-same@example.com"
		rec := putProfile(t, s, abc(e))
		res := apply(t, s, partmap.Operation{Op: partmap.OpSetFields, Email: e, Set: partmap.Patch{"a": ptr("1"), "b": ptr("2")}})
		if !res.Set {
			t.Fatal("HSETEX without a condition did not answer set")
		}
		wantVersion(t, s, e, rec.Version, true)
	})

	t.Run("IncrementFloat", func(t *testing.T) {
		s := started(t)
		const e = "hincrbyfloat@example.com"
		incr := func(field, by string) (partmap.OperationResult, error) {
			return s.Apply(ctx, partmap.Operation{Op: partmap.OpIncrementFloat, Email: e, Field: field, ByFloat: by})
		}
		if _, err := incr("f", "1"); !errors.Is(err, partmap.ErrNotFound) {
			t.Fatalf("HINCRBYFLOAT on a missing profile: %v, want not-found", err)
		}
		putProfile(t, s, partmap.Profile{partmap.FieldEmail: e, "f": "10.5", "g": "5.0e3", "s": "abc"})
		expireFields(t, s, e, at(year2100), partmap.ExpireAlways, "f")
		for _, tc := range []struct{ field, by, want string }{
			{"f", "0.1", "10.6"},
			{"g", "2.0e2", "5200"},
			{"new", "3", "3"},
			{"new", "-3.5", "-0.5"},
		} {
			res, err := incr(tc.field, tc.by)
			if err != nil || res.FloatValue != tc.want {
				t.Fatalf("HINCRBYFLOAT %s %s: got %q, %v; want %q", tc.field, tc.by, res.FloatValue, err, tc.want)
			}
			if got := mustFind(t, s, e).Profile[tc.field]; got != tc.want {
				t.Fatalf("HINCRBYFLOAT %s %s: stored %q, want %q", tc.field, tc.by, got, tc.want)
			}
		}
		// As HINCRBY, it keeps the field's deadline.
		wantDeadlines(t, s, e, -1, []string{"f", "g"}, year2100, -1)
		v := mustFind(t, s, e).Version
		if _, err := incr("s", "1"); string(partmap.ErrorCode(err)) != "not-a-float" {
			t.Fatalf("HINCRBYFLOAT of %q: got %v, want not-a-float", "abc", err)
		}
		if _, err := incr("f", "x"); err == nil {
			t.Fatal("HINCRBYFLOAT by x succeeded")
		}
		if _, err := incr(partmap.FieldEmail, "1"); partmap.ErrorCode(err) != partmap.EKEYFIELD {
			t.Fatalf("HINCRBYFLOAT of emailAddress: got %v, want key-field", err)
		}
		wantVersion(t, s, e, v, true)
	})

	t.Run("WritesKeepOrClearDeadlines", func(t *testing.T) {
		s := started(t)
		from, to := apart("keep", "kept")
		putProfile(t, s, partmap.Profile{partmap.FieldEmail: from, "a": "1", "b": "2", "n": "5", "c": "3"})
		expireFields(t, s, from, at(year2100), partmap.ExpireAlways, "a", "b", "n", "c")
		apply(t, s, partmap.Operation{Op: partmap.OpExpire, Email: from, When: at(year2101)})
		fields := []string{"a", "b", "n", "c"}

		// A patch clears the deadline of each field it writes, even with
		// the value it had, and the write gets a new version.
		v := mustFind(t, s, from).Version
		if _, err := partmap.PatchProfile(ctx, s, from, partmap.Patch{"a": ptr("1")}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		v = wantVersion(t, s, from, v, false).Version
		wantDeadlines(t, s, from, year2101, fields, -1, year2100, year2100, year2100)
		// A patch that deletes a field takes its deadline with it.
		if _, err := partmap.PatchProfile(ctx, s, from, partmap.Patch{"b": nil}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		if _, err := partmap.PatchProfile(ctx, s, from, partmap.Patch{"b": ptr("2")}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		wantDeadlines(t, s, from, year2101, fields, -1, -1, year2100, year2100)
		// A patch of nothing new, with no deadline to clear, writes nothing.
		v = mustFind(t, s, from).Version
		if _, err := partmap.PatchProfile(ctx, s, from, partmap.Patch{"a": ptr("1"), "gone": nil}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		v = wantVersion(t, s, from, v, true).Version
		// An increment keeps the field's deadline.
		if inc, err := partmap.IncrementField(ctx, s, from, "n", 2, partmap.Condition{}); err != nil || inc.Value != 7 {
			t.Fatalf("increment: %+v, %v", inc, err)
		}
		wantVersion(t, s, from, v, false)
		wantDeadlines(t, s, from, year2101, fields, -1, -1, year2100, year2100)
		// A rename keeps them all, the profile's too.
		if _, err := partmap.RenameProfile(ctx, s, from, to, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		wantDeadlines(t, s, to, year2101, fields, -1, -1, year2100, year2100)
		// HSETNX and HSETEX keep the profile's deadline.
		apply(t, s, partmap.Operation{Op: partmap.OpSetIfAbsent, Email: to, Field: "z", Value: "26"})
		apply(t, s, partmap.Operation{Op: partmap.OpSetFields, Email: to, Set: partmap.Patch{"y": ptr("25")}})
		wantDeadlines(t, s, to, year2101, fields, -1, -1, year2100, year2100)
		// A PUT replaces the profile and drops every deadline.
		if _, created, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: to, "a": "1", "b": "2", "n": "7", "c": "3"}, partmap.Condition{}); err != nil || created {
			t.Fatalf("put: created %v, %v", created, err)
		}
		wantDeadlines(t, s, to, -1, fields, -1, -1, -1, -1)
		// So does a bulk upsert, which puts each profile.
		expireFields(t, s, to, at(year2100), partmap.ExpireAlways, "a")
		apply(t, s, partmap.Operation{Op: partmap.OpExpire, Email: to, When: at(year2101)})
		if results, err := s.UpsertProfiles(ctx, []partmap.Profile{{partmap.FieldEmail: to, "a": "1"}}); err != nil || results[0].Err != nil || results[0].Created {
			t.Fatalf("bulk upsert: %+v, %v", results, err)
		}
		wantDeadlines(t, s, to, -1, []string{"a"}, -1)
		wantPartitions(t, s, map[string]int64{partitionOf(to): 1})
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		s := started(t)
		const e = "missing@example.com"
		w := at(year2100)
		for _, op := range []partmap.Operation{
			{Op: partmap.OpExpire, Fields: []string{"a"}, When: w},
			{Op: partmap.OpExpire, When: w},
			{Op: partmap.OpPersist, Fields: []string{"a"}},
			{Op: partmap.OpPersist},
			{Op: partmap.OpIncrementFloat, Field: "a", ByFloat: "1"},
			{Op: partmap.OpGetDelete, Fields: []string{"a"}},
			{Op: partmap.OpGetExpire, Fields: []string{"a"}},
			{Op: partmap.OpGetExpire, Fields: []string{"a"}, Expiry: partmap.FieldExpiry{When: &w}},
		} {
			op.Email = e
			if _, err := s.Apply(ctx, op); !errors.Is(err, partmap.ErrNotFound) {
				t.Errorf("%s %q on a missing profile: got %v, want not-found", op.Op, op.Fields, err)
			}
		}
		mustBeGone(t, s, e)
		wantPartitions(t, s, map[string]int64{})
	})

	t.Run("ErrBadInputWritesNothing", func(t *testing.T) {
		s := started(t)
		const e = "bad-expiry@example.com"
		rec := putProfile(t, s, abc(e))
		expireFields(t, s, e, at(year2100), partmap.ExpireAlways, "a")
		rec = mustFind(t, s, e)
		neg, late := partmap.When{Millis: -1}, at(partmap.MaxFieldDeadline+1)
		negRel := partmap.When{Millis: -1000, Relative: true}
		for name, op := range map[string]partmap.Operation{
			"ErrNegativeTime":         {Op: partmap.OpExpire, Fields: []string{"a"}, When: neg},
			"ErrNegativeRelativeTime": {Op: partmap.OpExpire, Fields: []string{"a"}, When: negRel},
			"ErrNegativeProfileTime":  {Op: partmap.OpExpire, When: neg},
			"ErrTooLate":              {Op: partmap.OpExpire, Fields: []string{"a"}, When: late},
			"ErrTooLateRelative":      {Op: partmap.OpExpire, Fields: []string{"a"}, When: partmap.When{Millis: partmap.MaxFieldDeadline, Relative: true}},
			"ErrProfileTooLate":       {Op: partmap.OpExpire, When: partmap.When{Millis: math.MaxInt64, Relative: true}},
			"ErrUnknownCondition":     {Op: partmap.OpExpire, Fields: []string{"a"}, When: at(year2101), ExpireCond: "XY"},
			"ErrEmptyField":           {Op: partmap.OpExpire, Fields: []string{""}, When: at(year2101)},
			"ErrGetDeleteNoFields":    {Op: partmap.OpGetDelete},
			"ErrGetExpireNoFields":    {Op: partmap.OpGetExpire, Expiry: partmap.FieldExpiry{Persist: true}},
			"ErrGetExpireNegative":    {Op: partmap.OpGetExpire, Fields: []string{"b"}, Expiry: partmap.FieldExpiry{When: &neg}},
			"ErrSetFieldsNegative":    {Op: partmap.OpSetFields, Set: partmap.Patch{"b": ptr("x")}, Expiry: partmap.FieldExpiry{When: &neg}},
			"ErrSetIfAbsentNoField":   {Op: partmap.OpSetIfAbsent, Value: "x"},
			"ErrUnknownOperation":     {Op: "hexpire", Fields: []string{"a"}, When: at(year2101)},
		} {
			op.Email = e
			_, err := s.Apply(ctx, op)
			if partmap.ErrorCode(err) != partmap.EINVALID {
				t.Errorf("%s: got %v, want invalid", name, err)
			}
		}
		wantVersion(t, s, e, rec.Version, true)
		assertProfile(t, mustFind(t, s, e).Profile, abc(e))
		wantDeadlines(t, s, e, -1, []string{"a", "b"}, year2100, -1)
	})

	// A field named twice is acted on in turn, as Redis takes each
	// argument. The HTTP client refuses it (EINVALID, partmap.FieldsOnce)
	// and writes nothing: over HTTP each field is named once.
	t.Run("RepeatedFieldsInTurn", func(t *testing.T) {
		s := started(t)
		const e = "repeated@example.com"
		rec := putProfile(t, s, abc(e))
		_, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpExpire, Email: e, Fields: []string{"a", "a"}, When: at(year2100)})
		if partmap.ErrorCode(err) == partmap.EINVALID && strings.Contains(partmap.ErrorMessage(err), "over HTTP") {
			for _, op := range []partmap.Operation{
				{Op: partmap.OpPersist, Email: e, Fields: []string{"a", "a"}},
				{Op: partmap.OpGetDelete, Email: e, Fields: []string{"a", "b", "a"}},
				{Op: partmap.OpGetExpire, Email: e, Fields: []string{"b", "b"}, Expiry: partmap.FieldExpiry{Persist: true}},
			} {
				if _, err := s.Apply(ctx, op); partmap.ErrorCode(err) != partmap.EINVALID {
					t.Errorf("%s of a field named twice over HTTP: %v, want invalid", op.Op, err)
				}
			}
			if _, err := s.Deadlines(ctx, e, []string{"a", "a"}); partmap.ErrorCode(err) != partmap.EINVALID {
				t.Errorf("deadlines of a field named twice over HTTP: %v, want invalid", err)
			}
			wantVersion(t, s, e, rec.Version, true)
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		wantCodes(t, "NX b b nope", expireFields(t, s, e, at(year2101), partmap.ExpireIfNone, "b", "b", "nope"), 1, 0, -2)
		wantCodes(t, "LT c c", expireFields(t, s, e, at(year2101), partmap.ExpireIfSooner, "c", "c"), 1, 0)
		wantDeadlines(t, s, e, -1, []string{"a", "a", "b", "nope", "nope"}, year2100, year2100, year2101, -2, -2)
		wantCodes(t, "HPERSIST a a", apply(t, s, partmap.Operation{Op: partmap.OpPersist, Email: e, Fields: []string{"a", "a"}}).Codes, 1, -1)
		wantCodes(t, "past b b", expireFields(t, s, e, past, partmap.ExpireAlways, "b", "b"), 2, -2)
		res := apply(t, s, partmap.Operation{Op: partmap.OpGetExpire, Email: e, Fields: []string{"c", "c"}, Expiry: partmap.FieldExpiry{Persist: true}})
		wantValues(t, "HGETEX PERSIST c c", res.Values, ptr("3"), ptr("3"))
		res = apply(t, s, partmap.Operation{Op: partmap.OpGetExpire, Email: e, Fields: []string{"c", "a", "c"}, Expiry: partmap.FieldExpiry{When: &past}})
		wantValues(t, "HGETEX past c a c", res.Values, ptr("3"), ptr("1"), nil)
		putProfile(t, s, abc(e))
		res = apply(t, s, partmap.Operation{Op: partmap.OpGetDelete, Email: e, Fields: []string{"a", "b", "a"}})
		wantValues(t, "HGETDEL a b a", res.Values, ptr("1"), ptr("2"), nil)
		assertProfile(t, mustFind(t, s, e).Profile, partmap.Profile{partmap.FieldEmail: e, "c": "3"})
	})

	t.Run("ErrPrecondition", func(t *testing.T) {
		s := started(t)
		const e = "cond-expiry@example.com"
		rec := putProfile(t, s, abc(e))
		_, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpExpire, Email: e, Fields: []string{"a"}, When: at(year2100), Cond: partmap.IfMatch(rec.Version + 1)})
		if !errors.Is(err, partmap.ErrPrecondition) {
			t.Fatalf("expire with a stale If-Match: %v", err)
		}
		wantDeadlines(t, s, e, -1, []string{"a"}, -1)
		res := apply(t, s, partmap.Operation{Op: partmap.OpExpire, Email: e, Fields: []string{"a"}, When: at(year2100), Cond: partmap.IfMatch(rec.Version)})
		wantCodes(t, "expire with the current If-Match", res.Codes, 1)
		if res.Record == nil || res.Record.Version == rec.Version || res.Record.Version != mustFind(t, s, e).Version {
			t.Fatalf("expire answered record %+v", res.Record)
		}
	})

	t.Run("Transaction", func(t *testing.T) {
		s := started(t)
		a, b := apart("txa", "txb")
		putProfile(t, s, abc(b))
		w := at(year2100)
		ops := []partmap.Operation{
			{Op: partmap.OpSetFields, Email: a, Set: partmap.Patch{"x": ptr("1"), "y": ptr("2")}, Expiry: partmap.FieldExpiry{When: &w}},
			{Op: partmap.OpExpire, Email: a, Fields: []string{"x", "nope"}, When: at(year2101), ExpireCond: partmap.ExpireIfLater},
			{Op: partmap.OpPersist, Email: a, Fields: []string{"y"}},
			{Op: partmap.OpSetIfAbsent, Email: b, Field: "a", Value: "9"},
			{Op: partmap.OpGetDelete, Email: b, Fields: []string{"b", "nope"}},
			{Op: partmap.OpGetExpire, Email: b, Fields: []string{"c"}, Expiry: partmap.FieldExpiry{When: &w}},
			{Op: partmap.OpExpire, Email: b, When: at(year2102)},
		}
		results, err := s.Transact(ctx, ops)
		if err != nil {
			t.Fatal(err)
		}
		if len(results) != len(ops) {
			t.Fatalf("%d results for %d operations", len(results), len(ops))
		}
		if !results[0].Set || results[3].Set {
			t.Fatalf("set answers: %v, %v", results[0].Set, results[3].Set)
		}
		wantCodes(t, "expire GT in a transaction", results[1].Codes, 1, -2)
		wantCodes(t, "persist in a transaction", results[2].Codes, 1)
		wantValues(t, "getDelete in a transaction", results[4].Values, ptr("2"), nil)
		wantValues(t, "getExpire in a transaction", results[5].Values, ptr("3"))
		wantCodes(t, "profile expire in a transaction", results[6].Codes, 1)
		wantDeadlines(t, s, a, -1, []string{"x", "y"}, year2101, -1)
		wantDeadlines(t, s, b, year2102, []string{"a", "b", "c"}, -1, -2, year2100)
		assertProfile(t, mustFind(t, s, b).Profile, partmap.Profile{partmap.FieldEmail: b, "a": "1", "c": "3"})

		// One failing operation writes nothing of the transaction.
		va, vb := mustFind(t, s, a).Version, mustFind(t, s, b).Version
		_, err = s.Transact(ctx, []partmap.Operation{
			{Op: partmap.OpGetDelete, Email: a, Fields: []string{"x"}},
			{Op: partmap.OpPersist, Email: b},
			{Op: partmap.OpExpire, Email: "nobody@example.com", Fields: []string{"x"}, When: w},
		})
		wantCode(t, err, partmap.ENOTFOUND, 3) // operations count from 1
		wantVersion(t, s, a, va, true)
		wantVersion(t, s, b, vb, true)
		wantDeadlines(t, s, b, year2102, nil)

		// Later operations see earlier ones: the field a getDelete took is
		// no longer there to expire.
		results, err = s.Transact(ctx, []partmap.Operation{
			{Op: partmap.OpGetDelete, Email: a, Fields: []string{"x"}},
			{Op: partmap.OpExpire, Email: a, Fields: []string{"x", "y"}, When: past},
		})
		if err != nil {
			t.Fatal(err)
		}
		wantCodes(t, "expire after getDelete", results[1].Codes, -2, 2)
		mustBeGone(t, s, a) // its last field went, as a Redis hash emptied is deleted
	})
}
