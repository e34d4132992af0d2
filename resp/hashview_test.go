package resp_test

import (
	"context"
	"reflect"
	"testing"

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
