package resp

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/partmap/partmap"
)

// The commands of profiles, each a parse and a reply (commands.go runs
// what parse makes between the two): the hash commands, DEL, EXISTS and
// TYPE here, the expiry commands in expire.go.

// refusal is Redis's reply to arguments a command refuses.
type refusal string

func (r refusal) Error() string { return string(r) }

// argReader reads a command's arguments with Redis's refusals. The first
// refusal stays, and every read after it answers a zero value, so that a
// parse reads on and answers the first.
type argReader struct {
	args [][]byte
	err  error
}

func (r *argReader) refuse(msg string) {
	if r.err == nil {
		r.err = refusal(msg)
	}
}

// done appends op to ops, unless an argument was refused or op would
// write emailAddress, which is no field of the hash (hashview.go).
func (r *argReader) done(ops []partmap.Operation, op partmap.Operation) ([]partmap.Operation, error) {
	if writesKey(op) {
		r.refuse(errKeyField)
	}
	if r.err != nil {
		return ops, r.err
	}
	return append(ops, op), nil
}

// key reads argument i as a customer email, canonicalised; a key that is
// not one is refused by name.
func (r *argReader) key(i int) string {
	if r.err != nil {
		return ""
	}
	email, err := partmap.CanonicalEmail(string(r.args[i]))
	if err != nil {
		r.refuse(fmt.Sprintf("ERR key '%s' is not a customer email: %s", clip(r.args[i]), oneLine(partmap.ErrorMessage(err))))
	}
	return email
}

// strings are the arguments from i on.
func (r *argReader) strings(i int) []string {
	if i >= len(r.args) {
		return nil
	}
	out := make([]string, len(r.args)-i)
	for j := range out {
		out[j] = string(r.args[i+j])
	}
	return out
}

// wrongArity is Redis's refusal of a command's argument count.
func wrongArity(args [][]byte) string {
	return "ERR wrong number of arguments for '" + lower(args[0]) + "' command"
}

// parseGet reads KEY [FIELD ...]: HGET, HMGET (whose fields may repeat),
// HEXISTS and HSTRLEN read the fields, the others the whole profile.
func parseGet(args [][]byte, ops []partmap.Operation) ([]partmap.Operation, error) {
	r := argReader{args: args}
	return r.done(ops, partmap.Operation{Op: partmap.OpGet, Email: r.key(1), Fields: r.strings(2)})
}

// parseHSet reads HSET's (and HMSET's) field value pairs, the last value
// of a repeated field winning, as in Redis; a missing profile is created.
func parseHSet(args [][]byte, ops []partmap.Operation) ([]partmap.Operation, error) {
	r := argReader{args: args}
	email := r.key(1)
	if len(args)%2 != 0 {
		r.refuse(wrongArity(args))
	}
	set := make(partmap.Patch, len(args)/2-1)
	for i := 2; i+1 < len(args); i += 2 {
		v := string(args[i+1])
		set[string(args[i])] = &v
	}
	return r.done(ops, partmap.Operation{Op: partmap.OpSetFields, Email: email, Set: set})
}

func parseHSetNX(args [][]byte, ops []partmap.Operation) ([]partmap.Operation, error) {
	r := argReader{args: args}
	return r.done(ops, partmap.Operation{Op: partmap.OpSetIfAbsent, Email: r.key(1), Field: string(args[2]), Value: string(args[3])})
}

// parseHDel deletes fields as HGETDEL does, each once, so that deleting
// the last one deletes the profile, as Redis deletes an emptied hash.
func parseHDel(args [][]byte, ops []partmap.Operation) ([]partmap.Operation, error) {
	r := argReader{args: args}
	fields := r.strings(2)
	slices.Sort(fields)
	return r.done(ops, partmap.Operation{Op: partmap.OpGetDelete, Email: r.key(1), Fields: slices.Compact(fields)})
}

// parseHIncrBy adds to an integer field, creating a missing profile with
// the field, as Redis creates a missing key.
func parseHIncrBy(args [][]byte, ops []partmap.Operation) ([]partmap.Operation, error) {
	r := argReader{args: args}
	return r.done(ops, partmap.Operation{Op: partmap.OpIncrement, Email: r.key(1), Field: string(args[2]), By: r.int(3), Create: true})
}

func parseHIncrByFloat(args [][]byte, ops []partmap.Operation) ([]partmap.Operation, error) {
	r := argReader{args: args}
	email, by := r.key(1), string(args[3])
	if err := partmap.ParseFloatIncrement(by); errors.Is(err, partmap.ErrInfiniteIncrement) {
		r.refuse("ERR value is NaN or Infinity")
	} else if err != nil {
		r.refuse(errNotFloat)
	}
	return r.done(ops, partmap.Operation{Op: partmap.OpIncrementFloat, Email: email, Field: string(args[2]), ByFloat: by, Create: true})
}

// parseDel deletes whole profiles; a missing one is no error.
func parseDel(args [][]byte, ops []partmap.Operation) ([]partmap.Operation, error) {
	return eachKey(args, ops, partmap.Operation{Op: partmap.OpDelete, AllowMissing: true})
}

func parseExists(args [][]byte, ops []partmap.Operation) ([]partmap.Operation, error) {
	return eachKey(args, ops, partmap.Operation{Op: partmap.OpGet})
}

// eachKey appends op once for each key from argument 1 on.
func eachKey(args [][]byte, ops []partmap.Operation, op partmap.Operation) ([]partmap.Operation, error) {
	r := argReader{args: args}
	for i := 1; i < len(args); i++ {
		if op.Email = r.key(i); r.err != nil {
			return ops, r.err
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// failed writes the reply to the first failure among x's results, but a
// missing profile's, which each command answers as Redis answers a
// missing key: true once it wrote one.
func (w *writer) failed(x *exchange) bool {
	for _, res := range x.res {
		switch {
		case res.Err == nil || partmap.ErrorCode(res.Err) == partmap.ENOTFOUND:
			continue
		case errors.Is(res.Err, partmap.ErrDeadlineTooLate):
			w.WriteError(errExpireTime(x.args))
		default:
			w.WriteError(storeError(res.Err))
		}
		return true
	}
	return false
}

// HSET answers how many fields are new, HMSET OK.
func replyHSet(w *writer, x *exchange) {
	if !w.failed(x) {
		w.WriteInt(x.res[0].FieldsAdded)
	}
}

func replyOK(w *writer, x *exchange) {
	if !w.failed(x) {
		w.ok()
	}
}

// replySet is HSETNX's and HSETEX's: whether they wrote.
func replySet(w *writer, x *exchange) {
	if !w.failed(x) {
		w.WriteInt(boolInt(x.res[0].Set))
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func replyHGet(w *writer, x *exchange) {
	if !w.failed(x) {
		w.bulkOrNull(spread(x, x.res[0].Values, nil)[0])
	}
}

// replyValues is HMGET's, HGETDEL's and HGETEX's: a null for each field
// missing, every one of a missing profile.
func replyValues(w *writer, x *exchange) {
	eachField(w, x, x.res[0].Values, nil, w.bulkOrNull)
}

// eachField writes one answer for each field of x's operation (spread).
func eachField[T any](w *writer, x *exchange, got []T, missing T, write func(T)) {
	if w.failed(x) {
		return
	}
	answers := spread(x, got, missing)
	w.WriteArray(len(answers))
	for _, v := range answers {
		write(v)
	}
}

func replyHGetAll(w *writer, x *exchange) {
	if w.failed(x) {
		return
	}
	p := profileOf(x.res[0])
	fields := hashFields(p)
	w.mapLen(len(fields))
	for _, f := range fields {
		w.WriteBulkString(f)
		w.WriteBulkString(p[f])
	}
}

func replyHKeys(w *writer, x *exchange) {
	if !w.failed(x) {
		w.strings(hashFields(profileOf(x.res[0])))
	}
}

func replyHVals(w *writer, x *exchange) {
	if w.failed(x) {
		return
	}
	p := profileOf(x.res[0])
	var vals []string
	for _, f := range hashFields(p) {
		vals = append(vals, p[f])
	}
	w.strings(vals)
}

func replyHLen(w *writer, x *exchange) {
	if !w.failed(x) {
		p := profileOf(x.res[0])
		_, keyed := p[partmap.FieldEmail]
		w.WriteInt(len(p) - boolInt(keyed))
	}
}

func replyHExists(w *writer, x *exchange) {
	if !w.failed(x) {
		w.WriteInt(boolInt(spread(x, x.res[0].Values, nil)[0] != nil))
	}
}

func replyHStrLen(w *writer, x *exchange) {
	if w.failed(x) {
		return
	}
	n := 0
	if v := spread(x, x.res[0].Values, nil)[0]; v != nil {
		n = len(*v)
	}
	w.WriteInt(n)
}

// replyHDel counts the fields that were there: none of a missing profile.
func replyHDel(w *writer, x *exchange) {
	if w.failed(x) {
		return
	}
	n := 0
	for _, v := range x.res[0].Values {
		n += boolInt(v != nil)
	}
	w.WriteInt(n)
}

func replyHIncrBy(w *writer, x *exchange) {
	if !w.failed(x) {
		w.WriteInt64(x.res[0].Value)
	}
}

func replyHIncrByFloat(w *writer, x *exchange) {
	switch {
	case partmap.ErrorCode(x.res[0].Err) == partmap.EOVERFLOW:
		w.WriteError(errIncrFltInf)
	case !w.failed(x):
		w.WriteBulkString(x.res[0].FloatValue)
	}
}

// replyDel counts the profiles that existed.
func replyDel(w *writer, x *exchange) {
	if w.failed(x) {
		return
	}
	n := 0
	for _, res := range x.res {
		n += boolInt(res.Deleted)
	}
	w.WriteInt(n)
}

func replyExists(w *writer, x *exchange) {
	if w.failed(x) {
		return
	}
	n := 0
	for _, res := range x.res {
		n += boolInt(isKey(res.Record))
	}
	w.WriteInt(n)
}

func replyType(w *writer, x *exchange) {
	switch {
	case w.failed(x):
	case !isKey(x.res[0].Record):
		w.WriteString("none")
	default:
		w.WriteString("hash")
	}
}

// wrongType is the reply to a read of another Redis type: WRONGTYPE on a
// profile, and Redis's reply for a missing key otherwise.
func wrongType(missing func(w *writer)) func(w *writer, x *exchange) {
	return func(w *writer, x *exchange) {
		switch {
		case w.failed(x):
		case isKey(x.res[0].Record):
			w.WriteError(errWrongType)
		default:
			missing(w)
		}
	}
}

func zero(w *writer)  { w.WriteInt(0) }
func empty(w *writer) { w.WriteArray(0) }

// parseHScan reads a profile whole: HSCAN answers its fields in one go,
// cursor 0, as Redis does for a small hash (a profile holds at most
// partmap.DefaultLimits' 2,048 fields, in 128 KiB).
func parseHScan(args [][]byte, ops []partmap.Operation) ([]partmap.Operation, error) {
	if _, ok := parseCursor(args[2]); !ok {
		return ops, refusal(errInvalidCursor)
	}
	return parseGet(args[:2], ops)
}

// replyHScan reads the options only of a profile that exists, as Redis
// answers a missing key's HSCAN before it reads them.
func replyHScan(w *writer, x *exchange) {
	if w.failed(x) {
		return
	}
	match, _, _, err := scanOptions(x.args, 3, false)
	if err != nil && x.res[0].Record != nil {
		w.fail(err)
		return
	}
	p := profileOf(x.res[0])
	var out []string
	for _, f := range hashFields(p) {
		if match == "" || globMatch(match, f) {
			out = append(out, f, p[f])
		}
	}
	w.WriteArray(2)
	w.WriteBulkString("0")
	w.strings(out)
}

// parseHRandField reads HRANDFIELD key [count [WITHVALUES]], Redis's
// refusals first.
func parseHRandField(args [][]byte, ops []partmap.Operation) ([]partmap.Operation, error) {
	if len(args) >= 3 {
		r := argReader{args: args}
		n := r.intIn(2, -math.MaxInt64, math.MaxInt64, "")
		switch {
		case r.err != nil:
			return ops, r.err
		case len(args) > 4 || (len(args) == 4 && lower(args[3]) != "withvalues"):
			return ops, refusal(errSyntax)
		case len(args) == 4 && (n < -math.MaxInt64/2 || n > math.MaxInt64/2):
			return ops, refusal("ERR value is out of range")
		}
	}
	return parseGet(args[:2], ops)
}

// replyHRandField answers one random field, or count distinct ones (a
// negative count: that many, repeats allowed), with their values after
// WITHVALUES, as Redis does.
func replyHRandField(w *writer, x *exchange) {
	if w.failed(x) {
		return
	}
	p := profileOf(x.res[0])
	names := hashFields(p)
	if len(x.args) == 2 {
		if len(names) == 0 {
			w.null()
			return
		}
		w.WriteBulkString(names[rand.IntN(len(names))])
		return
	}
	count, _ := partmap.ParseInteger(string(x.args[2])) // as parse read it
	var picked []string
	switch {
	case count >= 0:
		rand.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		picked = names[:min(int(count), len(names))]
	case len(names) > 0:
		// A negative count repeats fields: the reply is bounded in bytes,
		// not only in elements, as a small command could ask for gigabytes.
		longest := 0
		for _, f := range names {
			longest = max(longest, len(f)+len(p[f])+32)
		}
		if -count > int64(MaxPending/longest) {
			w.WriteError(fmt.Sprintf("ERR value is out of range: at most %d fields of this profile in one reply", MaxPending/longest))
			return
		}
		for range -count {
			picked = append(picked, names[rand.IntN(len(names))])
		}
	}
	if len(x.args) < 4 { // without WITHVALUES
		w.strings(picked)
		return
	}
	if w.proto == 3 {
		w.WriteArray(len(picked))
		for _, f := range picked {
			w.WriteArray(2)
			w.WriteBulkString(f)
			w.WriteBulkString(p[f])
		}
		return
	}
	w.WriteArray(2 * len(picked))
	for _, f := range picked {
		w.WriteBulkString(f)
		w.WriteBulkString(p[f])
	}
}
