package model

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/partmap/partmap"
)

// State is the profiles of a few emails, by email; an absent email has no
// entry. Operations that span profiles (a rename, a transaction) are
// stepped on it.
type State map[string]partmap.Profile

// Apply runs op on s and returns the next state and the answer, as the
// single-profile call (or RenameProfile) gives it. It never changes s.
func (s State) Apply(op Op) (State, Result) {
	cur := s[op.Email]
	if op.Kind == Rename {
		switch {
		case cur == nil:
			return s, Result{Code: partmap.ENOTFOUND}
		case s[op.To] != nil:
			return s, Result{Code: partmap.EEXISTS}
		}
		moved := cur.Clone()
		moved[partmap.FieldEmail] = op.To
		next := maps.Clone(s)
		delete(next, op.Email)
		next[op.To] = moved
		return next, Result{Profile: moved}
	}
	p, r := op.Apply(cur)
	if r.Code != "" || Equal(p, cur) {
		return s, r
	}
	next := maps.Clone(s)
	if p == nil {
		delete(next, op.Email)
	} else {
		next[op.Email] = p
	}
	return next, r
}

// Equal reports whether two states hold the same profiles.
func (s State) Equal(o State) bool {
	if len(s) != len(o) {
		return false
	}
	for e, p := range s {
		if !Equal(p, o[e]) {
			return false
		}
	}
	return true
}

func (s State) String() string {
	var parts []string
	for _, e := range slices.Sorted(maps.Keys(s)) {
		parts = append(parts, strings.Split(e, "@")[0]+Describe(s[e]))
	}
	return strings.Join(parts, " ")
}

// Call is what a client asked in one call: one operation (Get, Put, Patch,
// Incr, Delete or Rename, through its single-profile method), or, with Tx,
// a transaction of operations other than Get (Store.Transact).
type Call struct {
	Tx  bool
	Ops []Op
}

// Answer is what a call answered: a code, with the failing operation of a
// transaction (from 1), or a result per operation.
type Answer struct {
	Code    partmap.Code
	Failed  int
	Results []Result
}

// Apply steps a call on s. A transaction applies its operations in order;
// the first that fails fails it, writes nothing, and is named. Each
// operation of a transaction answers as its single call would, and also
// with the profile it left (none after a delete), as Transact's records
// show it.
func (c Call) Apply(s State) (State, Answer) {
	next := s
	var a Answer
	for i, op := range c.Ops {
		var r Result
		next, r = next.Apply(op)
		if r.Code != "" {
			a := Answer{Code: r.Code}
			if c.Tx {
				a.Failed = i + 1
			}
			return s, a
		}
		if c.Tx {
			switch op.Kind {
			case Rename:
				r.Profile = next[op.To]
			default:
				r.Profile = next[op.Email]
			}
		}
		a.Results = append(a.Results, r)
	}
	return next, a
}

// Same reports whether two answers are the same.
func (a Answer) Same(b Answer) bool {
	return a.Code == b.Code && a.Failed == b.Failed && slices.EqualFunc(a.Results, b.Results, Result.Same)
}

func (a Answer) String() string {
	if a.Code != "" {
		if a.Failed > 0 {
			return fmt.Sprintf("%s at %d", a.Code, a.Failed)
		}
		return string(a.Code)
	}
	var parts []string
	for _, r := range a.Results {
		parts = append(parts, r.String())
	}
	return strings.Join(parts, "; ")
}

func (c Call) String() string {
	var parts []string
	for _, op := range c.Ops {
		parts = append(parts, op.String())
	}
	if c.Tx {
		return "tx[" + strings.Join(parts, "; ") + "]"
	}
	return strings.Join(parts, "; ")
}

// Do sends c to a store and returns its answer in the model's terms, with
// the error that produced a code.
func (c Call) Do(ctx context.Context, s partmap.Store) (Answer, error) {
	if !c.Tx {
		r, err := c.Ops[0].Do(ctx, s)
		if err != nil {
			return Answer{Code: r.Code}, err
		}
		return Answer{Results: []Result{r}}, nil
	}
	ops := make([]partmap.Operation, len(c.Ops))
	for i, op := range c.Ops {
		o := partmap.Operation{Email: op.Email}
		switch op.Kind {
		case Put:
			o.Op, o.Email, o.Profile = partmap.OpPut, "", op.Put
		case Patch:
			o.Op, o.Patch = partmap.OpPatch, op.Patch
		case Incr:
			o.Op, o.Field, o.By = partmap.OpIncrement, op.Field, op.By
		case Delete:
			o.Op = partmap.OpDelete
		case Rename:
			o.Op, o.To = partmap.OpRename, op.To
		default:
			panic(fmt.Sprintf("model: operation %v in a transaction", op))
		}
		ops[i] = o
	}
	results, err := s.Transact(ctx, ops)
	if err != nil {
		a := Answer{Code: partmap.ErrorCode(err)}
		var e *partmap.Error
		if errors.As(err, &e) && a.Code != partmap.ELOCKCONFLICT {
			a.Failed = e.Operation
		}
		return a, err
	}
	a := Answer{Results: make([]Result, len(results))}
	for i, res := range results {
		r := Result{Created: res.Created, Added: res.FieldsAdded, Deleted: res.FieldsDeleted, Value: res.Value}
		if res.Record != nil {
			r.Profile = res.Record.Profile
		}
		a.Results[i] = r
	}
	return a, nil
}

// RandomCall draws a call on emails (at least two): half single
// operations, among them renames, and half transactions of two or three
// operations: transfers between two profiles, renames, puts of two
// profiles, and mixes.
func RandomCall(rng *rand.Rand, emails []string) Call {
	two := func() (string, string) {
		i := rng.IntN(len(emails))
		j := (i + 1 + rng.IntN(len(emails)-1)) % len(emails)
		return emails[i], emails[j]
	}
	rename := func() Op {
		a, b := two()
		return Op{Kind: Rename, Email: a, To: b}
	}
	if rng.IntN(2) == 0 {
		if rng.IntN(8) == 0 {
			return Call{Ops: []Op{rename()}}
		}
		return Call{Ops: []Op{Random(rng, emails)}}
	}
	a, b := two()
	switch rng.IntN(4) {
	case 0: // a transfer
		k := int64(rng.IntN(3) + 1)
		return Call{Tx: true, Ops: []Op{{Kind: Incr, Email: a, Field: "n", By: -k}, {Kind: Incr, Email: b, Field: "n", By: k}}}
	case 1: // a rename, then a write to the new address
		return Call{Tx: true, Ops: []Op{{Kind: Rename, Email: a, To: b}, {Kind: Incr, Email: b, Field: "m", By: 1}}}
	case 2: // a multi-put
		return Call{Tx: true, Ops: []Op{
			{Kind: Put, Email: a, Put: partmap.Profile{partmap.FieldEmail: a, "n": fmt.Sprint(rng.IntN(4))}},
			{Kind: Put, Email: b, Put: partmap.Profile{partmap.FieldEmail: b, "n": fmt.Sprint(rng.IntN(4))}},
		}}
	}
	var c Call
	c.Tx = true
	for range 2 + rng.IntN(2) {
		op := Random(rng, emails)
		switch {
		case rng.IntN(5) == 0:
			op = rename()
		case op.Kind == Get:
			op.Kind, op.Field, op.By = Incr, "n", 1
		}
		c.Ops = append(c.Ops, op)
	}
	return c
}
