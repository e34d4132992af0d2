package storetest

import (
	"context"
	"math"
	"strconv"
	"testing"

	"pgregory.net/rapid"

	"github.com/partmap/partmap"
)

// RunModel checks random operation sequences against a plain in-memory
// model of a profile store, comparing every reply and, after each step, the
// whole enumeration.
func RunModel(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	if _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	colliding, _ := Colliding(2, partmap.DefaultPartitions, "model")
	spellings := append([]string{"a@x.io", " A@X.io\t", "b@x.io", "B@x.IO"}, colliding...)
	fieldNames := []string{"fullName", "visits", "n.x", "", "emailAddress"}
	values := []string{"", "0", "7", "-1", "abc", "9223372036854775807", "007", "é🙂"}

	rapid.Check(t, func(rt *rapid.T) {
		// Each run starts from an empty directory, emptied through the API.
		for _, rec := range listAll(t, s, partmap.MaxPageLimit) {
			if err := s.DeleteProfile(ctx, rec.Profile.Email(), partmap.Condition{}); err != nil {
				rt.Fatal(err)
			}
		}
		model := map[string]partmap.Profile{}
		canon := func(e string) string { c, _ := partmap.CanonicalEmail(e); return c }
		genEmail := rapid.SampledFrom(spellings)
		genField := rapid.SampledFrom(fieldNames[:3])
		genValue := rapid.SampledFrom(values)
		sameErr := func(op string, got error, want partmap.Code) {
			if partmap.ErrorCode(got) != want {
				rt.Fatalf("%s: got error %v, want code %q", op, got, want)
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"upsert": func(rt *rapid.T) {
				email := genEmail.Draw(rt, "email")
				p := partmap.Profile{partmap.FieldEmail: email}
				for _, f := range rapid.SliceOfDistinct(genField, func(s string) string { return s }).Draw(rt, "fields") {
					p[f] = genValue.Draw(rt, "value")
				}
				_, created, err := s.UpsertProfile(ctx, p, partmap.Condition{})
				sameErr("upsert", err, "")
				_, existed := model[canon(email)]
				if created == existed {
					rt.Fatalf("upsert created=%v, but the profile existed=%v", created, existed)
				}
				p[partmap.FieldEmail] = canon(email)
				model[canon(email)] = p
			},
			"patch": func(rt *rapid.T) {
				email := genEmail.Draw(rt, "email")
				patch := partmap.Patch{}
				for _, f := range rapid.SliceOfDistinct(genField, func(s string) string { return s }).Draw(rt, "fields") {
					if rapid.Bool().Draw(rt, "delete") {
						patch[f] = nil
					} else {
						patch[f] = ptr(genValue.Draw(rt, "value"))
					}
				}
				res, err := s.PatchProfile(ctx, email, patch, partmap.Condition{})
				cur, ok := model[canon(email)]
				if !ok {
					sameErr("patch", err, partmap.ENOTFOUND)
					return
				}
				sameErr("patch", err, "")
				added, deleted := 0, 0
				for f, v := range patch {
					_, had := cur[f]
					switch {
					case v == nil && had:
						delete(cur, f)
						deleted++
					case v != nil:
						if !had {
							added++
						}
						cur[f] = *v
					}
				}
				if res.FieldsAdded != added || res.FieldsDeleted != deleted {
					rt.Fatalf("patch counted +%d -%d, model +%d -%d", res.FieldsAdded, res.FieldsDeleted, added, deleted)
				}
			},
			"increment": func(rt *rapid.T) {
				email, field := genEmail.Draw(rt, "email"), genField.Draw(rt, "field")
				by := rapid.SampledFrom([]int64{1, -1, 0, 5, math.MaxInt64, math.MinInt64}).Draw(rt, "by")
				inc, err := s.IncrementField(ctx, email, field, by, partmap.Condition{})
				cur, ok := model[canon(email)]
				if !ok {
					sameErr("increment", err, partmap.ENOTFOUND)
					return
				}
				stored, present := cur[field]
				want, werr := partmap.AddInteger(field, stored, present, by)
				sameErr("increment", err, partmap.ErrorCode(werr))
				if werr == nil {
					if inc.Value != want {
						rt.Fatalf("increment gave %d, model %d", inc.Value, want)
					}
					cur[field] = strconv.FormatInt(want, 10)
				}
			},
			"delete": func(rt *rapid.T) {
				email := genEmail.Draw(rt, "email")
				err := s.DeleteProfile(ctx, email, partmap.Condition{})
				if _, ok := model[canon(email)]; !ok {
					sameErr("delete", err, partmap.ENOTFOUND)
					return
				}
				sameErr("delete", err, "")
				delete(model, canon(email))
			},
			"find": func(rt *rapid.T) {
				email := genEmail.Draw(rt, "email")
				rec, err := s.FindProfile(ctx, email)
				want, ok := model[canon(email)]
				if !ok {
					sameErr("find", err, partmap.ENOTFOUND)
					return
				}
				sameErr("find", err, "")
				if !sameProfile(rec.Profile, want) {
					rt.Fatalf("find: got %v, model %v", rec.Profile, want)
				}
			},
			"project": func(rt *rapid.T) {
				email := genEmail.Draw(rt, "email")
				fields := rapid.SliceOfNDistinct(rapid.SampledFrom(fieldNames[:3]), 1, 3, func(s string) string { return s }).Draw(rt, "fields")
				proj, err := s.ProjectProfile(ctx, email, fields)
				want, ok := model[canon(email)]
				if !ok {
					sameErr("project", err, partmap.ENOTFOUND)
					return
				}
				sameErr("project", err, "")
				for i, f := range fields {
					v, has := want[f]
					if got := proj.Values[i]; (got != nil) != has || (got != nil && *got != v) {
						rt.Fatalf("project %q: got %s, model %q (present %v)", f, show(got), v, has)
					}
				}
			},
		})
		// The enumeration and the partition counts agree with the model.
		listed := listAll(rt, s, rapid.IntRange(1, 4).Draw(rt, "pageSize"))
		if len(listed) != len(model) {
			rt.Fatalf("listed %d profiles, model has %d", len(listed), len(model))
		}
		for _, rec := range listed {
			if !sameProfile(rec.Profile, model[rec.Profile.Email()]) {
				rt.Fatalf("listed %v, model %v", rec.Profile, model[rec.Profile.Email()])
			}
		}
		stats, err := s.ListPartitions(ctx)
		if err != nil || stats.TotalProfiles != int64(len(model)) {
			rt.Fatalf("partitions: total %d, %v; model %d", stats.TotalProfiles, err, len(model))
		}
	})
}

func sameProfile(a, b partmap.Profile) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
