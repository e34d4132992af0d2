package partmap

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// ParseInteger reads a field value as a counter. Only the canonical decimal
// form of a signed 64-bit integer is one: no sign on positives, no leading
// zeros, no "-0", no spaces. Being strict keeps a counter's text and value
// in one-to-one correspondence, so an increment never rewrites how a number
// was spelled.
func ParseInteger(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && strconv.FormatInt(n, 10) == s
}

// AddInteger is the arithmetic of an increment, like Redis's HINCRBY: a
// missing field counts as 0, a stored value that is not a canonical integer
// is ENOTINTEGER, and a result outside int64 is EOVERFLOW.
func AddInteger(field, stored string, present bool, by int64) (int64, error) {
	var n int64
	if present {
		var ok bool
		if n, ok = ParseInteger(stored); !ok {
			return 0, &Error{Code: ENOTINTEGER, Field: field,
				Message: fmt.Sprintf("field %q holds %s, which is not a canonical signed 64-bit integer", field, quoteBytes(clip(stored)))}
		}
	}
	if (by > 0 && n > math.MaxInt64-by) || (by < 0 && n < math.MinInt64-by) {
		return 0, &Error{Code: EOVERFLOW, Field: field,
			Message: fmt.Sprintf("field %q: %d %+d is outside the signed 64-bit range", field, n, by)}
	}
	return n + by, nil
}

// clip shortens a value quoted in an error message.
func clip(s string) string {
	if len(s) <= 40 {
		return s
	}
	n := 40
	for n > 0 && !utf8.RuneStart(s[n]) {
		n-- // never cut a character in two
	}
	return s[:n] + "…"
}
