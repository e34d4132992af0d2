// Package rounds summarises a benchmark's rounds as the load tests report
// them: medians, and ratios that are the medians of per-round ratios, so
// that two servers measured in the same round are compared round by round.
package rounds

import "slices"

// Median is the median of xs, 0 for none; xs is left as it was.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// Of is the median of v over the rounds rs.
func Of[T any](rs []T, v func(T) float64) float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = v(r)
	}
	return Median(xs)
}

// Ratio is the median of the per-round ratios of v, a's over b's; rounds
// one of them lacks are left out.
func Ratio[T any](a, b []T, v func(T) float64) float64 {
	var xs []float64
	for i := range min(len(a), len(b)) {
		xs = append(xs, v(a[i])/v(b[i]))
	}
	return Median(xs)
}
