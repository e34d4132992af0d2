package resp

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/tidwall/redcon"

	"github.com/partmap/partmap"
)

// call is one command being run.
type call struct {
	s     *Server
	c     *client
	w     *writer
	conn  redcon.Conn
	ctx   context.Context
	store partmap.Store // the server's, or a transaction's copy (multi.go)
	args  [][]byte
}

func (k *call) arg(i int) string { return string(k.args[i]) }

// arity is Redis's: n means exactly n arguments with the command's name,
// -n at least n.
type arity int

func (a arity) ok(n int) bool {
	if a < 0 {
		return n >= int(-a)
	}
	return n == int(a)
}

// spec describes a command, as COMMAND INFO does for Redis.
type spec struct {
	name       string // the map's key, lower case
	arity      arity
	write      bool // needs a write token
	beforeAuth bool // allowed before AUTH
	flags      []string
	keys       [3]int // first key, last key, step (COMMAND INFO)
	queued     bool   // MULTI may queue it (multi.go)
	run        func(k *call)
}

var commands map[string]spec

func init() {
	hashKey := [3]int{1, 1, 1}
	commands = map[string]spec{
		"ping":    {arity: -1, beforeAuth: true, flags: []string{"fast"}, run: cmdPing},
		"echo":    {arity: 2, flags: []string{"fast"}, run: func(k *call) { k.w.WriteBulk(k.args[1]) }},
		"hello":   {arity: -1, beforeAuth: true, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, run: cmdHello},
		"auth":    {arity: -2, beforeAuth: true, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, run: cmdAuth},
		"quit":    {arity: -1, beforeAuth: true, flags: []string{"fast", "no_auth"}, run: cmdQuit},
		"select":  {arity: 2, flags: []string{"loading", "stale", "fast"}, run: cmdSelect},
		"client":  {arity: -2, flags: []string{"loading", "stale"}, run: cmdClient},
		"command": {arity: -1, flags: []string{"loading", "stale"}, run: cmdCommand},
		"info":    {arity: -1, flags: []string{"loading", "stale"}, run: cmdInfo},
		"dbsize":  {arity: 1, flags: []string{"readonly", "fast"}, run: cmdDBSize},

		"hset":         {arity: -4, write: true, flags: []string{"write", "denyoom", "fast"}, keys: hashKey, run: cmdHSet},
		"hmset":        {arity: -4, write: true, flags: []string{"write", "denyoom", "fast"}, keys: hashKey, run: cmdHSet},
		"hsetnx":       {arity: 4, write: true, flags: []string{"write", "denyoom", "fast"}, keys: hashKey, run: cmdHSetNX},
		"hget":         {arity: 3, flags: []string{"readonly", "fast"}, keys: hashKey, run: cmdHGet},
		"hmget":        {arity: -3, flags: []string{"readonly", "fast"}, keys: hashKey, run: cmdHMGet},
		"hgetall":      {arity: 2, flags: []string{"readonly"}, keys: hashKey, run: cmdHGetAll},
		"hkeys":        {arity: 2, flags: []string{"readonly"}, keys: hashKey, run: cmdHKeys},
		"hvals":        {arity: 2, flags: []string{"readonly"}, keys: hashKey, run: cmdHVals},
		"hlen":         {arity: 2, flags: []string{"readonly", "fast"}, keys: hashKey, run: cmdHLen},
		"hexists":      {arity: 3, flags: []string{"readonly", "fast"}, keys: hashKey, run: cmdHExists},
		"hstrlen":      {arity: 3, flags: []string{"readonly", "fast"}, keys: hashKey, run: cmdHStrLen},
		"hdel":         {arity: -3, write: true, flags: []string{"write", "fast"}, keys: hashKey, run: cmdHDel},
		"hincrby":      {arity: 4, write: true, flags: []string{"write", "denyoom", "fast"}, keys: hashKey, run: cmdHIncrBy},
		"hincrbyfloat": {arity: 4, write: true, flags: []string{"write", "denyoom", "fast"}, keys: hashKey, run: cmdHIncrByFloat},

		"del":    {arity: -2, write: true, flags: []string{"write"}, keys: [3]int{1, -1, 1}, run: cmdDel},
		"unlink": {arity: -2, write: true, flags: []string{"write", "fast"}, keys: [3]int{1, -1, 1}, run: cmdDel},
		"exists": {arity: -2, flags: []string{"readonly", "fast"}, keys: [3]int{1, -1, 1}, run: cmdExists},
		"type":   {arity: 2, flags: []string{"readonly", "fast"}, keys: hashKey, run: cmdType},

		// Commands of other types answer as Redis does on a hash: a
		// missing key is empty, a profile the wrong type.
		"get":      {arity: 2, flags: []string{"readonly", "fast"}, keys: hashKey, run: wrongType(func(w *writer) { w.null() })},
		"strlen":   {arity: 2, flags: []string{"readonly", "fast"}, keys: hashKey, run: wrongType(func(w *writer) { w.WriteInt(0) })},
		"llen":     {arity: 2, flags: []string{"readonly", "fast"}, keys: hashKey, run: wrongType(func(w *writer) { w.WriteInt(0) })},
		"scard":    {arity: 2, flags: []string{"readonly", "fast"}, keys: hashKey, run: wrongType(func(w *writer) { w.WriteInt(0) })},
		"zcard":    {arity: 2, flags: []string{"readonly", "fast"}, keys: hashKey, run: wrongType(func(w *writer) { w.WriteInt(0) })},
		"smembers": {arity: 2, flags: []string{"readonly"}, keys: hashKey, run: wrongType(func(w *writer) { w.WriteArray(0) })},
	}
}

// named gives each spec its name, once every file's init has added its
// commands.
var named = sync.OnceFunc(func() {
	for name, sp := range commands {
		sp.name = name
		commands[name] = sp
	}
})

// lookup finds the command named b in any case, without allocating for a
// known one: every command's first step.
func lookup(b []byte) (spec, bool) {
	named()
	var buf [24]byte
	if len(b) > len(buf) {
		return spec{}, false // longer than any command's name
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	sp, ok := commands[string(buf[:len(b)])]
	return sp, ok
}

// key reads argument i as a customer email, canonicalised; a key that is
// not one is an error naming it, and the command stops.
func (k *call) key(i int) (string, bool) {
	email, err := partmap.CanonicalEmail(string(k.args[i]))
	if err != nil {
		k.w.WriteError(fmt.Sprintf("ERR key '%s' is not a customer email: %s", clip(k.args[i]), oneLine(partmap.ErrorMessage(err))))
		return "", false
	}
	return email, true
}

// find reads the profile of key i; ok is false once the reply is written.
func (k *call) find(i int) (rec *partmap.Record, ok bool) {
	email, ok := k.key(i)
	if !ok {
		return nil, false
	}
	r, err := k.store.FindProfile(k.ctx, email)
	switch {
	case partmap.ErrorCode(err) == partmap.ENOTFOUND:
		return nil, true
	case err != nil:
		k.w.WriteError(storeError(err))
		return nil, false
	}
	return &r, true
}

// cmdQuit drops what the client sent after it, answers OK and hangs up
// once the pipeline's writes before it are durable (endOfCommand): closing
// at once would send their replies first.
func cmdQuit(k *call) {
	k.conn.ReadPipeline()
	k.c.quit = true
	k.w.ok()
}

func cmdPing(k *call) {
	switch len(k.args) {
	case 1:
		k.w.WriteString("PONG")
	case 2:
		k.w.WriteBulk(k.args[1])
	default:
		k.w.WriteError("ERR wrong number of arguments for 'ping' command")
	}
}

// cmdHello switches the protocol, authenticates and names the client in
// one step, and describes the server.
func cmdHello(k *call) {
	proto := k.c.proto
	i := 1
	if len(k.args) > 1 {
		v, err := strconv.Atoi(k.arg(1))
		if err != nil {
			k.w.WriteError("ERR Protocol version is not an integer or out of range")
			return
		}
		if v != 2 && v != 3 {
			k.w.WriteError("NOPROTO unsupported protocol version")
			return
		}
		proto, i = v, 2
	}
	var name *string
	for ; i < len(k.args); i++ {
		switch opt := lower(k.args[i]); {
		case opt == "auth" && i+2 < len(k.args):
			if !k.authenticate(k.arg(i + 2)) {
				return
			}
			i += 2
		case opt == "setname" && i+1 < len(k.args):
			n := k.arg(i + 1)
			if !validName(n) {
				k.w.WriteError("ERR Client names cannot contain spaces, newlines or special characters.")
				return
			}
			name = &n
			i++
		default:
			k.w.WriteError("ERR Syntax error in HELLO option '" + clip(k.args[i]) + "'")
			return
		}
	}
	if !k.c.authed {
		k.w.WriteError("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	if name != nil {
		k.c.name = *name
	}
	k.c.proto, k.w.proto = proto, proto
	k.w.mapLen(7)
	k.w.WriteBulkString("server")
	k.w.WriteBulkString("redis")
	k.w.WriteBulkString("version")
	k.w.WriteBulkString(redisVersion)
	k.w.WriteBulkString("proto")
	k.w.WriteInt(proto)
	k.w.WriteBulkString("id")
	k.w.WriteInt64(k.c.id)
	k.w.WriteBulkString("mode")
	k.w.WriteBulkString("standalone")
	k.w.WriteBulkString("role")
	k.w.WriteBulkString("master")
	k.w.WriteBulkString("modules")
	k.w.WriteArray(0)
}

// redisVersion is the Redis whose replies partmap gives; clients read it
// to decide what they may send.
const redisVersion = "7.0.0"

func cmdAuth(k *call) {
	if len(k.args) > 3 {
		k.w.WriteError(errSyntax)
		return
	}
	if k.s.tokens == nil {
		k.w.WriteError("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
		return
	}
	if k.authenticate(k.arg(len(k.args) - 1)) {
		k.w.ok()
	}
}

// authenticate checks a partmap token (any user name goes with it): the
// client then has the token's scope.
func (k *call) authenticate(token string) bool {
	if k.s.tokens == nil {
		k.c.authed = true
		return true
	}
	name, scope, ok := k.s.tokens.Lookup(token)
	if !ok {
		k.w.WriteError("WRONGPASS invalid username-password pair or user is disabled.")
		return false
	}
	k.c.authed, k.c.user, k.c.scope = true, name, scope
	return true
}

func cmdSelect(k *call) {
	n, err := strconv.Atoi(k.arg(1))
	switch {
	case err != nil:
		k.w.WriteError(errNotInteger)
	case n != 0:
		k.w.WriteError("ERR DB index is out of range")
	default:
		k.w.ok()
	}
}

func validName(n string) bool {
	for _, r := range n {
		if r < '!' || r > '~' {
			return false
		}
	}
	return true
}

func cmdClient(k *call) {
	sub := lower(k.args[1])
	switch {
	case sub == "setname" && len(k.args) == 3:
		if !validName(k.arg(2)) {
			k.w.WriteError("ERR Client names cannot contain spaces, newlines or special characters.")
			return
		}
		k.c.name = k.arg(2)
		k.w.ok()
	case sub == "getname" && len(k.args) == 2:
		if k.c.name == "" {
			k.w.null()
			return
		}
		k.w.WriteBulkString(k.c.name)
	case sub == "setinfo" && len(k.args) == 4:
		// Redis 7.2's; go-redis sends it on every new connection.
		switch lower(k.args[2]) {
		case "lib-name", "lib-ver":
			k.w.ok()
		default:
			k.w.WriteError(fmt.Sprintf("ERR Unrecognized option '%s'", clip(k.args[2])))
		}
	case sub == "id" && len(k.args) == 2:
		k.w.WriteInt64(k.c.id)
	case sub == "info" && len(k.args) == 2:
		k.w.WriteBulkString(k.c.info() + "\n")
	case slices.Contains([]string{"setname", "getname", "id", "info", "setinfo"}, sub):
		k.w.WriteError("ERR wrong number of arguments for 'client|" + sub + "' command")
	default:
		k.w.WriteError(fmt.Sprintf("ERR unknown subcommand '%s'. Try CLIENT HELP.", clip(k.args[1])))
	}
}

func (c *client) info() string {
	return fmt.Sprintf("id=%d addr=%s name=%s db=0 resp=%d user=%s", c.id, c.addr, c.name, c.proto, cmp.Or(c.user, "default"))
}

// cmdCommand answers COMMAND COUNT, INFO and DOCS, enough for redis-cli's
// hints and for clients that ask which keys a command takes.
func cmdCommand(k *call) {
	sub := ""
	if len(k.args) > 1 {
		sub = lower(k.args[1])
	}
	names := slices.Sorted(maps.Keys(commands))
	switch sub {
	case "count":
		k.w.WriteInt(len(commands))
	case "", "info":
		want := names
		if sub == "info" && len(k.args) > 2 {
			want = nil
			for _, a := range k.args[2:] {
				want = append(want, lower(a))
			}
		}
		k.w.WriteArray(len(want))
		for _, n := range want {
			sp, ok := commands[n]
			if !ok {
				k.w.null()
				continue
			}
			k.w.WriteArray(10)
			k.w.WriteBulkString(n)
			k.w.WriteInt(int(sp.arity))
			k.w.WriteArray(len(sp.flags))
			for _, f := range sp.flags {
				k.w.WriteString(f)
			}
			k.w.WriteInt(sp.keys[0])
			k.w.WriteInt(sp.keys[1])
			k.w.WriteInt(sp.keys[2])
			k.w.WriteArray(0) // ACL categories
			k.w.WriteArray(0) // tips
			k.w.WriteArray(0) // key specifications
			k.w.WriteArray(0) // subcommands
		}
	case "docs":
		// Names not known are left out, as Redis does.
		want := names
		if len(k.args) > 2 {
			want = nil
			seen := map[string]bool{}
			for _, a := range k.args[2:] {
				if n := lower(a); docOf(n) != nil && !seen[n] {
					seen[n] = true
					want = append(want, n)
				}
			}
		}
		k.w.mapLen(len(want))
		for _, n := range want {
			k.w.WriteBulkString(n)
			k.w.writeDoc(*docOf(n))
		}
	default:
		k.w.WriteError(fmt.Sprintf("ERR unknown subcommand '%s'. Try COMMAND HELP.", clip(k.args[1])))
	}
}

func cmdInfo(k *call) {
	sections := map[string]bool{}
	for _, a := range k.args[1:] {
		sections[lower(a)] = true
	}
	all := len(sections) == 0 || sections["all"] || sections["everything"] || sections["default"]
	var b strings.Builder
	if all || sections["server"] {
		fmt.Fprintf(&b, "# Server\r\nredis_version:%s\r\nredis_mode:standalone\r\nserver_name:partmap\r\nos:partmap\r\n\r\n", redisVersion)
	}
	if all || sections["clients"] {
		fmt.Fprintf(&b, "# Clients\r\nconnected_clients:%d\r\n\r\n", k.s.Clients())
	}
	if all || sections["keyspace"] {
		b.WriteString("# Keyspace\r\n")
		if st, err := k.store.ListPartitions(k.ctx); err == nil && st.TotalProfiles > 0 {
			fmt.Fprintf(&b, "db0:keys=%d,expires=0,avg_ttl=0\r\n", st.TotalProfiles)
		}
		b.WriteString("\r\n")
	}
	k.w.WriteBulkString(b.String())
}

func cmdDBSize(k *call) {
	st, err := k.store.ListPartitions(k.ctx)
	if err != nil {
		k.w.WriteError(storeError(err))
		return
	}
	k.w.WriteInt64(st.TotalProfiles)
}

// fieldPairs reads field value pairs from argument i on.
func (k *call) fieldPairs(i int) (partmap.Patch, bool) {
	if (len(k.args)-i)%2 != 0 {
		k.w.WriteError("ERR wrong number of arguments for '" + lower(k.args[0]) + "' command")
		return nil, false
	}
	set := partmap.Patch{}
	for ; i < len(k.args); i += 2 {
		v := string(k.args[i+1])
		set[string(k.args[i])] = &v // a repeated field: the last value wins, as in Redis
	}
	return set, true
}

// cmdHSet (and HMSET) sets fields, creating a missing profile: HSET
// answers how many fields are new, HMSET OK.
func cmdHSet(k *call) {
	email, ok := k.key(1)
	if !ok {
		return
	}
	set, ok := k.fieldPairs(2)
	if !ok {
		return
	}
	res, err := k.store.Apply(k.ctx, partmap.Operation{Op: partmap.OpSetFields, Email: email, Set: set})
	if err != nil {
		k.w.WriteError(storeError(err))
		return
	}
	if bytes.EqualFold(k.args[0], []byte("hmset")) {
		k.w.ok()
		return
	}
	k.w.WriteInt(res.FieldsAdded)
}

func cmdHSetNX(k *call) {
	email, ok := k.key(1)
	if !ok {
		return
	}
	res, err := k.store.Apply(k.ctx, partmap.Operation{Op: partmap.OpSetIfAbsent, Email: email, Field: k.arg(2), Value: k.arg(3)})
	if err != nil {
		k.w.WriteError(storeError(err))
		return
	}
	k.w.WriteInt(boolInt(res.Set))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func cmdHGet(k *call) {
	email, ok := k.key(1)
	if !ok {
		return
	}
	proj, err := k.store.ProjectProfile(k.ctx, email, []string{k.arg(2)})
	switch {
	case partmap.ErrorCode(err) == partmap.ENOTFOUND:
		k.w.null()
	case err != nil:
		k.w.WriteError(storeError(err))
	default:
		k.w.bulkOrNull(proj.Values[0])
	}
}

func cmdHMGet(k *call) {
	email, ok := k.key(1)
	if !ok {
		return
	}
	fields := make([]string, len(k.args)-2)
	for i := range fields {
		fields[i] = k.arg(i + 2)
	}
	// A projection names each field once; HMGET may repeat them.
	distinct := slices.Compact(slices.Sorted(slices.Values(fields)))
	proj, err := k.store.ProjectProfile(k.ctx, email, distinct)
	if err != nil && partmap.ErrorCode(err) != partmap.ENOTFOUND {
		k.w.WriteError(storeError(err))
		return
	}
	k.w.WriteArray(len(fields))
	for _, f := range fields {
		var v *string
		if err == nil {
			i, _ := slices.BinarySearch(distinct, f)
			v = proj.Values[i]
		}
		k.w.bulkOrNull(v)
	}
}

// sortedFields are a profile's field names in byte order: the order
// partmap keeps them in, where Redis keeps a small hash's in insertion
// order.
func sortedFields(p partmap.Profile) []string {
	return slices.Sorted(maps.Keys(p))
}

func cmdHGetAll(k *call) {
	rec, ok := k.find(1)
	if !ok {
		return
	}
	if rec == nil {
		k.w.mapLen(0)
		return
	}
	names := sortedFields(rec.Profile)
	k.w.mapLen(len(names))
	for _, f := range names {
		k.w.WriteBulkString(f)
		k.w.WriteBulkString(rec.Profile[f])
	}
}

func cmdHKeys(k *call) {
	if rec, ok := k.find(1); ok {
		var names []string
		if rec != nil {
			names = sortedFields(rec.Profile)
		}
		k.w.strings(names)
	}
}

func cmdHVals(k *call) {
	if rec, ok := k.find(1); ok {
		var vals []string
		if rec != nil {
			for _, f := range sortedFields(rec.Profile) {
				vals = append(vals, rec.Profile[f])
			}
		}
		k.w.strings(vals)
	}
}

func cmdHLen(k *call) {
	if rec, ok := k.find(1); ok {
		n := 0
		if rec != nil {
			n = len(rec.Profile)
		}
		k.w.WriteInt(n)
	}
}

func cmdHExists(k *call) {
	if rec, ok := k.find(1); ok {
		has := false
		if rec != nil {
			_, has = rec.Profile[k.arg(2)]
		}
		k.w.WriteInt(boolInt(has))
	}
}

func cmdHStrLen(k *call) {
	if rec, ok := k.find(1); ok {
		n := 0
		if rec != nil {
			n = len(rec.Profile[k.arg(2)])
		}
		k.w.WriteInt(n)
	}
}

// cmdHDel deletes fields and counts those that were there. The profile's
// key field, emailAddress, is not deleted: the command fails and writes
// nothing (DEL deletes the whole profile).
func cmdHDel(k *call) {
	email, ok := k.key(1)
	if !ok {
		return
	}
	patch := partmap.Patch{}
	for _, f := range k.args[2:] {
		if string(f) == partmap.FieldEmail {
			k.w.WriteError("ERR emailAddress is the profile's key and cannot be deleted; DEL deletes the profile")
			return
		}
		patch[string(f)] = nil
	}
	res, err := k.store.PatchProfile(k.ctx, email, patch, partmap.Condition{})
	switch {
	case partmap.ErrorCode(err) == partmap.ENOTFOUND:
		k.w.WriteInt(0)
	case err != nil:
		k.w.WriteError(storeError(err))
	default:
		k.w.WriteInt(res.FieldsDeleted)
	}
}

// cmdHIncrBy adds to an integer field. A missing profile is created with
// the field, as Redis creates a missing key: the increment of the
// existing profile, and the creation of a missing one, are each atomic,
// and a creation that loses a race to another goes back to incrementing.
func cmdHIncrBy(k *call) {
	email, ok := k.key(1)
	if !ok {
		return
	}
	by, err := strconv.ParseInt(k.arg(3), 10, 64)
	if err != nil {
		k.w.WriteError(errNotInteger)
		return
	}
	field := k.arg(2)
	for {
		inc, err := k.store.IncrementField(k.ctx, email, field, by, partmap.Condition{})
		if partmap.ErrorCode(err) == partmap.ENOTFOUND {
			res, err := k.store.Apply(k.ctx, partmap.Operation{Op: partmap.OpSetIfAbsent, Email: email, Field: field, Value: strconv.FormatInt(by, 10)})
			if err != nil {
				k.w.WriteError(storeError(err))
				return
			}
			if res.Set {
				k.w.WriteInt64(by)
				return
			}
			continue // created meanwhile, with the field: add to it
		}
		if err != nil {
			k.w.WriteError(storeError(err))
			return
		}
		k.w.WriteInt64(inc.Value)
		return
	}
}

func cmdHIncrByFloat(k *call) {
	email, ok := k.key(1)
	if !ok {
		return
	}
	by, field := k.arg(3), k.arg(2)
	if err := partmap.ParseFloatIncrement(by); errors.Is(err, partmap.ErrInfiniteIncrement) {
		k.w.WriteError("ERR value is NaN or Infinity")
		return
	} else if err != nil {
		k.w.WriteError(errNotFloat)
		return
	}
	for {
		res, err := k.store.Apply(k.ctx, partmap.Operation{Op: partmap.OpIncrementFloat, Email: email, Field: field, ByFloat: by})
		if partmap.ErrorCode(err) == partmap.ENOTFOUND {
			v, err := partmap.AddFloat(field, "", false, by)
			if err != nil {
				k.w.WriteError(floatError(err))
				return
			}
			set, err := k.store.Apply(k.ctx, partmap.Operation{Op: partmap.OpSetIfAbsent, Email: email, Field: field, Value: v})
			if err != nil {
				k.w.WriteError(storeError(err))
				return
			}
			if set.Set {
				k.w.WriteBulkString(v)
				return
			}
			continue
		}
		if err != nil {
			k.w.WriteError(floatError(err))
			return
		}
		k.w.WriteBulkString(res.FloatValue)
		return
	}
}

// floatError is HINCRBYFLOAT's wording of an overflow.
func floatError(err error) string {
	if partmap.ErrorCode(err) == partmap.EOVERFLOW {
		return errIncrFltInf
	}
	return storeError(err)
}

// cmdDel deletes whole profiles, one after the other, and counts those
// that existed.
func cmdDel(k *call) {
	n := 0
	for i := 1; i < len(k.args); i++ {
		email, ok := k.key(i)
		if !ok {
			return
		}
		err := k.store.DeleteProfile(k.ctx, email, partmap.Condition{})
		switch {
		case err == nil:
			n++
		case partmap.ErrorCode(err) != partmap.ENOTFOUND:
			k.w.WriteError(storeError(err))
			return
		}
	}
	k.w.WriteInt(n)
}

// findAll reads the profiles of every key from argument 1 on, nil for a
// missing one; ok is false once the reply is written.
func (k *call) findAll() (emails []string, recs []*partmap.Record, ok bool) {
	for i := 1; i < len(k.args); i++ {
		email, ok := k.key(i)
		if !ok {
			return nil, nil, false
		}
		emails = append(emails, email)
	}
	recs, err := k.store.FindProfiles(k.ctx, emails)
	if err != nil {
		k.w.WriteError(storeError(err))
		return nil, nil, false
	}
	return emails, recs, true
}

func cmdExists(k *call) {
	_, recs, ok := k.findAll()
	if !ok {
		return
	}
	n := 0
	for _, r := range recs {
		if r != nil {
			n++
		}
	}
	k.w.WriteInt(n)
}

func cmdType(k *call) {
	if rec, ok := k.find(1); ok {
		if rec == nil {
			k.w.WriteString("none")
			return
		}
		k.w.WriteString("hash")
	}
}

// wrongType is a read of another Redis type: WRONGTYPE on a profile, and
// Redis's reply for a missing key otherwise.
func wrongType(missing func(w *writer)) func(k *call) {
	return func(k *call) {
		if rec, ok := k.find(1); ok {
			if rec != nil {
				k.w.WriteError(errWrongType)
				return
			}
			missing(k.w)
		}
	}
}
