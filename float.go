package partmap

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// The float increment reproduces Redis 7.0 HINCRBYFLOAT bit for bit on
// x86-64, where Redis's long double is the x87 80-bit format: a 64-bit
// mantissa, round to nearest even, and the exponent range below, with
// subnormals down to 2^-16445. A big.Float holds such a value exactly; its
// mantissa lies in [0.5, 1), so its exponent is one more than x87's.
const (
	x87Prec    = 64
	x87MaxExp  = 16384  // |x| >= 2^16384 is infinite
	x87MinExp  = -16381 // |x| < 2^-16382 is subnormal
	x87Quantum = -16445 // every subnormal is a multiple of 2^-16445

	// maxFloatText is Redis's MAX_LONG_DOUBLE_CHARS: string2ld refuses a
	// text of this length or more.
	maxFloatText = 5 * 1024
)

// ErrInfiniteIncrement is the cause of ParseFloatIncrement's error for an
// increment that reads as infinite, which Redis words apart from one that
// is no float ("value is NaN or Infinity").
var ErrInfiniteIncrement = errors.New("infinite increment")

// ParseFloatIncrement checks an increment as Redis 7.0 HINCRBYFLOAT does:
// the text must be what glibc's strtold reads whole, with no space before
// or after, and finite. Decimal and hexadecimal ("0x1p3") forms are
// accepted; "inf", NaN and values that overflow or underflow to zero are
// not.
func ParseFloatIncrement(s string) error {
	_, err := parseIncrement(s)
	return err
}

func parseIncrement(s string) (*big.Float, error) {
	x, ok := parseLongDouble(s)
	switch {
	case !ok:
		return nil, &Error{Code: EINVALID, Field: "by",
			Message: fmt.Sprintf("by is %s, which is not a float: want a decimal or hexadecimal number, with no spaces, of magnitude under about 1.19e4932", quoteBytes(clip(s)))}
	case x.IsInf():
		return nil, &Error{Code: EINVALID, Field: "by", Err: ErrInfiniteIncrement,
			Message: fmt.Sprintf("by is %s, which is infinite: an increment must be finite", quoteBytes(clip(s)))}
	}
	return x, nil
}

// AddFloat is the arithmetic of a float increment, exactly as Redis 7.0
// HINCRBYFLOAT computes and spells it, so a field incremented here reads
// the same as one incremented by Redis: a missing field counts as 0, the
// sum is rounded to the x87 long double, and the result is written with
// 17 decimals whose trailing zeros are cut ("10.6", "5200", never "-0").
// A stored value Redis would not read as a float is ENOTFLOAT, an infinite
// result (a stored "inf" gives one) is EOVERFLOW and a bad by is EINVALID.
func AddFloat(field, stored string, present bool, by string) (string, error) {
	incr, err := parseIncrement(by)
	if err != nil {
		return "", err
	}
	value := new(big.Float)
	if present {
		var ok bool
		if value, ok = parseLongDouble(stored); !ok {
			return "", &Error{Code: ENOTFLOAT, Field: field,
				Message: fmt.Sprintf("field %q holds %s, which is not a float", field, quoteBytes(clip(stored)))}
		}
	}
	if value.IsInf() {
		return "", &Error{Code: EOVERFLOW, Field: field,
			Message: fmt.Sprintf("field %q holds %s: the increment would produce an infinite value", field, quoteBytes(clip(stored)))}
	}
	sum := new(big.Float).SetPrec(x87Prec).SetMode(big.ToNearestEven).Add(value, incr)
	if sum.MantExp(nil) > x87MaxExp {
		return "", &Error{Code: EOVERFLOW, Field: field,
			Message: fmt.Sprintf("field %q: %s + %s is beyond the long double range (about ±1.19e4932)", field, clip(formatLongDouble(value)), clip(by))}
	}
	// A subnormal sum of two multiples of 2^-16445 is exact, so rounding
	// to 64 bits is all the x87 rounding there is.
	return formatLongDouble(sum), nil
}

// formatLongDouble is Redis's ld2string in LD_STR_HUMAN mode: "%.17Lf",
// then trailing zeros and a trailing point removed, and "-0" made "0".
// Like glibc's printf it rounds the exact binary value half to even. It
// works on integers, not big.Float.Text, whose decimal conversion of a
// tiny value shifts digit by digit through 16445 bits.
func formatLongDouble(x *big.Float) string {
	if x.Sign() == 0 {
		return "0"
	}
	// |x| = mant·2^shift, exactly: x has 64 bits of mantissa.
	e := x.MantExp(nil)
	mant, _ := new(big.Float).SetMantExp(new(big.Float).Abs(x), x87Prec-e).Int(nil)
	shift := e - x87Prec
	n := mant.Mul(mant, new(big.Int).Exp(big.NewInt(10), big.NewInt(17), nil))
	if shift >= 0 {
		n.Lsh(n, uint(shift))
	} else {
		k := uint(-shift)
		rem := new(big.Int).Sub(n, new(big.Int).Lsh(new(big.Int).Rsh(n, k), k))
		n.Rsh(n, k)
		switch c := rem.Cmp(new(big.Int).Lsh(big.NewInt(1), k-1)); {
		case c > 0, c == 0 && n.Bit(0) == 1:
			n.Add(n, big.NewInt(1))
		}
	}
	digits := n.String()
	if len(digits) < 18 {
		digits = strings.Repeat("0", 18-len(digits)) + digits
	}
	s := digits[:len(digits)-17] + "." + digits[len(digits)-17:]
	s = strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
	if x.Sign() < 0 && s != "0" {
		s = "-" + s
	}
	return s
}

// parseLongDouble reads s as Redis's string2ld does: glibc strtold must
// consume all of it, so a NUL byte anywhere refuses it. A result that
// overflows to infinity or underflows to zero is refused (ERANGE), an
// exact zero is not; "inf" and "infinity" are read as infinite, NaN is
// refused.
func parseLongDouble(s string) (*big.Float, bool) {
	if len(s) == 0 || len(s) >= maxFloatText || isCSpace(s[0]) {
		return nil, false
	}
	neg := false
	if s[0] == '+' || s[0] == '-' {
		neg = s[0] == '-'
		s = s[1:]
	}
	var x *big.Float
	switch l := strings.ToLower(s); {
	case l == "inf" || l == "infinity":
		x = new(big.Float).SetInf(false)
	case strings.HasPrefix(l, "0x"):
		m, exp, ok := scanMantissa(s[2:], 16, 'p')
		if !ok {
			return nil, false
		}
		x, ok = roundLongDouble(glibcBug30220(m, exp), exp, 2)
		if !ok {
			return nil, false
		}
	default:
		m, exp, ok := scanMantissa(s, 10, 'e')
		if !ok {
			return nil, false
		}
		x, ok = roundLongDouble(m, exp, 10)
		if !ok {
			return nil, false
		}
	}
	if neg {
		x.Neg(x)
	}
	return x, true
}

// isCSpace is isspace in the C locale, which Redis keeps for LC_CTYPE.
func isCSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// scanMantissa reads digits in base with an optional point, then an
// optional exponent after the letter expChar with at least one decimal
// digit. The value is m × base^exp for decimal, m × 2^exp for hex (whose
// exponent is binary, and counts 4 bits per fraction digit). An exponent
// is saturated far beyond any finite long double.
func scanMantissa(s string, base int, expChar byte) (m *big.Int, exp int64, ok bool) {
	var digits strings.Builder
	frac, seenPoint := int64(0), false
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.' && !seenPoint:
			seenPoint = true
		case digitValue(c) < base:
			digits.WriteByte(c)
			if seenPoint {
				frac++
			}
		default:
			goto mantissaDone
		}
	}
mantissaDone:
	if digits.Len() == 0 {
		return nil, 0, false
	}
	m, _ = new(big.Int).SetString(digits.String(), base)
	if base == 16 {
		frac *= 4
	}
	exp = -frac
	if i == len(s) {
		return m, exp, true
	}
	if s[i]|0x20 != expChar {
		return nil, 0, false
	}
	i++
	eneg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		eneg = s[i] == '-'
		i++
	}
	if i == len(s) {
		return nil, 0, false
	}
	var e int64
	for ; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return nil, 0, false
		}
		if e < 1e12 {
			e = e*10 + int64(s[i]-'0')
		}
	}
	if eneg {
		e = -e
	}
	return m, exp + e, true
}

func digitValue(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return 99
}

// glibcBug30220 drops the least significant bit of a hexadecimal value
// that has exactly one bit more than the 64 of a long double and is
// subnormal, as glibc's strtold did before 2.38 (sourceware bug 30220).
// Debian 12, whose Redis 7.0 is the reference, has glibc 2.36. The bit
// only matters when the rest is a tie: 0x1.0000000000000001p-16446 reads
// as 0, which is refused, not as the least subnormal. No decimal text
// under Redis's 5120 bytes is such a value.
func glibcBug30220(m *big.Int, exp int64) *big.Int {
	low := m.TrailingZeroBits()
	if m.Sign() == 0 || uint(m.BitLen())-low != x87Prec+1 || exp+int64(m.BitLen()) > x87MinExp-1 {
		return m
	}
	return new(big.Int).SetBit(m, int(low), 0)
}

// roundLongDouble rounds m × base^exp (base 2 or 10) to the nearest long
// double, ties to even, as strtold does. It refuses what strtold reports
// as ERANGE with an infinite or zero result; an exact zero is fine.
func roundLongDouble(m *big.Int, exp int64, base int64) (*big.Float, bool) {
	if m.Sign() == 0 {
		return new(big.Float), true
	}
	// Decide far-out magnitudes before building huge numbers. The value
	// lies in [base^(top-1), base^top).
	var top int64
	if base == 2 {
		top = exp + int64(m.BitLen())
		if top-1 >= x87MaxExp {
			return nil, false
		}
		if top <= x87Quantum-1 { // below half the least subnormal
			return nil, false
		}
	} else {
		top = exp + int64(len(m.String()))
		if top-1 >= 4933 { // the largest long double is about 1.19e4932
			return nil, false
		}
		if top <= -4951 { // half the least subnormal is about 1.82e-4951
			return nil, false
		}
	}
	// The value is num/den, exactly.
	num, den := new(big.Int).Set(m), big.NewInt(1)
	if exp != 0 {
		p := new(big.Int).Exp(big.NewInt(base), big.NewInt(abs64(exp)), nil)
		if exp > 0 {
			num.Mul(num, p)
		} else {
			den = p
		}
	}
	// Float's Quo of exact operands is correctly rounded, and its exponent
	// is unbounded.
	x := new(big.Float).SetPrec(x87Prec).SetMode(big.ToNearestEven).Quo(
		new(big.Float).SetInt(num), new(big.Float).SetInt(den))
	switch e := x.MantExp(nil); {
	case e > x87MaxExp:
		return nil, false // overflow to infinity
	case e >= x87MinExp:
		// Normal. A value just under 2^-16382 that rounds up to it lands
		// here too, rightly: the subnormals' quantum is that binade's.
		return x, true
	}
	// Subnormal: round to a multiple of 2^-16445, ties to even.
	q, rem := new(big.Int).QuoRem(num.Lsh(num, -x87Quantum), den, new(big.Int))
	switch c := rem.Lsh(rem, 1).Cmp(den); {
	case c > 0, c == 0 && q.Bit(0) == 1:
		q.Add(q, big.NewInt(1))
	}
	if q.Sign() == 0 {
		return nil, false // underflow to zero
	}
	x.SetInt(q) // under 2^64: exact
	return x.SetMantExp(x, x87Quantum), true
}

func abs64(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
