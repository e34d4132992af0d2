package storetest

import (
	"context"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/model"
)

func matchesAll(p partmap.Profile, where []partmap.Match) bool {
	for _, m := range where {
		if v, ok := p[m.Field]; !ok || v != m.Value {
			return false
		}
	}
	return true
}

// modelEmails starts s and returns its partitions' stats and the emails
// a model draws from: two, in several spellings, and two that share one
// of the store's partitions, whatever their count (a store whose listing
// reads every partition, Redis, runs the model on a few).
func modelEmails(t *testing.T, s partmap.Store, prefix string) (partmap.PartitionStats, []string) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stats, err := s.ListPartitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	colliding, _ := Colliding(2, stats.MapPartitions(), prefix)
	return stats, append([]string{"a@x.io", " A@X.io\t", "b@x.io", "B@x.IO"}, colliding...)
}

// RunModel checks random operation sequences against the sequential model
// (internal/model), comparing every answer and, after each sequence, the
// whole enumeration and the partition counts.
func RunModel(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	stats, spellings := modelEmails(t, s, "model")
	partitions := stats.MapPartitions()
	genEmail := rapid.SampledFrom(spellings)
	indexes := stats.Indexes
	genField := rapid.SampledFrom(append([]string{"fullName", "visits", "n.x"}, indexes...))
	genValue := rapid.SampledFrom([]string{"", "0", "7", "-1", "abc", "9223372036854775807", "007", "é🙂"})
	genFields := rapid.SliceOfNDistinct(genField, 0, 3, func(s string) string { return s })
	genOp := rapid.Custom(func(rt *rapid.T) model.Op {
		op := model.Op{Kind: rapid.SampledFrom([]model.Kind{model.Get, model.Put, model.Patch, model.Incr, model.Delete}).Draw(rt, "kind"),
			Email: genEmail.Draw(rt, "email")}
		switch op.Kind {
		case model.Put:
			op.Put = partmap.Profile{partmap.FieldEmail: op.Email}
			for _, f := range genFields.Draw(rt, "fields") {
				op.Put[f] = genValue.Draw(rt, "value")
			}
		case model.Patch:
			op.Patch = partmap.Patch{}
			for _, f := range genFields.Draw(rt, "fields") {
				if rapid.Bool().Draw(rt, "delete") {
					op.Patch[f] = nil
				} else {
					v := genValue.Draw(rt, "value")
					op.Patch[f] = &v
				}
			}
		case model.Incr:
			op.Field = genField.Draw(rt, "field")
			op.By = rapid.SampledFrom([]int64{1, -1, 0, 5, math.MaxInt64, math.MinInt64}).Draw(rt, "by")
		}
		return op
	})

	rapid.Check(t, func(rt *rapid.T) {
		// Each run starts from an empty directory, emptied through the API.
		for _, rec := range listAll(rt, s, partmap.MaxPageLimit) {
			if err := partmap.DeleteProfile(ctx, s, rec.Profile.Email(), partmap.Condition{}); err != nil {
				rt.Fatal(err)
			}
		}
		state := map[string]partmap.Profile{}
		canon := func(e string) string { c, _ := partmap.CanonicalEmail(e); return c }

		rt.Repeat(map[string]func(*rapid.T){
			"op": func(rt *rapid.T) {
				op := genOp.Draw(rt, "op")
				got, _ := op.Do(ctx, s)
				// The model speaks canonical emails, as the store stores them.
				key := canon(op.Email)
				op.Email = key
				if op.Put != nil {
					op.Put = op.Put.Clone()
					op.Put[partmap.FieldEmail] = key
				}
				next, want := op.Apply(state[key])
				if !want.Same(got) {
					rt.Fatalf("%v: got %v, model %v", op, got, want)
				}
				if next == nil {
					delete(state, key)
				} else {
					state[key] = next
				}
			},
			"project": func(rt *rapid.T) {
				email := genEmail.Draw(rt, "email")
				fields := rapid.SliceOfNDistinct(genField, 1, 3, func(s string) string { return s }).Draw(rt, "fields")
				proj, err := s.ProjectProfile(ctx, email, fields)
				want, ok := state[canon(email)]
				if !ok {
					if partmap.ErrorCode(err) != partmap.ENOTFOUND {
						rt.Fatalf("project of a missing profile: %v", err)
					}
					return
				}
				if err != nil {
					rt.Fatal(err)
				}
				for i, f := range fields {
					v, has := want[f]
					if got := proj.Values[i]; (got != nil) != has || (got != nil && *got != v) {
						rt.Fatalf("project %q: got %s, model %q (present %v)", f, show(got), v, has)
					}
				}
			},
		})
		// Searches equal a brute-force filter over the enumeration, and the
		// check finds no drift.
		if len(indexes) > 0 {
			all := listAll(rt, s, partmap.MaxPageLimit)
			for range rapid.IntRange(1, 4).Draw(rt, "searches") {
				fields := rapid.SliceOfNDistinct(rapid.SampledFrom(indexes), 1, len(indexes), func(s string) string { return s }).Draw(rt, "searchFields")
				var where []partmap.Match
				for _, f := range fields {
					where = append(where, partmap.Match{Field: f, Value: genValue.Draw(rt, "searchValue")})
				}
				var want []string
				for _, rec := range all {
					if matchesAll(rec.Profile, where) {
						want = append(want, rec.Profile.Email())
					}
				}
				var got []string
				for _, rec := range listWhere(rt, s, rapid.IntRange(1, 4).Draw(rt, "searchPageSize"), where, true) {
					got = append(got, rec.Profile.Email())
				}
				if !slices.Equal(got, want) {
					rt.Fatalf("search %v: got %v, brute force %v", where, got, want)
				}
			}
			for _, e := range spellings {
				c, err := s.CheckPartition(ctx, partmap.PartitionOf(canon(e), partitions))
				if err != nil || !c.OK() {
					rt.Fatalf("check of %s: %+v %v", e, c, err)
				}
			}
		}

		// The enumeration and the partition counts agree with the model.
		listed := listAll(rt, s, rapid.IntRange(1, 4).Draw(rt, "pageSize"))
		if len(listed) != len(state) {
			rt.Fatalf("listed %d profiles, model has %d", len(listed), len(state))
		}
		for _, rec := range listed {
			if !model.Equal(rec.Profile, state[rec.Profile.Email()]) {
				rt.Fatalf("listed %v, model %v", rec.Profile, state[rec.Profile.Email()])
			}
		}
		stats, err := s.ListPartitions(ctx)
		if err != nil || stats.TotalProfiles != int64(len(state)) {
			rt.Fatalf("partitions: total %d, %v; model %d", stats.TotalProfiles, err, len(state))
		}
	})
}
