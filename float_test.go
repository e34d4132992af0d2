package partmap_test

import (
	"math/big"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/partmap/partmap"
)

// Each want below is what redis-server 7.0.15 (Debian 12, x86-64) answers
// to HSET then HINCRBYFLOAT; redis/float_compare_test.go checks thousands
// more against a running server.
func TestAddFloat(t *testing.T) {
	// The largest long double, (2^64-1)·2^16320, written out.
	m := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 64), big.NewInt(1))
	max := m.Lsh(m, 16320).String()
	for _, tt := range []struct {
		name, stored string
		present      bool
		by, want     string
		code         partmap.Code
	}{
		{"OKMissing", "", false, "10.5", "10.5", ""},
		{"OKDecimal", "10.5", true, "0.1", "10.6", ""},
		{"OKExponents", "5.0e3", true, "2.0e2", "5200", ""},
		{"OKInteger", "3", true, "1", "4", ""},
		{"OKLeadingZeros", "007", true, "1", "8", ""},
		{"OKSigns", "+.5", true, "-1.", "-0.5", ""},
		{"OKNegativeZero", "-0", true, "-0", "0", ""},
		{"OKTinyNegativeIsZero", "-1e-20", true, "0", "0", ""},
		{"OKTinyPositiveIsZero", "0", true, "1e-18", "0", ""},
		{"OKSeventeenDecimals", "0", true, "1.5e-17", "0.00000000000000002", ""},
		{"OKTieToEven", "0", true, "0x1p-18", "0.00000381469726562", ""},
		{"OKTieToOdd", "0", true, "0x3p-18", "0.00001144409179688", ""},
		{"OKLongDoubleRounding", "0.1", true, "0.2", "0.3", ""},
		{"OKRoundsDownToLargest", "0x1.fffffffffffffffep16383", true, "0x1p16318", max, ""},
		{"OKBeyondDouble", "0x1p1100", true, "0", new(big.Int).Lsh(big.NewInt(1), 1100).String(), ""},
		{"OKCancels", "1e4000", true, "-1e4000", "0", ""},
		{"OKLargest", "0x1.fffffffffffffffep16383", true, "0", max, ""},
		{"OKLeastSubnormal", "0x1p-16445", true, "0", "0", ""},
		{"OKExactZeroExponent", "0e-999999", true, "1", "1", ""},
		{"OKHex", "0x10", true, "0x1.8", "17.5", ""},
		{"OKInt64Edge", "9223372036854775807", true, "1", "9223372036854775808", ""},
		{"OKRounded64Bits", "18446744073709551617", true, "0", "18446744073709551616", ""},
		{"ErrFloatSpaceBefore", " 1", true, "1", "", partmap.ENOTFLOAT},
		{"ErrFloatSpaceAfter", "1 ", true, "1", "", partmap.ENOTFLOAT},
		{"ErrFloatEmpty", "", true, "1", "", partmap.ENOTFLOAT},
		{"ErrFloatGarbage", "abc", true, "1", "", partmap.ENOTFLOAT},
		{"ErrFloatNaN", "nan", true, "1", "", partmap.ENOTFLOAT},
		{"ErrFloatNUL", "2\x00", true, "1", "", partmap.ENOTFLOAT},
		{"ErrFloatOverflows", "1e5000", true, "1", "", partmap.ENOTFLOAT},
		{"ErrFloatUnderflows", "1e-5000", true, "1", "", partmap.ENOTFLOAT},
		{"ErrFloatHexWithoutDigits", "0x", true, "1", "", partmap.ENOTFLOAT},
		{"ErrFloatTooLong", "1." + strings.Repeat("0", 5117) + "1", true, "1", "", partmap.ENOTFLOAT},
		{"ErrFloatGlibcBug30220", "0x1.0000000000000001p-16446", true, "1", "", partmap.ENOTFLOAT},
		{"ErrInvalidBeforeStored", "abc", true, "x", "", partmap.EINVALID},
		{"ErrInvalidInf", "1", true, "inf", "", partmap.EINVALID},
		{"ErrInvalidInfinity", "1", true, "-Infinity", "", partmap.EINVALID},
		{"ErrInvalidNaN", "1", true, "nan", "", partmap.EINVALID},
		{"ErrInvalidExponentWithoutDigits", "1", true, "1e", "", partmap.EINVALID},
		{"ErrInvalidEmpty", "1", true, "", "", partmap.EINVALID},
		{"ErrInvalidSpace", "1", true, "1 ", "", partmap.EINVALID},
		{"ErrOverflowStoredInf", "inf", true, "1", "", partmap.EOVERFLOW},
		{"ErrOverflowSum", max, true, max, "", partmap.EOVERFLOW},
		{"ErrOverflowRoundsUp", "0x1.fffffffffffffffep16383", true, "0x1p16319", "", partmap.EOVERFLOW},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := partmap.AddFloat("score", tt.stored, tt.present, tt.by)
			if code := partmap.ErrorCode(err); got != tt.want || code != tt.code {
				t.Fatalf("got %.80q, %v; want %.80q, %q", got, err, tt.want, tt.code)
			}
			if tt.code == partmap.EINVALID {
				if e := err.(*partmap.Error); e.Field != "by" {
					t.Fatalf("got field %q, want by", e.Field)
				}
				if partmap.ParseFloatIncrement(tt.by) == nil {
					t.Fatal("ParseFloatIncrement accepted it")
				}
			}
		})
	}
}

// An error message quotes a long value shortened, but never cuts a
// character in two.
func TestAddFloatQuotesValidText(t *testing.T) {
	stored := "1234567890123456789012345678901234567" + strings.Repeat("€", 10)
	_, err := partmap.AddFloat("v", stored, true, "1")
	if partmap.ErrorCode(err) != partmap.ENOTFLOAT || !utf8.ValidString(partmap.ErrorMessage(err)) || strings.Contains(err.Error(), `\x`) {
		t.Fatalf("got %v", err)
	}
}

// AddFloat never panics, and what it stores it can read back: a result is
// a float text that increments again.
func FuzzAddFloat(f *testing.F) {
	for _, s := range []string{"0", "10.5", "-0", "1e4932", "0x1p-16445", "inf", " 1", "0x1.8p3", "1e-4951", "\x00"} {
		f.Add(s, true, "0.1")
		f.Add("1", true, s)
	}
	f.Fuzz(func(t *testing.T, stored string, present bool, by string) {
		got, err := partmap.AddFloat("f", stored, present, by)
		if err != nil {
			switch partmap.ErrorCode(err) {
			case partmap.EINVALID, partmap.ENOTFLOAT, partmap.EOVERFLOW:
			default:
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		again, err := partmap.AddFloat("f", got, true, "0")
		if err != nil || again != got {
			t.Fatalf("%q + %q = %q, which reads back as %q, %v", stored, by, got, again, err)
		}
	})
}
