package engine

import (
	"math"
	"testing"
)

// Expiry values sort as their deadlines do, each 17 bytes: a profile's
// deadline past 16 digits, as late as an int64 goes, is entered as the
// latest 16 digits spell.
func TestExpiryValue(t *testing.T) {
	deadlines := []int64{0, 1, 1<<46 - 1, 1<<48 - 1, 1e16 - 2, 1e16 - 1, 3e17, math.MaxInt64}
	prev := ""
	for _, d := range deadlines {
		v := ExpiryValue(d, true)
		at, profile, ok := ParseExpiryValue(v)
		if len(v) != 17 || !ok || !profile || at != min(d, 1e16-1) {
			t.Fatalf("ExpiryValue(%d) = %q, read back as %d %v %v", d, v, at, profile, ok)
		}
		if v < prev {
			t.Fatalf("ExpiryValue(%d) = %q sorts before %q", d, v, prev)
		}
		switch {
		case d <= 1e16-1 && ExpiryBound(d) > v:
			t.Fatalf("ExpiryBound(%d) = %q is past its own entry %q", d, ExpiryBound(d), v)
		case d > 1e16-1 && ExpiryBound(d) <= v:
			// A read of everything due before it (a count of every
			// deadline) must take in the entries entered at the latest.
			t.Fatalf("ExpiryBound(%d) = %q leaves out %q", d, ExpiryBound(d), v)
		}
		prev = v
	}
}
