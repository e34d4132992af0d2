package search_test

import (
	"bytes"
	"cmp"
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/partmap/partmap/internal/search"
)

func TestParseNumber(t *testing.T) {
	for _, tt := range []struct {
		name, value string
		want        float64
		ok          bool
	}{
		{"OKInteger", "42", 42, true},
		{"OKNegative", "-7", -7, true},
		{"OKPlus", "+7", 7, true},
		{"OKLeadingZeros", "007", 7, true},
		{"OKDecimal", "3.25", 3.25, true},
		{"OKPointFirst", ".5", 0.5, true},
		{"OKPointLast", "5.", 5, true},
		{"OKExponent", "1e3", 1000, true},
		{"OKExponentSigned", "2.5E-2", 0.025, true},
		{"OKExponentPlus", "1e+3", 1000, true},
		{"OKNegativeZero", "-0", math.Copysign(0, -1), true},
		{"OKLargest", "1.7976931348623157e308", math.MaxFloat64, true},
		{"OKSubnormal", "5e-324", 5e-324, true},
		{"OKZeroWithHugeExponent", "0e-999", 0, true},
		{"OKInf", "inf", math.Inf(1), true},
		{"OKInfSigned", "-inf", math.Inf(-1), true},
		{"OKInfPlus", "+Inf", math.Inf(1), true},
		{"OKInfinity", "INFINITY", math.Inf(1), true},
		{"OKNegativeInfinity", "-Infinity", math.Inf(-1), true},
		{"ErrEmpty", "", 0, false},
		{"ErrSign", "-", 0, false},
		{"ErrPoint", ".", 0, false},
		{"ErrSpaceBefore", " 1", 0, false},
		{"ErrSpaceAfter", "1 ", 0, false},
		{"ErrGarbage", "12abc", 0, false},
		{"ErrWord", "abc", 0, false},
		{"ErrTwoPoints", "1.2.3", 0, false},
		{"ErrExponentWithoutDigits", "1e", 0, false},
		{"ErrExponentSignOnly", "1e+", 0, false},
		{"ErrTwoSigns", "--1", 0, false},
		{"ErrComma", "1,000", 0, false},
		{"ErrUnderscore", "1_000", 0, false},
		{"ErrHex", "0x10", 0, false},
		{"ErrHexFloat", "0x1p3", 0, false},
		{"ErrNaN", "nan", 0, false},
		{"ErrInfPrefix", "infin", 0, false},
		{"ErrOverflow", "1e309", 0, false},
		{"ErrNegativeOverflow", "-1e309", 0, false},
		{"ErrUnderflow", "1e-400", 0, false},
		{"ErrNUL", "1\x00", 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := search.ParseNumber(tt.value)
			if ok != tt.ok || got != tt.want || math.Signbit(got) != math.Signbit(tt.want) {
				t.Fatalf("got %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// The byte order of encodings is the numeric order, over every float64 but
// NaN: the bits rapid draws reach subnormals, infinities and -0.
func TestEncodeNumberOrder(t *testing.T) {
	number := rapid.Custom(func(t *rapid.T) float64 {
		f := rapid.OneOf(
			rapid.Float64(),
			rapid.Map(rapid.Uint64(), math.Float64frombits),
			rapid.SampledFrom([]float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64, math.MaxFloat64, -math.MaxFloat64}),
		).Draw(t, "f")
		if math.IsNaN(f) {
			return 1
		}
		return f
	})
	rapid.Check(t, func(t *rapid.T) {
		a, b := number.Draw(t, "a"), number.Draw(t, "b")
		ea, eb := search.EncodeNumber(a), search.EncodeNumber(b)
		if got, want := bytes.Compare(ea, eb), cmp.Compare(a, b); got != want {
			t.Fatalf("got bytes.Compare(%x, %x) = %d, want %d for %v, %v", ea, eb, got, want, a, b)
		}
		if got, ok := search.DecodeNumber(ea); !ok || got != a {
			t.Fatalf("got DecodeNumber(EncodeNumber(%v)) = %v, %v", a, got, ok)
		}
	})
}

func TestEncodeNumber(t *testing.T) {
	if got, want := search.EncodeNumber(math.Copysign(0, -1)), search.EncodeNumber(0); !bytes.Equal(got, want) {
		t.Fatalf("got %x for -0, want %x as for 0", got, want)
	}
	if got := search.EncodeNumber(math.NaN()); got != nil {
		t.Fatalf("got %x for NaN, want nil", got)
	}
	if got, want := search.EncodeNumber(1), []byte{0xbf, 0xf0, 0, 0, 0, 0, 0, 0}; !bytes.Equal(got, want) {
		t.Fatalf("got %x, want %x", got, want)
	}
	for _, b := range [][]byte{nil, {1, 2, 3}, {0xff, 0xf8, 0, 0, 0, 0, 0, 0}} {
		if f, ok := search.DecodeNumber(b); ok {
			t.Fatalf("DecodeNumber(%x) = %v, want no number", b, f)
		}
	}
}
