package search

import (
	"encoding/binary"
	"math"
	"strconv"
	"strings"
)

// ParseNumber reads a NUMERIC field's value as Redis reads a hash field
// for a NUMERIC index (strtod, which must read the whole text): an
// optional sign, digits with an optional point (".5" and "5." too), an
// optional exponent, or inf / infinity in any case. Space before or after,
// NaN, and values that overflow or underflow to zero are refused, as Redis
// refuses them; so are hexadecimal floats ("0x1p3"), which strtod reads but
// Redis 8's parser does not. A value that does not parse is not indexed.
func ParseNumber(value string) (float64, bool) {
	body := value
	if body != "" && (body[0] == '+' || body[0] == '-') {
		body = body[1:]
	}
	if l := strings.ToLower(body); l == "inf" || l == "infinity" {
		if value[0] == '-' {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	}
	if !decimal(body) {
		return 0, false
	}
	f, err := strconv.ParseFloat(value, 64)
	if err != nil { // out of range: ±Inf, which strtod reports as ERANGE
		return 0, false
	}
	if f == 0 && strings.ContainsAny(mantissa(body), "123456789") {
		return 0, false // underflow to zero, also ERANGE
	}
	return f, true
}

// decimal reports whether s is digits with at most one point, at least one
// digit, then optionally e or E, a sign and at least one digit: the
// decimal forms of strtod, which strconv.ParseFloat also reads the same.
func decimal(s string) bool {
	digits, i := 0, 0
	for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
		digits++
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i == len(s) {
		return true
	}
	if s[i] != 'e' && s[i] != 'E' {
		return false
	}
	i++
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	exp := i
	for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
	}
	return i > exp && i == len(s)
}

// mantissa is a decimal's text before its exponent.
func mantissa(s string) string {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		return s[:i]
	}
	return s
}

// EncodeNumber returns 8 bytes whose order under bytes.Compare is the
// numeric order of the numbers, for index keys: -Inf first, +Inf last, and
// -0 encoded as 0. It returns nil for NaN, which has no place in the
// order and which ParseNumber never returns.
func EncodeNumber(f float64) []byte {
	if math.IsNaN(f) {
		return nil
	}
	if f == 0 {
		f = 0 // -0 == 0, so they must encode alike
	}
	bits := math.Float64bits(f)
	// IEEE 754 orders positive numbers as their bits do; setting the sign
	// bit puts them above the negatives, whose order all bits flipped
	// reverses.
	if bits>>63 == 0 {
		bits |= 1 << 63
	} else {
		bits = ^bits
	}
	return binary.BigEndian.AppendUint64(nil, bits)
}

// DecodeNumber reverses EncodeNumber.
func DecodeNumber(b []byte) (float64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	bits := binary.BigEndian.Uint64(b)
	if bits>>63 == 1 {
		bits &^= 1 << 63
	} else {
		bits = ^bits
	}
	f := math.Float64frombits(bits)
	return f, !math.IsNaN(f)
}
