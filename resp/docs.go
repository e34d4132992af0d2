package resp

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// doc is what COMMAND DOCS tells of a command. redis-cli draws its hints
// (the arguments still to type, in grey) from the arguments, so an empty
// answer would leave it without any.
type doc struct {
	summary, since, group string
	args                  []argDoc
	subcommands           map[string]doc // "client|setname" and so on
}

// argDoc is one argument as COMMAND DOCS describes it.
type argDoc struct {
	name, typ, token string
	flags            []string // optional, multiple
	args             []argDoc // of a block or a oneof
}

// docs holds every command's doc. Arguments are written compactly as
// name:type, then /tok=TOKEN and /flag,flag where they apply, then
// {children} for a block or a oneof. Redis's own docs are the model for
// the commands Redis has, so that redis-cli hints alike for both
// (cmd/partmap's TestRedisCliInteractive compares them).
var docs = map[string]doc{}

func init() {
	const (
		condition = "condition:oneof/optional{nx:pure-token/tok=NX xx:pure-token/tok=XX gt:pure-token/tok=GT lt:pure-token/tok=LT}"
		fields    = "fields:block/tok=FIELDS{numfields:integer field:string/multiple}"
	)
	for _, d := range []struct{ name, group, since, args, summary string }{
		{"ping", "connection", "1.0.0", "message:string/optional", "Ping the server"},
		{"echo", "connection", "1.0.0", "message:string", "Echo the given string"},
		{"hello", "connection", "6.0.0", "arguments:block/optional{protover:integer username_password:block/tok=AUTH/optional{username:string password:string} clientname:string/tok=SETNAME/optional}", "Handshake, choosing RESP2 or RESP3"},
		{"auth", "connection", "1.0.0", "username:string/optional password:string", "Authenticate with a partmap token"},
		{"quit", "connection", "1.0.0", "", "Close the connection once the replies before it are sent"},
		{"select", "connection", "1.0.0", "index:integer", "Select database 0, the only one"},
		{"client", "connection", "2.4.0", "", "Commands about client connections"},
		{"command", "server", "2.8.13", "", "Describe the commands partmap answers"},
		{"info", "server", "1.0.0", "section:string/optional,multiple", "Information about the server, its clients and its keys"},
		{"dbsize", "server", "1.0.0", "", "The number of profiles"},

		{"hset", "hash", "2.0.0", "key:key field_value:block/multiple{field:string value:string}", "Set fields of a profile, creating it if missing"},
		{"hmset", "hash", "2.0.0", "key:key field_value:block/multiple{field:string value:string}", "Set fields of a profile (as HSET, answering OK)"},
		{"hsetnx", "hash", "2.0.0", "key:key field:string value:string", "Set a field only if the profile lacks it"},
		{"hget", "hash", "2.0.0", "key:key field:string", "Get a field of a profile"},
		{"hmget", "hash", "2.0.0", "key:key field:string/multiple", "Get several fields of a profile"},
		{"hgetall", "hash", "2.0.0", "key:key", "Get every field of a profile"},
		{"hkeys", "hash", "2.0.0", "key:key", "Get the field names of a profile"},
		{"hvals", "hash", "2.0.0", "key:key", "Get the field values of a profile"},
		{"hlen", "hash", "2.0.0", "key:key", "Count the fields of a profile"},
		{"hexists", "hash", "2.0.0", "key:key field:string", "Tell whether a profile has a field"},
		{"hstrlen", "hash", "3.2.0", "key:key field:string", "The length of a field's value"},
		{"hdel", "hash", "2.0.0", "key:key field:string/multiple", "Delete fields of a profile"},
		{"hincrby", "hash", "2.0.0", "key:key field:string increment:integer", "Add an integer to a field, atomically"},
		{"hincrbyfloat", "hash", "2.6.0", "key:key field:string increment:double", "Add a decimal to a field, atomically"},
		{"hrandfield", "hash", "6.2.0", "key:key options:block/optional{count:integer withvalues:pure-token/tok=WITHVALUES/optional}", "Get random fields of a profile"},
		{"hscan", "hash", "2.8.0", "key:key cursor:integer pattern:pattern/tok=MATCH/optional count:integer/tok=COUNT/optional", "Page through the fields of a profile"},
		{"hexpire", "hash", "7.4.0", "key:key seconds:integer " + condition + " " + fields, "Set fields' time to live in seconds"},
		{"hpexpire", "hash", "7.4.0", "key:key milliseconds:integer " + condition + " " + fields, "Set fields' time to live in milliseconds"},
		{"hexpireat", "hash", "7.4.0", "key:key unix-time-seconds:unix-time " + condition + " " + fields, "Set fields' expiry as a Unix time in seconds"},
		{"hpexpireat", "hash", "7.4.0", "key:key unix-time-milliseconds:unix-time " + condition + " " + fields, "Set fields' expiry as a Unix time in milliseconds"},
		{"httl", "hash", "7.4.0", "key:key " + fields, "Get fields' time to live in seconds"},
		{"hpttl", "hash", "7.4.0", "key:key " + fields, "Get fields' time to live in milliseconds"},
		{"hexpiretime", "hash", "7.4.0", "key:key " + fields, "Get fields' expiry as a Unix time in seconds"},
		{"hpexpiretime", "hash", "7.4.0", "key:key " + fields, "Get fields' expiry as a Unix time in milliseconds"},
		{"hpersist", "hash", "7.4.0", "key:key " + fields, "Remove fields' expiry"},
		{"hgetdel", "hash", "8.0.0", "key:key " + fields, "Get fields and delete them"},
		{"hgetex", "hash", "8.0.0", "key:key expiration:oneof/optional{seconds:integer/tok=EX milliseconds:integer/tok=PX unix-time-seconds:unix-time/tok=EXAT unix-time-milliseconds:unix-time/tok=PXAT persist:pure-token/tok=PERSIST} " + fields, "Get fields and set or remove their expiry"},
		{"hsetex", "hash", "8.0.0", "key:key condition:oneof/optional{fnx:pure-token/tok=FNX fxx:pure-token/tok=FXX} expiration:oneof/optional{seconds:integer/tok=EX milliseconds:integer/tok=PX unix-time-seconds:unix-time/tok=EXAT unix-time-milliseconds:unix-time/tok=PXAT keepttl:pure-token/tok=KEEPTTL} fields:block/tok=FIELDS{numfields:integer data:block/multiple{field:string value:string}}", "Set fields with an expiry, on conditions"},

		{"del", "generic", "1.0.0", "key:key/multiple", "Delete profiles"},
		{"unlink", "generic", "4.0.0", "key:key/multiple", "Delete profiles (as DEL)"},
		{"exists", "generic", "1.0.0", "key:key/multiple", "Count the keys given that are profiles"},
		{"type", "generic", "1.0.0", "key:key", "The type of a key: hash for a profile"},
		{"expire", "generic", "1.0.0", "key:key seconds:integer " + condition, "Set a profile's time to live in seconds"},
		{"pexpire", "generic", "2.6.0", "key:key milliseconds:integer " + condition, "Set a profile's time to live in milliseconds"},
		{"expireat", "generic", "1.2.0", "key:key unix-time-seconds:unix-time " + condition, "Set a profile's expiry as a Unix time in seconds"},
		{"pexpireat", "generic", "2.6.0", "key:key unix-time-milliseconds:unix-time " + condition, "Set a profile's expiry as a Unix time in milliseconds"},
		{"ttl", "generic", "1.0.0", "key:key", "Get a profile's time to live in seconds"},
		{"pttl", "generic", "2.6.0", "key:key", "Get a profile's time to live in milliseconds"},
		{"expiretime", "generic", "7.0.0", "key:key", "Get a profile's expiry as a Unix time in seconds"},
		{"pexpiretime", "generic", "7.0.0", "key:key", "Get a profile's expiry as a Unix time in milliseconds"},
		{"persist", "generic", "2.2.0", "key:key", "Remove a profile's expiry"},
		{"scan", "generic", "2.8.0", "cursor:integer pattern:pattern/tok=MATCH/optional count:integer/tok=COUNT/optional type:string/tok=TYPE/optional", "Page through the profiles"},

		{"get", "string", "1.0.0", "key:key", "A string's value: a profile is the wrong type"},
		{"strlen", "string", "2.2.0", "key:key", "A string's length: a profile is the wrong type"},
		{"llen", "list", "1.0.0", "key:key", "A list's length: a profile is the wrong type"},
		{"scard", "set", "1.0.0", "key:key", "A set's size: a profile is the wrong type"},
		{"smembers", "set", "1.0.0", "key:key", "A set's members: a profile is the wrong type"},
		{"zcard", "sorted-set", "1.2.0", "key:key", "A sorted set's size: a profile is the wrong type"},

		{"multi", "transactions", "1.2.0", "", "Start a transaction"},
		{"exec", "transactions", "1.2.0", "", "Commit the commands queued since MULTI, atomically"},
		{"discard", "transactions", "2.0.0", "", "Drop the commands queued since MULTI"},
		{"watch", "transactions", "2.2.0", "key:key/multiple", "Make EXEC fail if these profiles change first"},
		{"unwatch", "transactions", "2.2.0", "", "Forget the watched keys"},

		{"partmap.search", "partmap", "1.0.0", "cursor:integer condition:block/multiple{field:string value:string} count:integer/tok=COUNT/optional", "Page through the profiles whose indexed fields hold the values"},
	} {
		docs[d.name] = doc{summary: d.summary, since: d.since, group: d.group, args: parseArgDocs(d.args)}
	}
	sub := func(parent, name, since, args, summary string) {
		p := docs[parent]
		if p.subcommands == nil {
			p.subcommands = map[string]doc{}
		}
		p.subcommands[parent+"|"+name] = doc{summary: summary, since: since, group: p.group, args: parseArgDocs(args)}
		docs[parent] = p
	}
	sub("client", "setname", "2.6.9", "connection-name:string", "Name the connection")
	sub("client", "getname", "2.6.9", "", "The connection's name")
	sub("client", "id", "5.0.0", "", "The connection's id")
	sub("client", "info", "6.2.0", "", "About this connection")
	sub("client", "setinfo", "7.2.0", "attr:oneof{libname:string/tok=LIB-NAME libver:string/tok=LIB-VER}", "Record the client library's name or version")
	sub("command", "count", "2.8.13", "", "The number of commands")
	sub("command", "info", "2.8.13", "command-name:string/optional,multiple", "Describe commands")
	sub("command", "docs", "7.0.0", "command-name:string/optional,multiple", "Document commands")
}

// parseArgDocs reads the compact form of docs' arguments. It panics on a
// malformed one: the table is the program's own.
func parseArgDocs(s string) []argDoc {
	var out []argDoc
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		end := strings.IndexAny(s, " {")
		if end < 0 {
			end = len(s)
		}
		head := s[:end]
		s = s[end:]
		name, rest, ok := strings.Cut(head, ":")
		if !ok {
			panic(fmt.Sprintf("resp: argument %q has no type", head))
		}
		parts := strings.Split(rest, "/")
		a := argDoc{name: name, typ: parts[0]}
		for _, p := range parts[1:] {
			if tok, ok := strings.CutPrefix(p, "tok="); ok {
				a.token = tok
			} else {
				a.flags = strings.Split(p, ",")
			}
		}
		if strings.HasPrefix(s, "{") {
			depth, i := 0, 0
			for ; i < len(s); i++ {
				switch s[i] {
				case '{':
					depth++
				case '}':
					depth--
				}
				if depth == 0 {
					break
				}
			}
			if depth != 0 {
				panic(fmt.Sprintf("resp: unbalanced arguments of %q", name))
			}
			a.args = parseArgDocs(s[1:i])
			s = s[i+1:]
		}
		out = append(out, a)
	}
	return out
}

// writeDoc writes d as COMMAND DOCS does: a map of its properties.
func (w *writer) writeDoc(d doc) {
	n := 3
	if len(d.args) > 0 {
		n++
	}
	if len(d.subcommands) > 0 {
		n++
	}
	w.mapLen(n)
	w.WriteBulkString("summary")
	w.WriteBulkString(d.summary)
	w.WriteBulkString("since")
	w.WriteBulkString(d.since)
	w.WriteBulkString("group")
	w.WriteBulkString(d.group)
	if len(d.args) > 0 {
		w.WriteBulkString("arguments")
		w.writeArgDocs(d.args)
	}
	if len(d.subcommands) > 0 {
		w.WriteBulkString("subcommands")
		w.mapLen(len(d.subcommands))
		for _, name := range slices.Sorted(maps.Keys(d.subcommands)) {
			w.WriteBulkString(name)
			w.writeDoc(d.subcommands[name])
		}
	}
}

func (w *writer) writeArgDocs(args []argDoc) {
	w.WriteArray(len(args))
	for _, a := range args {
		n := 2
		for _, has := range []bool{a.token != "", len(a.flags) > 0, len(a.args) > 0} {
			if has {
				n++
			}
		}
		w.mapLen(n)
		w.WriteBulkString("name")
		w.WriteBulkString(a.name)
		w.WriteBulkString("type")
		w.WriteBulkString(a.typ)
		if a.token != "" {
			w.WriteBulkString("token")
			w.WriteBulkString(a.token)
		}
		if len(a.flags) > 0 {
			w.WriteBulkString("flags")
			w.WriteArray(len(a.flags))
			for _, f := range a.flags {
				w.WriteString(f)
			}
		}
		if len(a.args) > 0 {
			w.WriteBulkString("arguments")
			w.writeArgDocs(a.args)
		}
	}
}

// docOf returns the docs of a command, or of a subcommand named as Redis
// names it ("client|setname"), nil for one partmap does not have.
func docOf(name string) *doc {
	parent, sub, ok := strings.Cut(name, "|")
	if commands[parent].run == nil {
		return nil
	}
	d, found := docs[parent]
	if ok {
		d, found = docs[parent].subcommands[parent+"|"+sub]
	}
	if !found {
		return nil
	}
	return &d
}
