package resp

import (
	"math"

	"github.com/partmap/partmap"
)

// RENAME, RENAMENX and COPY, on partmap's rename and copy. A key is a
// canonical email, so two spellings of one email (a@x.com, A@X.COM) are
// one profile: renamed or copied onto itself, as Redis answers for a key
// named twice, not moved to a second key as Redis would.

// parseRename reads RENAME (replace: onto an existing profile too) and
// RENAMENX. A rename onto the profile itself is a get of it, for the
// reply to say whether it exists.
func parseRename(replace bool) func([][]byte, []partmap.Operation) ([]partmap.Operation, error) {
	return func(args [][]byte, ops []partmap.Operation) ([]partmap.Operation, error) {
		r := argReader{args: args}
		from, to := r.key(1), r.key(2)
		if from == to {
			return r.done(ops, partmap.Operation{Op: partmap.OpGet, Email: from})
		}
		return r.done(ops, partmap.Operation{Op: partmap.OpRename, Email: from, To: to, Replace: replace})
	}
}

// replyRename answers RENAME's OK or RENAMENX's 1, and 0 for RENAMENX
// onto an existing profile or onto the profile itself, as Redis's do.
func replyRename(nx bool) func(*writer, *exchange) {
	return func(w *writer, x *exchange) {
		res := x.res[0]
		switch code := partmap.ErrorCode(res.Err); {
		case code == partmap.ENOTFOUND || (res.Err == nil && res.Op == partmap.OpGet && res.Record == nil):
			w.WriteError("ERR no such key")
		case nx && code == partmap.EEXISTS:
			w.WriteInt(0)
		case res.Err != nil:
			w.WriteError(storeError(res.Err))
		case nx:
			w.WriteInt(boolInt(res.Op == partmap.OpRename))
		default:
			w.ok()
		}
	}
}

// parseCopy reads COPY source destination [DB destination-db] [REPLACE],
// its options in any order and in Redis's order of refusals: database 0
// is the only one.
func parseCopy(args [][]byte, ops []partmap.Operation) ([]partmap.Operation, error) {
	r := argReader{args: args}
	replace := false
	for i := 3; i < len(args) && r.err == nil; i++ {
		switch opt := lower(args[i]); {
		case opt == "replace":
			replace = true
		case opt == "db" && i+1 < len(args):
			i++
			if db := r.intIn(i, math.MinInt32, math.MaxInt32, ""); r.err == nil && db != 0 { // Redis's getIntFromObjectOrReply
				r.refuse("ERR DB index is out of range")
			}
		default:
			r.refuse(errSyntax)
		}
	}
	from, to := r.key(1), r.key(2)
	if r.err == nil && from == to {
		r.refuse("ERR source and destination objects are the same")
	}
	return r.done(ops, partmap.Operation{Op: partmap.OpCopy, Email: from, To: to, Replace: replace})
}

// replyCopy answers 1 for a copy made, 0 for a missing source or, without
// REPLACE, an existing destination.
func replyCopy(w *writer, x *exchange) {
	switch res := x.res[0]; partmap.ErrorCode(res.Err) {
	case "":
		w.WriteInt(1)
	case partmap.ENOTFOUND, partmap.EEXISTS:
		w.WriteInt(0)
	default:
		w.WriteError(storeError(res.Err))
	}
}
