package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/partmap/partmap"
)

// runDoorOperations tests the operations the front doors need beside the
// profile calls: a get of some or all fields, an increment that creates
// its profile, and a delete that does not fail on a missing one.
func runDoorOperations(t *testing.T, started func(*testing.T) partmap.Store) {
	ctx := context.Background()
	str := func(s string) *string { return &s }

	t.Run("GetReadsWithoutWriting", func(t *testing.T) {
		s := started(t)
		rec := put(t, s, "get@example.com", "Get")
		res, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpGet, Email: "GET@example.com"})
		if err != nil || res.Record == nil || res.Record.Version != rec.Version || res.Email != "get@example.com" {
			t.Fatalf("get: %+v %v, want the profile at %v", res, err, rec.Version)
		}
		assertProfile(t, res.Record.Profile, rec.Profile)
		res, err = s.Apply(ctx, partmap.Operation{Op: partmap.OpGet, Email: "get@example.com", Fields: []string{"fullName", "nope", "fullName"}})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := res.Values, []*string{str("Get"), nil, str("Get")}; !reflect.DeepEqual(got, want) {
			t.Fatalf("get of fields: %q, want %q", derefAll(got), derefAll(want))
		}
		res, err = s.Apply(ctx, partmap.Operation{Op: partmap.OpGet, Email: "missing@example.com", Fields: []string{"a", "b"}})
		if err != nil || res.Record != nil || !reflect.DeepEqual(res.Values, []*string{nil, nil}) {
			t.Fatalf("get of a missing profile: %+v %v, want nothing and no error", res, err)
		}
		if got := mustFind(t, s, "get@example.com"); got.Version != rec.Version {
			t.Fatal("a get changed the version")
		}
		mustBeGone(t, s, "missing@example.com")
		_, err = s.Apply(ctx, partmap.Operation{Op: partmap.OpGet, Email: "get@example.com", Cond: partmap.Condition{IfNoneMatch: true}})
		wantCode(t, err, partmap.EPRECONDITION, 0)
		_, err = s.Apply(ctx, partmap.Operation{Op: partmap.OpGet, Email: "  "})
		wantCode(t, err, partmap.EINVALIDEMAIL, 0)
		_, err = s.Apply(ctx, partmap.Operation{Op: partmap.OpGet, Email: "get@example.com", By: 1})
		wantCode(t, err, partmap.EINVALID, 0)
	})

	t.Run("GetSeesTheTransactionsEarlierOperations", func(t *testing.T) {
		s := started(t)
		x, y := apart("gx", "gy")
		ops := []partmap.Operation{
			{Op: partmap.OpGet, Email: x},
			{Op: partmap.OpPut, Profile: partmap.Profile{partmap.FieldEmail: x, "n": "1"}},
			{Op: partmap.OpGet, Email: x, Fields: []string{"n"}},
			{Op: partmap.OpGet, Email: y, Cond: partmap.Condition{IfNoneMatch: true}},
		}
		results, err := s.Transact(ctx, ops)
		if err != nil {
			t.Fatal(err)
		}
		if results[0].Record != nil || !reflect.DeepEqual(results[2].Values, []*string{str("1")}) || results[3].Record != nil {
			t.Fatalf("results: %+v", results)
		}
		// A get's condition is a WATCH: it fails the whole transaction.
		put(t, s, y, "Y")
		ops[1].Profile = partmap.Profile{partmap.FieldEmail: x, "n": "2"}
		_, err = s.Transact(ctx, ops)
		wantCode(t, err, partmap.EPRECONDITION, 4)
		if got := mustFind(t, s, x); got.Profile["n"] != "1" {
			t.Fatalf("a transaction whose get's condition failed wrote %q", got.Profile)
		}
	})

	t.Run("IncrementCreates", func(t *testing.T) {
		s := started(t)
		_, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpIncrement, Email: "counter@example.com", Field: "n", By: 5})
		wantCode(t, err, partmap.ENOTFOUND, 0)
		res, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpIncrement, Email: "Counter@example.com", Field: "n", By: 5, Create: true})
		if err != nil || res.Value != 5 || !res.Created || res.Email != "counter@example.com" {
			t.Fatalf("increment that creates: %+v %v", res, err)
		}
		assertProfile(t, mustFind(t, s, "counter@example.com").Profile, partmap.Profile{partmap.FieldEmail: "counter@example.com", "n": "5"})
		res, err = s.Apply(ctx, partmap.Operation{Op: partmap.OpIncrement, Email: "counter@example.com", Field: "n", By: -2, Create: true})
		if err != nil || res.Value != 3 || res.Created {
			t.Fatalf("increment of an existing profile with Create: %+v %v", res, err)
		}
		res, err = s.Apply(ctx, partmap.Operation{Op: partmap.OpIncrementFloat, Email: "float@example.com", Field: "f", ByFloat: "1.5", Create: true})
		if err != nil || res.FloatValue != "1.5" || !res.Created {
			t.Fatalf("incrementFloat that creates: %+v %v", res, err)
		}
		_, err = s.Apply(ctx, partmap.Operation{Op: partmap.OpIncrement, Email: "bad@example.com", Field: partmap.FieldEmail, By: 1, Create: true})
		wantCode(t, err, partmap.EKEYFIELD, 0)
		mustBeGone(t, s, "bad@example.com")
		_, err = s.Apply(ctx, partmap.Operation{Op: partmap.OpDelete, Email: "bad@example.com", Create: true})
		wantCode(t, err, partmap.EINVALID, 0)
	})

	// Apply answers the profile a write left (OperationResult.Record), on
	// every door's path: over HTTP a put, a patch and an increment each
	// have a route of their own.
	t.Run("WritesAnswerTheirRecord", func(t *testing.T) {
		s := started(t)
		e := "record@example.com"
		for _, op := range []partmap.Operation{
			{Op: partmap.OpPut, Profile: partmap.Profile{partmap.FieldEmail: e, "fullName": "Rec", "n": "1"}},
			{Op: partmap.OpPatch, Email: e, Patch: partmap.Patch{"fullName": str("Record")}},
			{Op: partmap.OpIncrement, Email: e, Field: "n", By: 2},
			{Op: partmap.OpIncrement, Email: e, Field: "n", By: 3, Create: true},
			{Op: partmap.OpIncrementFloat, Email: e, Field: "f", ByFloat: "0.5"},
		} {
			res, err := s.Apply(ctx, op)
			if err != nil {
				t.Fatalf("%s: %v", op.Op, err)
			}
			got := mustFind(t, s, e)
			if res.Record == nil || res.Record.Version != got.Version {
				t.Fatalf("%s answered %+v, want the record at %v", op.Op, res.Record, got.Version)
			}
			assertProfile(t, res.Record.Profile, got.Profile)
		}
	})

	t.Run("DeleteAllowsMissing", func(t *testing.T) {
		s := started(t)
		put(t, s, "del@example.com", "Del")
		_, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpDelete, Email: "none@example.com"})
		wantCode(t, err, partmap.ENOTFOUND, 0)
		x, _ := apart("dx", "dy")
		results, err := s.Transact(ctx, []partmap.Operation{
			{Op: partmap.OpDelete, Email: "del@example.com", AllowMissing: true},
			{Op: partmap.OpDelete, Email: x, AllowMissing: true},
		})
		if err != nil || !results[0].Deleted || results[1].Deleted {
			t.Fatalf("deletes: %+v %v, want the first deleted and the second missing", results, err)
		}
		mustBeGone(t, s, "del@example.com")
		res, err := s.Apply(ctx, partmap.Operation{Op: partmap.OpDelete, Email: "del@example.com", AllowMissing: true})
		if err != nil || res.Deleted {
			t.Fatalf("delete of a deleted profile: %+v %v", res, err)
		}
	})

	// FailAlone is EXEC's: a command that fails inside it fails alone.
	t.Run("FailAloneFailsAlone", func(t *testing.T) {
		s := started(t)
		x, y := apart("fx", "fy")
		bad := "\xff"
		ops := []partmap.Operation{
			{Op: partmap.OpPut, Profile: partmap.Profile{partmap.FieldEmail: x, "n": "1", "s": "abc"}},
			{Op: partmap.OpIncrement, Email: x, Field: "s", By: 1, FailAlone: true},           // fails as it runs
			{Op: partmap.OpPatch, Email: y, Patch: partmap.Patch{"a": &bad}, FailAlone: true}, // fails its planning
			{Op: partmap.OpIncrement, Email: x, Field: "n", By: 2, FailAlone: true},
			{Op: partmap.OpDelete, Email: y, FailAlone: true},
			{Op: partmap.OpIncrement, Email: y, Field: "n", By: 5, Create: true},
		}
		results, err := s.Transact(ctx, ops)
		var e *partmap.Error
		if errors.As(err, &e) && e.Code == partmap.EINVALID && e.Field == "FailAlone" {
			// The HTTP client's transaction route does not carry it.
			mustBeGone(t, s, x)
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		for i, code := range []partmap.Code{"", partmap.ENOTINTEGER, partmap.EINVALIDUTF8, "", partmap.ENOTFOUND, ""} {
			if got := partmap.ErrorCode(results[i].Err); got != code || results[i].Op != ops[i].Op {
				t.Errorf("result %d: %+v, want %s's error %q", i+1, results[i], ops[i].Op, code)
			}
		}
		if results[3].Value != 3 || results[5].Value != 5 || !results[5].Created || results[1].Record != nil {
			t.Fatalf("results: %+v", results)
		}
		assertProfile(t, mustFind(t, s, x).Profile, partmap.Profile{partmap.FieldEmail: x, "n": "3", "s": "abc"})
		assertProfile(t, mustFind(t, s, y).Profile, partmap.Profile{partmap.FieldEmail: y, "n": "5"})

		// Alone, a failure is still the transaction's result, not its error.
		results, err = s.Transact(ctx, ops[2:3])
		if err != nil || partmap.ErrorCode(results[0].Err) != partmap.EINVALIDUTF8 {
			t.Fatalf("one operation that fails alone: %+v %v", results, err)
		}
		// A condition's failure still fails the transaction, and without
		// FailAlone a failure is the transaction's.
		for i, fail := range []partmap.Operation{
			{Op: partmap.OpGet, Email: x, Cond: partmap.Condition{IfNoneMatch: true}, FailAlone: true},
			{Op: partmap.OpIncrement, Email: x, Field: "s", By: 1},
		} {
			_, err = s.Transact(ctx, []partmap.Operation{{Op: partmap.OpIncrement, Email: x, Field: "n", By: 1}, fail})
			wantCode(t, err, []partmap.Code{partmap.EPRECONDITION, partmap.ENOTINTEGER}[i], 2)
		}
		if got := mustFind(t, s, x).Profile["n"]; got != "3" {
			t.Fatalf("a failed transaction wrote n = %s", got)
		}
	})
}

func derefAll(vs []*string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = "<nil>"
		if v != nil {
			out[i] = *v
		}
	}
	return out
}
