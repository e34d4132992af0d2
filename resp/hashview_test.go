package resp_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
)

// A profile that holds its emailAddress alone, which HTTP and imports can
// make but no Redis command leaves, reads as a missing key, not as an
// empty hash: Redis has none.
func TestKeyAloneReadsAsMissing(t *testing.T) {
	addr, store := serve(t, nil)
	ctx := context.Background()
	for _, e := range []string{"alone@x.io", "full@x.io"} {
		p := partmap.Profile{partmap.FieldEmail: e}
		if e == "full@x.io" {
			p["f"] = "1"
		}
		if _, _, err := partmap.UpsertProfile(ctx, store, p, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, proto := range []int{2, 3} {
		c := client(t, addr, proto)
		for _, step := range []struct {
			args []any
			want reply
		}{
			{[]any{"exists", "alone@x.io", "full@x.io"}, reply{val: int64(1)}},
			{[]any{"type", "alone@x.io"}, reply{val: "none"}},
			{[]any{"get", "alone@x.io"}, reply{}},
			{[]any{"get", "full@x.io"}, reply{err: "WRONGTYPE Operation against a key holding the wrong kind of value"}},
			{[]any{"hlen", "alone@x.io"}, reply{val: int64(0)}},
			{[]any{"hkeys", "alone@x.io"}, reply{val: []any{}}},
			{[]any{"hget", "alone@x.io", partmap.FieldEmail}, reply{}},
			{[]any{"hrandfield", "alone@x.io"}, reply{}},
		} {
			if got := do(c, step.args...); !reflect.DeepEqual(got, step.want) {
				t.Errorf("RESP%d %q: %#v, want %#v", proto, step.args, got, step.want)
			}
		}
		if keys, _, err := c.Scan(ctx, 0, "", 100).Result(); err != nil || !reflect.DeepEqual(keys, []string{"full@x.io"}) {
			t.Errorf("RESP%d SCAN: %q %v, want full@x.io alone", proto, keys, err)
		}
	}
	// A field written makes it a key like any other.
	c := client(t, addr, 2)
	if n, err := c.HSet(ctx, "alone@x.io", "g", "2").Result(); err != nil || n != 1 {
		t.Fatalf("HSET: %d %v", n, err)
	}
	if n, err := c.Exists(ctx, "alone@x.io").Result(); err != nil || n != 1 {
		t.Fatalf("EXISTS after HSET: %d %v", n, err)
	}
}

// Redis's own hash tests fit the limits: a hash of over 1,024 fields
// (hash.tcl's "big hash" reaches 1,026) and field names over 256 bytes
// answer as Redis's do; past the limits, a write is refused and writes
// nothing.
func TestBigHashesMatchRedis(t *testing.T) {
	addr, _ := serve(t, nil)
	pm, rd := client(t, addr, 2), redisClient(t, 15, 2)
	ctx := context.Background()
	l := partmap.DefaultLimits
	long := strings.Repeat("k", l.MaxFieldNameBytes)
	for _, c := range []*goredis.Client{pm, rd} {
		if _, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i := range 1026 {
				p.HSet(ctx, "big@x.io", fmt.Sprintf("__avoid_collisions__%d", i), i)
			}
			p.HSet(ctx, "big@x.io", long, "b")
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]any{{"hlen", "big@x.io"}, {"hgetall", "big@x.io"}, {"hget", "big@x.io", long}, {"hstrlen", "big@x.io", long}} {
		name := args[0].(string)
		if got, want := unordered(name, do(pm, args...)), unordered(name, do(rd, args...)); !reflect.DeepEqual(got, want) {
			t.Errorf("%.40q: partmap %.200v, redis %.200v", args, got, want)
		}
	}
	// The hash holds 1,027 fields: fill it to the limit, emailAddress
	// aside, then one more field, or a longer name, is refused.
	var fill []any
	for i := 1027; i < l.MaxFields-1; i++ {
		fill = append(fill, fmt.Sprintf("f%d", i), "v")
	}
	if n, err := pm.HSet(ctx, "big@x.io", fill...).Result(); err != nil || int(n) != len(fill)/2 {
		t.Fatalf("HSET to the limit: %d %v", n, err)
	}
	for _, args := range [][]any{{"hset", "big@x.io", "one-more", "v"}, {"hset", "big@x.io", long + "k", "v"}} {
		if r := do(pm, args...); !strings.HasPrefix(r.err, "ERR ") {
			t.Errorf("%.40q: %#v, want a refusal", args, r)
		}
	}
	if n, err := pm.HLen(ctx, "big@x.io").Result(); err != nil || n != int64(l.MaxFields-1) {
		t.Fatalf("HLEN at the limit: %d %v, want %d", n, err, l.MaxFields-1)
	}
}
