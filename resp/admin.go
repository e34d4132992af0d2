package resp

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/partmap/partmap"
)

// FLUSHDB and FLUSHALL, CONFIG, TIME and MEMORY USAGE: the server commands
// that Redis tools and client libraries send.

// cmdFlush deletes every profile (partmap.Emptier), durably, before it
// answers OK. ASYNC is accepted and runs as SYNC does: the reply comes
// once the directory is empty.
func cmdFlush(k *call) {
	if len(k.args) > 2 || (len(k.args) == 2 && !slices.Contains([]string{"async", "sync"}, lower(k.args[1]))) {
		k.w.WriteError(errSyntax)
		return
	}
	if k.s.emptier == nil {
		k.w.WriteError("ERR this store cannot delete every profile at once")
		return
	}
	if _, err := k.s.emptier.DeleteAllProfiles(k.ctx); err != nil {
		k.w.WriteError(storeError(err))
		return
	}
	k.w.ok()
}

// configs are the parameters CONFIG GET answers, as they hold for
// partmap: no snapshots, every write durable before its reply (an
// append-only file fsync'd always), one database, no memory limit and so
// no eviction, idle clients kept, no keyspace notifications.
var configs = map[string]string{
	"save":                   "",
	"appendonly":             "yes",
	"appendfsync":            "always",
	"databases":              "1",
	"maxmemory":              "0",
	"maxmemory-policy":       "noeviction",
	"timeout":                "0",
	"notify-keyspace-events": "",
}

// configArity is each CONFIG subcommand's, as Redis's.
var configArity = map[string]arity{"get": -3, "set": -4, "rewrite": 2, "resetstat": 2, "help": 2}

// cmdConfig answers CONFIG GET from configs, and refuses to change
// anything: partmap is configured by its flags.
func cmdConfig(k *call) {
	sub := lower(k.args[1])
	switch a, ok := configArity[sub]; {
	case !ok:
		k.w.WriteError("ERR unknown subcommand '" + clip(k.args[1]) + "'. Try CONFIG HELP.")
	case !a.ok(len(k.args)):
		k.w.WriteError("ERR wrong number of arguments for 'config|" + sub + "' command")
	case sub == "get":
		configGet(k)
	case sub == "resetstat":
		// Redis zeroes the counters of INFO's stats sections; partmap's
		// INFO has none (its keyspace counts are the data's), so there
		// is nothing to reset.
		k.w.WriteString("OK")
	case sub == "help":
		writeHelp(k.w, "CONFIG",
			"GET <pattern>",
			"    Return parameters matching the glob-like <pattern> and their values.",
			"RESETSTAT",
			"    Reset statistics reported by the INFO command: partmap's INFO has none to reset.",
			"SET, REWRITE: refused; partmap is configured by the flags of partmap serve.")
	default:
		k.w.WriteError("ERR partmap is configured by the flags of `partmap serve` (see partmap serve -h), not by CONFIG " + strings.ToUpper(sub))
	}
}

// configGet answers each parameter once, as Redis does: one named exactly
// (in any case) under the name given, those a glob matches (in any case)
// under their own.
func configGet(k *call) {
	var names, values []string
	seen := map[string]bool{}
	add := func(name, param string) {
		if !seen[param] {
			seen[param] = true
			names, values = append(names, name), append(values, configs[param])
		}
	}
	for _, a := range k.args[2:] {
		pattern := string(a)
		if !strings.ContainsAny(pattern, "[*?") {
			if _, ok := configs[strings.ToLower(pattern)]; ok {
				add(pattern, strings.ToLower(pattern))
			}
			continue
		}
		for _, param := range slices.Sorted(maps.Keys(configs)) {
			if globMatch(strings.ToLower(pattern), param) {
				add(param, param)
			}
		}
	}
	k.w.mapLen(len(names))
	for i := range names {
		k.w.WriteBulkString(names[i])
		k.w.WriteBulkString(values[i])
	}
}

// cmdTime answers the server's clock: Unix seconds and microseconds.
func cmdTime(k *call) {
	now := time.Now()
	k.w.WriteArray(2)
	k.w.WriteBulkString(strconv.FormatInt(now.Unix(), 10))
	k.w.WriteBulkString(strconv.Itoa(now.Nanosecond() / 1000))
}

// writeHelp answers a container command's HELP in Redis's shape: a
// heading, the lines given, and HELP last.
func writeHelp(w *writer, command string, lines ...string) {
	w.WriteArray(len(lines) + 2)
	w.WriteString(command + " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
	for _, line := range lines {
		w.WriteString(line)
	}
	w.WriteString("HELP")
}

// cmdMemory answers MEMORY USAGE with the bytes of a profile's field names
// and values, emailAddress aside, as its limits count them: not what Redis
// would take to hold it, which depends on Redis's encodings, and which no
// client can rely on either. A missing key is nil, as in Redis.
func cmdMemory(k *call) {
	sub := lower(k.args[1])
	switch {
	case sub == "help" && len(k.args) == 2:
		writeHelp(k.w, "MEMORY",
			"USAGE <key> [SAMPLES <count>]",
			"    Return the bytes of the profile's field names and values (emailAddress aside).")
	case sub == "usage" && len(k.args) >= 3:
		r := argReader{args: k.args}
		email := r.key(2)
		for i := 3; i < len(k.args); i += 2 { // SAMPLES is Redis's, for sampling its big keys: read, and unused
			if lower(k.args[i]) != "samples" || i+1 == len(k.args) {
				r.refuse(errSyntax)
			} else if r.int(i+1) < 0 {
				r.refuse(errSyntax)
			}
		}
		if r.err != nil {
			k.w.WriteError(r.err.Error())
			return
		}
		rec, err := k.store.FindProfile(k.ctx, email)
		switch {
		case partmap.ErrorCode(err) == partmap.ENOTFOUND || (err == nil && !isKey(&rec)):
			k.w.null()
		case err != nil:
			k.w.WriteError(storeError(err))
		default:
			n := 0
			for name, value := range rec.Profile {
				if name != partmap.FieldEmail {
					n += len(name) + len(value)
				}
			}
			k.w.WriteInt(n)
		}
	case sub == "usage" || sub == "help":
		k.w.WriteError("ERR wrong number of arguments for 'memory|" + sub + "' command")
	default:
		k.w.WriteError("ERR unknown subcommand '" + clip(k.args[1]) + "'. Try MEMORY HELP.")
	}
}
