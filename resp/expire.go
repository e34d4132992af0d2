package resp

import (
	"math"
	"strconv"

	"github.com/partmap/partmap"
)

// The expiry of whole profiles, as Redis's keyspace commands: EXPIRE,
// PEXPIRE, EXPIREAT, PEXPIREAT (with NX, XX, GT, LT), TTL, PTTL,
// EXPIRETIME, PEXPIRETIME and PERSIST.

func init() {
	key := [3]int{1, 1, 1}
	for name, unit := range map[string]struct{ seconds, relative bool }{
		"expire": {true, true}, "pexpire": {false, true}, "expireat": {true, false}, "pexpireat": {false, false},
	} {
		commands[name] = spec{arity: -3, write: true, flags: []string{"write", "fast"}, keys: key,
			run: func(k *call) { cmdExpire(k, unit.seconds, unit.relative) }}
	}
	for name, unit := range map[string]struct{ seconds, absolute bool }{
		"ttl": {true, false}, "pttl": {false, false}, "expiretime": {true, true}, "pexpiretime": {false, true},
	} {
		commands[name] = spec{arity: 2, flags: []string{"readonly", "fast"}, keys: key,
			run: func(k *call) { cmdTTL(k, unit.seconds, unit.absolute) }}
	}
	commands["persist"] = spec{arity: 2, write: true, flags: []string{"write", "fast"}, keys: key, run: cmdPersist}
}

// expireOptions reads NX, XX, GT and LT as Redis 7.0 does, with its errors.
func (k *call) expireOptions(from int) (partmap.ExpireCondition, bool) {
	var nx, xx, gt, lt bool
	for _, a := range k.args[from:] {
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
			k.w.WriteError("ERR Unsupported option " + clip(a))
			return "", false
		}
	}
	switch {
	case nx && (xx || gt || lt):
		k.w.WriteError("ERR NX and XX, GT or LT options at the same time are not compatible")
		return "", false
	case gt && lt:
		k.w.WriteError("ERR GT and LT options at the same time are not compatible")
		return "", false
	case nx:
		return partmap.ExpireIfNone, true
	case xx && gt:
		return partmap.ExpireIfLater, true // XX GT: GT already needs a deadline
	case xx && lt:
		return "XXLT", true
	case xx:
		return partmap.ExpireIfSet, true
	case gt:
		return partmap.ExpireIfLater, true
	case lt:
		return partmap.ExpireIfSooner, true
	}
	return partmap.ExpireAlways, true
}

func cmdExpire(k *call, seconds, relative bool) {
	email, ok := k.key(1)
	if !ok {
		return
	}
	n, err := strconv.ParseInt(k.arg(2), 10, 64)
	if err != nil {
		k.w.WriteError(errNotInteger)
		return
	}
	cond, ok := k.expireOptions(3)
	if !ok {
		return
	}
	name := lower(k.args[0])
	if seconds && (n > math.MaxInt64/1000 || n < math.MinInt64/1000) {
		k.w.WriteError("ERR invalid expire time in '" + name + "' command")
		return
	}
	// A time at or before now deletes the profile, as Redis deletes the
	// key; partmap takes no negative time, so such a time is the epoch.
	when, err := partmap.WhenFromParam("time", n, seconds, relative)
	if n < 0 {
		when, err = partmap.When{Millis: 0}, nil
	}
	if err != nil {
		k.w.WriteError("ERR invalid expire time in '" + name + "' command")
		return
	}
	op := partmap.Operation{Op: partmap.OpExpire, Email: email, When: when, ExpireCond: cond}
	var res partmap.OperationResult
	if cond == "XXLT" {
		res, err = k.expireXXLT(op)
	} else {
		res, err = k.store.Apply(k.ctx, op)
	}
	switch {
	case partmap.ErrorCode(err) == partmap.ENOTFOUND:
		k.w.WriteInt(0)
	case err != nil:
		k.w.WriteError(storeError(err))
	default:
		code := partmap.ExpiryNoField
		if len(res.Codes) > 0 {
			code = res.Codes[0]
		}
		k.w.WriteInt(boolInt(code == partmap.ExpirySet || code == partmap.ExpiryDeleted))
	}
}

// cmdTTL answers -2 for a missing profile, -1 for one without a deadline,
// and otherwise the time left (TTL, PTTL) or the deadline (EXPIRETIME,
// PEXPIRETIME), in seconds rounded as Redis rounds them or milliseconds.
func cmdTTL(k *call, seconds, absolute bool) {
	email, ok := k.key(1)
	if !ok {
		return
	}
	ttl, err := k.store.Deadlines(k.ctx, email, nil)
	switch {
	case partmap.ErrorCode(err) == partmap.ENOTFOUND:
		k.w.WriteInt(-2)
		return
	case err != nil:
		k.w.WriteError(storeError(err))
		return
	case ttl.Profile == partmap.ExpiryNone:
		k.w.WriteInt(-1)
		return
	}
	v := ttl.TTL(ttl.Profile)
	if absolute {
		v = ttl.Profile
	}
	if seconds {
		v = (v + 500) / 1000 // rounded, as Redis rounds TTL and EXPIRETIME alike
	}
	k.w.WriteInt64(v)
}

func cmdPersist(k *call) {
	email, ok := k.key(1)
	if !ok {
		return
	}
	res, err := k.store.Apply(k.ctx, partmap.Operation{Op: partmap.OpPersist, Email: email})
	switch {
	case partmap.ErrorCode(err) == partmap.ENOTFOUND:
		k.w.WriteInt(0)
	case err != nil:
		k.w.WriteError(storeError(err))
	default:
		k.w.WriteInt(boolInt(len(res.Codes) > 0 && res.Codes[0] == partmap.ExpirySet))
	}
}

// expireXXLT is EXPIRE's XX LT: only a profile that has a deadline, and
// only to a sooner one. partmap's conditions have no XX LT, so it reads
// the deadline and sets the sooner one conditional on the version read,
// again from the read if the profile changed in between.
func (k *call) expireXXLT(op partmap.Operation) (partmap.OperationResult, error) {
	op.ExpireCond = partmap.ExpireIfSooner
	for range 100 {
		ttl, err := k.store.Deadlines(k.ctx, op.Email, nil)
		if err != nil {
			return partmap.OperationResult{}, err
		}
		if ttl.Profile == partmap.ExpiryNone {
			return partmap.OperationResult{Codes: []int{partmap.ExpiryNotMet}}, nil
		}
		op.Cond = partmap.Condition{IfMatch: []partmap.Version{ttl.Version}}
		res, err := k.store.Apply(k.ctx, op)
		if partmap.ErrorCode(err) != partmap.EPRECONDITION {
			return res, err
		}
	}
	return partmap.OperationResult{}, partmap.Errorf(partmap.ELOCKCONFLICT, "the profile kept changing under EXPIRE XX LT; retry")
}
