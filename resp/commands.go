package resp

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/tidwall/redcon"

	"github.com/partmap/partmap"
)

// command is one command: what COMMAND INFO and COMMAND DOCS tell of it,
// who may run it, and how it runs.
type command struct {
	name  string
	arity arity
	flags string // COMMAND INFO's, space-separated; "write" needs a write token
	keys  [3]int // COMMAND INFO's first key, last key and step; zero: none
	open  bool   // runs before AUTH
	admin bool   // needs an admin token
	// queued: MULTI may queue it, for EXEC to run: a command of profiles
	// (but HSCAN and HRANDFIELD, which never could be), or PING, ECHO,
	// UNWATCH, TIME or CONFIG, which read no profile.
	queued bool
	// doc is COMMAND DOCS' "GROUP SINCE; ARGUMENTS; SUMMARY", the
	// arguments as parseArgDocs reads them; subs, its subcommands', as
	// "NAME SINCE; ARGUMENTS; SUMMARY".
	doc  string
	subs []string

	// A command of profiles is parse, then its operations, then reply:
	// parse, a pure function of the arguments, appends the operations to
	// ops or answers Redis's refusal; the operations run, alone or in
	// EXEC's transaction; reply writes the answer from their results.
	parse func(args [][]byte, ops []partmap.Operation) ([]partmap.Operation, error)
	reply func(w *writer, x *exchange)
	// ttl: reply needs the store's deadlines and clock (exchange.ttl).
	ttl bool
	// run is any other command's: of the connection, the server, SCAN.
	run func(k *call)

	write bool // set from flags
	about doc  // set from doc and subs
}

// The commands, each once. Redis's own COMMAND INFO and COMMAND DOCS are
// the model for those Redis has, so that clients and redis-cli's hints
// treat both alike (cmd/partmap's TestRedisCliInteractive compares them).
var table = []command{
	{name: "ping", arity: -1, flags: "fast", open: true, queued: true, run: cmdPing, doc: "connection 1.0.0; message:string/optional; Ping the server"},
	{name: "echo", arity: 2, flags: "fast", queued: true, run: cmdEcho, doc: "connection 1.0.0; message:string; Echo the given string"},
	{name: "hello", arity: -1, flags: "noscript loading stale fast no_auth", open: true, run: cmdHello,
		doc: "connection 6.0.0; arguments:block/optional{protover:integer username_password:block/tok=AUTH/optional{username:string password:string} clientname:string/tok=SETNAME/optional}; Handshake, choosing RESP2 or RESP3"},
	{name: "auth", arity: -2, flags: "noscript loading stale fast no_auth", open: true, run: cmdAuth, doc: "connection 1.0.0; username:string/optional password:string; Authenticate with a partmap token"},
	{name: "quit", arity: -1, flags: "fast no_auth", open: true, run: cmdQuit, doc: "connection 1.0.0; ; Close the connection once the replies before it are sent"},
	{name: "select", arity: 2, flags: "loading stale fast", run: cmdSelect, doc: "connection 1.0.0; index:integer; Select database 0, the only one"},
	{name: "client", arity: -2, flags: "loading stale", run: cmdClient, doc: "connection 2.4.0; ; Commands about client connections", subs: []string{
		"setname 2.6.9; connection-name:string; Name the connection", "getname 2.6.9; ; The connection's name",
		"id 5.0.0; ; The connection's id", "info 6.2.0; ; About this connection",
		"setinfo 7.2.0; attr:oneof{libname:string/tok=LIB-NAME libver:string/tok=LIB-VER}; Record the client library's name or version"}},
	{name: "command", arity: -1, flags: "loading stale", run: cmdCommand, doc: "server 2.8.13; ; Describe the commands partmap answers", subs: []string{
		"count 2.8.13; ; The number of commands", "info 2.8.13; command-name:string/optional,multiple; Describe commands",
		"docs 7.0.0; command-name:string/optional,multiple; Document commands"}},
	{name: "info", arity: -1, flags: "loading stale", run: cmdInfo, doc: "server 1.0.0; section:string/optional,multiple; Information about the server, its clients and its keys"},
	{name: "dbsize", arity: 1, flags: "readonly fast", run: cmdDBSize, doc: "server 1.0.0; ; The number of profiles"},
	{name: "flushdb", arity: -1, flags: "write", admin: true, run: cmdFlush, doc: "server 1.0.0; " + flushArg + "; Delete every profile, durably, under the whole-map lock"},
	{name: "flushall", arity: -1, flags: "write", admin: true, run: cmdFlush, doc: "server 1.0.0; " + flushArg + "; Delete every profile (as FLUSHDB: there is one database)"},
	{name: "config", arity: -2, queued: true, run: cmdConfig, doc: "server 2.0.0; ; Read the server's configuration", subs: []string{
		"get 2.0.0; parameter:block/multiple{parameter:string}; The values of configuration parameters",
		"set 2.0.0; parameter_value:block/multiple{parameter:string value:string}; Refused: partmap is configured by its flags",
		"rewrite 2.8.0; ; Refused: partmap is configured by its flags", "resetstat 2.0.0; ; Reset the statistics INFO reports: partmap's INFO has none to reset",
		"help 5.0.0; ; Show helpful text about the different subcommands"}},
	{name: "time", arity: 1, flags: "loading stale fast", queued: true, run: cmdTime, doc: "server 2.6.0; ; The server's clock"},
	{name: "memory", arity: -2, run: cmdMemory, doc: "server 4.0.0; ; Commands about memory", subs: []string{
		"usage 4.0.0; key:key count:integer/tok=SAMPLES/optional; The bytes of a profile's field names and values",
		"help 4.0.0; ; Show helpful text about the different subcommands"}},

	{name: "hset", arity: -4, flags: "write denyoom fast", keys: oneKey, queued: true, parse: parseHSet, reply: replyHSet,
		doc: "hash 2.0.0; key:key field_value:block/multiple{field:string value:string}; Set fields of a profile, creating it if missing"},
	{name: "hmset", arity: -4, flags: "write denyoom fast", keys: oneKey, queued: true, parse: parseHSet, reply: replyOK,
		doc: "hash 2.0.0; key:key field_value:block/multiple{field:string value:string}; Set fields of a profile (as HSET, answering OK)"},
	{name: "hsetnx", arity: 4, flags: "write denyoom fast", keys: oneKey, queued: true, parse: parseHSetNX, reply: replySet,
		doc: "hash 2.0.0; key:key field:string value:string; Set a field only if the profile lacks it"},
	{name: "hget", arity: 3, flags: "readonly fast", keys: oneKey, queued: true, parse: parseGet, reply: replyHGet, doc: "hash 2.0.0; key:key field:string; Get a field of a profile"},
	{name: "hmget", arity: -3, flags: "readonly fast", keys: oneKey, queued: true, parse: parseGet, reply: replyValues, doc: "hash 2.0.0; key:key field:string/multiple; Get several fields of a profile"},
	{name: "hgetall", arity: 2, flags: "readonly", keys: oneKey, queued: true, parse: parseGet, reply: replyHGetAll, doc: "hash 2.0.0; key:key; Get every field of a profile"},
	{name: "hkeys", arity: 2, flags: "readonly", keys: oneKey, queued: true, parse: parseGet, reply: replyHKeys, doc: "hash 2.0.0; key:key; Get the field names of a profile"},
	{name: "hvals", arity: 2, flags: "readonly", keys: oneKey, queued: true, parse: parseGet, reply: replyHVals, doc: "hash 2.0.0; key:key; Get the field values of a profile"},
	{name: "hlen", arity: 2, flags: "readonly fast", keys: oneKey, queued: true, parse: parseGet, reply: replyHLen, doc: "hash 2.0.0; key:key; Count the fields of a profile"},
	{name: "hexists", arity: 3, flags: "readonly fast", keys: oneKey, queued: true, parse: parseGet, reply: replyHExists, doc: "hash 2.0.0; key:key field:string; Tell whether a profile has a field"},
	{name: "hstrlen", arity: 3, flags: "readonly fast", keys: oneKey, queued: true, parse: parseGet, reply: replyHStrLen, doc: "hash 3.2.0; key:key field:string; The length of a field's value"},
	{name: "hdel", arity: -3, flags: "write fast", keys: oneKey, queued: true, parse: parseHDel, reply: replyHDel, doc: "hash 2.0.0; key:key field:string/multiple; Delete fields of a profile"},
	{name: "hincrby", arity: 4, flags: "write denyoom fast", keys: oneKey, queued: true, parse: parseHIncrBy, reply: replyHIncrBy,
		doc: "hash 2.0.0; key:key field:string increment:integer; Add an integer to a field, atomically"},
	{name: "hincrbyfloat", arity: 4, flags: "write denyoom fast", keys: oneKey, queued: true, parse: parseHIncrByFloat, reply: replyHIncrByFloat,
		doc: "hash 2.6.0; key:key field:string increment:double; Add a decimal to a field, atomically"},
	{name: "hrandfield", arity: -2, flags: "readonly", keys: oneKey, parse: parseHRandField, reply: replyHRandField,
		doc: "hash 6.2.0; key:key options:block/optional{count:integer withvalues:pure-token/tok=WITHVALUES/optional}; Get random fields of a profile"},
	{name: "hscan", arity: -3, flags: "readonly", keys: oneKey, parse: parseHScan, reply: replyHScan,
		doc: "hash 2.8.0; key:key cursor:integer pattern:pattern/tok=MATCH/optional count:integer/tok=COUNT/optional; Page through the fields of a profile"},
	{name: "hexpire", arity: -6, flags: "write denyoom fast", keys: oneKey, queued: true, parse: parseHExpire(true, true), reply: replyCodes,
		doc: "hash 7.4.0; key:key seconds:integer " + expireCondition + " " + fieldsArg + "; Set fields' time to live in seconds"},
	{name: "hpexpire", arity: -6, flags: "write denyoom fast", keys: oneKey, queued: true, parse: parseHExpire(false, true), reply: replyCodes,
		doc: "hash 7.4.0; key:key milliseconds:integer " + expireCondition + " " + fieldsArg + "; Set fields' time to live in milliseconds"},
	{name: "hexpireat", arity: -6, flags: "write denyoom fast", keys: oneKey, queued: true, parse: parseHExpire(true, false), reply: replyCodes,
		doc: "hash 7.4.0; key:key unix-time-seconds:unix-time " + expireCondition + " " + fieldsArg + "; Set fields' expiry as a Unix time in seconds"},
	{name: "hpexpireat", arity: -6, flags: "write denyoom fast", keys: oneKey, queued: true, parse: parseHExpire(false, false), reply: replyCodes,
		doc: "hash 7.4.0; key:key unix-time-milliseconds:unix-time " + expireCondition + " " + fieldsArg + "; Set fields' expiry as a Unix time in milliseconds"},
	{name: "httl", arity: -5, flags: "readonly fast", keys: oneKey, queued: true, parse: parseFields(partmap.OpGet), reply: replyHTTL(true, false), ttl: true,
		doc: "hash 7.4.0; key:key " + fieldsArg + "; Get fields' time to live in seconds"},
	{name: "hpttl", arity: -5, flags: "readonly fast", keys: oneKey, queued: true, parse: parseFields(partmap.OpGet), reply: replyHTTL(false, false), ttl: true,
		doc: "hash 7.4.0; key:key " + fieldsArg + "; Get fields' time to live in milliseconds"},
	{name: "hexpiretime", arity: -5, flags: "readonly fast", keys: oneKey, queued: true, parse: parseFields(partmap.OpGet), reply: replyHTTL(true, true), ttl: true,
		doc: "hash 7.4.0; key:key " + fieldsArg + "; Get fields' expiry as a Unix time in seconds"},
	{name: "hpexpiretime", arity: -5, flags: "readonly fast", keys: oneKey, queued: true, parse: parseFields(partmap.OpGet), reply: replyHTTL(false, true), ttl: true,
		doc: "hash 7.4.0; key:key " + fieldsArg + "; Get fields' expiry as a Unix time in milliseconds"},
	{name: "hpersist", arity: -5, flags: "write fast", keys: oneKey, queued: true, parse: parseFields(partmap.OpPersist), reply: replyCodes, doc: "hash 7.4.0; key:key " + fieldsArg + "; Remove fields' expiry"},
	{name: "hgetdel", arity: -5, flags: "write fast", keys: oneKey, queued: true, parse: parseFields(partmap.OpGetDelete), reply: replyValues, doc: "hash 8.0.0; key:key " + fieldsArg + "; Get fields and delete them"},
	{name: "hgetex", arity: -5, flags: "write fast", keys: oneKey, queued: true, parse: parseHGetEx, reply: replyValues,
		doc: "hash 8.0.0; key:key expiration:oneof/optional{seconds:integer/tok=EX milliseconds:integer/tok=PX unix-time-seconds:unix-time/tok=EXAT unix-time-milliseconds:unix-time/tok=PXAT persist:pure-token/tok=PERSIST} " + fieldsArg + "; Get fields and set or remove their expiry"},
	{name: "hsetex", arity: -6, flags: "write denyoom fast", keys: oneKey, queued: true, parse: parseHSetEx, reply: replySet,
		doc: "hash 8.0.0; key:key condition:oneof/optional{fnx:pure-token/tok=FNX fxx:pure-token/tok=FXX} expiration:oneof/optional{seconds:integer/tok=EX milliseconds:integer/tok=PX unix-time-seconds:unix-time/tok=EXAT unix-time-milliseconds:unix-time/tok=PXAT keepttl:pure-token/tok=KEEPTTL} fields:block/tok=FIELDS{numfields:integer data:block/multiple{field:string value:string}}; Set fields with an expiry, on conditions"},

	{name: "del", arity: -2, flags: "write", keys: allKeys, queued: true, parse: parseDel, reply: replyDel, doc: "generic 1.0.0; key:key/multiple; Delete profiles"},
	{name: "unlink", arity: -2, flags: "write fast", keys: allKeys, queued: true, parse: parseDel, reply: replyDel, doc: "generic 4.0.0; key:key/multiple; Delete profiles (as DEL)"},
	{name: "rename", arity: 3, flags: "write", keys: twoKeys, queued: true, parse: parseRename(true), reply: replyRename(false),
		doc: "generic 1.0.0; key:key newkey:key; Move a profile to another email, replacing any profile there"},
	{name: "renamenx", arity: 3, flags: "write fast", keys: twoKeys, queued: true, parse: parseRename(false), reply: replyRename(true),
		doc: "generic 1.0.0; key:key newkey:key; Move a profile to another email that has none"},
	{name: "copy", arity: -3, flags: "write denyoom", keys: twoKeys, queued: true, parse: parseCopy, reply: replyCopy,
		doc: "generic 6.2.0; source:key destination:key destination-db:integer/tok=DB/optional replace:pure-token/tok=REPLACE/optional; Copy a profile, deadlines included, to another email"},
	{name: "exists", arity: -2, flags: "readonly fast", keys: allKeys, queued: true, parse: parseExists, reply: replyExists, doc: "generic 1.0.0; key:key/multiple; Count the keys given that are profiles"},
	{name: "type", arity: 2, flags: "readonly fast", keys: oneKey, queued: true, parse: parseGet, reply: replyType, doc: "generic 1.0.0; key:key; The type of a key: hash for a profile"},
	{name: "expire", arity: -3, flags: "write fast", keys: oneKey, queued: true, parse: parseExpire(true, true), reply: replyExpire,
		doc: "generic 1.0.0; key:key seconds:integer " + expireCondition + "; Set a profile's time to live in seconds"},
	{name: "pexpire", arity: -3, flags: "write fast", keys: oneKey, queued: true, parse: parseExpire(false, true), reply: replyExpire,
		doc: "generic 2.6.0; key:key milliseconds:integer " + expireCondition + "; Set a profile's time to live in milliseconds"},
	{name: "expireat", arity: -3, flags: "write fast", keys: oneKey, queued: true, parse: parseExpire(true, false), reply: replyExpire,
		doc: "generic 1.2.0; key:key unix-time-seconds:unix-time " + expireCondition + "; Set a profile's expiry as a Unix time in seconds"},
	{name: "pexpireat", arity: -3, flags: "write fast", keys: oneKey, queued: true, parse: parseExpire(false, false), reply: replyExpire,
		doc: "generic 2.6.0; key:key unix-time-milliseconds:unix-time " + expireCondition + "; Set a profile's expiry as a Unix time in milliseconds"},
	{name: "ttl", arity: 2, flags: "readonly fast", keys: oneKey, queued: true, parse: parseGet, reply: replyTTL(true, false), ttl: true, doc: "generic 1.0.0; key:key; Get a profile's time to live in seconds"},
	{name: "pttl", arity: 2, flags: "readonly fast", keys: oneKey, queued: true, parse: parseGet, reply: replyTTL(false, false), ttl: true, doc: "generic 2.6.0; key:key; Get a profile's time to live in milliseconds"},
	{name: "expiretime", arity: 2, flags: "readonly fast", keys: oneKey, queued: true, parse: parseGet, reply: replyTTL(true, true), ttl: true, doc: "generic 7.0.0; key:key; Get a profile's expiry as a Unix time in seconds"},
	{name: "pexpiretime", arity: 2, flags: "readonly fast", keys: oneKey, queued: true, parse: parseGet, reply: replyTTL(false, true), ttl: true, doc: "generic 7.0.0; key:key; Get a profile's expiry as a Unix time in milliseconds"},
	{name: "persist", arity: 2, flags: "write fast", keys: oneKey, queued: true, parse: parseFields(partmap.OpPersist), reply: replyPersist, doc: "generic 2.2.0; key:key; Remove a profile's expiry"},
	{name: "scan", arity: -2, flags: "readonly", run: cmdScan,
		doc: "generic 2.8.0; cursor:integer pattern:pattern/tok=MATCH/optional count:integer/tok=COUNT/optional type:string/tok=TYPE/optional; Page through the profiles"},

	// Commands of other types answer as Redis does on a hash: a missing
	// key is empty, a profile the wrong type.
	{name: "get", arity: 2, flags: "readonly fast", keys: oneKey, queued: true, parse: parseGet, reply: wrongType((*writer).null), doc: "string 1.0.0; key:key; A string's value: a profile is the wrong type"},
	{name: "strlen", arity: 2, flags: "readonly fast", keys: oneKey, queued: true, parse: parseGet, reply: wrongType(zero), doc: "string 2.2.0; key:key; A string's length: a profile is the wrong type"},
	{name: "llen", arity: 2, flags: "readonly fast", keys: oneKey, queued: true, parse: parseGet, reply: wrongType(zero), doc: "list 1.0.0; key:key; A list's length: a profile is the wrong type"},
	{name: "scard", arity: 2, flags: "readonly fast", keys: oneKey, queued: true, parse: parseGet, reply: wrongType(zero), doc: "set 1.0.0; key:key; A set's size: a profile is the wrong type"},
	{name: "smembers", arity: 2, flags: "readonly", keys: oneKey, queued: true, parse: parseGet, reply: wrongType(empty), doc: "set 1.0.0; key:key; A set's members: a profile is the wrong type"},
	{name: "zcard", arity: 2, flags: "readonly fast", keys: oneKey, queued: true, parse: parseGet, reply: wrongType(zero), doc: "sorted-set 1.2.0; key:key; A sorted set's size: a profile is the wrong type"},

	{name: "multi", arity: 1, flags: "noscript loading stale fast allow_busy", run: cmdMulti, doc: "transactions 1.2.0; ; Start a transaction"},
	{name: "exec", arity: 1, flags: "noscript loading stale skip_slowlog", run: cmdExec, doc: "transactions 1.2.0; ; Commit the commands queued since MULTI, atomically"},
	{name: "discard", arity: 1, flags: "noscript loading stale fast allow_busy", run: cmdDiscard, doc: "transactions 2.0.0; ; Drop the commands queued since MULTI"},
	{name: "watch", arity: -2, flags: "noscript loading stale fast allow_busy", keys: allKeys, run: cmdWatch, doc: "transactions 2.2.0; key:key/multiple; Make EXEC fail if these profiles change first"},
	{name: "unwatch", arity: 1, flags: "noscript loading stale fast allow_busy", queued: true, run: cmdUnwatch, doc: "transactions 2.2.0; ; Forget the watched keys"},

	// The Redis Query Engine's, as the RediSearch module names them (ft.go):
	// changing the set of indexes takes an admin token, as over HTTP.
	{name: "ft.create", arity: -5, flags: "write denyoom", admin: true, run: cmdFTCreate,
		doc: "module 1.0.0; index:string data_type:oneof/tok=ON/optional{hash:pure-token/tok=HASH} prefix:block/tok=PREFIX/optional{count:integer prefix:string/multiple} stopwords:block/tok=STOPWORDS/optional{count:integer stopword:string/optional,multiple} schema:pure-token/tok=SCHEMA field:block/multiple{field_name:string type:oneof{text:pure-token/tok=TEXT tag:pure-token/tok=TAG numeric:pure-token/tok=NUMERIC} nostem:pure-token/tok=NOSTEM/optional separator:string/tok=SEPARATOR/optional casesensitive:pure-token/tok=CASESENSITIVE/optional sortable:pure-token/tok=SORTABLE/optional}; Create a search index of every profile"},
	{name: "ft.search", arity: -3, flags: "readonly", run: cmdFTSearch,
		doc: "module 1.0.0; index:string query:string nocontent:pure-token/tok=NOCONTENT/optional return:block/tok=RETURN/optional{count:integer identifier:string/multiple} sortby:block/tok=SORTBY/optional{sortby:string order:oneof/optional{asc:pure-token/tok=ASC desc:pure-token/tok=DESC}} limit:block/tok=LIMIT/optional{offset:integer num:integer} dialect:integer/tok=DIALECT/optional; Search an index with a query"},
	{name: "ft.info", arity: 2, flags: "readonly", run: cmdFTInfo, doc: "module 1.0.0; index:string; Describe a search index"},
	{name: "ft._list", arity: -1, flags: "readonly", run: cmdFTList, doc: "module 2.0.0; ; The names of the search indexes"},
	{name: "ft.dropindex", arity: -2, flags: "write", admin: true, run: cmdFTDropIndex,
		doc: "module 2.0.0; index:string; Drop a search index; its profiles stay"},

	{name: "partmap.search", arity: -4, flags: "readonly", run: cmdSearch,
		doc: "partmap 1.0.0; cursor:integer condition:block/multiple{field:string value:string} count:integer/tok=COUNT/optional; Page through the profiles whose indexed fields hold the values"},
}

const (
	flushArg        = "async:oneof/optional{async:pure-token/tok=ASYNC sync:pure-token/tok=SYNC}"
	expireCondition = "condition:oneof/optional{nx:pure-token/tok=NX xx:pure-token/tok=XX gt:pure-token/tok=GT lt:pure-token/tok=LT}"
	fieldsArg       = "fields:block/tok=FIELDS{numfields:integer field:string/multiple}"
)

// oneKey, twoKeys and allKeys are COMMAND INFO's key positions: the
// first argument, the first two, or every one.
var oneKey, twoKeys, allKeys = [3]int{1, 1, 1}, [3]int{1, 2, 1}, [3]int{1, -1, 1}

// commands is the table by name.
var commands = map[string]*command{}

func init() {
	for i := range table {
		c := &table[i]
		c.write = slices.Contains(strings.Fields(c.flags), "write")
		c.about = parseDoc(c.doc)
		for _, s := range c.subs {
			name, rest, _ := strings.Cut(s, " ")
			if c.about.subcommands == nil {
				c.about.subcommands = map[string]doc{}
			}
			c.about.subcommands[c.name+"|"+name] = parseDoc(c.about.group + " " + rest)
		}
		commands[c.name] = c
	}
}

// displayName is the name Redis's errors give the command: a module's
// (the FT commands') as the module declared it, in capitals.
func (c *command) displayName() string {
	if c.about.group == "module" {
		return strings.ToUpper(c.name)
	}
	return c.name
}

// arity is Redis's: n means exactly n arguments with the command's name,
// -n at least n.
type arity int

func (a arity) ok(n int) bool {
	if a < 0 {
		return n >= int(-a)
	}
	return n == int(a)
}

// lookup finds the command named b in any case, without allocating for a
// known one: every command's first step.
func lookup(b []byte) (*command, bool) {
	var buf [24]byte
	if len(b) > len(buf) {
		return nil, false // longer than any command's name
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	c, ok := commands[string(buf[:len(b)])]
	return c, ok
}

// call is one command being run.
type call struct {
	s     *Server
	c     *client
	w     *writer
	conn  redcon.Conn
	ctx   context.Context
	store partmap.Store
	args  [][]byte

	// noWait (the event loop's): a lone command of profiles fails at once
	// on a locked partition instead of waiting for it, and, when
	// deferConflict, writes no reply but sets blocked, for the loop to run
	// it again later. Such a conflict wrote nothing.
	noWait, deferConflict, blocked bool
}

func (k *call) arg(i int) string { return string(k.args[i]) }

// exchange is one run of a command of profiles: its arguments, the
// operations parse made of them, and their results, one each, whose Err
// is the operation's failure.
type exchange struct {
	args [][]byte
	ops  []partmap.Operation
	res  []partmap.OperationResult
	ttl  partmap.TTLs   // a ttl command's: the deadlines read, and the store's clock
	rec  partmap.Record // a lone read's, which res points to
}

// execute runs a command of profiles outside a transaction.
func (k *call) execute(cmd *command) {
	x := &k.c.x // the client's own, reused
	x.args = k.args
	var err error
	if x.ops, err = cmd.parse(k.args, x.ops[:0]); err != nil {
		k.w.fail(err)
		return
	}
	if k.noWait && len(x.ops) <= partmap.MaxTransactionOps { // one store call: a conflict wrote nothing
		k.store, k.ctx = k.s.raw, partmap.NoLockWait(k.ctx)
		k.runAlone(cmd, x)
		if k.blocked = k.deferConflict && conflicted(x.res); k.blocked {
			return
		}
	} else {
		k.runAlone(cmd, x)
	}
	cmd.reply(k.w, x)
}

// conflicted reports whether a result failed on a locked partition.
func conflicted(res []partmap.OperationResult) bool {
	for _, r := range res {
		if partmap.ErrorCode(r.Err) == partmap.ELOCKCONFLICT {
			return true
		}
	}
	return false
}

// runAlone runs x's operations, outside a transaction: reads as plain
// reads (a ttl command's with Store.Deadlines, for the store's clock), one
// write with Apply, more with one Transact. The store is asked of the
// profile's hash alone (sent).
func (k *call) runAlone(cmd *command, x *exchange) {
	x.res = x.res[:0]
	op := sent(x.ops[0])
	switch {
	case cmd.ttl:
		var err error
		x.ttl, err = k.store.Deadlines(k.ctx, op.Email, op.Fields)
		x.res = append(x.res, partmap.OperationResult{Op: op.Op, Email: op.Email, Err: err})
	case op.Op == partmap.OpGet && len(x.ops) == 1:
		var err error
		x.rec, err = k.store.FindProfile(k.ctx, op.Email)
		x.res = append(x.res, read(op, &x.rec, err))
	case op.Op == partmap.OpGet:
		emails := make([]string, len(x.ops))
		for i, op := range x.ops {
			emails[i] = op.Email
		}
		recs, err := k.store.FindProfiles(k.ctx, emails)
		for i, op := range x.ops {
			var rec *partmap.Record
			if err == nil {
				rec = recs[i]
			}
			x.res = append(x.res, read(op, rec, err))
		}
	case len(x.ops) == 1:
		res, err := k.store.Apply(k.ctx, op)
		res.Err = err
		x.res = append(x.res, res)
	default:
		// DEL of several keys: one transaction of up to
		// partmap.MaxTransactionOps of them at a time, each atomic.
		for ops := range slices.Chunk(x.ops, partmap.MaxTransactionOps) {
			results, err := k.store.Transact(k.ctx, ops)
			if err != nil {
				results = make([]partmap.OperationResult, len(x.ops)-len(x.res))
				for i := range results {
					results[i].Err = err
				}
				x.res = append(x.res, results...)
				return
			}
			x.res = append(x.res, results...)
		}
	}
}

// read is what a get of op answers, from a plain read of its profile (nil:
// none).
func read(op partmap.Operation, rec *partmap.Record, err error) partmap.OperationResult {
	if err != nil {
		rec = nil
	}
	if partmap.ErrorCode(err) == partmap.ENOTFOUND {
		err = nil
	}
	res := partmap.OperationResult{Op: op.Op, Email: op.Email, Record: rec, Err: err}
	if len(op.Fields) > 0 {
		res.Values = make([]*string, len(op.Fields))
		for i, f := range op.Fields {
			if v, ok := profileOf(res)[f]; ok {
				res.Values[i] = &v
			}
		}
	}
	return res
}

// profileOf is the profile a result holds, nil for none.
func profileOf(res partmap.OperationResult) partmap.Profile {
	if res.Record == nil {
		return nil
	}
	return res.Record.Profile
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

func cmdEcho(k *call) { k.w.WriteBulk(k.args[1]) }

// cmdHello switches the protocol, authenticates and names the client in
// one step, and describes the server.
func cmdHello(k *call) {
	proto := k.c.proto
	i := 1
	if len(k.args) > 1 {
		r := argReader{args: k.args}
		v := r.intIn(1, math.MinInt64, math.MaxInt64, "Protocol version is not an integer or out of range")
		switch {
		case r.err != nil:
			k.w.fail(r.err)
			return
		case v != 2 && v != 3:
			k.w.WriteError("NOPROTO unsupported protocol version")
			return
		}
		proto, i = int(v), 2
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
	r := argReader{args: k.args}
	n := r.intIn(1, math.MinInt32, math.MaxInt32, "") // Redis's getIntFromObjectOrReply
	switch {
	case r.err != nil:
		k.w.fail(r.err)
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
			cmd, ok := commands[n]
			if !ok {
				k.w.null()
				continue
			}
			flags := strings.Fields(cmd.flags)
			k.w.WriteArray(10)
			k.w.WriteBulkString(n)
			k.w.WriteInt(int(cmd.arity))
			k.w.WriteArray(len(flags))
			for _, f := range flags {
				k.w.WriteString(f)
			}
			k.w.WriteInt(cmd.keys[0])
			k.w.WriteInt(cmd.keys[1])
			k.w.WriteInt(cmd.keys[2])
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
	var out []string // Redis separates sections by a blank line, and ends with none
	if all || sections["server"] {
		out = append(out, fmt.Sprintf("# Server\r\nredis_version:%s\r\nredis_mode:standalone\r\nserver_name:partmap\r\nos:partmap\r\n", redisVersion))
	}
	if all || sections["clients"] {
		out = append(out, fmt.Sprintf("# Clients\r\nconnected_clients:%d\r\n", k.s.Clients()))
	}
	if all || sections["keyspace"] {
		line, err := keyspaceLine(k)
		if err != nil {
			k.w.WriteError(storeError(err))
			return
		}
		out = append(out, "# Keyspace\r\n"+line)
	}
	k.w.WriteBulkString(strings.Join(out, "\r\n"))
}

// keyspaceLine is INFO keyspace's line of db0, as Redis 7.4 writes it,
// or none for an empty or unstarted directory. expires= counts the
// profiles that end at a deadline, a profile's own or its last field's
// (partmap.DeadlineCounts); avg_ttl, an estimate in Redis, is 0.
func keyspaceLine(k *call) (string, error) {
	st, err := k.store.ListPartitions(k.ctx)
	if partmap.ErrorCode(err) == partmap.ENOTSTARTED || err == nil && st.TotalProfiles == 0 {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var dc partmap.DeadlineCounts
	if k.s.deadlines != nil {
		if dc, err = k.s.deadlines.CountDeadlines(k.ctx); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("db0:keys=%d,expires=%d,avg_ttl=0,subexpiry=%d\r\n", st.TotalProfiles, dc.Ending, dc.FieldExpiry), nil
}

func cmdDBSize(k *call) {
	st, err := k.store.ListPartitions(k.ctx)
	if err != nil {
		k.w.WriteError(storeError(err))
		return
	}
	k.w.WriteInt64(st.TotalProfiles)
}
