package redis_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
)

// Random sequences of hash commands run on a partmap profile and on a
// Redis hash of the real server side by side: every reply, and the whole
// hash after each step, must be the same. It covers the commands Redis 7.0
// has: HSET and HDEL (as patches), HINCRBY, HINCRBYFLOAT and HSETNX.
func TestHashCommandsMatchRedis(t *testing.T) {
	ctx := context.Background()
	store := openStarted(t, open, nil)
	db := int(server.nextDB.Add(1) % databases)
	rdb := goredis.NewClient(&goredis.Options{Network: "unix", Addr: server.socket, DB: db})
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const email, key = "ada@example.com", "h"
	if _, _, err := partmap.UpsertProfile(ctx, store, partmap.Profile{"emailAddress": email}, partmap.Condition{}); err != nil {
		t.Fatal(err)
	}
	rdb.HSet(ctx, key, "emailAddress", email)

	fields := []string{"a", "b", "c", "n"}
	values := []string{"0", "1", "-7", "9223372036854775807", "-9223372036854775808", "1.5", "10.50", "abc", "",
		" 1", "1e3", "+5", "007", "-0", "3.0e2", "0.1", "1.7976931348623157e308", "-inf", "inf", "nan", "0x10", "1e-320"}
	incrs := []int64{1, -1, 0, 41, 1 << 62, -(1 << 62), 9223372036854775807}
	floats := []string{"0.1", "-0.1", "1", "2.5e3", "1e308", "-1e308", "1e-5", "abc", "", "inf", "5.0e3", "0"}
	rng := rand.New(rand.NewPCG(1, 2))
	outcome := func(err error) string {
		if err == nil {
			return "ok"
		}
		return "error"
	}
	for step := range 3000 {
		f := fields[rng.IntN(len(fields))]
		var what, got, want string
		switch rng.IntN(5) {
		case 0:
			v := values[rng.IntN(len(values))]
			what = fmt.Sprintf("HSET %s %q", f, v)
			res, err := partmap.PatchProfile(ctx, store, email, partmap.Patch{f: &v}, partmap.Condition{})
			n, rerr := rdb.HSet(ctx, key, f, v).Result()
			got, want = fmt.Sprint(res.FieldsAdded, outcome(err)), fmt.Sprint(n, outcome(rerr))
		case 1:
			what = "HDEL " + f
			res, err := partmap.PatchProfile(ctx, store, email, partmap.Patch{f: nil}, partmap.Condition{})
			n, rerr := rdb.HDel(ctx, key, f).Result()
			got, want = fmt.Sprint(res.FieldsDeleted, outcome(err)), fmt.Sprint(n, outcome(rerr))
		case 2:
			by := incrs[rng.IntN(len(incrs))]
			if rng.IntN(2) == 0 {
				by = -by
			}
			what = fmt.Sprintf("HINCRBY %s %d", f, by)
			inc, err := partmap.IncrementField(ctx, store, email, f, by, partmap.Condition{})
			n, rerr := rdb.HIncrBy(ctx, key, f, by).Result()
			got, want = outcome(err), outcome(rerr)
			if err == nil && rerr == nil {
				got, want = strconv.FormatInt(inc.Value, 10), strconv.FormatInt(n, 10)
			}
		case 3:
			by := floats[rng.IntN(len(floats))]
			what = fmt.Sprintf("HINCRBYFLOAT %s %q", f, by)
			res, err := store.Apply(ctx, partmap.Operation{Op: partmap.OpIncrementFloat, Email: email, Field: f, ByFloat: by})
			v, rerr := rdb.Do(ctx, "HINCRBYFLOAT", key, f, by).Text()
			got, want = outcome(err), outcome(rerr)
			if err == nil && rerr == nil {
				got, want = res.FloatValue, v
			}
		case 4:
			v := values[rng.IntN(len(values))]
			what = fmt.Sprintf("HSETNX %s %q", f, v)
			res, err := store.Apply(ctx, partmap.Operation{Op: partmap.OpSetIfAbsent, Email: email, Field: f, Value: v})
			set, rerr := rdb.HSetNX(ctx, key, f, v).Result()
			got, want = fmt.Sprint(res.Set, outcome(err)), fmt.Sprint(set, outcome(rerr))
		}
		if got != want {
			t.Fatalf("step %d, %s: partmap %s, Redis %s", step, what, got, want)
		}
		rec, err := store.FindProfile(ctx, email)
		if err != nil {
			t.Fatal(err)
		}
		hash, err := rdb.HGetAll(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(map[string]string(rec.Profile)) != fmt.Sprint(hash) {
			t.Fatalf("step %d, after %s: partmap %v, Redis %v", step, what, rec.Profile, hash)
		}
	}
}
