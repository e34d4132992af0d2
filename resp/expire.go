package resp

import (
	"math"

	"github.com/partmap/partmap"
)

// The expiry commands, on partmap's expiry operations: of whole profiles,
// as Redis's keyspace commands (EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT with
// NX, XX, GT and LT; TTL, PTTL, EXPIRETIME, PEXPIRETIME; PERSIST), and of
// fields, as Redis 7.4's (HEXPIRE, HPEXPIRE, HEXPIREAT, HPEXPIREAT, HTTL,
// HPTTL, HEXPIRETIME, HPEXPIRETIME, HPERSIST) and Redis 8.0's HGETDEL,
// HGETEX and HSETEX.

// expireOptions reads EXPIRE's NX, XX, GT and LT as Redis 7.0 does.
func (r *argReader) expireOptions(from int) partmap.ExpireCondition {
	var nx, xx, gt, lt bool
	for _, a := range r.args[from:] {
		switch lower(a) {
		case "nx":
			nx = true
		case "xx":
			xx = true
		case "gt":
			gt = true
		case "lt":
			lt = true
		default:
			r.refuse("ERR Unsupported option " + clip(a))
		}
	}
	switch {
	case nx && (xx || gt || lt):
		r.refuse("ERR NX and XX, GT or LT options at the same time are not compatible")
	case gt && lt:
		r.refuse("ERR GT and LT options at the same time are not compatible")
	case nx:
		return partmap.ExpireIfNone
	case xx && lt:
		return partmap.ExpireIfSetSooner
	case gt: // XX GT too: GT already needs a deadline
		return partmap.ExpireIfLater
	case xx:
		return partmap.ExpireIfSet
	case lt:
		return partmap.ExpireIfSooner
	}
	return partmap.ExpireAlways
}

// keyWhen is EXPIRE's time n, read as Redis's expireGenericCommand reads
// it: one past Unix milliseconds in an int64 is refused (a relative one by
// the store, at its clock), and a negative one is a time gone, which
// deletes the profile as Redis deletes the key: partmap takes no negative
// time, so it is the epoch.
func (r *argReader) keyWhen(n int64, seconds, relative bool) partmap.When {
	switch {
	case r.err != nil:
	case seconds && n < math.MinInt64/1000:
		r.refuse(errExpireTime(r.args))
	case n < 0:
	default:
		w, err := partmap.WhenFromParam("time", n, seconds, relative, math.MaxInt64)
		if err != nil {
			r.refuse(errExpireTime(r.args))
		}
		return w
	}
	return partmap.When{}
}

// fieldWhen is a field's time n, read as Redis's hexpireGenericCommand and
// parseExpireTime read it: never negative, and at most Redis's latest
// field deadline (a relative one checked again by the store, at its
// clock).
func (r *argReader) fieldWhen(n int64, seconds, relative bool) partmap.When {
	if r.err != nil {
		return partmap.When{}
	}
	if n < 0 {
		r.refuse("ERR invalid expire time, must be >= 0")
		return partmap.When{}
	}
	w, err := partmap.WhenFromParam("time", n, seconds, relative, partmap.MaxFieldDeadline)
	if err != nil {
		r.refuse(errExpireTime(r.args))
	}
	return w
}

// errExpireTime is Redis's refusal of a time past the latest deadline
// (addReplyErrorExpireTime), which the store gives for a relative time
// that its clock puts there.
func errExpireTime(args [][]byte) string {
	return "ERR invalid expire time in '" + lower(args[0]) + "' command"
}

func parseExpire(seconds, relative bool) func([][]byte, []partmap.Operation) ([]partmap.Operation, error) {
	return func(args [][]byte, ops []partmap.Operation) ([]partmap.Operation, error) {
		r := argReader{args: args}
		email, cond := r.key(1), r.expireOptions(3) // the options before the time, as Redis reads them
		return r.done(ops, partmap.Operation{Op: partmap.OpExpire, Email: email, When: r.keyWhen(r.int(2), seconds, relative), ExpireCond: cond})
	}
}

// replyExpire answers 1 when the deadline was set (or the profile
// deleted), 0 when not or the profile is missing.
func replyExpire(w *writer, x *exchange) {
	if !w.failed(x) {
		code := x.res[0].Codes
		w.WriteInt(boolInt(len(code) > 0 && (code[0] == partmap.ExpirySet || code[0] == partmap.ExpiryDeleted)))
	}
}

func replyPersist(w *writer, x *exchange) {
	if !w.failed(x) {
		code := x.res[0].Codes
		w.WriteInt(boolInt(len(code) > 0 && code[0] == partmap.ExpirySet))
	}
}

// replyTTL answers -2 for a missing profile, -1 for one without a
// deadline, and otherwise the time left (TTL, PTTL) or the deadline
// (EXPIRETIME, PEXPIRETIME), in seconds rounded as Redis rounds them or
// milliseconds.
func replyTTL(seconds, absolute bool) func(*writer, *exchange) {
	return func(w *writer, x *exchange) {
		switch t := x.ttl; {
		case partmap.ErrorCode(x.res[0].Err) == partmap.ENOTFOUND:
			w.WriteInt(-2)
		case w.failed(x):
		case t.Profile == partmap.ExpiryNone:
			w.WriteInt(-1)
		default:
			w.WriteInt64(ttlIn(t, t.Profile, seconds, absolute, 500))
		}
	}
}

// ttlIn is deadline d, read with t, as a TTL command answers it: the time
// left, or the deadline itself when absolute, in milliseconds or in
// seconds rounded up from up ms (500 for TTL, 999 for HTTL, as Redis
// rounds them).
func ttlIn(t partmap.TTLs, d int64, seconds, absolute bool, up int64) int64 {
	if !absolute {
		d = t.TTL(d)
	}
	if seconds {
		d = d/1000 + (d%1000+up)/1000 // (d+up)/1000, which overflows near the latest deadline
	}
	return d
}

// parseFields reads KEY [FIELDS numfields field ...]: a get (HTTL and its
// siblings), persist, or getDelete of the fields, or of the profile
// without them (PERSIST).
func parseFields(kind partmap.OpKind) func([][]byte, []partmap.Operation) ([]partmap.Operation, error) {
	return func(args [][]byte, ops []partmap.Operation) ([]partmap.Operation, error) {
		r := argReader{args: args}
		op := partmap.Operation{Op: kind, Email: r.key(1)}
		if len(args) > 2 {
			op.Fields = r.fields(2, errFieldsPositive)
		}
		return r.done(ops, op)
	}
}

// fields reads FIELDS numfields field... at argument at, with Redis's
// refusals: msg is the command's refusal of a count that is not a
// positive integer.
func (r *argReader) fields(at int, msg string) []string {
	switch {
	case r.err != nil:
		return nil
	case at+1 >= len(r.args) || lower(r.args[at]) != "fields":
		r.refuse("ERR Mandatory argument FIELDS is missing or not at the right position")
		return nil
	}
	if n := r.intIn(at+1, 1, math.MaxInt64, msg); r.err == nil && int64(len(r.args)-at-2) != n {
		r.refuse("ERR The `numfields` parameter must match the number of arguments")
		return nil
	}
	return r.strings(at + 2)
}

const (
	errNumFieldsPositive = "Parameter `numFields` should be greater than 0"
	errFieldsPositive    = "Number of fields must be a positive integer"
)

func parseHExpire(seconds, relative bool) func([][]byte, []partmap.Operation) ([]partmap.Operation, error) {
	return func(args [][]byte, ops []partmap.Operation) ([]partmap.Operation, error) {
		r := argReader{args: args}
		op := partmap.Operation{Op: partmap.OpExpire, Email: r.key(1)}
		op.When = r.fieldWhen(r.int(2), seconds, relative)
		at := 3
		if c, err := partmap.ParseExpireCondition(string(args[3])); err == nil && c != "" && c != partmap.ExpireIfSetSooner {
			at, op.ExpireCond = 4, c
		}
		op.Fields = r.fields(at, errNumFieldsPositive)
		return r.done(ops, op)
	}
}

// replyCodes writes one code per field, -2 for each of a missing profile.
func replyCodes(w *writer, x *exchange) {
	eachField(w, x, x.res[0].Codes, partmap.ExpiryNoField, w.WriteInt)
}

// replyHTTL answers each field's time left or deadline, as replyTTL, or
// its code: -2 for a field missing (every one of a missing profile), -1
// for one without a deadline.
func replyHTTL(seconds, absolute bool) func(*writer, *exchange) {
	return func(w *writer, x *exchange) {
		eachField(w, x, x.ttl.Deadlines, partmap.ExpiryNoField, func(d int64) {
			if d >= 0 { // a deadline, not a code
				d = ttlIn(x.ttl, d, seconds, absolute, 999)
			}
			w.WriteInt64(d)
		})
	}
}

// timeOptions are HGETEX's and HSETEX's EX, PX, EXAT and PXAT.
var timeOptions = map[string]struct{ seconds, relative bool }{"ex": {true, true}, "px": {false, true}, "exat": {true, false}, "pxat": {false, false}}

// parseHGetEx reads HGETEX's one option where Redis's hgetexCommand reads
// it, before FIELDS.
func parseHGetEx(args [][]byte, ops []partmap.Operation) ([]partmap.Operation, error) {
	r := argReader{args: args}
	op := partmap.Operation{Op: partmap.OpGetExpire, Email: r.key(1)}
	at := 2
	if opt := lower(args[2]); opt == "persist" {
		at, op.Expiry.Persist = 3, true
	} else if u, ok := timeOptions[opt]; ok {
		when := r.fieldWhen(r.int(3), u.seconds, u.relative)
		at, op.Expiry.When = 4, &when
	}
	op.Fields = r.fields(at, errFieldsPositive)
	return r.done(ops, op)
}

// parseHSetEx reads HSETEX's options in any order, up to FIELDS and its
// field value pairs, with the refusals of Redis's hsetexParseArgs.
func parseHSetEx(args [][]byte, ops []partmap.Operation) ([]partmap.Operation, error) {
	r := argReader{args: args}
	op := partmap.Operation{Op: partmap.OpSetFields, Email: r.key(1)}
	timed := false
	for i := 2; i < len(args) && r.err == nil; i++ {
		opt := lower(args[i])
		u, isTime := timeOptions[opt]
		switch {
		case opt == "fields":
			n := int64(-1)
			if i < len(args)-3 {
				n = r.intIn(i+1, 1, math.MaxInt32, "invalid number of fields")
			}
			if left := len(args) - i - 2; r.err == nil && (left%2 != 0 || n != int64(left/2)) {
				r.refuse(wrongArity(args))
			}
			op.Set = partmap.Patch{}
			for j := i + 2; j+1 < len(args); j += 2 {
				v := string(args[j+1])
				op.Set[string(args[j])] = &v // the last of a field named twice, as Redis sets each in turn
			}
			return r.done(ops, op)
		case (isTime || opt == "keepttl") && timed:
			r.refuse("ERR Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified")
		case isTime && i+1 == len(args):
			r.refuse("ERR missing expire time")
		case isTime:
			i++
			when := r.fieldWhen(r.int(i), u.seconds, u.relative)
			timed, op.Expiry.When = true, &when
		case opt == "keepttl":
			timed, op.Expiry.KeepTTL = true, true
		case (opt == "fnx" || opt == "fxx") && op.FieldSet != partmap.SetFieldsAlways:
			r.refuse("ERR Only one of FXX or FNX arguments can be specified")
		case opt == "fnx":
			op.FieldSet = partmap.SetIfNoFieldExist
		case opt == "fxx":
			op.FieldSet = partmap.SetIfAllExist
		default:
			r.refuse("ERR unknown argument: " + clip(args[i]))
		}
	}
	r.refuse(wrongArity(args)) // not reached: HSETEX's arity leaves no room for valid options alone
	return ops, r.err
}
