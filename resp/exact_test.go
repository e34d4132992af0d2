package resp_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// sameAsRedis runs each step on partmap and on Debian's redis-server (its
// database db, flushed), RESP2, and fails on every reply that differs.
func sameAsRedis(t *testing.T, db int, steps [][]any) {
	t.Helper()
	addr, _ := serve(t, nil)
	pm, rd := client(t, addr, 2), redisClient(t, db, 2)
	for i, args := range steps {
		if got, want := do(pm, args...), do(rd, args...); !reflect.DeepEqual(got, want) {
			t.Errorf("step %d %q: partmap %#v, redis %#v", i, args, got, want)
		}
	}
}

// Every integer argument is read as Redis reads it (string2ll): no sign on
// a positive, no leading zeros, no "-0", no spaces, within int64, with
// each command's own refusals; cursors as strtoul reads them.
func TestIntegerArgumentsMatchRedis(t *testing.T) {
	const k, none = "n@x.io", "none@x.io"
	steps := [][]any{{"hset", k, "f", "1"}}
	for _, bad := range []string{"+5000", "05000", "-0", "00", " 5", "5 ", "", "-", "1.5", "9223372036854775808", "-9223372036854775809", "0x10"} {
		steps = append(steps,
			[]any{"expire", k, bad}, []any{"pexpire", k, bad}, []any{"expireat", k, bad}, []any{"pexpireat", k, bad},
			[]any{"hincrby", k, "f", bad}, []any{"hincrby", none, "f", bad},
			[]any{"scan", "0", "count", bad}, []any{"hscan", k, "0", "count", bad}, []any{"hscan", none, "0", "count", bad},
			[]any{"hrandfield", k, bad}, []any{"hrandfield", none, bad, "withvalues"}, []any{"hrandfield", none, bad, "bogus"},
			[]any{"select", bad}, []any{"hello", bad}, []any{"copy", k, "c@x.io", "db", bad},
		)
	}
	steps = append(steps,
		[]any{"exists", k, "c@x.io"}, []any{"ttl", k}, []any{"hget", k, "f"}, // nothing above took
		[]any{"hincrby", k, "f", "-9223372036854775808"}, []any{"hincrby", k, "f", "9223372036854775807"}, []any{"hget", k, "f"},
		// Cursors: strtoul's reading.
		[]any{"scan", "+0"}, []any{"scan", "-0"}, []any{"scan", "000"}, []any{"scan", ""}, []any{"scan", " 0"}, []any{"scan", "0 "},
		[]any{"scan", "+"}, []any{"scan", "-"}, []any{"scan", "18446744073709551616"}, []any{"scan", "0x0"},
		[]any{"hscan", k, "+"}, []any{"hscan", k, " 0"}, []any{"hscan", k, "18446744073709551616"}, []any{"hscan", none, "-0"}, []any{"hscan", none, ""},
		// COUNT below 1 is a syntax error, of a key that exists.
		[]any{"scan", "0", "count", "0"}, []any{"scan", "0", "count", "-1"}, []any{"hscan", k, "0", "count", "0"}, []any{"hscan", none, "0", "count", "0"},
		[]any{"hscan", k, "0", "bogus", "1"}, []any{"hscan", none, "0", "bogus", "1"},
		// HRANDFIELD: the count first, then the syntax, then WITHVALUES's range.
		[]any{"hrandfield", none, "x", "bogus"}, []any{"hrandfield", none, "1", "bogus"}, []any{"hrandfield", none, "1", "withvalues", "x"},
		[]any{"hrandfield", none, "-9223372036854775808"}, []any{"hrandfield", none, "9223372036854775807"},
		[]any{"hrandfield", none, "4611686018427387903", "withvalues"}, []any{"hrandfield", none, "4611686018427387904", "withvalues"},
		[]any{"hrandfield", none, "-4611686018427387903", "withvalues"}, []any{"hrandfield", none, "-4611686018427387904", "withvalues"},
		// SELECT's index is an int.
		[]any{"select", "2147483648"}, []any{"select", "-2147483649"}, []any{"hello", "4"},
	)
	sameAsRedis(t, 14, steps)
}

// step is a command and the reply Redis's source gives it: a value, or an
// error's text.
type step struct {
	args []any
	want any
}

// asRedisSource runs each step on partmap (RESP3) and fails on every reply
// that is not the one its step wants: for the commands Debian's Redis 7.0
// lacks, whose replies the test cites from Redis's source.
func asRedisSource(t *testing.T, c *goredis.Client, steps []step) {
	t.Helper()
	for i, s := range steps {
		v, err := c.Do(context.Background(), s.args...).Result()
		got := v
		if err != nil && err != goredis.Nil {
			got = err.Error()
		}
		if !reflect.DeepEqual(got, s.want) {
			t.Errorf("step %d %q: got %#v, want %#v", i, s.args, got, s.want)
		}
	}
}

// The field-expiry commands read their integers with string2ll too.
// Redis's src/t_hash.c: hexpireGenericCommand, httlGenericCommand,
// hpersistCommand, hgetdelCommand and hgetexCommand read a time with
// getLongLongFromObjectOrReply and numfields with
// getRangeLongFromObjectOrReply and the command's own text.
func TestIntegerArgumentsOfFieldExpiry(t *testing.T) {
	addr, _ := serve(t, nil)
	c := client(t, addr, 3)
	const notInteger = "ERR value is not an integer or out of range"
	steps := []step{{[]any{"hset", "h@x.io", "f", "1"}, int64(1)}}
	for _, bad := range []string{"+1", "01", "-0", " 1", "1 ", ""} {
		steps = append(steps,
			step{[]any{"hpexpire", "h@x.io", bad, "fields", "1", "f"}, notInteger},
			step{[]any{"hexpireat", "h@x.io", bad, "fields", "1", "f"}, notInteger},
			step{[]any{"hgetex", "h@x.io", "ex", bad, "fields", "1", "f"}, notInteger},
			step{[]any{"hgetex", "h@x.io", "pxat", bad, "fields", "1", "f"}, notInteger},
			step{[]any{"hexpire", "h@x.io", "10", "fields", bad, "f"}, "ERR Parameter `numFields` should be greater than 0"},
			step{[]any{"httl", "h@x.io", "fields", bad, "f"}, "ERR Number of fields must be a positive integer"},
			step{[]any{"hpersist", "h@x.io", "fields", bad, "f"}, "ERR Number of fields must be a positive integer"},
			step{[]any{"hgetdel", "h@x.io", "fields", bad, "f"}, "ERR Number of fields must be a positive integer"},
			step{[]any{"hgetex", "h@x.io", "fields", bad, "f"}, "ERR Number of fields must be a positive integer"},
		)
	}
	steps = append(steps, step{[]any{"httl", "h@x.io", "fields", "1", "f"}, []any{int64(-1)}}, step{[]any{"hget", "h@x.io", "f"}, "1"})
	asRedisSource(t, c, steps)
}

// EXPIRE and its siblings read their options before their time, as
// Redis's expireGenericCommand does.
func TestExpireOptionsBeforeNumberMatchRedis(t *testing.T) {
	const k = "o@x.io"
	steps := [][]any{{"hset", k, "f", "1"}}
	for _, cmd := range []string{"expire", "pexpire", "expireat", "pexpireat"} {
		steps = append(steps,
			[]any{cmd, k, "abc", "gt", "lt"}, []any{cmd, k, "1.5", "FOO"}, []any{cmd, k, "x", "nx", "xx"},
			[]any{cmd, k, "+1", "lt", "bogus"}, []any{cmd, k, "", "GT", "LT"}, []any{cmd, k, "9223372036854775807", "nx", "gt"},
			[]any{cmd, k, "-9223372036854775808", "xx", "Nope"}, []any{cmd, "none@x.io", "abc", "gt", "lt"},
		)
	}
	sameAsRedis(t, 14, append(steps, []any{"ttl", k}))
}

// A key's deadline may be any Unix time in int64 milliseconds: Redis
// refuses one only where it overflows (expireGenericCommand), not past
// 2^48-1 ms.
func TestKeyDeadlinesMatchRedis(t *testing.T) {
	const k, none = "d@x.io", "none@x.io"
	set := []any{"hset", k, "f", "1"}
	sameAsRedis(t, 14, [][]any{
		set, {"expire", k, "300000000000"}, {"ttl", k},
		{"pexpire", k, "300000000000000"}, {"ttl", k},
		{"expireat", k, "9223372036854775"}, {"expiretime", k}, {"pexpiretime", k},
		{"pexpireat", k, "9223372036854775807"}, {"pexpiretime", k}, {"expiretime", k},
		{"expireat", k, "9223372036854775", "gt"}, {"expireat", k, "9223372036854775", "lt"}, {"pexpiretime", k},
		// Past int64, counted from the epoch or from now.
		{"expire", k, "9223372036854776"}, {"expire", k, "9223372036854775"}, {"expireat", k, "9223372036854776"},
		{"pexpire", k, "9223372036854775807"}, {"pexpire", none, "9223372036854775807"}, {"expire", none, "9223372036854775"},
		{"expire", k, "-9223372036854776"}, {"expireat", k, "-9223372036854776", "nx"}, {"pexpiretime", k},
		// Far in the past, a time deletes.
		{"expire", k, "-9223372036854775"}, {"exists", k},
		set, {"pexpire", k, "-9223372036854775808"}, {"exists", k},
		set, {"pexpireat", k, "-9223372036854775808"}, {"exists", k},
	})
}

// A field's deadline is at most Redis's HFE_MAX_ABS_TIME_MSEC, (2^48-1)/4
// ms after the epoch: src/t_hash.c's hexpireGenericCommand and
// parseExpireTime (HGETEX, HSETEX) refuse a later one, a relative one
// counted from the server's clock, with addReplyErrorExpireTime's text,
// before they look the key up.
func TestFieldDeadlineLimit(t *testing.T) {
	addr, _ := serve(t, nil)
	c := client(t, addr, 3)
	const latest, h = 70368744177663, "h@x.io"
	tooLate := func(cmd string) string { return "ERR invalid expire time in '" + cmd + "' command" }
	one := []any{int64(1)}
	steps := []step{
		{[]any{"hset", h, "f", "1", "g", "2"}, int64(2)},
		{[]any{"hpexpireat", h, "70368744177764", "fields", "1", "f"}, tooLate("hpexpireat")},
		{[]any{"hpexpireat", h, "70368744177664", "fields", "1", "f"}, tooLate("hpexpireat")},
		{[]any{"hpexpireat", "none@x.io", "70368744177664", "fields", "1", "f"}, tooLate("hpexpireat")},
		{[]any{"hpexpireat", h, "70368744177663", "fields", "1", "f"}, one},
		{[]any{"hpexpiretime", h, "fields", "1", "f"}, []any{int64(latest)}},
		{[]any{"hexpireat", h, "70368744178", "fields", "1", "f"}, tooLate("hexpireat")},
		{[]any{"hexpireat", h, "70368744177", "nx", "fields", "1", "g"}, one},
		{[]any{"hpexpiretime", h, "fields", "1", "g"}, []any{int64(70368744177000)}},
		{[]any{"hexpire", h, "70368744178", "fields", "1", "f"}, tooLate("hexpire")},
		{[]any{"hexpire", h, "70368744177", "fields", "1", "f"}, tooLate("hexpire")}, // past it once counted from now
		{[]any{"hpexpire", h, "70368744177664", "fields", "1", "f"}, tooLate("hpexpire")},
		{[]any{"hpexpire", h, "70368744177663", "fields", "1", "f"}, tooLate("hpexpire")},
		{[]any{"hpexpire", "none@x.io", "70368744177663", "fields", "1", "f"}, tooLate("hpexpire")},
		{[]any{"hgetex", h, "pxat", "70368744177664", "fields", "1", "f"}, tooLate("hgetex")},
		{[]any{"hgetex", h, "exat", "70368744178", "fields", "1", "f"}, tooLate("hgetex")},
		{[]any{"hgetex", h, "ex", "70368744178", "fields", "1", "f"}, tooLate("hgetex")},
		{[]any{"hgetex", h, "px", "70368744177663", "fields", "1", "f"}, tooLate("hgetex")},
		{[]any{"hgetex", h, "pxat", "70368744177663", "fields", "1", "g"}, []any{"2"}},
		{[]any{"hsetex", h, "pxat", "70368744177664", "fields", "1", "f", "v"}, tooLate("hsetex")},
		{[]any{"hsetex", h, "exat", "70368744178", "fields", "1", "f", "v"}, tooLate("hsetex")},
		{[]any{"hsetex", h, "ex", "70368744178", "fields", "1", "f", "v"}, tooLate("hsetex")},
		{[]any{"hsetex", h, "px", "70368744177663", "fields", "1", "f", "v"}, tooLate("hsetex")},
		{[]any{"hsetex", "none@x.io", "px", "70368744177663", "fields", "1", "f", "v"}, tooLate("hsetex")},
		{[]any{"hsetex", h, "exat", "70368744177", "fields", "1", "f", "v"}, int64(1)},
		{[]any{"hpexpiretime", h, "fields", "2", "f", "g"}, []any{int64(70368744177000), int64(latest)}},
		{[]any{"exists", "none@x.io"}, int64(0)},
	}
	asRedisSource(t, c, steps)
	// Inside EXEC, the refusal is the command's reply in its place.
	c.Options().PoolSize = 1
	ctx := context.Background()
	c.Do(ctx, "multi")
	c.Do(ctx, "hpexpire", h, "70368744177663", "fields", "1", "f")
	c.Do(ctx, "hpexpire", h, "1000000", "fields", "1", "f")
	v, err := c.Do(ctx, "exec").Slice()
	if err != nil || len(v) != 2 || fmt.Sprint(v[0]) != tooLate("hpexpire") || !reflect.DeepEqual(v[1], one) {
		t.Fatalf("EXEC of a time too late and one not: %#v %v", v, err)
	}
}

// A field's time is never negative: "invalid expire time, must be >= 0"
// (src/t_hash.c's hexpireGenericCommand, and parseExpireTime for HGETEX
// and HSETEX).
func TestFieldDeadlineNegative(t *testing.T) {
	addr, _ := serve(t, nil)
	c := client(t, addr, 3)
	const negative = "ERR invalid expire time, must be >= 0"
	steps := []step{{[]any{"hset", "h@x.io", "f", "1"}, int64(1)}}
	for _, cmd := range []string{"hexpire", "hpexpire", "hexpireat", "hpexpireat"} {
		steps = append(steps, step{[]any{cmd, "h@x.io", "-1", "fields", "1", "f"}, negative},
			step{[]any{cmd, "none@x.io", "-9223372036854775808", "nx", "fields", "1", "f"}, negative})
	}
	for _, opt := range []string{"ex", "px", "exat", "pxat"} {
		steps = append(steps, step{[]any{"hgetex", "h@x.io", opt, "-1", "fields", "1", "f"}, negative},
			step{[]any{"hsetex", "h@x.io", opt, "-1", "fields", "1", "f", "2"}, negative})
	}
	asRedisSource(t, c, append(steps, step{[]any{"httl", "h@x.io", "fields", "1", "f"}, []any{int64(-1)}}, step{[]any{"hget", "h@x.io", "f"}, "1"}))
}

// A field named twice is taken in turn, as Redis takes each argument:
// src/t_hash.c's hexpireGenericCommand, hpersistCommand, hgetdelCommand,
// hgetexCommand and hsetexCommand act on each field as they reach it, so
// the second of two is answered as the first left it; httlGenericCommand
// answers each. Inside EXEC too.
func TestRepeatedFieldsInTurn(t *testing.T) {
	addr, _ := serve(t, nil)
	c := client(t, addr, 3)
	const h, far = "r@x.io", "4102444800" // 2100-01-01
	i := func(ns ...int64) []any {
		out := make([]any, len(ns))
		for j, n := range ns {
			out[j] = n
		}
		return out
	}
	asRedisSource(t, c, []step{
		{[]any{"hset", h, "a", "1", "b", "2", "c", "3", "keep", "k"}, int64(4)},
		{[]any{"hexpireat", h, far, "fields", "2", "a", "a"}, i(1, 1)},
		{[]any{"hexpireat", h, far, "nx", "fields", "3", "b", "b", "zz"}, i(1, 0, -2)},
		{[]any{"hexpireat", h, far, "gt", "fields", "2", "c", "c"}, i(0, 0)},
		{[]any{"hexpireat", h, far, "lt", "fields", "2", "c", "c"}, i(1, 0)},
		{[]any{"hexpiretime", h, "fields", "3", "a", "a", "keep"}, i(4102444800, 4102444800, -1)},
		{[]any{"hpexpiretime", h, "fields", "2", "b", "b"}, i(4102444800000, 4102444800000)},
		{[]any{"httl", h, "fields", "4", "keep", "keep", "zz", "zz"}, i(-1, -1, -2, -2)},
		{[]any{"hpttl", h, "fields", "2", "keep", "keep"}, i(-1, -1)},
		{[]any{"hpersist", h, "fields", "3", "a", "a", "zz"}, i(1, -1, -2)},
		{[]any{"hpexpire", h, "0", "fields", "2", "b", "b"}, i(2, -2)},
		{[]any{"hgetex", h, "persist", "fields", "2", "c", "c"}, []any{"3", "3"}},
		{[]any{"hgetex", h, "ex", "100", "fields", "2", "c", "c"}, []any{"3", "3"}},
		{[]any{"hgetex", h, "pxat", "1", "fields", "3", "c", "c", "a"}, []any{"3", nil, "1"}},
		{[]any{"hset", h, "d", "4"}, int64(1)},
		{[]any{"hgetdel", h, "fields", "3", "d", "d", "zz"}, []any{"4", nil, nil}},
		{[]any{"hsetex", h, "fields", "2", "e", "1", "e", "2"}, int64(1)},
		{[]any{"hsetex", h, "fnx", "fields", "2", "f", "1", "f", "2"}, int64(1)},
		{[]any{"hsetex", h, "fxx", "fields", "2", "f", "3", "f", "4"}, int64(1)},
		{[]any{"hmget", h, "a", "b", "c", "d", "e", "f", "keep"}, []any{nil, nil, nil, nil, "2", "4", "k"}},
	})
	c.Options().PoolSize = 1
	ctx := context.Background()
	c.Do(ctx, "multi")
	c.Do(ctx, "hexpire", h, "100", "fields", "2", "keep", "keep")
	c.Do(ctx, "httl", h, "fields", "2", "keep", "keep")
	c.Do(ctx, "hpersist", h, "fields", "2", "keep", "keep")
	c.Do(ctx, "hgetdel", h, "fields", "2", "keep", "keep")
	c.Do(ctx, "hgetdel", h, "fields", "2", "keep", "keep")
	v, err := c.Do(ctx, "exec").Slice()
	if want := []any{i(1, 1), i(100, 100), i(1, -1), []any{"k", nil}, []any{nil, nil}}; err != nil || !reflect.DeepEqual(v, want) {
		t.Fatalf("EXEC of repeated fields: %#v %v, want %#v", v, err, want)
	}
}

// HSETEX takes FNX or FXX and its time in any order before FIELDS, with
// the refusals of src/t_hash.c's hsetexParseArgs; HGETEX takes its one
// option right after the key (hgetexCommand).
func TestHSetExOptionsMatchRedisSource(t *testing.T) {
	addr, _ := serve(t, nil)
	c := client(t, addr, 3)
	const h = "s@x.io"
	arity := "ERR wrong number of arguments for 'hsetex' command"
	oneCond := "ERR Only one of FXX or FNX arguments can be specified"
	oneTime := "ERR Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified"
	fieldsCount := "ERR invalid number of fields"
	mandatory := "ERR Mandatory argument FIELDS is missing or not at the right position"
	asRedisSource(t, c, []step{
		{[]any{"hsetex", h, "ex", "100", "fnx", "fields", "1", "a", "1"}, int64(1)},
		{[]any{"hsetex", h, "keepttl", "FXX", "fields", "1", "a", "2"}, int64(1)},
		{[]any{"httl", h, "fields", "1", "a"}, []any{int64(100)}},
		{[]any{"hsetex", h, "PxAt", "1", "Fnx", "fields", "1", "a", "3"}, int64(0)},
		{[]any{"hsetex", h, "fields", "1", "fields", "b"}, int64(1)},
		{[]any{"hmget", h, "a", "fields"}, []any{"2", "b"}},
		{[]any{"hsetex", h, "fields", "1", "a", "b", "unknown"}, arity},
		{[]any{"hsetex", h, "fields", "2", "a", "b"}, arity},
		{[]any{"hsetex", h, "fields", "1", "a", "b", "c", "d"}, arity},
		{[]any{"hsetex", h, "ex", "100", "fields", "1", "a"}, arity},
		{[]any{"hsetex", h, "fnx", "fields", "1", "a"}, arity},
		{[]any{"hsetex", h, "nx", "fields", "1", "a", "b"}, "ERR unknown argument: nx"},
		{[]any{"hsetex", h, "1", "fields", "1", "a", "b"}, "ERR unknown argument: 1"},
		{[]any{"hsetex", h, "fnx", "ex", "10", "Persist", "fields", "1", "a", "b"}, "ERR unknown argument: Persist"},
		{[]any{"hsetex", h, "fxx", "fxx", "ex", "100", "fields", "1", "a", "b"}, oneCond},
		{[]any{"hsetex", h, "fxx", "fnx", "ex", "100", "fields", "1", "a", "b"}, oneCond},
		{[]any{"hsetex", h, "ex", "100", "fnx", "fxx", "fields", "1", "a", "b"}, oneCond},
		{[]any{"hsetex", h, "ex", "100", "px", "100", "fields", "1", "a", "b"}, oneTime},
		{[]any{"hsetex", h, "keepttl", "ex", "100", "fields", "1", "a", "b"}, oneTime},
		{[]any{"hsetex", h, "exat", "100", "keepttl", "fields", "1", "a", "b"}, oneTime},
		{[]any{"hsetex", h, "keepttl", "keepttl", "fields", "1", "a", "b"}, oneTime},
		{[]any{"hsetex", h, "ex", "x", "px", "1", "fields", "1", "a", "b"}, "ERR value is not an integer or out of range"},
		{[]any{"hsetex", h, "fields", "0", "a", "b"}, fieldsCount},
		{[]any{"hsetex", h, "fields", "-1", "a", "b"}, fieldsCount},
		{[]any{"hsetex", h, "fields", "+1", "a", "b"}, fieldsCount},
		{[]any{"hsetex", h, "fields", "x", "a", "b"}, fieldsCount},
		{[]any{"hsetex", h, "fields", "2147483648", "a", "b"}, fieldsCount},
		{[]any{"hgetex", h, "persist", "ex", "10", "fields", "1", "a"}, mandatory},
		{[]any{"hgetex", h, "fnx", "fields", "1", "a"}, mandatory},
		{[]any{"hgetex", h, "ex", "10", "persist", "fields", "1", "a"}, mandatory},
		{[]any{"hgetex", h, "PERSIST", "fields", "1", "a"}, []any{"2"}},
		{[]any{"httl", h, "fields", "1", "a"}, []any{int64(-1)}},
	})
}
