// Package model is the sequential specification of profile operations: what
// one operation does to one profile and what it answers. The
// linearizability check and the crash harness both judge real histories
// against it.
package model

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/partmap/partmap"
)

// Kind is an operation.
type Kind int

const (
	Get Kind = iota
	Put
	Patch
	Incr
	Delete
	Rename // moves the profile of Email to To; see State.Apply
)

// Op is one operation on the profile of Email.
type Op struct {
	Kind  Kind
	Email string
	Put   partmap.Profile // Put
	Patch partmap.Patch   // Patch
	Field string          // Incr
	By    int64           // Incr
	To    string          // Rename
}

// Result is what an operation answers.
type Result struct {
	Code    partmap.Code    // "" for success
	Profile partmap.Profile // Get
	Created bool            // Put
	Added   int             // Patch
	Deleted int             // Patch
	Value   int64           // Incr
}

// Apply runs op on the current profile (nil when absent) and returns the
// next profile and the answer. It never changes cur. A rename touches two
// profiles: State.Apply steps it.
func (op Op) Apply(cur partmap.Profile) (partmap.Profile, Result) {
	if cur == nil && op.Kind != Put {
		return nil, Result{Code: partmap.ENOTFOUND}
	}
	switch op.Kind {
	case Get:
		return cur, Result{Profile: cur}
	case Put:
		return op.Put, Result{Created: cur == nil}
	case Delete:
		return nil, Result{}
	case Patch:
		next, r := cur.Clone(), Result{}
		for f, v := range op.Patch {
			_, had := next[f]
			switch {
			case v == nil && had:
				delete(next, f)
				r.Deleted++
			case v != nil:
				if !had {
					r.Added++
				}
				next[f] = *v
			}
		}
		return next, r
	case Incr:
		stored, present := cur[op.Field]
		n, err := partmap.AddInteger(op.Field, stored, present, op.By)
		if err != nil {
			return cur, Result{Code: partmap.ErrorCode(err)}
		}
		next := cur.Clone()
		next[op.Field] = strconv.FormatInt(n, 10)
		return next, Result{Value: n}
	}
	panic(fmt.Sprintf("model: unknown operation %d", op.Kind))
}

// Same reports whether two results are the same answer.
func (r Result) Same(o Result) bool {
	return r.Code == o.Code && Equal(r.Profile, o.Profile) && r.Created == o.Created &&
		r.Added == o.Added && r.Deleted == o.Deleted && r.Value == o.Value
}

// Equal compares two profiles; nil (absent) equals only nil.
func Equal(a, b partmap.Profile) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Describe shows a profile compactly, without its email.
func Describe(p partmap.Profile) string {
	if p == nil {
		return "absent"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(p)) {
		if k != partmap.FieldEmail {
			parts = append(parts, k+"="+p[k])
		}
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func (op Op) String() string {
	who := strings.Split(op.Email, "@")[0]
	switch op.Kind {
	case Get:
		return who + " get"
	case Put:
		return who + " put " + Describe(op.Put)
	case Delete:
		return who + " delete"
	case Patch:
		var parts []string
		for _, f := range slices.Sorted(maps.Keys(op.Patch)) {
			if v := op.Patch[f]; v == nil {
				parts = append(parts, f+"=null")
			} else {
				parts = append(parts, f+"="+*v)
			}
		}
		return who + " patch {" + strings.Join(parts, " ") + "}"
	case Rename:
		return who + " rename to " + strings.Split(op.To, "@")[0]
	}
	return fmt.Sprintf("%s incr %s %+d", who, op.Field, op.By)
}

func (r Result) String() string {
	switch {
	case r.Code != "":
		return string(r.Code)
	case r.Profile != nil:
		return Describe(r.Profile)
	}
	return fmt.Sprintf("created=%v +%d -%d value=%d", r.Created, r.Added, r.Deleted, r.Value)
}

// Do sends op to a store and returns its answer in the model's terms, with
// the error that produced a non-empty code.
func (op Op) Do(ctx context.Context, s partmap.Store) (Result, error) {
	var r Result
	var err error
	switch op.Kind {
	case Get:
		var rec partmap.Record
		rec, err = s.FindProfile(ctx, op.Email)
		r.Profile = rec.Profile
	case Put:
		_, r.Created, err = partmap.UpsertProfile(ctx, s, op.Put, partmap.Condition{})
	case Patch:
		var res partmap.PatchResult
		res, err = partmap.PatchProfile(ctx, s, op.Email, op.Patch, partmap.Condition{})
		r.Added, r.Deleted = res.FieldsAdded, res.FieldsDeleted
	case Incr:
		var inc partmap.Increment
		inc, err = partmap.IncrementField(ctx, s, op.Email, op.Field, op.By, partmap.Condition{})
		r.Value = inc.Value
	case Delete:
		err = partmap.DeleteProfile(ctx, s, op.Email, partmap.Condition{})
	case Rename:
		var rec partmap.Record
		rec, err = partmap.RenameProfile(ctx, s, op.Email, op.To, partmap.Condition{})
		r.Profile = rec.Profile
	}
	if err != nil {
		return Result{Code: partmap.ErrorCode(err)}, err
	}
	return r, nil
}

// Random draws an operation on one of emails. Values are small, so that
// operations often meet each other's fields.
func Random(rng *rand.Rand, emails []string) Op {
	op := Op{Email: emails[rng.IntN(len(emails))]}
	v := func() string { return strconv.Itoa(rng.IntN(4)) }
	switch n := rng.IntN(10); {
	case n < 3:
		op.Kind = Get
	case n < 5:
		op.Kind = Incr
		op.Field, op.By = []string{"n", "m"}[rng.IntN(2)], int64(rng.IntN(5)-1)
	case n < 7:
		op.Kind = Patch
		a := v()
		op.Patch = partmap.Patch{"a": &a}
		if rng.IntN(2) == 0 {
			op.Patch["n"] = nil
		}
	case n < 9:
		op.Kind = Put
		op.Put = partmap.Profile{partmap.FieldEmail: op.Email, "a": v(), "n": v()}
	default:
		op.Kind = Delete
	}
	return op
}
