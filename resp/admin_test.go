package resp_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/auth"
	"github.com/partmap/partmap/resp"
)

// FLUSHDB and FLUSHALL take an admin token, delete every profile with a
// delete event each in the change feed, and refuse what Redis refuses.
func TestFlush(t *testing.T) {
	writeTok, writeLine, _ := auth.NewToken("writer", auth.ScopeWrite)
	adminTok, adminLine, _ := auth.NewToken("admin", auth.ScopeAdmin)
	tokens, err := auth.ParseTokens(strings.NewReader(writeLine + "\n" + adminLine + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	addr, store := serve(t, &resp.Options{Tokens: tokens, EventLoop: !noLoop})
	ctx := context.Background()
	writer := goredis.NewClient(&goredis.Options{Addr: addr, Password: writeTok, Protocol: 2, DisableIdentity: true})
	admin := goredis.NewClient(&goredis.Options{Addr: addr, Password: adminTok, Protocol: 3, DisableIdentity: true, PoolSize: 1})
	defer writer.Close()
	defer admin.Close()
	feed := store.(partmap.Feeder)
	begin, err := feed.Changes(ctx, partmap.ChangeQuery{After: partmap.FeedNow})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := range 30 {
		keys = append(keys, fmt.Sprintf("k%d@x.io", i))
		if err := writer.HSet(ctx, keys[i], "f", "1").Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, cmd := range []string{"flushdb", "flushall"} {
		if err := writer.Do(ctx, cmd).Err(); err == nil || err.Error() != "NOPERM this user has no permissions to run the '"+cmd+"' command" {
			t.Fatalf("a writer's %s: %v", cmd, err)
		}
	}
	if n, _ := writer.DBSize(ctx).Result(); n != int64(len(keys)) {
		t.Fatalf("after refused flushes, DBSIZE %d, want %d", n, len(keys))
	}
	// Refused inside MULTI: it is no part of one transaction.
	admin.Do(ctx, "multi")
	if r := do(admin, "flushall"); r.err != "ERR 'flushall' cannot be queued in a partmap transaction" {
		t.Fatalf("FLUSHALL in MULTI: %#v", r)
	}
	if r := do(admin, "exec"); !strings.HasPrefix(r.err, "EXECABORT") {
		t.Fatalf("EXEC after FLUSHALL in MULTI: %#v", r)
	}
	if r := do(admin, "flushdb", "ASYNC"); r.val != "OK" {
		t.Fatalf("FLUSHDB ASYNC: %#v", r)
	}
	if n, _ := admin.DBSize(ctx).Result(); n != 0 {
		t.Fatalf("after FLUSHDB, DBSIZE %d", n)
	}
	page, err := feed.Changes(ctx, partmap.ChangeQuery{After: begin.Next})
	if err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for _, c := range page.Changes {
		if c.Op == partmap.OpDelete && c.Deleted() {
			deleted = append(deleted, c.Email)
		}
	}
	if slices.Sort(deleted); !slices.Equal(deleted, slices.Sorted(slices.Values(keys))) {
		t.Fatalf("FLUSHDB's delete events name %q, want %q", deleted, keys)
	}
	for _, args := range [][]any{{"flushall"}, {"flushall", "sync"}, {"FLUSHDB", "Sync"}} {
		writer.HSet(ctx, "again@x.io", "f", "1")
		if r := do(admin, args...); r.val != "OK" {
			t.Fatalf("%q: %#v", args, r)
		}
		if n, _ := admin.Exists(ctx, "again@x.io").Result(); n != 0 {
			t.Fatalf("after %q the profile is there", args)
		}
	}

	// Redis's refusals, from a server of one database.
	for _, proto := range []int{2, 3} {
		pm := goredis.NewClient(&goredis.Options{Addr: addr, Password: adminTok, Protocol: proto, DisableIdentity: true})
		defer pm.Close()
		rd := oneDBRedis(t, proto)
		for _, args := range [][]any{{"flushdb", "foo"}, {"flushall", "async", "sync"}, {"flushdb", "sync", "async"}, {"flushall", "lazy"}} {
			if got, want := do(pm, args...), do(rd, args...); !reflect.DeepEqual(got, want) {
				t.Errorf("RESP%d %q: partmap %#v, redis %#v", proto, args, got, want)
			}
		}
	}
}

// pairs reads CONFIG GET's reply, a flat array in RESP2 and a map in
// RESP3, as a map.
func pairs(r reply) reply {
	if v, ok := r.val.([]any); ok {
		m := map[any]any{}
		for i := 0; i+1 < len(v); i += 2 {
			m[v[i]] = v[i+1]
		}
		r.val = m
	}
	return r
}

// CONFIG GET answers the parameters clients ask about as Redis's does,
// with partmap's values; CONFIG RESETSTAT answers OK, as Redis's does;
// CONFIG SET and REWRITE are refused.
func TestConfigMatchesRedis(t *testing.T) {
	addr, _ := serve(t, nil)
	for _, proto := range []int{2, 3} {
		pm, rd := client(t, addr, proto), oneDBRedis(t, proto)
		// Values partmap shares with a redis-server of one database
		// without snapshots.
		for _, args := range [][]any{
			{"config", "get", "save"}, {"config", "get", "databases", "maxmemory"}, {"config", "get", "DATABASES", "databases"},
			{"config", "get", "maxmemory-policy", "timeout", "notify-keyspace-events"}, {"config", "get", "nosuch"},
			{"config", "get", "Save", "s?ve", "[sz]ave"}, {"config", "get", "databas[e]s"},
			{"config"}, {"config", "get"}, {"config", "nosuch"}, {"config", "set", "save"}, {"config", "rewrite", "x"},
			{"config", "resetstat", "x"}, {"config", "resetstat"}, {"config", "help", "x"},
		} {
			if got, want := pairs(do(pm, args...)), pairs(do(rd, args...)); !reflect.DeepEqual(got, want) {
				t.Errorf("RESP%d %q: partmap %#v, redis %#v", proto, args, got, want)
			}
		}
		// partmap's own: every write is durable before its reply.
		for _, tc := range []struct {
			args []any
			want map[any]any
		}{
			{[]any{"config", "get", "appendonly", "appendfsync"}, map[any]any{"appendonly": "yes", "appendfsync": "always"}},
			{[]any{"config", "get", "APPEND*"}, map[any]any{"appendonly": "yes", "appendfsync": "always"}},
			{[]any{"config", "get", "*"}, map[any]any{"save": "", "appendonly": "yes", "appendfsync": "always", "databases": "1", "maxmemory": "0",
				"maxmemory-policy": "noeviction", "timeout": "0", "notify-keyspace-events": ""}},
		} {
			if got := pairs(do(pm, tc.args...)); !reflect.DeepEqual(got, reply{val: tc.want}) {
				t.Errorf("RESP%d %q: %#v, want %v", proto, tc.args, got, tc.want)
			}
		}
		for _, sub := range []string{"set save x", "rewrite"} {
			args := []any{"config"}
			for _, a := range strings.Fields(sub) {
				args = append(args, a)
			}
			want := "ERR partmap is configured by the flags of `partmap serve` (see partmap serve -h), not by CONFIG " + strings.ToUpper(strings.Fields(sub)[0])
			if got := do(pm, args...); got.err != want {
				t.Errorf("RESP%d %q: %#v, want %q", proto, args, got, want)
			}
		}
	}
}

// TIME answers the clock as Redis's does: seconds and microseconds, both
// bulk strings; inside MULTI, at EXEC.
func TestTime(t *testing.T) {
	addr, _ := serve(t, nil)
	for _, proto := range []int{2, 3} {
		pm, rd := client(t, addr, proto), oneDBRedis(t, proto)
		pm.Options().PoolSize = 1
		check := func(what string, v any) {
			t.Helper()
			got, ok := v.([]any)
			if !ok || len(got) != 2 {
				t.Fatalf("RESP%d %s: %#v", proto, what, v)
			}
			sec, err1 := strconv.ParseInt(fmt.Sprint(got[0]), 10, 64)
			usec, err2 := strconv.ParseInt(fmt.Sprint(got[1]), 10, 64)
			if err1 != nil || err2 != nil || usec < 0 || usec >= 1e6 || time.Since(time.Unix(sec, usec*1000)).Abs() > 5*time.Second {
				t.Fatalf("RESP%d %s: %#v", proto, what, v)
			}
		}
		check("TIME", do(pm, "time").val)
		check("Redis's TIME", do(rd, "time").val)
		if got, want := do(pm, "time", "x"), do(rd, "time", "x"); !reflect.DeepEqual(got, want) {
			t.Errorf("RESP%d TIME x: partmap %#v, redis %#v", proto, got, want)
		}
		do(pm, "multi")
		do(pm, "time")
		do(pm, "echo", "hi")
		r := do(pm, "exec")
		if v, ok := r.val.([]any); !ok || len(v) != 2 || v[1] != "hi" {
			t.Fatalf("RESP%d MULTI TIME ECHO EXEC: %#v", proto, r)
		}
		check("TIME in EXEC", r.val.([]any)[0])
	}
}

// MEMORY USAGE answers Redis's errors and nil as Redis does, and for a
// profile the bytes of its field names and values, emailAddress aside
// (Redis's figure is its encoding's, so only its kind is compared).
func TestMemoryUsage(t *testing.T) {
	addr, _ := serve(t, nil)
	for _, proto := range []int{2, 3} {
		pm, rd := client(t, addr, proto), oneDBRedis(t, proto)
		for _, c := range []*goredis.Client{pm, rd} {
			do(c, "del", "m@x.io")
		}
		for _, args := range [][]any{
			{"memory"}, {"memory", "nosuch"}, {"memory", "usage"}, {"memory", "help", "x"},
			{"memory", "usage", "m@x.io"}, {"memory", "usage", "m@x.io", "samples"},
			{"memory", "usage", "m@x.io", "samples", "x"}, {"memory", "usage", "m@x.io", "samples", "-1"},
			{"memory", "usage", "m@x.io", "samples", "+1"}, {"memory", "usage", "m@x.io", "nosuch", "1"},
		} {
			if got, want := do(pm, args...), do(rd, args...); !reflect.DeepEqual(got, want) {
				t.Errorf("RESP%d %q: partmap %#v, redis %#v", proto, args, got, want)
			}
		}
		for _, c := range []*goredis.Client{pm, rd} {
			do(c, "hset", "m@x.io", "ab", "cde", "f", "g")
		}
		for _, args := range [][]any{{"memory", "usage", "m@x.io"}, {"memory", "usage", "m@x.io", "samples", "0"}} {
			if got, want := do(pm, args...), do(rd, args...); got.val != int64(7) || fmt.Sprintf("%T", want.val) != "int64" {
				t.Errorf("RESP%d %q: partmap %#v (want 7, the bytes of ab, cde, f and g), redis %#v", proto, args, got, want)
			}
		}
	}
}

// INFO keyspace writes db0's line as Redis 7.4 does, counting the
// profiles with deadlines (expires=, a profile's own or its last
// field's) and those with field deadlines (subexpiry=), and none for an
// empty directory, as redis-server writes none for an empty database.
func TestInfoKeyspace(t *testing.T) {
	addr, _ := serve(t, nil)
	pm, rd := client(t, addr, 2), oneDBRedis(t, 2)
	keyspace := func(c *goredis.Client) string {
		t.Helper()
		s, err := c.Info(context.Background(), "keyspace").Result()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got, want := keyspace(pm), keyspace(rd); got != want {
		t.Fatalf("empty: %q, redis %q", got, want)
	}
	// Two sections: a blank line between them, none after the last.
	for _, c := range []*goredis.Client{pm, rd} {
		s, err := c.Info(context.Background(), "clients", "keyspace").Result()
		if err != nil || !strings.HasPrefix(s, "# Clients\r\n") || !strings.HasSuffix(s, "\r\n\r\n# Keyspace\r\n") {
			t.Fatalf("INFO clients keyspace: %q %v", s, err)
		}
	}
	line := func(want string) {
		t.Helper()
		if got := keyspace(pm); got != "# Keyspace\r\n"+want+"\r\n" {
			t.Fatalf("%q, want the line %q", got, want)
		}
	}
	for _, args := range [][]any{
		{"hset", "a", "f", "1"}, {"hset", "b", "f", "1"}, {"expire", "b", "1000"},
		{"hset", "c", "f", "1", "g", "2"}, {"hpexpire", "c", "100000", "fields", "1", "f"},
	} {
		if r := do(pm, args...); r.err != "" {
			t.Fatalf("%q: %s", args, r.err)
		}
	}
	line("db0:keys=3,expires=1,avg_ttl=0,subexpiry=1")
	do(pm, "hpexpire", "a", "100000", "fields", "1", "f") // a's only field: a ends with it
	line("db0:keys=3,expires=2,avg_ttl=0,subexpiry=2")
	do(pm, "hdel", "c", "f")
	do(pm, "persist", "b")
	line("db0:keys=3,expires=1,avg_ttl=0,subexpiry=1")
	do(pm, "hpexpire", "c", "1", "fields", "1", "g") // c's last field, due at once
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if got := keyspace(pm); got == "# Keyspace\r\ndb0:keys=2,expires=1,avg_ttl=0,subexpiry=1\r\n" {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("after c's last field expired: %q", got)
		}
	}
}
