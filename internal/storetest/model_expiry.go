package storetest

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/model"
)

// ExpiryOpener returns a new, empty store whose deadlines run on clock and
// which runs no sweeper of its own, and a function that runs one sweeper
// pass. A few partitions keep the runs quick: every listing and count
// reads each partition's expiry entries.
type ExpiryOpener func(t *testing.T, clock func() time.Time) (partmap.Store, func(context.Context) error)

// RunExpiryModel checks random sequences of writes, expiry operations,
// clock moves and sweeper passes against the sequential model
// (internal/model, ExpiryState): every reply, every read's profile and
// exact version (the same before and after a sweep), Deadlines, the
// enumeration and the partition counts, at the store's clock.
func RunExpiryModel(t *testing.T, open ExpiryOpener) {
	ctx := context.Background()
	clock := NewClock(1_900_000_000_000) // in 2030
	s, sweep := open(t, clock.Now)
	stats, spellings := modelEmails(t, s, "expiry")
	n := stats.MapPartitions()
	canon := func(e string) string { c, _ := partmap.CanonicalEmail(e); return c }
	partitions := map[partmap.Partition]bool{}
	for _, e := range spellings {
		partitions[partmap.PartitionOf(canon(e), n)] = true
	}
	genEmail := rapid.SampledFrom(spellings)
	genField := rapid.SampledFrom([]string{"a", "b", "n", partmap.FieldCustomerTier})
	genFieldOrKey := rapid.OneOf(genField, genField, genField, rapid.Just(partmap.FieldEmail))
	genValue := rapid.SampledFrom([]string{"", "0", "7", "abc"})
	distinct := func(g *rapid.Generator[string], min int) *rapid.Generator[[]string] {
		return rapid.SliceOfNDistinct(g, min, 3, func(s string) string { return s })
	}
	genCond := rapid.SampledFrom([]partmap.ExpireCondition{partmap.ExpireAlways, partmap.ExpireAlways,
		partmap.ExpireIfNone, partmap.ExpireIfSet, partmap.ExpireIfLater, partmap.ExpireIfSooner})
	// genWhen draws a deadline: relative, or absolute around now, past
	// ones and now itself included.
	genWhen := func(rt *rapid.T) partmap.When {
		if rapid.Bool().Draw(rt, "relative") {
			return partmap.When{Relative: true, Millis: rapid.SampledFrom([]int64{0, 1, 250, 1000, 2000, 3000}).Draw(rt, "ttl")}
		}
		at := clock.ms.Load() + rapid.SampledFrom([]int64{-1000, -1, 0, 1, 500, 1500, 3000}).Draw(rt, "offset")
		return partmap.When{Millis: at}
	}
	// expiryOr draws a deadline for when, or sets other, or neither.
	expiryOr := func(rt *rapid.T, when **partmap.When, other *bool) {
		switch rapid.IntRange(0, 2).Draw(rt, "expiry") {
		case 0:
			w := genWhen(rt)
			*when = &w
		case 1:
			*other = true
		}
	}

	genPut := func(rt *rapid.T, email string) partmap.Profile {
		p := partmap.Profile{partmap.FieldEmail: email}
		for _, f := range distinct(genField, 0).Draw(rt, "fields") {
			p[f] = genValue.Draw(rt, "value")
		}
		return p
	}
	// restate draws email in another spelling, mostly: or another email.
	restate := func(rt *rapid.T, email string) string {
		return rapid.SampledFrom([]string{" " + strings.ToUpper(email) + "\t", email, "other@x.io"}).Draw(rt, "restated")
	}
	genPatch := func(rt *rapid.T, email string) partmap.Patch {
		patch := partmap.Patch{}
		for _, f := range distinct(genField, 1).Draw(rt, "fields") {
			if rapid.IntRange(0, 3).Draw(rt, "delete") == 0 {
				patch[f] = nil
			} else {
				v := genValue.Draw(rt, "value")
				patch[f] = &v
			}
		}
		if rapid.IntRange(0, 9).Draw(rt, "restate") == 0 {
			// The key restated in another spelling: allowed, and stored
			// canonical.
			v := restate(rt, email)
			patch[partmap.FieldEmail] = &v
		}
		return patch
	}
	genOp := func(rt *rapid.T) partmap.Operation {
		email := genEmail.Draw(rt, "email")
		op := partmap.Operation{Email: email}
		switch op.Op = rapid.SampledFrom([]partmap.OpKind{
			partmap.OpPut, partmap.OpPut, partmap.OpPatch, partmap.OpIncrement, partmap.OpDelete, partmap.OpRename, partmap.OpCopy,
			partmap.OpExpire, partmap.OpExpire, partmap.OpExpire, partmap.OpPersist, partmap.OpSetIfAbsent,
			partmap.OpGetDelete, partmap.OpGetExpire, partmap.OpSetFields, partmap.OpSetFields,
		}).Draw(rt, "op"); op.Op {
		case partmap.OpPut:
			op.Email, op.Profile = "", genPut(rt, email)
		case partmap.OpPatch:
			op.Patch = genPatch(rt, email)
		case partmap.OpIncrement:
			op.Field = genField.Draw(rt, "field")
			op.By = rapid.SampledFrom([]int64{0, 1, -1, 5}).Draw(rt, "by")
		case partmap.OpRename, partmap.OpCopy:
			op.To = genEmail.Draw(rt, "to")
			op.Replace = rapid.Bool().Draw(rt, "replace")
		case partmap.OpExpire:
			if rapid.IntRange(0, 2).Draw(rt, "profile") > 0 {
				op.Fields = distinct(genFieldOrKey, 1).Draw(rt, "fields")
			}
			op.When, op.ExpireCond = genWhen(rt), genCond.Draw(rt, "cond")
		case partmap.OpPersist:
			if rapid.Bool().Draw(rt, "fieldsOrProfile") {
				op.Fields = distinct(genFieldOrKey, 1).Draw(rt, "fields")
			}
		case partmap.OpSetIfAbsent:
			op.Field, op.Value = genField.Draw(rt, "field"), genValue.Draw(rt, "value")
		case partmap.OpGetDelete:
			op.Fields = distinct(genFieldOrKey, 1).Draw(rt, "fields")
		case partmap.OpGetExpire:
			op.Fields = distinct(genFieldOrKey, 1).Draw(rt, "fields")
			expiryOr(rt, &op.Expiry.When, &op.Expiry.Persist)
		case partmap.OpSetFields:
			op.Set = partmap.Patch{}
			for _, f := range distinct(genField, 1).Draw(rt, "fields") {
				v := genValue.Draw(rt, "value")
				op.Set[f] = &v
			}
			if rapid.IntRange(0, 9).Draw(rt, "restate") == 0 {
				v := restate(rt, email)
				op.Set[partmap.FieldEmail] = &v
			}
			op.FieldSet = rapid.SampledFrom([]partmap.FieldSetCondition{partmap.SetFieldsAlways, partmap.SetIfNoFieldExist, partmap.SetIfAllExist}).Draw(rt, "fieldSet")
			expiryOr(rt, &op.Expiry.When, &op.Expiry.KeepTTL)
		}
		return op
	}

	rapid.Check(t, func(rt *rapid.T) {
		// Each run starts from an empty directory, emptied through the API
		// and swept, so that nothing expired is left stored either.
		for _, rec := range listAll(rt, s, partmap.MaxPageLimit) {
			if err := partmap.DeleteProfile(ctx, s, rec.Profile.Email(), partmap.Condition{}); err != nil {
				rt.Fatal(err)
			}
		}
		if err := sweep(ctx); err != nil {
			rt.Fatal(err)
		}
		state := model.ExpiryState{}
		now := func() int64 { return clock.ms.Load() }

		// checkFind holds FindProfile of email to the model, version and all.
		checkFind := func(rt *rapid.T, email string) {
			got, err := s.FindProfile(ctx, email)
			want, ok := state[canon(email)].Live(now())
			switch {
			case !ok && partmap.ErrorCode(err) != partmap.ENOTFOUND:
				rt.Fatalf("find %s at %d: got %v %v, model: none", email, now(), model.Describe(got.Profile), err)
			case !ok:
			case err != nil:
				rt.Fatalf("find %s at %d: %v, model %s", email, now(), err, model.Describe(want.Profile))
			case !model.Equal(got.Profile, want.Profile) || got.Version != want.Version:
				rt.Fatalf("find %s at %d: got %s at version %v, model %s at %v", email, now(),
					model.Describe(got.Profile), got.Version, model.Describe(want.Profile), want.Version)
			}
		}
		// checkAll holds the enumeration and the counts to the model.
		checkAll := func(rt *rapid.T) {
			live := state.LiveAt(now())
			listed := listAll(rt, s, rapid.IntRange(1, 4).Draw(rt, "pageSize"))
			if len(listed) != len(live) {
				rt.Fatalf("at %d: listed %d profiles, model has %d: %v", now(), len(listed), len(live), slices.Collect(maps.Keys(live)))
			}
			for _, rec := range listed {
				want := live[rec.Profile.Email()]
				if !model.Equal(rec.Profile, want.Profile) {
					rt.Fatalf("at %d: listed %s, model %s", now(), model.Describe(rec.Profile), model.Describe(want.Profile))
				}
			}
			stats, err := s.ListPartitions(ctx)
			if err != nil || stats.TotalProfiles != int64(len(live)) {
				rt.Fatalf("at %d: partitions total %d, %v; model %d", now(), stats.TotalProfiles, err, len(live))
			}
			var counted int64
			for _, pc := range stats.Partitions {
				counted += pc.Profiles
				if pc.Profiles <= 0 {
					rt.Fatalf("at %d: partition %v listed with %d profiles", now(), pc.Partition, pc.Profiles)
				}
			}
			if counted != stats.TotalProfiles {
				rt.Fatalf("at %d: partitions add up to %d, total says %d", now(), counted, stats.TotalProfiles)
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"advance": func(rt *rapid.T) {
				var deadlines []int64
				for _, e := range state {
					if at := e.Deadlines.Profile; at > now() {
						deadlines = append(deadlines, at)
					}
					for _, at := range e.Deadlines.Fields {
						if at > now() {
							deadlines = append(deadlines, at)
						}
					}
				}
				if len(deadlines) > 0 && rapid.Bool().Draw(rt, "toDeadline") {
					slices.Sort(deadlines)
					at := rapid.SampledFrom(deadlines).Draw(rt, "deadline")
					at += rapid.SampledFrom([]int64{0, 0, -1}).Draw(rt, "nudge")
					clock.ms.Store(max(at, now()))
					return
				}
				clock.ms.Add(rapid.Int64Range(0, 3000).Draw(rt, "ms"))
			},
			"op": func(rt *rapid.T) {
				op := genOp(rt)
				got, err := s.Apply(ctx, op)
				at := now()
				// The model speaks canonical emails, as the store stores them.
				m := op
				m.Email = canon(op.Email)
				if op.Op == partmap.OpPut {
					m.Profile = op.Profile.Clone()
					m.Profile[partmap.FieldEmail] = canon(op.Profile.Email())
					m.Email = ""
				}
				if op.To != "" {
					m.To = canon(op.To)
				}
				key := m.Email
				if key == "" {
					key = m.Profile.Email()
				}
				before, existed := state[key].Live(at)
				next, want := state.ApplyOp(m, at)
				if g := model.FromOperation(got, err); !want.Same(g) {
					rt.Fatalf("at %d: %s %s %+v: got %v (%v), model %v", at, op.Op, op.Email, m, g, err, want)
				}
				if err != nil {
					return
				}
				switch {
				case got.Record == nil:
				case want.Writes && existed && got.Record.Version == before.Version:
					rt.Fatalf("at %d: %s %s wrote, but kept version %v", at, op.Op, key, before.Version)
				case want.Writes:
					written := key
					if op.To != "" { // a rename's or copy's
						written = m.To
					}
					next.SetVersion(written, got.Record.Version)
				case got.Record.Version != before.Version:
					rt.Fatalf("at %d: %s %s changed nothing, but the version went from %v to %v", at, op.Op, key, before.Version, got.Record.Version)
				}
				state = next
			},
			"find": func(rt *rapid.T) {
				checkFind(rt, genEmail.Draw(rt, "email"))
			},
			"findMany": func(rt *rapid.T) {
				emails := rapid.SliceOfN(genEmail, 1, 4).Draw(rt, "emails")
				got, err := s.FindProfiles(ctx, emails)
				if err != nil {
					rt.Fatal(err)
				}
				for i, e := range emails {
					want, ok := state[canon(e)].Live(now())
					if (got[i] != nil) != ok || ok && (!model.Equal(got[i].Profile, want.Profile) || got[i].Version != want.Version) {
						rt.Fatalf("at %d: batch read of %s: got %v, model %s (exists %v)", now(), e, got[i], model.Describe(want.Profile), ok)
					}
				}
			},
			"project": func(rt *rapid.T) {
				email := genEmail.Draw(rt, "email")
				fields := distinct(genFieldOrKey, 1).Draw(rt, "fields")
				proj, err := s.ProjectProfile(ctx, email, fields)
				want, ok := state[canon(email)].Live(now())
				if !ok {
					if partmap.ErrorCode(err) != partmap.ENOTFOUND {
						rt.Fatalf("at %d: project of a missing profile: %v", now(), err)
					}
					return
				}
				if err != nil {
					rt.Fatal(err)
				}
				for i, f := range fields {
					v, has := want.Profile[f]
					if got := proj.Values[i]; (got != nil) != has || (got != nil && *got != v) {
						rt.Fatalf("at %d: project %q: got %s, model %q (present %v)", now(), f, show(got), v, has)
					}
				}
				if proj.Version != want.Version {
					rt.Fatalf("at %d: project's version %v, model %v", now(), proj.Version, want.Version)
				}
			},
			"deadlines": func(rt *rapid.T) {
				email := genEmail.Draw(rt, "email")
				fields := distinct(genFieldOrKey, 0).Draw(rt, "fields")
				got, err := s.Deadlines(ctx, email, fields)
				want, ok := state.TTLs(canon(email), fields, now())
				switch {
				case !ok && partmap.ErrorCode(err) != partmap.ENOTFOUND:
					rt.Fatalf("at %d: deadlines of a missing profile: %+v %v", now(), got, err)
				case !ok:
				case err != nil:
					rt.Fatal(err)
				case got.Profile != want.Profile || !slices.Equal(got.Deadlines, want.Deadlines) || got.Now != want.Now || got.Version != want.Version:
					rt.Fatalf("at %d: deadlines of %s %v: got %+v, model %+v", now(), email, fields, got, want)
				}
			},
			"sweep": func(rt *rapid.T) {
				if err := sweep(ctx); err != nil {
					rt.Fatal(err)
				}
				// What a reader sees, versions included, is what it saw
				// before: the sweeper reclaims only what had gone.
				for _, e := range spellings {
					checkFind(rt, e)
				}
				// And the reclaimed profiles are gone from the stored
				// counts, which the check compares with the records.
				live := state.LiveAt(now())
				for p := range partitions {
					c, err := s.CheckPartition(ctx, p)
					if err != nil || !c.OK() {
						rt.Fatalf("at %d: check of %v after a sweep: %+v %v", now(), p, c, err)
					}
					var want int64
					for e := range live {
						if partmap.PartitionOf(e, n) == p {
							want++
						}
					}
					if c.Counted != want {
						rt.Fatalf("at %d: after a sweep %v stores %d profiles, model %d", now(), p, c.Counted, want)
					}
				}
			},
			"list": checkAll,
		})
		checkAll(rt)
	})
}
