package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/partmap/partmap"
)

func ptr(s string) *string { return &s }

// runFields checks the Redis-hash record semantics: projection, partial
// update, increment and delete, with their exact counts.
func runFields(t *testing.T, started func(*testing.T) partmap.Store) {
	ctx := context.Background()
	const email = "hash@example.com"
	seed := func(t *testing.T, s partmap.Store) partmap.Record {
		t.Helper()
		rec, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{
			partmap.FieldEmail: email, "fullName": "Ada", "visits": "0", "empty": "", "name.first": "Ada",
		}, partmap.Condition{})

		if err != nil {
			t.Fatal(err)
		}
		return rec
	}

	t.Run("Projection", func(t *testing.T) {
		s := started(t)
		rec := seed(t, s)
		proj, err := s.ProjectProfile(ctx, " HASH@example.com", []string{"visits", "fullName", "missing", "empty", "name.first", "name", "emailAddress"})
		if err != nil {
			t.Fatal(err)
		}
		want := []*string{ptr("0"), ptr("Ada"), nil, ptr(""), ptr("Ada"), nil, ptr(email)}
		if len(proj.Values) != len(want) {
			t.Fatalf("got %d values, want %d", len(proj.Values), len(want))
		}
		for i, w := range want {
			got := proj.Values[i]
			if (got == nil) != (w == nil) || (got != nil && *got != *w) {
				t.Fatalf("field %q: got %v, want %v", proj.Fields[i], show(got), show(w))
			}
		}
		if proj.Fields[0] != "visits" || proj.Fields[6] != "emailAddress" || proj.Version != rec.Version {
			t.Fatalf("fields %q version %v, want the request order and %v", proj.Fields, proj.Version, rec.Version)
		}
		// A projection of a missing profile is not found and creates nothing.
		const ghost = "ghost@example.com"
		if _, err := s.ProjectProfile(ctx, ghost, []string{"a", "b"}); !errors.Is(err, partmap.ErrNotFound) {
			t.Fatalf("projection of a missing profile: got %v", err)
		}
		if _, err := s.FindProfile(ctx, ghost); !errors.Is(err, partmap.ErrNotFound) {
			t.Fatalf("the projection created something: %v", err)
		}
		wantPartitions(t, s, map[string]int64{partitionOf(email): 1})
		for _, bad := range [][]string{nil, {}, {"a", "a"}, {"a", ""}} {
			if _, err := s.ProjectProfile(ctx, email, bad); partmap.ErrorCode(err) != partmap.EINVALID {
				t.Errorf("projection of %q: got %v, want invalid", bad, err)
			}
		}
	})

	t.Run("Patch", func(t *testing.T) {
		for _, tc := range []struct {
			name           string
			patch          partmap.Patch
			added, deleted int
			want           partmap.Profile // nil: unchanged
			code           partmap.Code
			keepsVersion   bool
		}{
			{name: "OKAddsNew", patch: partmap.Patch{"nickname": ptr("A"), "city": ptr("")}, added: 2,
				want: partmap.Profile{"nickname": "A", "city": ""}},
			{name: "OKReplaceCountsZero", patch: partmap.Patch{"fullName": ptr("Ada L")}, added: 0,
				want: partmap.Profile{"fullName": "Ada L"}},
			{name: "OKMixed", patch: partmap.Patch{"fullName": ptr("B"), "new": ptr("n"), "visits": nil, "absent": nil}, added: 1, deleted: 1,
				want: partmap.Profile{"fullName": "B", "new": "n", "visits": "<deleted>"}},
			{name: "OKDeleteEmptyField", patch: partmap.Patch{"empty": nil}, deleted: 1, want: partmap.Profile{"empty": "<deleted>"}},
			{name: "OKDeleteMissingCountsZero", patch: partmap.Patch{"absent": nil}, keepsVersion: true},
			{name: "OKSameValuesWriteNothing", patch: partmap.Patch{"fullName": ptr("Ada"), "visits": ptr("0")}, keepsVersion: true},
			{name: "OKEmptyPatch", patch: partmap.Patch{}, keepsVersion: true},
			{name: "OKRestateEmail", patch: partmap.Patch{partmap.FieldEmail: ptr(" Hash@Example.com "), "x": ptr("1")}, added: 1,
				want: partmap.Profile{"x": "1"}},
			{name: "ErrDeleteEmail", patch: partmap.Patch{partmap.FieldEmail: nil}, code: partmap.EKEYFIELD},
			{name: "ErrChangeEmail", patch: partmap.Patch{partmap.FieldEmail: ptr("other@example.com")}, code: partmap.EKEYFIELD},
			{name: "ErrInvalidUTF8", patch: partmap.Patch{"fullName": ptr("\xff")}, code: partmap.EINVALIDUTF8},
			{name: "ErrValueTooLarge", patch: partmap.Patch{"fullName": ptr(string(make([]byte, partmap.DefaultLimits.MaxFieldValueBytes+1)))}, code: partmap.ETOOLARGE},
			{name: "ErrTooManyFields", patch: manyFields(partmap.DefaultLimits.MaxFields), code: partmap.ETOOMANYFIELDS},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s := started(t)
				before := seed(t, s)
				res, err := partmap.PatchProfile(ctx, s, email, tc.patch, partmap.Condition{})
				after, ferr := s.FindProfile(ctx, email)
				if ferr != nil {
					t.Fatal(ferr)
				}
				if tc.code != "" {
					if partmap.ErrorCode(err) != tc.code {
						t.Fatalf("got %v, want %s", err, tc.code)
					}
					assertProfile(t, after.Profile, before.Profile)
					if after.Version != before.Version {
						t.Fatal("a refused patch changed the version")
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if res.FieldsAdded != tc.added || res.FieldsDeleted != tc.deleted {
					t.Fatalf("fieldsAdded=%d fieldsDeleted=%d, want %d and %d", res.FieldsAdded, res.FieldsDeleted, tc.added, tc.deleted)
				}
				want := before.Profile.Clone()
				for k, v := range tc.want {
					if v == "<deleted>" {
						delete(want, k)
					} else {
						want[k] = v
					}
				}
				assertProfile(t, res.Record.Profile, want)
				assertProfile(t, after.Profile, want)
				if (after.Version == before.Version) != tc.keepsVersion || res.Record.Version != after.Version {
					t.Fatalf("version %v → %v (reply %v); keeps version: want %v", before.Version, after.Version, res.Record.Version, tc.keepsVersion)
				}
			})
		}
		t.Run("ErrMissingProfile", func(t *testing.T) {
			s := started(t)
			if _, err := partmap.PatchProfile(ctx, s, "nobody@example.com", partmap.Patch{"a": ptr("b")}, partmap.Condition{}); !errors.Is(err, partmap.ErrNotFound) {
				t.Fatalf("got %v, want not-found", err)
			}
			wantPartitions(t, s, map[string]int64{})
		})
	})

	t.Run("Increment", func(t *testing.T) {
		s := started(t)
		seed(t, s)
		incr := func(field string, by int64) (int64, error) {
			inc, err := partmap.IncrementField(ctx, s, email, field, by, partmap.Condition{})
			if err == nil && (inc.Email != email || inc.Field != field || inc.Version == 0) {
				t.Fatalf("increment reply %+v", inc)
			}
			return inc.Value, err
		}
		for _, step := range []struct {
			field string
			by    int64
			want  int64
		}{
			{"visits", 1, 1}, {"visits", 41, 42}, {"visits", -50, -8}, {"visits", 0, -8},
			{"counter", 5, 5}, // a missing field starts from 0
			{"negative", -1, -1},
		} {
			if got, err := incr(step.field, step.by); err != nil || got != step.want {
				t.Fatalf("%s += %d: got %d, %v; want %d", step.field, step.by, got, err, step.want)
			}
		}
		if got, _ := s.FindProfile(ctx, email); got.Profile["visits"] != "-8" || got.Profile["counter"] != "5" {
			t.Fatalf("stored counters: %v", got.Profile)
		}
		for _, bad := range []string{"abc", "1.5", " 11", "11 ", "007", "+5", "-0", "", "1e3", "0x10", "９", "9223372036854775808", "-9223372036854775809"} {
			t.Run("ErrNotInteger"+strconv.Quote(bad), func(t *testing.T) {
				if _, err := partmap.PatchProfile(ctx, s, email, partmap.Patch{"bad": ptr(bad)}, partmap.Condition{}); err != nil {
					t.Fatal(err)
				}
				if _, err := incr("bad", 1); partmap.ErrorCode(err) != partmap.ENOTINTEGER {
					t.Fatalf("got %v, want not-an-integer", err)
				}
				if got, _ := s.FindProfile(ctx, email); got.Profile["bad"] != bad {
					t.Fatalf("value changed to %q", got.Profile["bad"])
				}
			})
		}
		for _, tc := range []struct {
			stored string
			by     int64
		}{
			{strconv.FormatInt(math.MaxInt64, 10), 1},
			{strconv.FormatInt(math.MinInt64, 10), -1},
			{"1", math.MaxInt64},
			{"-2", math.MinInt64},
		} {
			t.Run("ErrOverflow"+tc.stored, func(t *testing.T) {
				partmap.PatchProfile(ctx, s, email, partmap.Patch{"big": ptr(tc.stored)}, partmap.Condition{})
				if _, err := incr("big", tc.by); partmap.ErrorCode(err) != partmap.EOVERFLOW {
					t.Fatalf("%s + %d: got %v, want overflow", tc.stored, tc.by, err)
				}
				if got, _ := s.FindProfile(ctx, email); got.Profile["big"] != tc.stored {
					t.Fatalf("value changed to %q", got.Profile["big"])
				}
			})
		}
		t.Run("OKExtremes", func(t *testing.T) {
			partmap.PatchProfile(ctx, s, email, partmap.Patch{"big": ptr("-1")}, partmap.Condition{})
			if got, err := incr("big", math.MinInt64+1); err != nil || got != math.MinInt64 {
				t.Fatalf("got %d, %v", got, err)
			}
			if got, err := incr("big", math.MaxInt64); err != nil || got != -1 {
				t.Fatalf("got %d, %v", got, err)
			}
		})
		if _, err := incr(partmap.FieldEmail, 1); partmap.ErrorCode(err) != partmap.EKEYFIELD {
			t.Fatalf("increment of the email: got %v", err)
		}
		if _, err := incr("", 1); partmap.ErrorCode(err) != partmap.EINVALID {
			t.Fatalf("increment of an empty field name: got %v", err)
		}
		// A bad field name is refused before the profile is looked for.
		for name, code := range map[string]partmap.Code{"": partmap.EINVALID, strings.Repeat("f", partmap.DefaultLimits.MaxFieldNameBytes+1): partmap.ETOOLARGE, "\xff": partmap.EINVALIDUTF8} {
			if _, err := partmap.IncrementField(ctx, s, "nobody@example.com", name, 1, partmap.Condition{}); partmap.ErrorCode(err) != code {
				t.Fatalf("increment of field %q of a missing profile: got %v, want %s", name, err, code)
			}
		}
		if _, err := partmap.IncrementField(ctx, s, "nobody@example.com", "visits", 1, partmap.Condition{}); !errors.Is(err, partmap.ErrNotFound) {
			t.Fatalf("increment of a missing profile: got %v", err)
		}
		if _, err := s.FindProfile(ctx, "nobody@example.com"); !errors.Is(err, partmap.ErrNotFound) {
			t.Fatal("an increment created a profile")
		}
	})

	t.Run("ConcurrentIncrementsAllCount", func(t *testing.T) {
		s := started(t)
		seed(t, s)
		const workers, each = 16, 20
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range each {
					if err := retry(func() error {
						_, err := partmap.IncrementField(ctx, s, email, "visits", 1, partmap.Condition{})
						return err
					}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if got, _ := s.FindProfile(ctx, email); got.Profile["visits"] != strconv.Itoa(workers*each) {
			t.Fatalf("visits = %q after %d increments", got.Profile["visits"], workers*each)
		}
	})

	t.Run("Delete", func(t *testing.T) {
		s := started(t)
		emails, p := Colliding(2, partmap.DefaultPartitions, "del")
		for _, e := range emails {
			put(t, s, e, "x")
		}
		wantPartitions(t, s, map[string]int64{p.String(): 2})
		if err := partmap.DeleteProfile(ctx, s, emails[0], partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.FindProfile(ctx, emails[0]); !errors.Is(err, partmap.ErrNotFound) {
			t.Fatalf("after delete: %v", err)
		}
		if err := partmap.DeleteProfile(ctx, s, emails[0], partmap.Condition{}); !errors.Is(err, partmap.ErrNotFound) {
			t.Fatalf("second delete: got %v, want not-found", err)
		}
		wantPartitions(t, s, map[string]int64{p.String(): 1})
		if err := partmap.DeleteProfile(ctx, s, " "+emails[1]+" ", partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
		wantPartitions(t, s, map[string]int64{}) // the last profile took its partition with it
		if err := partmap.DeleteProfile(ctx, s, "bad\xff", partmap.Condition{}); partmap.ErrorCode(err) != partmap.EINVALIDEMAIL {
			t.Fatalf("delete of an invalid email: got %v", err)
		}
	})

	t.Run("ConditionsOnEveryWrite", func(t *testing.T) {
		s := started(t)
		rec := seed(t, s)
		stale := partmap.IfMatch(rec.Version ^ 1)
		for name, write := range map[string]func(partmap.Condition) error{
			"patch": func(c partmap.Condition) error {
				_, err := partmap.PatchProfile(ctx, s, email, partmap.Patch{"fullName": ptr("changed")}, c)
				return err
			},
			"increment": func(c partmap.Condition) error {
				_, err := partmap.IncrementField(ctx, s, email, "visits", 1, c)
				return err
			},
			"delete": func(c partmap.Condition) error { return partmap.DeleteProfile(ctx, s, email, c) },
		} {
			for _, c := range []partmap.Condition{stale, {IfNoneMatch: true}} {
				if err := write(c); !errors.Is(err, partmap.ErrPrecondition) {
					t.Fatalf("%s with %+v: got %v, want precondition-failed", name, c, err)
				}
			}
			if got, _ := s.FindProfile(ctx, email); got.Version != rec.Version {
				t.Fatalf("a failed %s precondition wrote", name)
			}
		}
		// If-Match: * requires existence; on a missing profile it is 412.
		if _, err := partmap.PatchProfile(ctx, s, "nobody@example.com", partmap.Patch{}, partmap.Condition{IfExists: true}); !errors.Is(err, partmap.ErrPrecondition) {
			t.Fatalf("If-Match: * on a missing profile: got %v", err)
		}
		inc, err := partmap.IncrementField(ctx, s, email, "visits", 1, partmap.IfMatch(rec.Version))
		if err != nil {
			t.Fatal(err)
		}
		res, err := partmap.PatchProfile(ctx, s, email, partmap.Patch{"a": ptr("b")}, partmap.Condition{IfMatch: []partmap.Version{inc.Version}, IfExists: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := partmap.DeleteProfile(ctx, s, email, partmap.IfMatch(res.Record.Version)); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("PatchIfMatchRace", func(t *testing.T) {
		s := started(t)
		rec := seed(t, s)
		exactlyOneWins(t, func(i int) error {
			_, err := partmap.PatchProfile(ctx, s, email, partmap.Patch{"winner": ptr(fmt.Sprint(i))}, partmap.IfMatch(rec.Version))
			return err
		})
	})
}

func manyFields(n int) partmap.Patch {
	p := partmap.Patch{}
	for i := range n {
		p[fmt.Sprintf("extra%d", i)] = ptr("v")
	}
	return p
}

func show(s *string) string {
	if s == nil {
		return "<missing>"
	}
	return strconv.Quote(*s)
}

func partitionOf(email string) string {
	return partmap.PartitionOf(email, partmap.DefaultPartitions).String()
}

// wantPartitions checks ListPartitions against partition name → count.
func wantPartitions(t *testing.T, s partmap.Store, want map[string]int64) {
	t.Helper()
	stats, err := s.ListPartitions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	var total int64
	for _, p := range stats.Partitions {
		got[p.Partition.String()] = p.Profiles
		total += p.Profiles
	}
	if len(got) != len(want) || total != stats.TotalProfiles {
		t.Fatalf("partitions %v (total %d), want %v", got, stats.TotalProfiles, want)
	}
	for name, n := range want {
		if got[name] != n {
			t.Fatalf("partitions %v, want %v", got, want)
		}
	}
}

func runBulk(t *testing.T, started func(*testing.T) partmap.Store) {
	ctx := context.Background()
	t.Run("Bulk", func(t *testing.T) {
		s := started(t)
		put(t, s, "exists@example.com", "old")
		emails, p := Colliding(3, partmap.DefaultPartitions, "bulk")
		in := []partmap.Profile{
			{partmap.FieldEmail: " Exists@Example.com ", "fullName": "new"},
			{partmap.FieldEmail: emails[0], "fullName": "a"},
			{partmap.FieldEmail: "bad\xff"},
			{partmap.FieldEmail: emails[1], "fullName": "b1"},
			{"fullName": "no email"},
			{partmap.FieldEmail: emails[1], "fullName": "b2"}, // the same email again: applied in order
			{partmap.FieldEmail: emails[2], "v": "\xff"},
		}
		res, err := s.UpsertProfiles(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		want := []struct {
			created bool
			code    partmap.Code
		}{{false, ""}, {true, ""}, {false, partmap.EINVALIDUTF8}, {true, ""}, {false, partmap.EINVALIDEMAIL}, {false, ""}, {false, partmap.EINVALIDUTF8}}
		for i, w := range want {
			if partmap.ErrorCode(res[i].Err) != w.code || res[i].Created != w.created {
				t.Fatalf("result %d: %+v, want created=%v code=%q", i, res[i], w.created, w.code)
			}
			if w.code == "" && (res[i].Record.Version == 0 || res[i].Record.Profile.Email() != strings.TrimSpace(strings.ToLower(in[i].Email()))) {
				t.Fatalf("result %d: record %+v", i, res[i].Record)
			}
		}
		for email, name := range map[string]string{"exists@example.com": "new", emails[0]: "a", emails[1]: "b2"} {
			if rec, err := s.FindProfile(ctx, email); err != nil || rec.Profile["fullName"] != name {
				t.Fatalf("%s: %v, %v", email, rec.Profile, err)
			}
		}
		if _, err := s.FindProfile(ctx, emails[2]); !errors.Is(err, partmap.ErrNotFound) {
			t.Fatal("a refused profile was stored")
		}
		wantPartitions(t, s, map[string]int64{partitionOf("exists@example.com"): 1, p.String(): 2})
		if res, err := s.UpsertProfiles(ctx, nil); err != nil || len(res) != 0 {
			t.Fatalf("empty bulk: %v, %v", res, err)
		}
		if _, err := s.UpsertProfiles(ctx, make([]partmap.Profile, partmap.MaxBulkProfiles+1)); partmap.ErrorCode(err) != partmap.ETOOLARGE {
			t.Fatalf("too many profiles: %v", err)
		}
	})
}
