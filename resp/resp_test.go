package resp_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/auth"
	"github.com/partmap/partmap/internal/redistest"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/pebble"
	"github.com/partmap/partmap/resp"
)

// redisSocket is the real redis-server TestMain starts, to compare with.
var redisSocket string

// noLoop runs the tests of a server on a Pebble store with a goroutine
// per client, as TLS clients have it, instead of on the event loop:
// PARTMAP_RESP_LOOP=off go test ./resp. The tests of bounds and
// durability run on both (onBothPaths).
var noLoop = os.Getenv("PARTMAP_RESP_LOOP") == "off"

// onBothPaths runs test on the event loop and on a goroutine per client.
func onBothPaths(t *testing.T, test func(t *testing.T, loop bool)) {
	for _, loop := range []bool{true, false} {
		t.Run(map[bool]string{true: "Loop", false: "GoroutinePerClient"}[loop], func(t *testing.T) { test(t, loop) })
	}
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "partmap-resp-")
	if err != nil {
		panic(err)
	}
	srv, err := redistest.StartServer(dir, 16)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	redisSocket = srv.Socket
	code := m.Run()
	srv.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// serve starts a RESP server on a started Pebble store of its own and
// returns its address and the store.
func serve(t testing.TB, opts *resp.Options) (string, partmap.Store) {
	t.Helper()
	_, addr, store := serveServer(t, nil, opts)
	return addr, store
}

// serveServer is serve on a store opened with storeOpts, that returns the
// server too.
func serveServer(t testing.TB, storeOpts *pebble.Options, opts *resp.Options) (*resp.Server, string, partmap.Store) {
	t.Helper()
	store, err := pebble.Open(t.TempDir(), storeOpts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if opts == nil {
		opts = &resp.Options{EventLoop: !noLoop} // as partmap serve has it on Pebble
	}
	s := resp.New(store, opts)
	go s.Serve(ln)
	t.Cleanup(func() {
		s.Close()
		store.Close()
	})
	return s, ln.Addr().String(), store
}

func client(t *testing.T, addr string, proto int) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr, Protocol: proto, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// redisClient is a client of a flushed database of the real Redis.
func redisClient(t *testing.T, db, proto int) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Network: "unix", Addr: redisSocket, DB: db, Protocol: proto, DisableIdentity: true})
	if err := c.FlushDB(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// reply is a command's outcome, comparable across servers: its value and
// its error's text.
type reply struct {
	val any
	err string
}

func do(c *goredis.Client, args ...any) reply {
	v, err := c.Do(context.Background(), args...).Result()
	r := reply{val: v}
	if err != nil && err != goredis.Nil {
		r.err = err.Error()
	}
	return r
}

// unordered sorts what a hash command lists, whose order partmap (byte
// order) and Redis (insertion order) do not share.
func unordered(name string, r reply) reply {
	switch v := r.val.(type) {
	case []any:
		switch name {
		case "scan": // cursor 0, and the keys
			keys := slices.Clone(v[1].([]any))
			sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
			r.val = []any{v[0], keys}
		case "hkeys", "hvals":
			s := slices.Clone(v)
			sort.Slice(s, func(i, j int) bool { return fmt.Sprint(s[i]) < fmt.Sprint(s[j]) })
			r.val = s
		case "hgetall": // RESP2: field, value, field, value
			var pairs []string
			for i := 0; i+1 < len(v); i += 2 {
				pairs = append(pairs, fmt.Sprint(v[i])+"\x00"+fmt.Sprint(v[i+1]))
			}
			slices.Sort(pairs)
			r.val = pairs
		}
	}
	return r
}

// The hash commands answer exactly as Debian's redis-server does, over
// RESP2 and RESP3, step after random step: a profile's hash is its fields
// but emailAddress, which reads as a field that is not there, and a
// profile whose last field goes is gone, as Redis deletes an emptied
// hash (EXISTS, TYPE, DBSIZE and SCAN agree).
func TestHashCommandsMatchRedis(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			addr, _ := serve(t, nil)
			pm, rd := client(t, addr, proto), redisClient(t, proto, proto)
			rng := rand.New(rand.NewPCG(uint64(proto), 7))
			keys := []string{"a@x.io", "b@x.io", "c@x.io"}
			fields := []string{"f", "g", "visits", "n.x", "é"}
			named := append(slices.Clone(fields), partmap.FieldEmail) // what reads and HDEL may name
			values := []string{"", "0", "7", "-3", "abc", "9223372036854775807", "-9223372036854775808", "1.5", "007", "1e3", "inf", " 5", "é🙂"}
			for step := range 3000 {
				key, field, value := keys[rng.IntN(len(keys))], fields[rng.IntN(len(fields))], values[rng.IntN(len(values))]
				read := named[rng.IntN(len(named))]
				var args []any
				switch rng.IntN(18) {
				case 0, 1:
					args = []any{"hset", key, field, value}
					if rng.IntN(2) == 0 {
						args = append(args, fields[rng.IntN(len(fields))], values[rng.IntN(len(values))])
					}
				case 2:
					args = []any{"hmset", key, field, value}
				case 3:
					args = []any{"hsetnx", key, field, value}
				case 4:
					args = []any{"hget", key, read}
				case 5:
					args = []any{"hmget", key, read, named[rng.IntN(len(named))], read}
				case 6:
					args = []any{[]string{"hgetall", "hkeys", "hvals", "hlen", "type", "exists"}[rng.IntN(6)], key}
				case 7:
					args = []any{[]string{"hexists", "hstrlen"}[rng.IntN(2)], key, read}
				case 8:
					args = []any{"hdel", key, read}
					if rng.IntN(2) == 0 {
						args = append(args, named[rng.IntN(len(named))])
					}
				case 16: // every field, so that the hash goes
					args = []any{"hdel", key}
					for _, f := range rng.Perm(len(named)) {
						args = append(args, named[f])
					}
				case 17:
					args = []any{[]string{"dbsize", "scan"}[rng.IntN(2)]}
					if args[0] == "scan" {
						args = append(args, "0", "count", "100")
					}
				case 9, 10:
					args = []any{"hincrby", key, field, []string{"1", "-1", "5", "9223372036854775807", "x", "1.5", "-9223372036854775808"}[rng.IntN(7)]}
				case 11, 12:
					args = []any{"hincrbyfloat", key, field, []string{"1", "-1.25", "0.1", "1e3", "x", "inf", "5.0e3"}[rng.IntN(7)]}
				case 13:
					if rng.IntN(4) == 0 {
						args = []any{"del", key, keys[rng.IntN(len(keys))]}
					} else {
						args = []any{"exists", key, key, keys[rng.IntN(len(keys))]}
					}
				case 14:
					args = []any{[]string{"get", "strlen"}[rng.IntN(2)], key}
				default:
					args = []any{"hset", key, field} // wrong arity
				}
				name := args[0].(string)
				got, want := unordered(name, do(pm, args...)), unordered(name, do(rd, args...))
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("step %d %q: partmap %#v, redis %#v", step, args, got, want)
				}
			}
			for _, key := range keys {
				got, want := unordered("hgetall", do(pm, "hgetall", key)), unordered("hgetall", do(rd, "hgetall", key))
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("at the end, %s: partmap %v, redis %v", key, got, want)
				}
			}
		})
	}
}

// Connection commands and errors that need no store state match Redis's
// too.
func TestConnectionCommandsMatchRedis(t *testing.T) {
	addr, _ := serve(t, nil)
	for _, proto := range []int{2, 3} {
		pm, rd := client(t, addr, proto), redisClient(t, 10+proto, proto)
		for _, args := range [][]any{
			{"ping"}, {"ping", "hi"}, {"ping", "a", "b"}, {"echo", "x y"}, {"echo"},
			{"select", "0"}, {"select", "1x"}, {"nosuchcommand", "a", "b"},
			{"client", "setname", "has space"}, {"client", "setname", "me"}, {"client", "getname"},
			{"client", "nosuch"}, {"hello", "4"}, {"hello", "x"}, {"auth", "secret"},
			{"hget", "k@x.io"}, {"hincrby", "k@x.io", "f", "nope"}, {"hincrbyfloat", "k@x.io", "f", "nope"},
			manyArgs("nosuch", strings.Split(strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789 ", 20), " ")),
			{"nosuch", strings.Repeat("y", 300)},
		} {
			if got, want := do(pm, args...), do(rd, args...); !reflect.DeepEqual(got, want) {
				t.Errorf("RESP%d %q: partmap %#v, redis %#v", proto, args, got, want)
			}
		}
	}
}

// A key is a customer email, canonicalised: any spelling reaches the same
// profile, and what RESP writes the HTTP API's store reads.
func TestKeysAreCanonicalEmails(t *testing.T) {
	addr, store := serve(t, nil)
	c := client(t, addr, 3)
	ctx := context.Background()
	if n, err := c.HSet(ctx, " Alice@Example.COM ", "fullName", "Alice").Result(); err != nil || n != 1 {
		t.Fatalf("HSET: %d %v", n, err)
	}
	if v, err := c.HGet(ctx, "alice@example.com", "fullName").Result(); err != nil || v != "Alice" {
		t.Fatalf("HGET of another spelling: %q %v", v, err)
	}
	rec, err := store.FindProfile(ctx, "alice@example.com")
	if err != nil || rec.Profile["fullName"] != "Alice" || rec.Profile.Email() != "alice@example.com" {
		t.Fatalf("the store has %v, %v", rec.Profile, err)
	}
	// emailAddress is the key, not a field of the hash: no read shows it,
	// HDEL of it deletes nothing, and no write may set it.
	all, err := c.HGetAll(ctx, "ALICE@example.com").Result()
	if err != nil || !reflect.DeepEqual(all, map[string]string{"fullName": "Alice"}) {
		t.Fatalf("HGETALL: %v %v", all, err)
	}
	if n, err := c.HDel(ctx, "alice@example.com", partmap.FieldEmail).Result(); err != nil || n != 0 {
		t.Fatalf("HDEL emailAddress: %d %v", n, err)
	}
	for _, args := range [][]any{
		{"hset", "alice@example.com", partmap.FieldEmail, "alice@example.com"},
		{"hset", "alice@example.com", "x", "1", partmap.FieldEmail, "bob@example.com"},
		{"hsetnx", "alice@example.com", partmap.FieldEmail, "bob@example.com"},
		{"hincrby", "alice@example.com", partmap.FieldEmail, "1"},
		{"hsetex", "alice@example.com", "fields", "1", partmap.FieldEmail, "bob@example.com"},
	} {
		if r := do(c, args...); r.err != "ERR emailAddress is the profile's key, not a field of its hash: it cannot be written" {
			t.Fatalf("%q: %#v", args, r)
		}
	}
	if n, _ := c.HLen(ctx, "alice@example.com").Result(); n != 1 {
		t.Fatalf("after refused writes, HLEN %d", n)
	}
	if rec, err := store.FindProfile(ctx, "alice@example.com"); err != nil || !reflect.DeepEqual(rec.Profile, partmap.Profile{partmap.FieldEmail: "alice@example.com", "fullName": "Alice"}) {
		t.Fatalf("after refused writes, the store has %v, %v", rec.Profile, err)
	}
	// A key that is no email is an error that names it.
	if err := c.HSet(ctx, "caf\u00e9@example.com", "f", "v").Err(); err == nil || !strings.Contains(err.Error(), "café@example.com") {
		t.Fatalf("a non-ASCII key: %v", err)
	}
	if err := c.HGet(ctx, "  ", "f").Err(); err == nil || !strings.Contains(err.Error(), "not a customer email") {
		t.Fatalf("a blank key: %v", err)
	}
	// Invalid UTF-8 in a value is refused, naming the field, and writes nothing.
	if err := c.HSet(ctx, "alice@example.com", "bad", "\xff").Err(); err == nil || !strings.Contains(err.Error(), "bad") {
		t.Fatalf("invalid UTF-8: %v", err)
	}
	if ok, _ := c.HExists(ctx, "alice@example.com", "bad").Result(); ok {
		t.Fatal("the invalid value was stored")
	}
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 1 {
		t.Fatalf("DBSIZE %d %v", n, err)
	}
}

// Pipelined commands are answered in order.
func TestPipeline(t *testing.T) {
	addr, _ := serve(t, nil)
	c := client(t, addr, 2)
	ctx := context.Background()
	cmds, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range 200 {
			p.HIncrBy(ctx, fmt.Sprintf("p%d@x.io", i%7), "n", 1)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[int]int64{}
	for i, cmd := range cmds {
		counts[i%7]++
		if v := cmd.(*goredis.IntCmd).Val(); v != counts[i%7] {
			t.Fatalf("reply %d: %d, want %d", i, v, counts[i%7])
		}
	}
}

// With tokens, nothing but HELLO, AUTH, PING and QUIT works before AUTH, a
// wrong token is WRONGPASS, and a read token's writes are NOPERM.
func TestAuth(t *testing.T) {
	readTok, readLine, _ := auth.NewToken("reader", auth.ScopeRead)
	writeTok, writeLine, _ := auth.NewToken("writer", auth.ScopeWrite)
	tokens, err := auth.ParseTokens(strings.NewReader(readLine + "\n" + writeLine + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := serve(t, &resp.Options{Tokens: tokens, EventLoop: !noLoop})
	ctx := context.Background()
	anon := client(t, addr, 2)
	if err := anon.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING before AUTH: %v", err)
	}
	if err := anon.HGet(ctx, "a@x.io", "f").Err(); err == nil || err.Error() != "NOAUTH Authentication required." {
		t.Fatalf("HGET before AUTH: %v", err)
	}
	if err := anon.Do(ctx, "auth", "wrong").Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
		t.Fatalf("AUTH with a wrong token: %v", err)
	}
	reader := goredis.NewClient(&goredis.Options{Addr: addr, Password: readTok, Protocol: 3, DisableIdentity: true})
	defer reader.Close()
	if err := reader.HGet(ctx, "a@x.io", "f").Err(); err != goredis.Nil {
		t.Fatalf("a reader's HGET: %v", err)
	}
	if err := reader.HSet(ctx, "a@x.io", "f", "v").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("a reader's HSET: %v", err)
	}
	writer := goredis.NewClient(&goredis.Options{Addr: addr, Username: "anyone", Password: writeTok, Protocol: 2, DisableIdentity: true})
	defer writer.Close()
	if err := writer.HSet(ctx, "a@x.io", "f", "v").Err(); err != nil {
		t.Fatalf("a writer's HSET: %v", err)
	}
	if v, err := reader.HGet(ctx, "a@x.io", "f").Result(); err != nil || v != "v" {
		t.Fatalf("the reader reads %q %v", v, err)
	}
}

// Before the directory is started, commands that need it say so.
func TestNotStarted(t *testing.T) {
	store, err := pebble.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := resp.New(store, nil)
	go s.Serve(ln)
	defer s.Close()
	c := client(t, ln.Addr().String(), 2)
	if err := c.HSet(context.Background(), "a@x.io", "f", "v").Err(); err == nil || !strings.Contains(err.Error(), "not started") {
		t.Fatalf("HSET before start: %v", err)
	}
}

// A client that sends more than MaxPending bytes without a whole command
// (a huge bulk string, a million arguments) is hung up on, and the others
// are served meanwhile.
func TestHostileClients(t *testing.T) {
	onBothPaths(t, func(t *testing.T, loop bool) {
		addr, _ := serve(t, &resp.Options{EventLoop: loop})
		ctx := context.Background()
		good := client(t, addr, 2)
		for name, head := range map[string]string{
			"HugeBulk":        "*3\r\n$4\r\nHGET\r\n$6\r\na@x.io\r\n$2000000000\r\n",
			"MillionArgs":     "*100000000\r\n",
			"EndlessInline":   "HGET ",
			"MalformedLength": "*1\r\n$x\r\n",
			"HugeCount":       "*9223372036854775807\r\n",
			"MillionAndOne":   "*1048577\r\n",
		} {
			t.Run(name, func(t *testing.T) {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if _, err := c.Write([]byte(head)); err != nil {
					t.Fatal(err)
				}
				if name == "MalformedLength" {
					buf := make([]byte, 256)
					n, _ := c.Read(buf)
					if !strings.HasPrefix(string(buf[:n]), "-ERR Protocol error") {
						t.Fatalf("a malformed length: %q", buf[:n])
					}
					return
				}
				chunk := make([]byte, 1<<20)
				for i := range chunk {
					chunk[i] = 'a'
				}
				if name == "MillionArgs" {
					chunk = []byte(strings.Repeat("$1\r\na\r\n", 1<<17))
				}
				sent := 0
				for ; sent < 8*resp.MaxPending; sent += len(chunk) {
					if _, err := c.Write(chunk); err != nil {
						break // hung up on
					}
					if sent == 2*resp.MaxPending {
						// Meanwhile another client is served.
						if err := good.Ping(ctx).Err(); err != nil {
							t.Fatalf("another client's PING: %v", err)
						}
					}
				}
				if sent >= 8*resp.MaxPending {
					t.Fatalf("sent %d bytes without a whole command and was not hung up on", sent)
				}
			})
		}
		if err := good.HSet(ctx, "a@x.io", "f", "v").Err(); err != nil {
			t.Fatalf("after the hostile clients: %v", err)
		}
	})
}

// A client that pipelines commands and never reads the replies is hung up
// on once a reply has waited WriteTimeout, and the others are served.
func TestClientThatNeverReads(t *testing.T) {
	onBothPaths(t, func(t *testing.T, loop bool) {
		addr, _ := serve(t, &resp.Options{WriteTimeout: 200 * time.Millisecond, EventLoop: loop})
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ping := []byte(strings.Repeat("*2\r\n$4\r\nECHO\r\n$1024\r\n"+strings.Repeat("x", 1024)+"\r\n", 64))
		deadline := time.Now().Add(30 * time.Second)
		for {
			c.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := c.Write(ping); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() && time.Now().Before(deadline) {
					continue // the server's buffers are full: it stopped reading until it can write
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a client that never reads was not hung up on in 30 s")
			}
		}
		if err := client(t, addr, 2).Ping(context.Background()).Err(); err != nil {
			t.Fatalf("another client: %v", err)
		}
	})
}

func manyArgs(name string, args []string) []any {
	out := []any{name}
	for _, a := range args {
		out = append(out, a)
	}
	return out
}

// EXPIRE and its siblings answer as Redis does; the times are far enough
// ahead that the two servers' clocks agree on them to the second.
func TestKeyExpiryMatchesRedis(t *testing.T) {
	for _, proto := range []int{2, 3} {
		addr, _ := serve(t, nil)
		pm, rd := client(t, addr, proto), redisClient(t, 4+proto, proto)
		far := "4102444800" // 2100-01-01, in seconds
		for i, args := range [][]any{
			{"ttl", "e@x.io"}, {"pttl", "e@x.io"}, {"expire", "e@x.io", "100"}, {"persist", "e@x.io"},
			{"hset", "e@x.io", "f", "1"},
			{"ttl", "e@x.io"}, {"expiretime", "e@x.io"}, {"persist", "e@x.io"},
			{"expire", "e@x.io", "100", "xx"}, {"expire", "e@x.io", "100", "gt"}, {"expire", "e@x.io", "100", "nx"},
			{"ttl", "e@x.io"}, {"expire", "e@x.io", "50", "nx"}, {"expire", "e@x.io", "50", "gt"}, {"expire", "e@x.io", "200", "gt"},
			{"ttl", "e@x.io"}, {"expire", "e@x.io", "300", "lt"}, {"expire", "e@x.io", "150", "lt"}, {"ttl", "e@x.io"},
			{"expire", "e@x.io", "150", "xx", "lt"}, {"expire", "e@x.io", "120", "xx", "lt"}, {"ttl", "e@x.io"},
			{"persist", "e@x.io"}, {"expire", "e@x.io", "120", "xx", "lt"}, {"ttl", "e@x.io"}, {"expire", "e@x.io", "150", "lt"},
			{"expireat", "e@x.io", far}, {"expiretime", "e@x.io"}, {"pexpireat", "e@x.io", far + "000"}, {"pexpiretime", "e@x.io"},
			{"pexpireat", "e@x.io", far + "600"}, {"expiretime", "e@x.io"}, {"pexpireat", "e@x.io", far + "400"}, {"expiretime", "e@x.io"},
			{"pexpire", "e@x.io", "100000000"}, {"ttl", "e@x.io"},
			{"persist", "e@x.io"}, {"ttl", "e@x.io"}, {"persist", "e@x.io"},
			{"expire", "e@x.io", "10", "nx", "xx"}, {"expire", "e@x.io", "10", "gt", "lt"}, {"expire", "e@x.io", "10", "bogus"},
			{"expire", "e@x.io", "ten"}, {"expire", "e@x.io"}, {"ttl"},
			{"expire", "e@x.io", "-1"}, {"exists", "e@x.io"}, {"ttl", "e@x.io"},
			{"hset", "f@x.io", "f", "1"}, {"expireat", "f@x.io", "1"}, {"exists", "f@x.io"},
			{"hset", "g@x.io", "f", "1"}, {"expire", "g@x.io", "0"}, {"exists", "g@x.io"},
		} {
			if got, want := do(pm, args...), do(rd, args...); !reflect.DeepEqual(got, want) {
				t.Errorf("RESP%d step %d %q: partmap %#v, redis %#v", proto, i, args, got, want)
			}
		}
	}
}

// scanAll runs a whole SCAN and returns the keys, sorted, and how many
// calls it took.
func scanAll(t *testing.T, c *goredis.Client, args ...any) ([]string, int) {
	t.Helper()
	var keys []string
	cursor, calls := "0", 0
	for {
		v, err := c.Do(context.Background(), append([]any{"scan", cursor}, args...)...).Slice()
		if err != nil {
			t.Fatalf("SCAN %s %v: %v", cursor, args, err)
		}
		calls++
		cursor = v[0].(string)
		for _, k := range v[1].([]any) {
			keys = append(keys, k.(string))
		}
		if cursor == "0" {
			slices.Sort(keys)
			return keys, calls
		}
	}
}

// SCAN finds the keys Redis's SCAN finds, with the same MATCH and TYPE;
// HSCAN the same fields; HRANDFIELD picks as Redis's does.
func TestScanMatchesRedis(t *testing.T) {
	addr, _ := serve(t, nil)
	pm, rd := client(t, addr, 2), redisClient(t, 9, 2)
	ctx := context.Background()
	for i := range 300 {
		key := fmt.Sprintf("user%d@ex%d.io", i, i%3)
		for _, c := range []*goredis.Client{pm, rd} {
			c.HSet(ctx, key, "n", i, "tier", []string{"gold", "silver"}[i%2])
		}
	}
	for _, args := range [][]any{nil, {"count", "7"}, {"match", "user1*"}, {"match", "*@ex2.io", "count", "1000"},
		{"match", "user?@*"}, {"match", "user[1-3]0@*"}, {"match", "user[^1]*@ex1.io"}, {"type", "hash"}, {"type", "string"}} {
		got, calls := scanAll(t, pm, args...)
		want, _ := scanAll(t, rd, args...)
		if !slices.Equal(got, want) {
			t.Errorf("SCAN %v: partmap %d keys, redis %d", args, len(got), len(want))
		}
		if slices.Equal(args, []any{"count", "7"}) && calls < 300/7 {
			t.Errorf("SCAN COUNT 7 took %d calls for 300 keys", calls)
		}
	}
	for _, args := range [][]any{{"scan", "x"}, {"scan", "0", "count", "0"}, {"scan", "0", "count", "x"}, {"scan", "0", "match"},
		{"scan", "0", "bogus", "1"}, {"hscan", "user1@ex1.io", "x"}, {"hscan", "user1@ex1.io", "0", "type", "hash"},
		{"hrandfield", "user1@ex1.io", "x"}, {"hrandfield", "user1@ex1.io", "1", "bogus"}, {"hrandfield", "nobody@x.io"},
		{"hrandfield", "nobody@x.io", "3"}, {"hrandfield", "nobody@x.io", "-3", "withvalues"}} {
		if got, want := do(pm, args...), do(rd, args...); !reflect.DeepEqual(got, want) {
			t.Errorf("%q: partmap %#v, redis %#v", args, got, want)
		}
	}
	for _, args := range [][]any{{"hscan", "user1@ex1.io", "0"}, {"hscan", "user1@ex1.io", "0", "match", "t*"}, {"hscan", "nobody@x.io", "0"}} {
		got, want := do(pm, args...), do(rd, args...)
		g, w := got.val.([]any), want.val.([]any)
		if !reflect.DeepEqual(unordered("hgetall", reply{val: g[1]}), unordered("hgetall", reply{val: w[1]})) || g[0] != w[0] {
			t.Errorf("%q: partmap %#v, redis %#v", args, got, want)
		}
	}
	// HRANDFIELD: distinct fields up to the count, repeats for a negative
	// one, pairs with WITHVALUES (RESP3: one array per pair).
	fields := []string{"n", "tier"}
	if v, err := pm.HRandField(ctx, "user1@ex1.io", 5).Result(); err != nil || len(v) != 2 || !slices.Equal(sorted(v), fields) {
		t.Errorf("HRANDFIELD 5: %v %v", v, err)
	}
	if v, err := pm.Do(ctx, "hrandfield", "user1@ex1.io", "-7").StringSlice(); err != nil || len(v) != 7 {
		t.Errorf("HRANDFIELD -7: %v %v", v, err)
	}
	if v, err := pm.Do(ctx, "hrandfield", "user1@ex1.io").Text(); err != nil || !slices.Contains(fields, v) {
		t.Errorf("HRANDFIELD: %v %v", v, err)
	}
	r3 := client(t, addr, 3)
	v, err := r3.Do(ctx, "hrandfield", "user1@ex1.io", "2", "withvalues").Slice()
	if err != nil || len(v) != 2 {
		t.Fatalf("HRANDFIELD 2 WITHVALUES over RESP3: %v %v", v, err)
	}
	for _, pair := range v {
		p, ok := pair.([]any)
		if !ok || len(p) != 2 {
			t.Fatalf("HRANDFIELD WITHVALUES over RESP3: %#v, want [field value] pairs", v)
		}
	}
}

// One client's scans cannot break another's: a client that starts more
// scans than any table holds forgets only its own oldest cursors. Any
// connection continues any cursor, as a client's pool needs, also after
// the connection it was handed to has closed.
func TestScanCursorsPerConnection(t *testing.T) {
	srv, addr, _ := serveServer(t, nil, nil)
	ctx := context.Background()
	conn := func() *goredis.Client {
		c := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 1, DisableIdentity: true})
		t.Cleanup(func() { c.Close() })
		return c
	}
	b, flooder, other := conn(), conn(), conn()
	var want []string
	for i := range 5 {
		key := fmt.Sprintf("u%d@example.com", i)
		b.HSet(ctx, key, "n", i)
		want = append(want, key)
	}
	scan := func(c *goredis.Client, cursor string) (string, []string, error) {
		v, err := c.Do(ctx, "scan", cursor, "count", "1").Slice()
		if err != nil {
			return "", nil, err
		}
		var keys []string
		for _, k := range v[1].([]any) {
			keys = append(keys, k.(string))
		}
		return v[0].(string), keys, nil
	}
	cursor, keys, err := scan(b, "0")
	if err != nil || cursor == "0" {
		t.Fatalf("SCAN 0: %q %v", cursor, err)
	}

	// More scans started than the one table shared by every client used
	// to keep (100,000), in pipelines.
	var first string
	for sent := 0; sent <= 100_000; sent += 5000 {
		pipe := flooder.Pipeline()
		cmds := make([]*goredis.Cmd, 5000)
		for i := range cmds {
			cmds[i] = pipe.Do(ctx, "scan", "0", "count", "1")
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if first == "" {
			first = cmds[0].Val().([]any)[0].(string)
		}
	}
	if _, _, err := scan(flooder, first); err == nil || !strings.Contains(err.Error(), "invalid cursor") {
		t.Errorf("the flooder's first cursor, 100,000 scans later: %v, want ERR invalid cursor", err)
	}
	last, _, err := scan(flooder, "0")
	if err != nil {
		t.Fatal(err)
	}

	// The other client's scan goes on, and ends with every key.
	for cursor != "0" {
		var page []string
		if cursor, page, err = scan(b, cursor); err != nil {
			t.Fatalf("the scan of a client beside the flooder: %v", err)
		}
		keys = append(keys, page...)
	}
	if slices.Sort(keys); !slices.Equal(keys, want) {
		t.Errorf("the scan beside the flooder found %q, want %q", keys, want)
	}

	// The flooder's newest cursor goes on over another connection, after
	// the flooder has hung up too.
	flooder.Close()
	for tries := 0; srv.Clients() > 2; tries++ { // b and other
		if tries == 1000 {
			t.Fatalf("the flooder has not hung up: %d clients", srv.Clients())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, _, err := scan(other, last); err != nil {
		t.Errorf("a closed connection's cursor, over another: %v", err)
	}
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

// PARTMAP.SEARCH pages through the same profiles as the store's search.
func TestSearch(t *testing.T) {
	addr, store := serve(t, nil)
	c := client(t, addr, 2)
	ctx := context.Background()
	for i := range 120 {
		c.HSet(ctx, fmt.Sprintf("s%d@x.io", i), partmap.FieldCompanyName, []string{"Acme", "Initech"}[i%2], partmap.FieldCustomerTier, []string{"gold", "silver", "bronze"}[i%3])
	}
	search := func(args ...any) []string {
		var keys []string
		cursor := "0"
		for {
			v, err := c.Do(ctx, append([]any{"partmap.search", cursor}, args...)...).Slice()
			if err != nil {
				t.Fatalf("PARTMAP.SEARCH %v: %v", args, err)
			}
			cursor = v[0].(string)
			for _, k := range v[1].([]any) {
				keys = append(keys, k.(string))
			}
			if cursor == "0" {
				return keys
			}
		}
	}
	for _, where := range [][]partmap.Match{
		{{Field: partmap.FieldCompanyName, Value: "Acme"}},
		{{Field: partmap.FieldCompanyName, Value: "Initech"}, {Field: partmap.FieldCustomerTier, Value: "gold"}},
		{{Field: partmap.FieldCustomerTier, Value: "none"}},
	} {
		want := storetest.SearchEmails(t, store, where, 0)
		var args []any
		for _, m := range where {
			args = append(args, m.Field, m.Value)
		}
		if got := search(append(args, "count", "7")...); !slices.Equal(got, want) {
			t.Errorf("PARTMAP.SEARCH %v: %d keys, the store's search %d", args, len(got), len(want))
		}
	}
	if err := c.Do(ctx, "partmap.search", "0", "fullName", "x").Err(); err == nil || !strings.Contains(err.Error(), "fullName") {
		t.Errorf("a search of a field without an index: %v", err)
	}
	if err := c.Do(ctx, "partmap.search", "0", "companyName", "Acme", "customerTier").Err(); err == nil || err.Error() != "ERR syntax error" {
		t.Errorf("a field without a value: %v", err)
	}
}

// MULTI and EXEC, and their errors, answer as Redis's do; the queued
// commands apply all or none.
func TestMultiMatchesRedis(t *testing.T) {
	for _, proto := range []int{2, 3} {
		addr, _ := serve(t, nil)
		pm, rd := client(t, addr, proto), redisClient(t, 6+proto, proto)
		// One connection each: a transaction is the connection's.
		pm.Options().PoolSize, rd.Options().PoolSize = 1, 1
		steps := [][]any{
			{"exec"}, {"discard"},
			{"hset", "m@x.io", "n", "1"},
			{"multi"}, {"multi"}, {"hincrby", "m@x.io", "n", "2"}, {"hget", "m@x.io", "n"}, {"hset", "m2@x.io", "a", "b"},
			{"hgetall", "m2@x.io"}, {"del", "m@x.io"}, {"exists", "m@x.io", "m2@x.io"}, {"exec"},
			{"exists", "m@x.io"}, {"hgetall", "m2@x.io"},
			// An error inside a command fails that command only.
			{"multi"}, {"hset", "m2@x.io", "c", "d"}, {"hincrby", "m2@x.io", "a", "1"}, {"hlen", "m2@x.io"}, {"exec"},
			// A refused command dooms the transaction.
			{"multi"}, {"hset", "m2@x.io", "e", "f"}, {"nosuch"}, {"exec"}, {"hexists", "m2@x.io", "e"},
			{"multi"}, {"hset", "m2@x.io"}, {"exec"},
			{"multi"}, {"hset", "m2@x.io", "g", "h"}, {"discard"}, {"hexists", "m2@x.io", "g"},
			{"multi"}, {"watch", "m2@x.io"}, {"discard"},
			{"watch", "m2@x.io", "m3@x.io"}, {"multi"}, {"hset", "m2@x.io", "w", "1"}, {"exec"}, {"unwatch"},
			{"multi"}, {"unwatch"}, {"hget", "m2@x.io", "w"}, {"exec"},
			// Nothing to read or write; after a WATCH of a key that did not
			// change, an empty array too, not a null.
			{"multi"}, {"exec"}, {"multi"}, {"echo", "hi"}, {"ping"}, {"exec"},
			{"watch", "m2@x.io", "m9@x.io"}, {"multi"}, {"exec"}, {"watch", "m2@x.io"}, {"multi"}, {"echo", "hi"}, {"exec"},
			{"multi"}, {"expire", "m2@x.io", "100"}, {"ttl", "m2@x.io"}, {"expire", "m2@x.io", "50", "xx", "lt"}, {"ttl", "m2@x.io"},
			{"persist", "m2@x.io"}, {"ttl", "m2@x.io"}, {"expire", "m2@x.io", "50", "xx", "lt"}, {"ttl", "m2@x.io"}, {"exec"},
			{"multi"}, {"del", "m2@x.io", "m3@x.io"}, {"hincrby", "m3@x.io", "n", "5"}, {"exists", "m2@x.io", "m3@x.io"}, {"exec"},
			// The last field deleted deletes the hash, and a later command
			// makes it again.
			{"multi"}, {"hset", "m4@x.io", "a", "1"}, {"hdel", "m4@x.io", "a", "emailAddress"}, {"exists", "m4@x.io"}, {"type", "m4@x.io"},
			{"hset", "m4@x.io", "b", "2"}, {"hlen", "m4@x.io"}, {"exec"}, {"dbsize"},
		}
		for i, args := range steps {
			norm := execUnordered
			if args[0] == "hgetall" {
				norm = func(r reply) reply { return unordered("hgetall", r) }
			}
			if got, want := do(pm, args...), do(rd, args...); !reflect.DeepEqual(norm(got), norm(want)) {
				t.Errorf("RESP%d step %d %q: partmap %#v, redis %#v", proto, i, args, got, want)
			}
		}
	}
}

// A WATCHed key changed by another client makes EXEC answer null and
// write nothing; concurrent transactions of HINCRBY lose no increment.
func TestWatchAndConcurrentExec(t *testing.T) {
	addr, store := serve(t, nil)
	ctx := context.Background()
	a, b := client(t, addr, 2), client(t, addr, 2)
	a.Options().PoolSize, b.Options().PoolSize = 1, 1
	if err := a.HSet(ctx, "w@x.io", "n", "1").Err(); err != nil {
		t.Fatal(err)
	}
	do(a, "watch", "w@x.io")
	if err := b.HSet(ctx, "w@x.io", "n", "2").Err(); err != nil {
		t.Fatal(err)
	}
	do(a, "multi")
	do(a, "hset", "w@x.io", "n", "3")
	if r := do(a, "exec"); r.val != nil || r.err != "" {
		t.Fatalf("EXEC after a watched key changed: %#v, want null", r)
	}
	if v, _ := a.HGet(ctx, "w@x.io", "n").Result(); v != "2" {
		t.Fatalf("after the aborted EXEC: n = %q", v)
	}
	// Transactions that increment two counters, from many clients at once:
	// each applies whole, and none is lost.
	const workers, each = 8, 25
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			c := client(t, addr, 2)
			c.Options().PoolSize = 1
			for range each {
				_, err := c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
					p.HIncrBy(ctx, "t1@x.io", "n", 1)
					p.HIncrBy(ctx, "t2@x.io", "n", -1)
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	r1, err1 := store.FindProfile(ctx, "t1@x.io")
	r2, err2 := store.FindProfile(ctx, "t2@x.io")
	if err1 != nil || err2 != nil || r1.Profile["n"] != strconv.Itoa(workers*each) || r2.Profile["n"] != strconv.Itoa(-workers*each) {
		t.Fatalf("after %d transactions: %v %v, %v %v", workers*each, r1.Profile, err1, r2.Profile, err2)
	}
}

// execUnordered sorts the HGETALL replies among EXEC's (arrays and maps),
// whose field order partmap and Redis do not share.
func execUnordered(r reply) reply {
	vs, ok := r.val.([]any)
	if !ok {
		return r
	}
	out := make([]any, len(vs))
	for i, v := range vs {
		switch v := v.(type) {
		case []any:
			out[i] = unordered("hgetall", reply{val: v}).val
		default:
			out[i] = v
		}
	}
	return reply{val: out, err: r.err}
}

// A client that sends a command a byte at a time (a slowloris) is hung up
// on once the command has taken CommandTimeout; an idle one is not.
func TestSlowloris(t *testing.T) {
	onBothPaths(t, func(t *testing.T, loop bool) {
		addr, _ := serve(t, &resp.Options{CommandTimeout: 300 * time.Millisecond, EventLoop: loop})
		// No retries: a hung-up idle connection must fail the PING below.
		idle := goredis.NewClient(&goredis.Options{Addr: addr, DisableIdentity: true, MaxRetries: -1, PoolSize: 1})
		defer idle.Close()
		ctx := context.Background()
		if err := idle.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		began := time.Now()
		msg := []byte("*1\r\n$4\r\nPING\r\n")
		hungUp := false
		for i := 0; i < len(msg)-1 && !hungUp; i++ { // never the last byte
			if _, err := c.Write(msg[i : i+1]); err != nil {
				hungUp = true
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if n, err := c.Read(make([]byte, 16)); err == nil {
			t.Fatalf("the slow client read %d bytes", n)
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("the slow client was not hung up on after %v", time.Since(began))
		}
		time.Sleep(200 * time.Millisecond)
		if err := idle.Ping(ctx).Err(); err != nil {
			t.Fatalf("an idle client after %v: %v", time.Since(began), err)
		}
	})
}

// QUIT answers OK after the replies before it, and nothing sent after it
// runs.
func TestQuit(t *testing.T) {
	onBothPaths(t, func(t *testing.T, loop bool) {
		addr, store := serve(t, &resp.Options{EventLoop: loop})
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("*4\r\n$4\r\nHSET\r\n$6\r\nq@x.io\r\n$1\r\nf\r\n$1\r\n1\r\nQUIT\r\n*4\r\n$4\r\nHSET\r\n$6\r\nq@x.io\r\n$1\r\ng\r\n$1\r\n2\r\n")); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := io.ReadAll(c)
		if err != nil || string(got) != ":1\r\n+OK\r\n" {
			t.Fatalf("replies %q, %v; want :1 then +OK, then the hang-up", got, err)
		}
		rec, err := store.FindProfile(context.Background(), "q@x.io")
		if err != nil || rec.Profile["f"] != "1" || rec.Profile["g"] != "" {
			t.Fatalf("after QUIT: %v %v; want f and not g", rec.Profile, err)
		}
	})
}

// A go-redis client with its defaults (RESP3, and CLIENT SETINFO on each
// new connection) works as against Redis.
func TestDefaultGoRedisClient(t *testing.T) {
	addr, _ := serve(t, nil)
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	if err := c.HSet(ctx, "d@x.io", "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	if m, err := c.HGetAll(ctx, "d@x.io").Result(); err != nil || m["f"] != "v" {
		t.Fatalf("HGETALL: %v %v", m, err)
	}
	if err := c.Do(ctx, "client", "setinfo", "lib-name", "x").Err(); err != nil {
		t.Fatalf("CLIENT SETINFO: %v", err)
	}
}

// COMMAND DOCS documents every command COMMAND lists, and for those Redis
// has too, their arguments as Redis's do: redis-cli draws its hints from
// them (cmd/partmap's TestRedisCliInteractive types them).
func TestCommandDocs(t *testing.T) {
	addr, _ := serve(t, nil)
	pm, rd := client(t, addr, 3), redisClient(t, 13, 3)
	ctx := context.Background()
	infos, err := pm.Do(ctx, "command").Slice()
	if err != nil {
		t.Fatal(err)
	}
	docs, err := pm.Do(ctx, "command", "docs").Result()
	if err != nil {
		t.Fatal(err)
	}
	all := docs.(map[any]any)
	if len(all) != len(infos) {
		t.Errorf("COMMAND lists %d commands, COMMAND DOCS %d", len(infos), len(all))
	}
	var shared []any
	for _, info := range infos {
		name := info.([]any)[0].(string)
		d, ok := all[name].(map[any]any)
		if !ok || d["summary"] == "" || d["group"] == "" || d["since"] == "" {
			t.Errorf("COMMAND DOCS of %s: %#v", name, all[name])
		}
		// partmap's own, the newer Redis's, and a module's (the FT
		// commands, which Debian's redis-server lacks) are not Redis 7.0's.
		if name != "partmap.search" && !slices.Contains(newerThanRedis7, name) && d["group"] != "module" {
			shared = append(shared, name)
		}
	}
	arguments := func(c *goredis.Client) map[any]any {
		v, err := c.Do(ctx, append([]any{"command", "docs"}, shared...)...).Result()
		if err != nil {
			t.Fatal(err)
		}
		out := map[any]any{}
		for name, d := range v.(map[any]any) {
			out[name] = structure(d.(map[any]any)["arguments"])
		}
		return out
	}
	got, want := arguments(pm), arguments(rd)
	if len(got) != len(shared) || len(want) != len(shared) {
		t.Fatalf("COMMAND DOCS of %d commands: partmap documents %d, Redis %d", len(shared), len(got), len(want))
	}
	for _, name := range shared {
		if !reflect.DeepEqual(got[name], want[name]) {
			t.Errorf("arguments of %s:\npartmap %v\nredis   %v", name, got[name], want[name])
		}
	}
	if d, _ := pm.Do(ctx, "command", "docs", "nosuch", "HGET", "client|nosuch", "hget|x").Result(); len(d.(map[any]any)) != 1 {
		t.Errorf("COMMAND DOCS nosuch HGET client|nosuch hget|x: %v", d)
	}

	// A subcommand asked by its full name, as redis-cli asks.
	var subs []any
	for name := range all["client"].(map[any]any)["subcommands"].(map[any]any) {
		if name != "client|setinfo" { // Redis 7.2's
			subs = append(subs, name)
		}
	}
	if len(subs) < 4 {
		t.Fatalf("CLIENT's subcommands: %v", subs)
	}
	shared = subs
	got, want = arguments(pm), arguments(rd)
	if len(got) != len(subs) || len(want) != len(subs) {
		t.Fatalf("COMMAND DOCS %v: partmap documents %d, Redis %d", subs, len(got), len(want))
	}
	for _, name := range subs {
		if !reflect.DeepEqual(got[name], want[name]) {
			t.Errorf("arguments of %s:\npartmap %v\nredis   %v", name, got[name], want[name])
		}
	}
}

// newerThanRedis7 are the commands Debian's Redis 7.0 lacks.
var newerThanRedis7 = []string{"hexpire", "hpexpire", "hexpireat", "hpexpireat", "httl", "hpttl", "hexpiretime", "hpexpiretime", "hpersist", "hgetdel", "hgetex", "hsetex"}

// structure keeps of an argument list what hints and clients read: names,
// types, tokens, flags and nested arguments.
func structure(v any) any {
	args, _ := v.([]any)
	var out []any
	for _, a := range args {
		m := a.(map[any]any)
		kept := map[any]any{}
		for _, k := range []string{"name", "type", "token", "flags"} {
			if x, ok := m[k]; ok {
				kept[k] = fmt.Sprint(x)
			}
		}
		if sub, ok := m["arguments"]; ok {
			kept["arguments"] = structure(sub)
		}
		out = append(out, kept)
	}
	return out
}

// spy is a store that counts the writes resp sends it.
type spy struct {
	partmap.Store
	mu        sync.Mutex
	transacts [][]partmap.Operation
}

func (s *spy) Transact(ctx context.Context, ops []partmap.Operation) ([]partmap.OperationResult, error) {
	s.mu.Lock()
	s.transacts = append(s.transacts, ops)
	s.mu.Unlock()
	return s.Store.Transact(ctx, ops)
}

// taken returns the transactions run since the last call, and forgets
// them.
func (s *spy) taken() [][]partmap.Operation {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.transacts
	s.transacts = nil
	return t
}

// serveSpy starts a RESP server on a spy of a started Pebble store.
func serveSpy(t *testing.T) (string, *spy) {
	t.Helper()
	_, store := serve(t, nil)
	sp := &spy{Store: store}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := resp.New(sp, nil)
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return ln.Addr().String(), sp
}

// DEL and UNLINK of several keys are one transaction of deletes, which
// counts those that existed; past a transaction's size they are refused
// whole.
func TestDelIsOneTransaction(t *testing.T) {
	addr, sp := serveSpy(t)
	c := client(t, addr, 2)
	ctx := context.Background()
	for _, k := range []string{"a@x.io", "b@x.io"} {
		if err := c.HSet(ctx, k, "f", "1").Err(); err != nil {
			t.Fatal(err)
		}
	}
	sp.taken()
	if n, err := c.Del(ctx, "a@x.io", "nobody@x.io", "B@x.io", "a@x.io").Result(); err != nil || n != 2 {
		t.Fatalf("DEL: %d %v, want 2", n, err)
	}
	txs := sp.taken()
	if len(txs) != 1 || len(txs[0]) != 4 {
		t.Fatalf("DEL of four keys ran the transactions %+v, want one of four deletes", txs)
	}
	for _, op := range txs[0] {
		if op.Op != partmap.OpDelete || !op.AllowMissing {
			t.Fatalf("DEL's operation %+v", op)
		}
	}
	if n, _ := c.Exists(ctx, "a@x.io", "b@x.io").Result(); n != 0 {
		t.Fatalf("after DEL, %d keys exist", n)
	}
	// A key that is no email: nothing is deleted.
	c.HSet(ctx, "a@x.io", "f", "1")
	if err := c.Unlink(ctx, "a@x.io", "café@x.io").Err(); err == nil || !strings.Contains(err.Error(), "not a customer email") {
		t.Fatalf("UNLINK of a non-email: %v", err)
	}
	if n, _ := c.Exists(ctx, "a@x.io").Result(); n != 1 {
		t.Fatal("a refused UNLINK deleted a key")
	}
	// More keys than a transaction names go a hundred at a time, each
	// hundred atomic; a key named twice counts once.
	keys := []string{"a@x.io"}
	for i := range 2*partmap.MaxTransactionOps + 50 {
		keys = append(keys, fmt.Sprintf("k%d@x.io", i))
		if i%2 == 0 {
			c.HSet(ctx, keys[len(keys)-1], "f", "1")
		}
	}
	keys = append(keys, "a@x.io")
	sp.taken()
	if n, err := c.Del(ctx, keys...).Result(); err != nil || n != 1+partmap.MaxTransactionOps+25 {
		t.Fatalf("DEL of %d keys: %d %v, want %d", len(keys), n, err, 1+partmap.MaxTransactionOps+25)
	}
	if txs := sp.taken(); len(txs) != 3 {
		t.Fatalf("DEL of %d keys ran %d transactions, want 3 of at most %d", len(keys), len(txs), partmap.MaxTransactionOps)
	}
	if n, _ := c.Exists(ctx, keys[:partmap.MaxBatchEmails/4]...).Result(); n != 0 {
		t.Fatalf("after DEL, %d keys exist", n)
	}
}

// EXEC runs its transaction only when there is something to read or
// write; a command that fails inside it, even where partmap refuses what
// Redis takes, fails alone; and a transaction's size is bounded.
func TestExec(t *testing.T) {
	addr, sp := serveSpy(t)
	c := client(t, addr, 3)
	c.Options().PoolSize = 1
	answer := func(args ...any) string {
		if r := do(c, args...); r.err != "" {
			return r.err
		} else {
			return fmt.Sprint(r.val)
		}
	}
	for _, step := range []struct {
		args []any
		want string
	}{
		{[]any{"multi"}, "OK"}, {[]any{"exec"}, "[]"},
		{[]any{"multi"}, "OK"}, {[]any{"echo", "hi"}, "QUEUED"}, {[]any{"ping"}, "QUEUED"}, {[]any{"unwatch"}, "QUEUED"},
		{[]any{"hincrby", "e@x.io", "n", "x"}, "QUEUED"}, {[]any{"exec"}, "[hi PONG OK ERR value is not an integer or out of range]"},
	} {
		if got := answer(step.args...); got != step.want {
			t.Fatalf("%q: %s, want %s", step.args, got, step.want)
		}
	}
	if txs := sp.taken(); len(txs) != 0 {
		t.Fatalf("EXEC without operations ran %d transactions", len(txs))
	}
	do(c, "multi")
	for _, args := range [][]any{
		{"hset", "e@x.io", "bad", "\xff"}, {"hset", "e@x.io", "n", "1"}, {"hincrby", "e@x.io", "n", "2"},
		{"hexpire", "e@x.io", "100", "fields", "1", "n"}, {"httl", "e@x.io", "fields", "2", "n", "zz"}, {"expire", "e@x.io", "200"},
		{"ttl", "e@x.io"}, {"pttl", "nobody@x.io"}, {"hgetdel", "e@x.io", "fields", "1", "emailAddress"},
	} {
		do(c, args...)
	}
	got := do(c, "exec")
	vals, _ := got.val.([]any)
	if len(vals) != 9 || fmt.Sprint(vals[1:9]) != "[1 3 [1] [100 -2] 1 200 -2 [<nil>]]" || !strings.Contains(fmt.Sprint(vals[0]), "UTF-8") {
		t.Fatalf("EXEC: %#v", got)
	}
	if txs := sp.taken(); len(txs) != 1 || len(txs[0]) != 9 {
		t.Fatalf("EXEC ran the transactions %+v, want one of 9 operations", txs)
	}
	// A transaction is bounded by the profiles it names, not by its
	// commands: many on one profile run, as they did on a copy of it.
	do(c, "watch", "e@x.io")
	do(c, "multi")
	for range 2 * partmap.MaxTransactionOps {
		do(c, "hget", "e@x.io", "n")
	}
	if got := do(c, "exec"); got.err != "" || len(got.val.([]any)) != 2*partmap.MaxTransactionOps {
		t.Fatalf("EXEC of %d reads of one profile: %#v", 2*partmap.MaxTransactionOps, got)
	}
	do(c, "multi")
	for i := range partmap.MaxTransactionOps + 1 {
		do(c, "hget", fmt.Sprintf("p%d@x.io", i), "n")
	}
	if got := do(c, "exec"); !strings.HasPrefix(got.err, "ERR a transaction names at most 100 profiles; this one names 101") {
		t.Fatalf("EXEC naming %d profiles: %#v", partmap.MaxTransactionOps+1, got)
	}
}

// The change feed shows the kinds the client sent, inside MULTI as
// outside.
func TestFeedKindsUnderMulti(t *testing.T) {
	addr, store := serve(t, nil)
	c := client(t, addr, 2)
	c.Options().PoolSize = 1
	ctx := context.Background()
	feed := store.(partmap.Feeder)
	begin, err := feed.Changes(ctx, partmap.ChangeQuery{After: partmap.FeedNow})
	if err != nil {
		t.Fatal(err)
	}
	c.HSet(ctx, "gone@x.io", "f", "1")
	if _, err := c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.HIncrBy(ctx, "n@x.io", "n", 1)
		p.HSet(ctx, "s@x.io", "f", "v")
		p.HDel(ctx, "s@x.io", "g")
		p.Del(ctx, "gone@x.io")
		p.HIncrByFloat(ctx, "n@x.io", "f", 1.5)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	page, err := feed.Changes(ctx, partmap.ChangeQuery{After: begin.Next})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ch := range page.Changes {
		got = append(got, ch.Email+" "+string(ch.Op))
	}
	// A transaction's event of a profile names its last operation on it.
	want := []string{"gone@x.io setFields", "gone@x.io delete", "n@x.io incrementFloat", "s@x.io setFields"}
	if slices.Sort(got[1:]); !reflect.DeepEqual(got, want) {
		t.Fatalf("the feed: %q, want %q", got, want)
	}
	c.Do(ctx, "multi")
	c.Do(ctx, "hincrby", "n@x.io", "n", "1")
	c.Do(ctx, "exec")
	page, err = feed.Changes(ctx, partmap.ChangeQuery{After: page.Next})
	if err != nil || len(page.Changes) != 1 || page.Changes[0].Op != partmap.OpIncrement {
		t.Fatalf("the feed after HINCRBY in MULTI: %+v %v", page.Changes, err)
	}
}

// HTTL answers a field named twice inside EXEC as it does alone: twice,
// as Redis does.
func TestHTTLRepeatSameInExec(t *testing.T) {
	addr, _ := serve(t, nil)
	c := client(t, addr, 2)
	c.Options().PoolSize = 1
	do(c, "hset", "r@x.io", "a", "1")
	alone := do(c, "httl", "r@x.io", "fields", "2", "a", "a")
	do(c, "multi")
	do(c, "httl", "r@x.io", "fields", "2", "a", "a")
	inExec := do(c, "exec")
	want := []any{int64(-1), int64(-1)}
	if !reflect.DeepEqual(alone, reply{val: want}) || !reflect.DeepEqual(inExec, reply{val: []any{want}}) {
		t.Fatalf("HTTL of a repeated field: alone %#v, in EXEC %#v", alone, inExec)
	}
}
