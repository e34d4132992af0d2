package storetest

import (
	"context"
	"testing"

	"github.com/partmap/partmap"
)

// runCopyAndReplace tests a copy, and a rename or copy that replaces the
// profile of its new email, as Redis's COPY and RENAME do: the deadlines
// go with the profile, and the counts follow.
func runCopyAndReplace(t *testing.T, started func(*testing.T) partmap.Store) {
	ctx := context.Background()
	const later, later2 = 4_000_000_000_000, 4_000_000_500_000
	// withDeadlines puts email's profile with fields a and b, a deadline on
	// a and one on the profile.
	withDeadlines := func(t *testing.T, s partmap.Store, email string) partmap.Record {
		t.Helper()
		putProfile(t, s, partmap.Profile{partmap.FieldEmail: email, "a": "1", "b": "2"})
		expireFields(t, s, email, at(later), "", "a")
		apply(t, s, partmap.Operation{Op: partmap.OpExpire, Email: email, When: at(later2)})
		return mustFind(t, s, email)
	}
	total := func(t *testing.T, s partmap.Store) int64 {
		t.Helper()
		st, err := s.ListPartitions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.TotalProfiles
	}

	t.Run("Copy", func(t *testing.T) {
		s := started(t)
		x, z := apart("cx", "cz")
		src := withDeadlines(t, s, x)
		res, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpCopy, Email: "CX" + x[2:], To: z})
		if err != nil || res.Email != z || res.Record == nil || res.Record.Version == src.Version {
			t.Fatalf("copy: %+v %v; want %s's copy at a new version", res, err, z)
		}
		want := src.Profile.Clone()
		want[partmap.FieldEmail] = z
		assertProfile(t, res.Record.Profile, want)
		assertProfile(t, mustFind(t, s, z).Profile, want)
		wantDeadlines(t, s, z, later2, []string{"a", "b"}, later, partmap.ExpiryNone)
		wantVersion(t, s, x, src.Version, true)
		wantDeadlines(t, s, x, later2, []string{"a", "b"}, later, partmap.ExpiryNone)
		if n := total(t, s); n != 2 {
			t.Fatalf("after a copy: %d profiles, want 2", n)
		}
	})

	t.Run("ErrCopy", func(t *testing.T) {
		s := started(t)
		x, y := apart("ex", "ey")
		putProfile(t, s, partmap.Profile{partmap.FieldEmail: x, "a": "1"})
		taken := putProfile(t, s, partmap.Profile{partmap.FieldEmail: y, "b": "2"})
		_, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpCopy, Email: x, To: y})
		wantCode(t, err, partmap.EEXISTS, 0)
		wantVersion(t, s, y, taken.Version, true)
		_, err = s.Apply(ctx, partmap.Operation{Op: partmap.OpCopy, Email: "nobody@example.com", To: "other@example.com"})
		wantCode(t, err, partmap.ENOTFOUND, 0)
		mustBeGone(t, s, "other@example.com")
		_, err = s.Apply(ctx, partmap.Operation{Op: partmap.OpCopy, Email: x, To: " " + x})
		wantCode(t, err, partmap.EINVALID, 0)
		_, err = s.Apply(ctx, partmap.Operation{Op: partmap.OpCopy, Email: x, To: "  "})
		wantCode(t, err, partmap.EINVALIDEMAIL, 0)
		_, err = s.Apply(ctx, partmap.Operation{Op: partmap.OpCopy, Email: x, To: y, Cond: partmap.Condition{IfNoneMatch: true}})
		wantCode(t, err, partmap.EPRECONDITION, 0)
	})

	for _, kind := range []partmap.OpKind{partmap.OpCopy, partmap.OpRename} {
		t.Run(string(kind)+"Replaces", func(t *testing.T) {
			s := started(t)
			x, y := apart("rx", "ry")
			src := withDeadlines(t, s, x)
			old := putProfile(t, s, partmap.Profile{partmap.FieldEmail: y, "c": "3"})
			expireFields(t, s, y, at(later), "", "c")
			res, err := s.Apply(ctx, partmap.Operation{Op: kind, Email: x, To: y, Replace: true})
			if err != nil || res.Email != y || res.Record == nil || res.Record.Version == old.Version || res.Record.Version == src.Version {
				t.Fatalf("%s with replace: %+v %v", kind, res, err)
			}
			want := src.Profile.Clone()
			want[partmap.FieldEmail] = y
			assertProfile(t, mustFind(t, s, y).Profile, want)
			// The replaced profile's deadlines are gone with it.
			wantDeadlines(t, s, y, later2, []string{"a", "b", "c"}, later, partmap.ExpiryNone, partmap.ExpiryNoField)
			n := total(t, s)
			if kind == partmap.OpRename {
				mustBeGone(t, s, x)
				if n != 1 {
					t.Fatalf("after a rename that replaced: %d profiles, want 1", n)
				}
				return
			}
			wantVersion(t, s, x, src.Version, true)
			if n != 2 {
				t.Fatalf("after a copy that replaced: %d profiles, want 2", n)
			}
		})
	}

	// In a transaction, a later operation sees the copy.
	t.Run("CopyInTransaction", func(t *testing.T) {
		s := started(t)
		x, y := apart("tx", "ty")
		putProfile(t, s, partmap.Profile{partmap.FieldEmail: x, "n": "1"})
		results, err := s.Transact(ctx, []partmap.Operation{
			{Op: partmap.OpCopy, Email: x, To: y},
			{Op: partmap.OpIncrement, Email: y, Field: "n", By: 2},
			{Op: partmap.OpCopy, Email: y, To: x, Replace: true},
		})
		if err != nil || results[1].Value != 3 {
			t.Fatalf("copy, increment, copy back: %+v %v", results, err)
		}
		assertProfile(t, mustFind(t, s, x).Profile, partmap.Profile{partmap.FieldEmail: x, "n": "3"})
		assertProfile(t, mustFind(t, s, y).Profile, partmap.Profile{partmap.FieldEmail: y, "n": "3"})
	})
}
