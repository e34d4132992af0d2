package rounds

import (
	"slices"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		in := slices.Clone(c.xs)
		if got := Median(c.xs); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.xs, got, c.want)
		}
		if !slices.Equal(in, c.xs) {
			t.Errorf("Median reordered its argument: %v, was %v", c.xs, in)
		}
	}
}

func TestOfAndRatio(t *testing.T) {
	type round struct{ rps float64 }
	rps := func(r round) float64 { return r.rps }
	a := []round{{10}, {30}, {8}}
	b := []round{{20}, {30}, {4}}
	if got := Of(a, rps); got != 10 {
		t.Errorf("Of = %v, want 10", got)
	}
	if got := Ratio(a, b, rps); got != 1 { // the ratios are 0.5, 1 and 2
		t.Errorf("Ratio = %v, want 1", got)
	}
	if got := Ratio(a, b[:1], rps); got != 0.5 { // rounds the other lacks are left out
		t.Errorf("Ratio of one round = %v, want 0.5", got)
	}
}
