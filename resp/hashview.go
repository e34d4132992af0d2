package resp

import (
	"slices"

	"github.com/partmap/partmap"
)

// A profile's hash is its fields but emailAddress, which the key already
// is: HLEN, HGETALL, HKEYS, HVALS, HSCAN and HRANDFIELD leave it out, and
// every command that names it answers it as a field that is not there
// (HGET nil, HEXISTS 0, HDEL 0, HEXPIRE and HTTL -2). A command that
// would write it (HSET, HSETNX, HINCRBY, HSETEX…) is refused, since a
// Redis tool could otherwise move the profile away from its key. A
// profile left without a field is deleted by the directory, as Redis
// deletes an emptied hash; one made over HTTP with its emailAddress alone
// reads as a missing key (EXISTS, TYPE, SCAN).

const errKeyField = "ERR emailAddress is the profile's key, not a field of its hash: it cannot be written"

// writesKey reports whether op writes emailAddress as a field.
func writesKey(op partmap.Operation) bool {
	switch op.Op {
	case partmap.OpSetIfAbsent, partmap.OpIncrement, partmap.OpIncrementFloat:
		return op.Field == partmap.FieldEmail
	}
	_, set := op.Set[partmap.FieldEmail]
	return set
}

// sent is op as the store is asked it: without emailAddress among its
// fields, and a plain read of the profile when no other is left, so that
// the field is never read, expired or deleted. The reply spreads the
// results over the fields asked (spread).
func sent(op partmap.Operation) partmap.Operation {
	if !slices.Contains(op.Fields, partmap.FieldEmail) {
		return op
	}
	fields := make([]string, 0, len(op.Fields)-1)
	for _, f := range op.Fields {
		if f != partmap.FieldEmail {
			fields = append(fields, f)
		}
	}
	if len(fields) == 0 {
		return partmap.Operation{Op: partmap.OpGet, Email: op.Email, Cond: op.Cond, FailAlone: op.FailAlone}
	}
	op.Fields = fields
	return op
}

// spread answers each field x's command named: got's answers, in order,
// for the fields sent, and missing for emailAddress and past got's end
// (every field of a missing profile).
func spread[T any](x *exchange, got []T, missing T) []T {
	fields := x.ops[0].Fields
	if len(got) == len(fields) && !slices.Contains(fields, partmap.FieldEmail) {
		return got // every field answered: HGET's every time
	}
	out := make([]T, len(fields))
	j := 0
	for i, f := range fields {
		out[i] = missing
		if f == partmap.FieldEmail {
			continue
		}
		if j < len(got) {
			out[i] = got[j]
		}
		j++
	}
	return out
}

// hashFields are the names of p's hash in byte order: the order partmap
// keeps them in, where Redis keeps a small hash's in insertion order.
func hashFields(p partmap.Profile) []string {
	names := make([]string, 0, len(p))
	for f := range p {
		if f != partmap.FieldEmail {
			names = append(names, f)
		}
	}
	slices.Sort(names)
	return names
}

// isKey reports whether rec reads as a key: a profile with a field
// besides emailAddress.
func isKey(rec *partmap.Record) bool { return rec != nil && len(rec.Profile) > 1 }
