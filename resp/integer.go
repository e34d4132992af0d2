package resp

import (
	"fmt"
	"math"

	"github.com/partmap/partmap"
)

// Integer arguments are read as Redis reads them: with
// partmap.ParseInteger, whose rules are Redis's string2ll (no sign on a
// positive, no leading zeros, no "-0", no spaces, within int64), and with
// the refusals of Redis's getLongLongFromObjectOrReply and
// getRangeLongFromObjectOrReply. Cursors have Redis's own reading
// (parseCursor).

// int reads argument i as Redis's getLongLongFromObjectOrReply does.
func (r *argReader) int(i int) int64 {
	return r.intIn(i, math.MinInt64, math.MaxInt64, "")
}

// intIn reads argument i as an integer from lo to hi, as Redis's
// getRangeLongFromObjectOrReply does: msg, when given, is the refusal of
// anything else, and Redis's own texts are the refusals without it.
func (r *argReader) intIn(i int, lo, hi int64, msg string) int64 {
	if r.err != nil {
		return 0
	}
	n, ok := partmap.ParseInteger(string(r.args[i]))
	switch {
	case (!ok || n < lo || n > hi) && msg != "":
		r.refuse("ERR " + msg)
	case !ok:
		r.refuse(errNotInteger)
	case n < lo || n > hi:
		r.refuse(fmt.Sprintf("ERR value is out of range, value must between %d and %d", lo, hi))
	default:
		return n
	}
	return 0
}

// parseCursor reads a SCAN cursor as Redis's parseScanCursorOrReply does,
// with C's strtoul: a sign and leading zeros are taken ("-1" wraps to
// 2^64-1), and so is the empty string, as 0; a space, anything after the
// digits and a number past 64 bits are not.
func parseCursor(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, true
	}
	neg := b[0] == '-'
	if b[0] == '+' || neg {
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		d := uint64(c - '0')
		if c < '0' || c > '9' || n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	if neg {
		n = -n
	}
	return n, true
}
