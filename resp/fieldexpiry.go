package resp

import (
	"strconv"

	"github.com/partmap/partmap"
)

// The expiry of fields (Redis 7.4: HEXPIRE, HPEXPIRE, HEXPIREAT,
// HPEXPIREAT, HTTL, HPTTL, HEXPIRETIME, HPEXPIRETIME, HPERSIST) and Redis
// 8.0's HGETDEL, HGETEX and HSETEX, on partmap's expiry operations.

func init() {
	key := [3]int{1, 1, 1}
	for name, unit := range map[string]struct{ seconds, relative bool }{
		"hexpire": {true, true}, "hpexpire": {false, true}, "hexpireat": {true, false}, "hpexpireat": {false, false},
	} {
		commands[name] = spec{arity: -6, write: true, flags: []string{"write", "denyoom", "fast"}, keys: key,
			run: func(k *call) { cmdHExpire(k, unit.seconds, unit.relative) }}
	}
	for name, unit := range map[string]struct{ seconds, absolute bool }{
		"httl": {true, false}, "hpttl": {false, false}, "hexpiretime": {true, true}, "hpexpiretime": {false, true},
	} {
		commands[name] = spec{arity: -5, flags: []string{"readonly", "fast"}, keys: key,
			run: func(k *call) { cmdHTTL(k, unit.seconds, unit.absolute) }}
	}
	commands["hpersist"] = spec{arity: -5, write: true, flags: []string{"write", "fast"}, keys: key, run: cmdHPersist}
	commands["hgetdel"] = spec{arity: -5, write: true, flags: []string{"write", "fast"}, keys: key, run: cmdHGetDel}
	commands["hgetex"] = spec{arity: -5, write: true, flags: []string{"write", "fast"}, keys: key, run: cmdHGetEx}
	commands["hsetex"] = spec{arity: -6, write: true, flags: []string{"write", "denyoom", "fast"}, keys: key, run: cmdHSetEx}
}

// fieldList reads FIELDS numfields field... at argument at, with Redis's
// errors; per says how many arguments a field takes (2 for HSETEX's
// pairs), and zeroMsg is the command's wording of a count below 1.
func (k *call) fieldList(at, per int, zeroMsg string) ([]string, bool) {
	if at+1 >= len(k.args) || lower(k.args[at]) != "fields" {
		k.w.WriteError("ERR Mandatory argument FIELDS is missing or not at the right position")
		return nil, false
	}
	n, err := strconv.ParseInt(k.arg(at+1), 10, 64)
	if err != nil || n < 1 {
		k.w.WriteError("ERR " + zeroMsg)
		return nil, false
	}
	rest := k.args[at+2:]
	if int64(len(rest)) != n*int64(per) {
		k.w.WriteError("ERR The `numfields` parameter must match the number of arguments")
		return nil, false
	}
	out := make([]string, len(rest))
	for i, a := range rest {
		out[i] = string(a)
	}
	return out, true
}

const (
	errNumFieldsPositive = "Parameter `numFields` should be greater than 0"
	errFieldsPositive    = "Number of fields must be a positive integer"
)

// expireTime reads a time argument as Redis's parseExpireTime does.
func (k *call) expireTime(i int, seconds, relative bool) (partmap.When, bool) {
	n, err := strconv.ParseInt(k.arg(i), 10, 64)
	if err != nil {
		k.w.WriteError(errNotInteger)
		return partmap.When{}, false
	}
	when, err := partmap.WhenFromParam("time", n, seconds, relative)
	if err != nil {
		k.w.WriteError("ERR invalid expire time in '" + lower(k.args[0]) + "' command")
		return partmap.When{}, false
	}
	return when, true
}

// codes writes one code per field, or -2 for each on a missing profile.
func (k *call) codes(fields []string, res partmap.OperationResult, err error) {
	switch {
	case partmap.ErrorCode(err) == partmap.ENOTFOUND:
		res.Codes = nil
	case err != nil:
		k.w.WriteError(storeError(err))
		return
	}
	k.w.WriteArray(len(fields))
	for i := range fields {
		code := partmap.ExpiryNoField
		if i < len(res.Codes) {
			code = res.Codes[i]
		}
		k.w.WriteInt(code)
	}
}

func cmdHExpire(k *call, seconds, relative bool) {
	email, ok := k.key(1)
	if !ok {
		return
	}
	when, ok := k.expireTime(2, seconds, relative)
	if !ok {
		return
	}
	at, cond := 3, partmap.ExpireAlways
	if c, err := partmap.ParseExpireCondition(k.arg(3)); err == nil && c != "" {
		at, cond = 4, c
	}
	fields, ok := k.fieldList(at, 1, errNumFieldsPositive)
	if !ok {
		return
	}
	res, err := k.store.Apply(k.ctx, partmap.Operation{Op: partmap.OpExpire, Email: email, Fields: fields, When: when, ExpireCond: cond})
	k.codes(fields, res, err)
}

func cmdHTTL(k *call, seconds, absolute bool) {
	email, ok := k.key(1)
	if !ok {
		return
	}
	fields, ok := k.fieldList(2, 1, errFieldsPositive)
	if !ok {
		return
	}
	ttl, err := k.store.Deadlines(k.ctx, email, fields)
	switch {
	case partmap.ErrorCode(err) == partmap.ENOTFOUND:
		ttl.Deadlines = nil
	case err != nil:
		k.w.WriteError(storeError(err))
		return
	}
	k.w.WriteArray(len(fields))
	for i := range fields {
		d := int64(partmap.ExpiryNoField)
		if i < len(ttl.Deadlines) {
			d = ttl.Deadlines[i]
		}
		if d >= 0 { // a deadline, not a code
			if !absolute {
				d = ttl.TTL(d)
			}
			if seconds {
				d = (d + 999) / 1000 // rounded up, as Redis's HTTL and HEXPIRETIME do
			}
		}
		k.w.WriteInt64(d)
	}
}

func cmdHPersist(k *call) {
	email, ok := k.key(1)
	if !ok {
		return
	}
	fields, ok := k.fieldList(2, 1, errFieldsPositive)
	if !ok {
		return
	}
	res, err := k.store.Apply(k.ctx, partmap.Operation{Op: partmap.OpPersist, Email: email, Fields: fields})
	k.codes(fields, res, err)
}

// values writes what getDelete or getExpire read: a null for each field
// of a missing profile.
func (k *call) values(fields []string, res partmap.OperationResult, err error) {
	switch {
	case partmap.ErrorCode(err) == partmap.ENOTFOUND:
		res.Values = nil
	case err != nil:
		k.w.WriteError(storeError(err))
		return
	}
	k.w.WriteArray(len(fields))
	for i := range fields {
		var v *string
		if i < len(res.Values) {
			v = res.Values[i]
		}
		k.w.bulkOrNull(v)
	}
}

func cmdHGetDel(k *call) {
	email, ok := k.key(1)
	if !ok {
		return
	}
	fields, ok := k.fieldList(2, 1, errFieldsPositive)
	if !ok {
		return
	}
	res, err := k.store.Apply(k.ctx, partmap.Operation{Op: partmap.OpGetDelete, Email: email, Fields: fields})
	k.values(fields, res, err)
}

// ttlOption reads HGETEX's and HSETEX's EX, PX, EXAT, PXAT (and PERSIST
// or KEEPTTL, as the command takes) at argument i: how many arguments it
// took, and the expiry.
func (k *call) ttlOption(i int, extra string) (int, partmap.FieldExpiry, bool) {
	var x partmap.FieldExpiry
	if i >= len(k.args) {
		return 0, x, true
	}
	opt := lower(k.args[i])
	units := map[string]struct{ seconds, relative bool }{"ex": {true, true}, "px": {false, true}, "exat": {true, false}, "pxat": {false, false}}
	if u, ok := units[opt]; ok {
		if i+1 >= len(k.args) {
			k.w.WriteError(errSyntax)
			return 0, x, false
		}
		when, ok := k.expireTime(i+1, u.seconds, u.relative)
		x.When = &when
		return 2, x, ok
	}
	switch {
	case opt == extra && extra == "persist":
		x.Persist = true
		return 1, x, true
	case opt == extra && extra == "keepttl":
		x.KeepTTL = true
		return 1, x, true
	}
	return 0, x, true
}

func cmdHGetEx(k *call) {
	email, ok := k.key(1)
	if !ok {
		return
	}
	n, x, ok := k.ttlOption(2, "persist")
	if !ok {
		return
	}
	fields, ok := k.fieldList(2+n, 1, errFieldsPositive)
	if !ok {
		return
	}
	res, err := k.store.Apply(k.ctx, partmap.Operation{Op: partmap.OpGetExpire, Email: email, Fields: fields, Expiry: x})
	k.values(fields, res, err)
}

func cmdHSetEx(k *call) {
	email, ok := k.key(1)
	if !ok {
		return
	}
	at, cond := 2, partmap.SetFieldsAlways
	switch lower(k.args[2]) {
	case "fnx":
		at, cond = 3, partmap.SetIfNoFieldExist
	case "fxx":
		at, cond = 3, partmap.SetIfAllExist
	}
	n, x, ok := k.ttlOption(at, "keepttl")
	if !ok {
		return
	}
	pairs, ok := k.fieldList(at+n, 2, errFieldsPositive)
	if !ok {
		return
	}
	set := partmap.Patch{}
	for i := 0; i < len(pairs); i += 2 {
		v := pairs[i+1]
		set[pairs[i]] = &v
	}
	res, err := k.store.Apply(k.ctx, partmap.Operation{Op: partmap.OpSetFields, Email: email, Set: set, FieldSet: cond, Expiry: x})
	if err != nil {
		k.w.WriteError(storeError(err))
		return
	}
	k.w.WriteInt(boolInt(res.Set))
}
