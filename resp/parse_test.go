package resp

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/partmap/partmap"
)

// Each command of profiles parses its arguments into operations, with
// Redis's refusals, without a store.
func TestParse(t *testing.T) {
	str := func(s string) *string { return &s }
	when := func(w partmap.When) *partmap.When { return &w }
	const a = "a@x.io"
	many := "del"
	var manyDeletes []partmap.Operation
	for i := range partmap.MaxTransactionOps + 1 {
		many += fmt.Sprintf(" k%d@x.io", i)
		manyDeletes = append(manyDeletes, partmap.Operation{Op: partmap.OpDelete, Email: fmt.Sprintf("k%d@x.io", i), AllowMissing: true})
	}
	for _, tc := range []struct {
		line string // the command, its arguments separated by spaces
		want []partmap.Operation
		err  string
	}{
		{line: "hset A@x.io f 1 g 2 f 3", want: []partmap.Operation{{Op: partmap.OpSetFields, Email: a, Set: partmap.Patch{"f": str("3"), "g": str("2")}}}},
		{line: "hmset a@x.io f 1", want: []partmap.Operation{{Op: partmap.OpSetFields, Email: a, Set: partmap.Patch{"f": str("1")}}}},
		{line: "hsetnx a@x.io f 1", want: []partmap.Operation{{Op: partmap.OpSetIfAbsent, Email: a, Field: "f", Value: "1"}}},
		{line: "hget a@x.io f", want: []partmap.Operation{{Op: partmap.OpGet, Email: a, Fields: []string{"f"}}}},
		{line: "hmget a@x.io f g f", want: []partmap.Operation{{Op: partmap.OpGet, Email: a, Fields: []string{"f", "g", "f"}}}},
		{line: "hgetall a@x.io", want: []partmap.Operation{{Op: partmap.OpGet, Email: a}}},
		{line: "ttl a@x.io", want: []partmap.Operation{{Op: partmap.OpGet, Email: a}}},
		{line: "hdel a@x.io g f g emailAddress", want: []partmap.Operation{{Op: partmap.OpGetDelete, Email: a, Fields: []string{"emailAddress", "f", "g"}}}},
		{line: "hincrby a@x.io n -5", want: []partmap.Operation{{Op: partmap.OpIncrement, Email: a, Field: "n", By: -5, Create: true}}},
		{line: "hincrbyfloat a@x.io n 1.5e3", want: []partmap.Operation{{Op: partmap.OpIncrementFloat, Email: a, Field: "n", ByFloat: "1.5e3", Create: true}}},
		{line: "del a@x.io b@x.io a@x.io", want: []partmap.Operation{
			{Op: partmap.OpDelete, Email: a, AllowMissing: true}, {Op: partmap.OpDelete, Email: "b@x.io", AllowMissing: true}, {Op: partmap.OpDelete, Email: a, AllowMissing: true}}},
		{line: "unlink a@x.io", want: []partmap.Operation{{Op: partmap.OpDelete, Email: a, AllowMissing: true}}},
		{line: "exists a@x.io b@x.io", want: []partmap.Operation{{Op: partmap.OpGet, Email: a}, {Op: partmap.OpGet, Email: "b@x.io"}}},
		{line: "expire a@x.io 10 nx", want: []partmap.Operation{{Op: partmap.OpExpire, Email: a, When: partmap.When{Millis: 10_000, Relative: true}, ExpireCond: partmap.ExpireIfNone}}},
		{line: "pexpireat a@x.io 5 xx lt", want: []partmap.Operation{{Op: partmap.OpExpire, Email: a, When: partmap.When{Millis: 5}, ExpireCond: partmap.ExpireIfSetSooner}}},
		{line: "expire a@x.io 5 xx gt", want: []partmap.Operation{{Op: partmap.OpExpire, Email: a, When: partmap.When{Millis: 5000, Relative: true}, ExpireCond: partmap.ExpireIfLater}}},
		{line: "expire a@x.io -5", want: []partmap.Operation{{Op: partmap.OpExpire, Email: a}}}, // the past: the epoch
		{line: "persist a@x.io", want: []partmap.Operation{{Op: partmap.OpPersist, Email: a}}},
		{line: "hexpire a@x.io 10 gt fields 2 f g", want: []partmap.Operation{
			{Op: partmap.OpExpire, Email: a, Fields: []string{"f", "g"}, When: partmap.When{Millis: 10_000, Relative: true}, ExpireCond: partmap.ExpireIfLater}}},
		{line: "hpexpireat a@x.io 7 fields 1 f", want: []partmap.Operation{{Op: partmap.OpExpire, Email: a, Fields: []string{"f"}, When: partmap.When{Millis: 7}}}},
		{line: "hpttl a@x.io fields 1 f", want: []partmap.Operation{{Op: partmap.OpGet, Email: a, Fields: []string{"f"}}}},
		{line: "hpersist a@x.io fields 1 f", want: []partmap.Operation{{Op: partmap.OpPersist, Email: a, Fields: []string{"f"}}}},
		{line: "hgetdel a@x.io fields 2 f g", want: []partmap.Operation{{Op: partmap.OpGetDelete, Email: a, Fields: []string{"f", "g"}}}},
		{line: "hgetex a@x.io px 20 fields 1 f", want: []partmap.Operation{
			{Op: partmap.OpGetExpire, Email: a, Fields: []string{"f"}, Expiry: partmap.FieldExpiry{When: when(partmap.When{Millis: 20, Relative: true})}}}},
		{line: "hgetex a@x.io persist fields 1 f", want: []partmap.Operation{{Op: partmap.OpGetExpire, Email: a, Fields: []string{"f"}, Expiry: partmap.FieldExpiry{Persist: true}}}},
		{line: "hsetex a@x.io fnx keepttl fields 2 f 1 g 2", want: []partmap.Operation{
			{Op: partmap.OpSetFields, Email: a, Set: partmap.Patch{"f": str("1"), "g": str("2")}, FieldSet: partmap.SetIfNoFieldExist, Expiry: partmap.FieldExpiry{KeepTTL: true}}}},
		{line: "hsetex a@x.io exat 9 fields 1 f 1", want: []partmap.Operation{
			{Op: partmap.OpSetFields, Email: a, Set: partmap.Patch{"f": str("1")}, Expiry: partmap.FieldExpiry{When: when(partmap.When{Millis: 9000})}}}},
		{line: "hscan a@x.io 0 match f* count 5", want: []partmap.Operation{{Op: partmap.OpGet, Email: a}}},
		// HSCAN's reply reads its options, of a profile that exists only,
		// as Redis does (TestIntegerArgumentsMatchRedis).
		{line: "hscan a@x.io 0 count 0", want: []partmap.Operation{{Op: partmap.OpGet, Email: a}}},
		{line: "hrandfield a@x.io 4611686018427387904", want: []partmap.Operation{{Op: partmap.OpGet, Email: a}}},
		{line: "hrandfield a@x.io -3 withvalues", want: []partmap.Operation{{Op: partmap.OpGet, Email: a}}},

		{line: "rename a@x.io B@x.io", want: []partmap.Operation{{Op: partmap.OpRename, Email: a, To: "b@x.io", Replace: true}}},
		{line: "renamenx a@x.io b@x.io", want: []partmap.Operation{{Op: partmap.OpRename, Email: a, To: "b@x.io"}}},
		{line: "rename a@x.io A@X.IO", want: []partmap.Operation{{Op: partmap.OpGet, Email: a}}}, // onto itself
		{line: "renamenx A@x.io a@x.io", want: []partmap.Operation{{Op: partmap.OpGet, Email: a}}},
		{line: "copy a@x.io b@x.io", want: []partmap.Operation{{Op: partmap.OpCopy, Email: a, To: "b@x.io"}}},
		{line: "copy a@x.io b@x.io REPLACE db 0 replace", want: []partmap.Operation{{Op: partmap.OpCopy, Email: a, To: "b@x.io", Replace: true}}},

		{line: "copy a@x.io A@x.io", err: "ERR source and destination objects are the same"},
		{line: "copy a@x.io b@x.io db 1", err: "ERR DB index is out of range"},
		{line: "copy a@x.io a@x.io db 1", err: "ERR DB index is out of range"},
		{line: "copy a@x.io b@x.io db 2147483648", err: "ERR value is out of range, value must between -2147483648 and 2147483647"},
		{line: "copy a@x.io b@x.io db", err: "ERR syntax error"},
		{line: "copy a@x.io b@x.io replace foo", err: "ERR syntax error"},
		{line: "rename a@x.io café@x.io", err: "ERR key 'café@x.io' is not a customer email"},
		{line: "hget café@x.io f", err: "ERR key 'café@x.io' is not a customer email: "},
		{line: "hset a@x.io f 1 g", err: "ERR wrong number of arguments for 'hset' command"},
		{line: "hset a@x.io f 1 emailAddress a@x.io", err: errKeyField},
		{line: "hmset a@x.io emailAddress a@x.io", err: errKeyField},
		{line: "hsetnx a@x.io emailAddress b@x.io", err: errKeyField},
		{line: "hincrby a@x.io emailAddress 1", err: errKeyField},
		{line: "hincrbyfloat a@x.io emailAddress 1", err: errKeyField},
		{line: "hsetex a@x.io fields 2 f 1 emailAddress a@x.io", err: errKeyField},
		{line: "hincrby a@x.io n 1.5", err: "ERR value is not an integer or out of range"},
		{line: "hincrbyfloat a@x.io n abc", err: "ERR value is not a valid float"},
		{line: "hincrbyfloat a@x.io n inf", err: "ERR value is NaN or Infinity"},
		{line: "del a@x.io café@x.io b@x.io", err: "ERR key 'café@x.io' is not a customer email"},
		{line: many, want: manyDeletes},
		{line: "expire a@x.io ten", err: "ERR value is not an integer or out of range"},
		{line: "expire a@x.io 10 nx gt", err: "ERR NX and XX, GT or LT options at the same time are not compatible"},
		{line: "expire a@x.io 10 gt lt", err: "ERR GT and LT options at the same time are not compatible"},
		{line: "expire a@x.io 10 bogus nx xx", err: "ERR Unsupported option bogus"},
		{line: "expire a@x.io -9223372036854776 xx", err: "ERR invalid expire time in 'expire' command"},
		// The store refuses a relative time past int64 at its clock.
		{line: "pexpire a@x.io 9223372036854775807", want: []partmap.Operation{{Op: partmap.OpExpire, Email: a, When: partmap.When{Millis: math.MaxInt64, Relative: true}}}},
		{line: "expire a@x.io 9223372036854776", err: "ERR invalid expire time in 'expire' command"},
		{line: "hexpire a@x.io -1 fields 1 f", err: "ERR invalid expire time, must be >= 0"},
		{line: "hpexpireat a@x.io 70368744177664 fields 1 f", err: "ERR invalid expire time in 'hpexpireat' command"},
		{line: "hexpire a@x.io 10 xx fieldz 1 f", err: "ERR Mandatory argument FIELDS is missing or not at the right position"},
		{line: "hexpire a@x.io 10 fields 0 f", err: "ERR Parameter `numFields` should be greater than 0"},
		{line: "httl a@x.io fields x f", err: "ERR Number of fields must be a positive integer"},
		{line: "hpersist a@x.io fields 2 f", err: "ERR The `numfields` parameter must match the number of arguments"},
		{line: "hgetex a@x.io ex 5 fieldz 1 f", err: "ERR Mandatory argument FIELDS is missing or not at the right position"},
		{line: "hgetex a@x.io ex fields 1 f", err: "ERR value is not an integer or out of range"},
		{line: "hsetex a@x.io fields 2 f 1", err: "ERR wrong number of arguments for 'hsetex' command"},
		{line: "hsetex a@x.io ex 5 fnx fields 1 f 1", want: []partmap.Operation{
			{Op: partmap.OpSetFields, Email: a, Set: partmap.Patch{"f": str("1")}, FieldSet: partmap.SetIfNoFieldExist, Expiry: partmap.FieldExpiry{When: when(partmap.When{Millis: 5000, Relative: true})}}}},
		{line: "hscan a@x.io x", err: "ERR invalid cursor"},
		{line: "hrandfield a@x.io 1 withvalue", err: "ERR syntax error"},
		{line: "hrandfield a@x.io 4611686018427387904 withvalues", err: "ERR value is out of range"},
	} {
		name := "OK"
		if tc.err != "" {
			name = "Err"
		}
		t.Run(name+"/"+tc.line[:min(len(tc.line), 40)], func(t *testing.T) {
			var args [][]byte
			for _, a := range strings.Fields(tc.line) {
				args = append(args, []byte(a))
			}
			cmd, ok := lookup(args[0])
			if !ok || cmd.parse == nil || !cmd.arity.ok(len(args)) {
				t.Fatalf("%s is no command of profiles, or not with %d arguments", args[0], len(args))
			}
			before := []partmap.Operation{{Op: partmap.OpGet, Email: "before@x.io"}}
			got, err := cmd.parse(args, before[:1:1])
			switch {
			case tc.err != "":
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("got %v, want the refusal %q", err, tc.err)
				}
			case err != nil:
				t.Fatal(err)
			case !reflect.DeepEqual(got[:1], before) || !reflect.DeepEqual(got[1:], tc.want):
				t.Fatalf("got %+v\nwant %+v after the operations before", got, tc.want)
			}
		})
	}
}
