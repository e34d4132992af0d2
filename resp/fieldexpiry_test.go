package resp_test

import (
	"context"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partmap/partmap/pebble"
)

// The field-expiry commands, which Debian's Redis 7.0 lacks, against
// Redis's documented replies, on a store whose clock the test moves.
func TestFieldExpiry(t *testing.T) {
	var skew atomic.Int64
	base := time.UnixMilli(1_900_000_000_000) // a whole second
	opts := pebble.Options{}
	opts.Clock = func() time.Time { return base.Add(time.Duration(skew.Load())) }
	_, addr, _ := serveServer(t, &opts, nil)
	c := client(t, addr, 3)
	now := base.UnixMilli()
	for i, step := range []struct {
		args []any
		want any
	}{
		{[]any{"hset", "k@x.io", "a", "1", "b", "2", "c", "3"}, int64(3)},
		{[]any{"hexpire", "nobody@x.io", "100", "fields", "2", "a", "b"}, []any{int64(-2), int64(-2)}},
		{[]any{"httl", "nobody@x.io", "fields", "1", "a"}, []any{int64(-2)}},
		{[]any{"hexpire", "k@x.io", "100", "fields", "2", "a", "zz"}, []any{int64(1), int64(-2)}},
		{[]any{"httl", "k@x.io", "fields", "2", "a", "b"}, []any{int64(100), int64(-1)}},
		{[]any{"hpttl", "k@x.io", "fields", "1", "a"}, []any{int64(100_000)}},
		{[]any{"hexpire", "k@x.io", "100", "nx", "fields", "1", "a"}, []any{int64(0)}},
		{[]any{"hexpire", "k@x.io", "50", "gt", "fields", "1", "a"}, []any{int64(0)}},
		{[]any{"hpexpire", "k@x.io", "200000", "gt", "fields", "1", "a"}, []any{int64(1)}},
		{[]any{"hexpiretime", "k@x.io", "fields", "1", "a"}, []any{(now + 200_000 + 999) / 1000}},
		{[]any{"hpexpiretime", "k@x.io", "fields", "1", "a"}, []any{now + 200_000}},
		{[]any{"hexpireat", "k@x.io", "1", "fields", "1", "c"}, []any{int64(2)}},
		{[]any{"hexists", "k@x.io", "c"}, int64(0)},
		{[]any{"hpersist", "k@x.io", "fields", "3", "a", "b", "zz"}, []any{int64(1), int64(-1), int64(-2)}},
		{[]any{"hsetex", "k@x.io", "fnx", "ex", "100", "fields", "1", "d", "4"}, int64(1)},
		{[]any{"hsetex", "k@x.io", "fnx", "ex", "100", "fields", "1", "d", "5"}, int64(0)},
		{[]any{"hsetex", "k@x.io", "fxx", "keepttl", "fields", "1", "d", "6"}, int64(1)},
		{[]any{"httl", "k@x.io", "fields", "1", "d"}, []any{int64(100)}},
		{[]any{"hgetex", "k@x.io", "persist", "fields", "2", "d", "zz"}, []any{"6", nil}},
		{[]any{"httl", "k@x.io", "fields", "1", "d"}, []any{int64(-1)}},
		{[]any{"hgetex", "k@x.io", "px", "1500", "fields", "1", "d"}, []any{"6"}},
		{[]any{"hgetdel", "k@x.io", "fields", "2", "b", "zz"}, []any{"2", nil}},
		{[]any{"hgetdel", "nobody@x.io", "fields", "1", "b"}, []any{nil}},
		{[]any{"hkeys", "k@x.io"}, []any{"a", "d"}},
		// emailAddress is no field of the hash.
		{[]any{"hexpire", "k@x.io", "300", "fields", "2", "emailAddress", "a"}, []any{int64(-2), int64(1)}},
		{[]any{"httl", "k@x.io", "fields", "2", "emailAddress", "a"}, []any{int64(-2), int64(300)}},
		{[]any{"hpexpiretime", "k@x.io", "fields", "1", "emailAddress"}, []any{int64(-2)}},
		{[]any{"hpersist", "k@x.io", "fields", "2", "emailAddress", "zz"}, []any{int64(-2), int64(-2)}},
		{[]any{"hgetex", "k@x.io", "ex", "5", "fields", "2", "emailAddress", "a"}, []any{nil, "1"}},
		{[]any{"hpersist", "k@x.io", "fields", "1", "a"}, []any{int64(1)}},
		{[]any{"hexpire", "k@x.io", "0", "fields", "1", "emailAddress"}, []any{int64(-2)}},
		{[]any{"hgetdel", "k@x.io", "fields", "1", "emailAddress"}, []any{nil}},
		{[]any{"hexists", "k@x.io", "emailAddress"}, int64(0)},
		// A hash whose last field goes is deleted: by HGETDEL, HEXPIRE
		// with 0, HGETEX and HSETEX with a time past.
		{[]any{"hset", "g@x.io", "a", "1", "b", "2"}, int64(2)},
		{[]any{"hgetdel", "g@x.io", "fields", "3", "a", "emailAddress", "b"}, []any{"1", nil, "2"}},
		{[]any{"exists", "g@x.io"}, int64(0)},
		{[]any{"hset", "g@x.io", "a", "1"}, int64(1)},
		{[]any{"hpexpire", "g@x.io", "0", "fields", "2", "a", "emailAddress"}, []any{int64(2), int64(-2)}},
		{[]any{"type", "g@x.io"}, "none"},
		{[]any{"hset", "g@x.io", "a", "1"}, int64(1)},
		{[]any{"hgetex", "g@x.io", "pxat", "1", "fields", "1", "a"}, []any{"1"}},
		{[]any{"exists", "g@x.io"}, int64(0)},
		{[]any{"hset", "g@x.io", "a", "1"}, int64(1)},
		{[]any{"hsetex", "g@x.io", "pxat", "1", "fields", "1", "a", "2"}, int64(1)},
		{[]any{"exists", "g@x.io"}, int64(0)},
		{[]any{"hset", "t@x.io", "a", "1"}, int64(1)},
		{[]any{"hpexpire", "t@x.io", "1500", "fields", "1", "a"}, []any{int64(1)}},
		// Errors, as Redis words them.
		{[]any{"hexpire", "k@x.io", "100", "fields", "0", "a"}, "ERR Parameter `numFields` should be greater than 0"},
		{[]any{"hexpire", "k@x.io", "100", "bogus", "fields", "1", "a"}, "ERR Mandatory argument FIELDS is missing or not at the right position"},
		{[]any{"hexpire", "k@x.io", "100", "fields", "2", "a"}, "ERR The `numfields` parameter must match the number of arguments"},
		{[]any{"hexpire", "k@x.io", "-1", "fields", "1", "a"}, "ERR invalid expire time, must be >= 0"},
		{[]any{"hexpire", "k@x.io", "x", "fields", "1", "a"}, "ERR value is not an integer or out of range"},
		{[]any{"httl", "k@x.io", "fields", "x", "a"}, "ERR Number of fields must be a positive integer"},
		{[]any{"hsetex", "k@x.io", "fields", "1", "a"}, "ERR wrong number of arguments for 'hsetex' command"},
		{[]any{"hsetex", "k@x.io", "fields", "2", "a", "b"}, "ERR wrong number of arguments for 'hsetex' command"},
	} {
		v, err := c.Do(context.Background(), step.args...).Result()
		got := v
		if err != nil && err.Error() != "redis: nil" {
			got = err.Error()
		}
		if !reflect.DeepEqual(got, step.want) {
			t.Fatalf("step %d %q: got %#v, want %#v", i, step.args, got, step.want)
		}
	}
	// The deadline passes: d (1.5 s) is gone, a (no deadline) stays, and
	// t@x.io, whose one field expired, is gone, as Redis deletes a hash
	// whose last field expires.
	skew.Store(int64(2 * time.Second))
	ctx := context.Background()
	if v, err := c.HMGet(ctx, "k@x.io", "a", "d").Result(); err != nil || v[0] != "1" || v[1] != nil {
		t.Fatalf("after 2 s: %#v %v", v, err)
	}
	if n, err := c.Exists(ctx, "t@x.io").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS of a hash whose last field expired: %d %v", n, err)
	}
	if keys, _, err := c.Scan(ctx, 0, "", 100).Result(); err != nil || !reflect.DeepEqual(keys, []string{"k@x.io"}) {
		t.Fatalf("SCAN after the last field of t@x.io expired: %q %v", keys, err)
	}
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 1 {
		t.Fatalf("DBSIZE after the last field of t@x.io expired: %d %v", n, err)
	}
}
