package redis_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/redistest"
)

// partmap.AddFloat promises Redis 7.0 HINCRBYFLOAT's result to the bit, so
// it is held against a real redis-server: the same stored value and
// increment must give the same text, or an error of the code Redis's error
// stands for. FLOAT_COMPARE_SEED picks another random sample.
func TestAddFloatMatchesRedis(t *testing.T) {
	c := redistest.StartTestServer(t).Client(t)
	ctx := context.Background()

	seed := uint64(20260701)
	if s := os.Getenv("FLOAT_COMPARE_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d", seed)
	cases := floatCases(rand.New(rand.NewPCG(seed, 0)))

	const batch = 500
	results := 0
	for start := 0; start < len(cases); start += batch {
		part := cases[start:min(start+batch, len(cases))]
		pipe := c.Pipeline()
		cmds := make([]*goredis.Cmd, len(part))
		for i, fc := range part {
			key := fmt.Sprintf("float:%d", start+i)
			pipe.Del(ctx, key)
			if fc.present {
				pipe.HSet(ctx, key, "f", fc.stored)
			}
			cmds[i] = pipe.Do(ctx, "hincrbyfloat", key, "f", fc.by)
		}
		pipe.Exec(ctx) // each command's error is read below
		for i, fc := range part {
			want, wantErr := cmds[i].Text()
			wantCode := redisFloatCode(t, wantErr)
			got, err := partmap.AddFloat("f", fc.stored, fc.present, fc.by)
			if code := partmap.ErrorCode(err); got != want || code != wantCode {
				t.Errorf("stored %s (present %v) + %s: got %q, %v; Redis says %q, %v",
					clipQuote(fc.stored), fc.present, clipQuote(fc.by), clipText(got), err, clipText(want), wantErr)
			}
			if wantErr == nil {
				results++
			}
		}
	}
	t.Logf("%d cases, %d of them results", len(cases), results)
	if results < len(cases)/2 {
		t.Fatalf("only %d of %d cases gave a result: the sample is mostly errors", results, len(cases))
	}
}

// redisFloatCode is the partmap code an HINCRBYFLOAT error stands for.
func redisFloatCode(t *testing.T, err error) partmap.Code {
	switch {
	case err == nil:
		return ""
	case strings.Contains(err.Error(), "value is not a valid float"),
		strings.Contains(err.Error(), "value is NaN or Infinity") && !strings.Contains(err.Error(), "would produce"):
		return partmap.EINVALID
	case strings.Contains(err.Error(), "hash value is not a float"):
		return partmap.ENOTFLOAT
	case strings.Contains(err.Error(), "increment would produce NaN or Infinity"):
		return partmap.EOVERFLOW
	}
	t.Fatalf("unexpected Redis error %v", err)
	return ""
}

type floatCase struct {
	stored  string
	present bool
	by      string
}

// floatCases mixes fixed edge cases with random values of every spelling
// strtold takes, across the whole long double range.
func floatCases(r *rand.Rand) []floatCase {
	edges := []string{
		"0", "-0", "+0", "3", "-3", "007", "10.5", "0.1", "5.0e3", "2.0e2", "1.", ".5", "+.5e-3",
		"", " ", " 1", "1 ", "\t1", "1\n", "abc", "1e", "1e+", ".", ".e1", "+-1", "--1", "1,5", "1.5.5", "١",
		"inf", "-inf", "+inf", "INF", "infinity", "-Infinity", "infinit", "nan", "-nan", "NaN(1)",
		"0x", "0x1p3", "0X1P3", "0x1.8", "-0x.8p1", "0x1p", "0x.p1", "0xg", "0x1p-16445", "0x1p-16446",
		"0x1.8p-16446", "0x1p-16446", "0x1.0000000000000001p-16446", "0x1p16383", "0x1.fffffffffffffffep16383",
		"0x1.ffffffffffffffffp16383", "0x1p16384", "0x1p-18", "0x3p-18", "0x1p64", "0x1.00000000000000008p0",
		"0x1.00000000000000018p0", "0x1.0000000000000003p-16382", "0x1.0000000000000003p-16383", "0x1.0000000000000001p-16383",
		"0x1.0000000000000003p-16384", "0x1.8000000000000001p-16446", "0x1.0000000000000003p-16445", "0x1.0000000000000001p-16445",
		"0x1.0000000000000001p-16444", "0x1.0000000000000003p-16444", "0x1.0000000000000003p-16385", "0x1.0000000000000000000001p-16446", "1e5000", "-1e5000", "1e-5000", "1e4932", "1.18973149535723176e4932",
		"1.18973149535723176502e4932", "1.1897314953572317651e4932", "-1.18973149535723176502e4932", "1.2e4932",
		"1e4930", "-1e4930", "9.99e4931", "3.6e-4951", "3.64519953188247460253e-4951", "1.82259976594123730126e-4951",
		"1.8225997659412373013e-4951", "1e-4951", "2e-4951", "3e-4951", "3.3621031431120935063e-4932",
		"1e308", "1.7976931348623157e308", "-1.7976931348623157e308", "1e309", "4.9e-324", "2.2250738585072014e-308",
		"1e-17", "5e-18", "-5e-18", "1.5e-17", "2.5e-17", "0.000000000000000005", "-0.00000000000000001",
		"0e-999999", "0e999999", "1e-999999999999999999999", "1e999999999999999999999", "9223372036854775807",
		"-9223372036854775808", "18446744073709551615", "18446744073709551617", "36893488147419103233",
		"1.00000000000000000005421010862427522170037264004349708557128906250",
		"1.0000000000000000000542101086242752217003726400434970855712890625",
		"1.00000000000000000016263032587282566651", "0.1e1", "00000000000000000000000000001", "\x00", "2\x00zz",
		"\x00ab", "1\x00", "5\x00 ",
		"1." + strings.Repeat("0", 5116) + "1", // 5119 bytes: the longest Redis reads
		"1." + strings.Repeat("0", 5117) + "1", // 5120: too long
		"0." + strings.Repeat("0", 4949) + "4", "0." + strings.Repeat("0", 4950) + "4",
	}
	var cases []floatCase
	for _, s := range edges {
		for _, b := range edges {
			if r.IntN(4) == 0 || len(s)+len(b) < 12 {
				cases = append(cases, floatCase{s, true, b})
			}
		}
		cases = append(cases, floatCase{"", false, s}, floatCase{s, true, "0"}, floatCase{s, true, "1"})
	}
	for range 4000 {
		cases = append(cases, floatCase{randomFloat(r), r.IntN(10) != 0, randomFloat(r)})
	}
	return cases
}

// randomFloat is a number spelled as a client might: a float64 in one of
// strconv's formats, an integer, a decimal of many digits, a hex float, or
// a value near the ends of the long double range.
func randomFloat(r *rand.Rand) string {
	sign := []string{"", "-", "+"}[r.IntN(3)]
	switch r.IntN(11) {
	case 0:
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			f = 1
		}
		return strconv.FormatFloat(f, "gef"[r.IntN(3)], -1, 64)
	case 1:
		f := r.NormFloat64() * math.Pow(10, float64(r.IntN(40)-20))
		return strconv.FormatFloat(f, "gef"[r.IntN(3)], r.IntN(25)-1, 64)
	case 2:
		return strconv.FormatInt(r.Int64()>>r.IntN(64), 10)
	case 3:
		s := sign + randomDigits(r, 1+r.IntN(30))
		if r.IntN(2) == 0 {
			s += "." + randomDigits(r, r.IntN(30))
		}
		return s
	case 4:
		return fmt.Sprintf("%s%s.%se%d", sign, randomDigits(r, 1), randomDigits(r, r.IntN(25)), r.IntN(9900)-4955)
	case 5:
		return fmt.Sprintf("%s%s.%se%d", sign, randomDigits(r, 1), randomDigits(r, r.IntN(25)), 4925+r.IntN(9))
	case 6:
		return fmt.Sprintf("%s%s.%se-%d", sign, randomDigits(r, 1), randomDigits(r, r.IntN(25)), 4925+r.IntN(30))
	case 7:
		return fmt.Sprintf("%s0x%x.%xp%d", sign, r.Uint64()>>r.IntN(64), r.Uint64(), r.IntN(33000)-16500)
	case 9:
		// 65 bits in the subnormal range: glibc bug 30220's ground
		return fmt.Sprintf("%s0x1.%016xp-%d", sign, r.Uint64()|1, 16382+r.IntN(66))
	case 10:
		// a multiple of 2^-n with n near 17 decimals: ties in the formatting
		return fmt.Sprintf("%s0x%xp-%d", sign, r.Uint64()>>r.IntN(64), 14+r.IntN(8))
	default:
		// a small value with many fraction digits: the 17-decimal rounding
		return fmt.Sprintf("%s0.%s", sign, randomDigits(r, 15+r.IntN(10)))
	}
}

func randomDigits(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('0' + r.IntN(10))
	}
	return string(b)
}

func clipQuote(s string) string { return strconv.Quote(clipText(s)) }

func clipText(s string) string {
	if len(s) > 60 {
		return s[:60] + fmt.Sprintf("…(%d bytes)", len(s))
	}
	return s
}
