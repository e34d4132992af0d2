package resp_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap/internal/redistest"
)

// oneDBRedis starts a redis-server of one database, as partmap has, and
// returns a client of it over proto.
func oneDBRedis(t *testing.T, proto int) *goredis.Client {
	t.Helper()
	srv, err := redistest.StartServer(t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	c := goredis.NewClient(&goredis.Options{Network: "unix", Addr: srv.Socket, Protocol: proto, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// RENAME, RENAMENX and COPY answer as Redis's do, deadlines and errors
// included, alone and inside MULTI. Only the fields the commands moved
// are compared: partmap's profile also holds its key, as emailAddress.
func TestKeyCommandsMatchRedis(t *testing.T) {
	const far = "4102444800123" // 2100-01-01, in ms
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			addr, _ := serve(t, nil)
			pm, rd := client(t, addr, proto), oneDBRedis(t, proto)
			pm.Options().PoolSize, rd.Options().PoolSize = 1, 1 // MULTI is the connection's
			steps := [][]any{
				{"hset", "a@x.io", "f", "1"}, {"pexpireat", "a@x.io", far}, {"hset", "b@x.io", "g", "2"},
				{"rename", "nokey@x.io", "c@x.io"}, {"rename", "nokey@x.io", "nokey@x.io"}, {"renamenx", "nokey@x.io", "nokey@x.io"},
				{"rename", "a@x.io", "a@x.io"}, {"renamenx", "a@x.io", "a@x.io"}, {"pexpiretime", "a@x.io"},
				{"renamenx", "a@x.io", "b@x.io"}, {"exists", "a@x.io", "b@x.io"}, {"hget", "b@x.io", "g"},
				// RENAME replaces the profile there, and keeps the deadline.
				{"rename", "a@x.io", "b@x.io"}, {"exists", "a@x.io", "b@x.io"}, {"hmget", "b@x.io", "f", "g"}, {"pexpiretime", "b@x.io"},
				{"renamenx", "b@x.io", "c@x.io"}, {"exists", "b@x.io", "c@x.io"}, {"pexpiretime", "c@x.io"},
				{"copy", "c@x.io", "d@x.io"}, {"hget", "d@x.io", "f"}, {"pexpiretime", "d@x.io"}, {"hget", "c@x.io", "f"},
				{"hset", "d@x.io", "f", "changed"}, {"copy", "c@x.io", "d@x.io"}, {"hget", "d@x.io", "f"},
				{"copy", "c@x.io", "d@x.io", "replace"}, {"hget", "d@x.io", "f"},
				{"persist", "c@x.io"}, {"copy", "c@x.io", "d@x.io", "DB", "0", "REPLACE"}, {"pexpiretime", "d@x.io"},
				{"copy", "c@x.io", "d@x.io", "db", "0"}, {"copy", "c@x.io", "d@x.io", "replace", "replace"},
				{"copy", "nokey@x.io", "e@x.io"}, {"exists", "e@x.io"},
				{"copy", "c@x.io", "c@x.io"}, {"copy", "nokey@x.io", "nokey@x.io"},
				{"copy", "c@x.io", "e@x.io", "db", "1"}, {"copy", "c@x.io", "c@x.io", "db", "1"}, {"copy", "c@x.io", "e@x.io", "db", "-1"},
				{"copy", "c@x.io", "e@x.io", "db", "x"}, {"copy", "c@x.io", "e@x.io", "db", "99999999999"},
				{"copy", "c@x.io", "e@x.io", "db"}, {"copy", "c@x.io", "e@x.io", "foo"}, {"copy", "c@x.io", "e@x.io", "db", "1", "foo"},
				{"copy", "c@x.io", "e@x.io", "foo", "db", "1"}, {"copy", "nokey@x.io", "nokey@x.io", "foo"}, {"exists", "e@x.io"},
				{"copy", "c@x.io"}, {"rename", "c@x.io"}, {"renamenx", "a@x.io", "b@x.io", "c@x.io"},
				// Inside MULTI each answers in its place at EXEC.
				{"multi"}, {"rename", "nokey@x.io", "e@x.io"}, {"copy", "c@x.io", "e@x.io"}, {"renamenx", "c@x.io", "e@x.io"},
				{"copy", "c@x.io", "e@x.io", "db", "1"}, {"rename", "e@x.io", "f@x.io"}, {"hget", "f@x.io", "f"}, {"exec"},
				{"exists", "c@x.io", "e@x.io", "f@x.io"},
			}
			for i, args := range steps {
				if got, want := do(pm, args...), do(rd, args...); !reflect.DeepEqual(got, want) {
					t.Errorf("step %d %q: partmap %#v, redis %#v", i, args, got, want)
				}
			}
		})
	}
}

// Keys are canonical emails: two spellings of one address are one
// profile, so RENAME from one to the other renames the profile onto
// itself, and COPY refuses to copy it onto itself, as Redis answers for
// a key named twice.
func TestKeyCommandsFoldCase(t *testing.T) {
	addr, store := serve(t, nil)
	c := client(t, addr, 2)
	ctx := context.Background()
	c.HSet(ctx, "h1@x.io", "f", "1")
	for _, tc := range []struct {
		args []any
		want reply
	}{
		{[]any{"rename", "h1@x.io", "H1@X.IO"}, reply{val: "OK"}},
		{[]any{"renamenx", "H1@x.io", "h1@X.io"}, reply{val: int64(0)}},
		{[]any{"copy", "h1@x.io", " H1@x.io"}, reply{err: "ERR source and destination objects are the same"}},
		{[]any{"rename", "gone@x.io", "GONE@x.io"}, reply{err: "ERR no such key"}},
		{[]any{"hget", "H1@x.io", "f"}, reply{val: "1"}},
	} {
		if got := do(c, tc.args...); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %#v, want %#v", tc.args, got, tc.want)
		}
	}
	if rec, err := store.FindProfile(ctx, "h1@x.io"); err != nil || rec.Profile["emailAddress"] != "h1@x.io" {
		t.Fatalf("after renames onto itself: %v %v", rec.Profile, err)
	}
}

// COPY copies the fields' deadlines too, as Redis 7.4's does (Debian's
// 7.0 has none to compare with).
func TestCopyKeepsFieldDeadlines(t *testing.T) {
	addr, _ := serve(t, nil)
	c := client(t, addr, 3)
	for _, args := range [][]any{
		{"hset", "src@x.io", "f", "1", "g", "2"},
		{"hpexpireat", "src@x.io", "4102444800123", "fields", "1", "f"},
		{"copy", "src@x.io", "dst@x.io"},
	} {
		if r := do(c, args...); r.err != "" {
			t.Fatalf("%q: %s", args, r.err)
		}
	}
	for _, key := range []string{"src@x.io", "dst@x.io"} {
		got := do(c, "hpexpiretime", key, "fields", "3", "f", "g", "h")
		if want := []any{int64(4102444800123), int64(-1), int64(-2)}; !reflect.DeepEqual(got.val, want) {
			t.Errorf("HPEXPIRETIME of %s: %#v, want %v", key, got, want)
		}
	}
}
