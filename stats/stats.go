// Package stats summarises how a map's profiles spread over its partitions:
// the counts, nearest-rank quantiles, mean and spread, a chi-square test
// against a uniform hash, the largest partitions and a histogram of
// partition sizes. It renders the summary as text, and the histogram as an
// SVG or PNG plot. `partmap stats` is one user; a Go program holding a
// partmap.PartitionStats (from any partmap.Store) can be another.
//
// Every partition of the map counts, an empty one as 0, so that the figures
// describe the hash and not only the partitions in use.
package stats

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/partmap/partmap"
)

// MinChiSquareExpected is the usual rule of thumb below which the chi-square
// approximation of the counts' distribution is poor: with fewer expected
// profiles per partition, Report.Uniform.P is left out.
const MinChiSquareExpected = 5

// maxBins bounds the histogram, so that it fits a terminal's height.
const maxBins = 20

// Report is the summary of a map's partition sizes, and its JSON form.
type Report struct {
	Profiles        int64           `json:"profiles"`
	Partitions      int             `json:"partitions"`
	PartitionsInUse int             `json:"partitionsInUse"`
	Min             int64           `json:"min"`
	Median          int64           `json:"median"`
	P99             int64           `json:"p99"`
	Max             int64           `json:"max"`
	Mean            float64         `json:"mean"`
	StdDev          float64         `json:"stddev"`
	CV              *float64        `json:"cv"`      // null for an empty map
	Uniform         *Uniform        `json:"uniform"` // null for an empty map
	Largest         []PartitionSize `json:"largest"`
	Histogram       []Bin           `json:"histogram"`
}

// Uniform compares the sizes with what a uniform hash would give.
type Uniform struct {
	Expected       float64  `json:"expected"`       // profiles per partition
	ExpectedStdDev float64  `json:"expectedStddev"` // of a multinomial spread
	ChiSquare      float64  `json:"chiSquare"`
	DF             int      `json:"degreesOfFreedom"`
	P              *float64 `json:"p"` // null when too few profiles are expected per partition
}

// PartitionSize is one partition, by name, and its profile count.
type PartitionSize struct {
	Name     string `json:"name"`
	Profiles int64  `json:"profiles"`
}

// Bin counts the partitions holding From to To profiles, both included.
type Bin struct {
	From       int64 `json:"from"`
	To         int64 `json:"to"`
	Partitions int   `json:"partitions"`
}

// Label is "From-To", or one number for a bin of width 1.
func (b Bin) Label() string {
	if b.From == b.To {
		return fmt.Sprint(b.From)
	}
	return fmt.Sprintf("%d-%d", b.From, b.To)
}

// Sizes spreads the counts of ps over all the map's partitions, indexed by
// partition number, so that the partitions ps does not list count as
// empty. The map has ps.MapPartitions() partitions. A count outside the
// map, or negative, is an error.
func Sizes(ps partmap.PartitionStats) ([]int64, error) {
	n := ps.MapPartitions()
	sizes := make([]int64, n)
	for _, p := range ps.Partitions {
		if int(p.Partition) >= n || p.Profiles < 0 {
			return nil, fmt.Errorf("the server reports %d profiles in %s, but partmap has %d partitions", p.Profiles, p.Partition, n)
		}
		sizes[p.Partition] += p.Profiles
	}
	return sizes, nil
}

// Summarize describes sizes, the profile counts of every partition indexed
// by partition number, and lists the top largest non-empty partitions.
func Summarize(sizes []int64, top int) Report {
	r := Report{Partitions: len(sizes), Largest: []PartitionSize{}}
	var sum float64
	for _, s := range sizes {
		r.Profiles += s
		sum += float64(s)
		if s > 0 {
			r.PartitionsInUse++
		}
	}
	n := float64(len(sizes))
	sorted := slices.Sorted(slices.Values(sizes))
	r.Min, r.Median, r.P99, r.Max = nearestRank(sorted, 0, 1), nearestRank(sorted, 1, 2), nearestRank(sorted, 99, 100), nearestRank(sorted, 1, 1)
	r.Mean = sum / n
	var sq float64
	for _, s := range sizes {
		d := float64(s) - r.Mean
		sq += d * d
	}
	r.StdDev = math.Sqrt(sq / n) // of the population: these are all the partitions
	if r.Profiles > 0 {
		cv := r.StdDev / r.Mean
		r.CV = &cv
		u := &Uniform{Expected: r.Mean, ExpectedStdDev: math.Sqrt(r.Mean * (1 - 1/n)), ChiSquare: sq / r.Mean, DF: len(sizes) - 1}
		if u.Expected >= MinChiSquareExpected && u.DF > 0 {
			p := chiSquareUpperTail(u.ChiSquare, u.DF)
			u.P = &p
		}
		r.Uniform = u
	}
	r.Largest = largest(sizes, top)
	r.Histogram = binSizes(sizes, maxBins)
	return r
}

// nearestRank returns the num/den quantile of sorted (ascending) by the
// nearest-rank definition: the value at rank ceil(num/den * n), counting
// from 1, where rank 0 means the first. Integer arithmetic keeps
// 0.99*1000 from landing on rank 991.
func nearestRank(sorted []int64, num, den int) int64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := (num*len(sorted) + den - 1) / den
	return sorted[max(rank, 1)-1]
}

// largest returns the top non-empty partitions, largest first; ties go in
// partition order.
func largest(sizes []int64, top int) []PartitionSize {
	idx := make([]int, 0, len(sizes))
	for p, s := range sizes {
		if s > 0 {
			idx = append(idx, p)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(sizes[b], sizes[a]) })
	out := make([]PartitionSize, 0, min(top, len(idx)))
	for _, p := range idx[:min(top, len(idx))] {
		out = append(out, PartitionSize{partmap.Partition(p).String(), sizes[p]})
	}
	return out
}

// binSizes groups sizes into at most maxBins bins of one integer width, the
// smallest of 1, 2, 5, 10, 20, 50... that fits, the first bin starting at a
// multiple of the width so that the labels stay round. Bins between the
// smallest and largest size are kept even when empty.
func binSizes(sizes []int64, maxBins int) []Bin {
	if len(sizes) == 0 || maxBins < 1 {
		return nil
	}
	lo, hi := slices.Min(sizes), slices.Max(sizes)
	width, start := int64(1), lo
	for i := 1; ; i++ {
		start = lo - lo%width
		if (hi-start)/width < int64(maxBins) {
			break
		}
		width = niceNumber(i)
	}
	bins := make([]Bin, (hi-start)/width+1)
	for i := range bins {
		bins[i].From = start + int64(i)*width
		bins[i].To = bins[i].From + width - 1
	}
	for _, s := range sizes {
		bins[(s-start)/width].Partitions++
	}
	return bins
}

// niceNumber is the i-th of 1, 2, 5, 10, 20, 50, 100...
func niceNumber(i int) int64 {
	n := []int64{1, 2, 5}[i%3]
	for range i / 3 {
		n *= 10
	}
	return n
}

// niceAtLeast is the smallest nice number that is at least x.
func niceAtLeast(x int64) int64 {
	for i := 0; ; i++ {
		if n := niceNumber(i); n >= x {
			return n
		}
	}
}

// chiSquareUpperTail approximates P(X >= x) for X chi-square distributed
// with df degrees of freedom, by Wilson and Hilferty's cube-root normal
// approximation, which is close for the hundreds of degrees of freedom a
// partition count gives.
func chiSquareUpperTail(x float64, df int) float64 {
	k := float64(df)
	v := 2 / (9 * k)
	z := (math.Cbrt(x/k) - (1 - v)) / math.Sqrt(v)
	return 0.5 * math.Erfc(z/math.Sqrt2)
}

// WriteText writes the report for a person: the summary lines, the largest
// partitions and a histogram whose longest bar fills width columns.
func (r *Report) WriteText(w io.Writer, width int) error {
	var b bytes.Buffer
	if r.Profiles == 0 {
		fmt.Fprintf(&b, "the map holds no profiles: all %d partitions are empty\n", r.Partitions)
		_, err := w.Write(b.Bytes())
		return err
	}
	fmt.Fprintf(&b, "%d profiles in %d partitions: %d in use, %d empty\n", r.Profiles, r.Partitions, r.PartitionsInUse, r.Partitions-r.PartitionsInUse)
	fmt.Fprintf(&b, "profiles per partition: min %d, median %d, p99 %d, max %d (nearest rank)\n", r.Min, r.Median, r.P99, r.Max)
	fmt.Fprintf(&b, "mean %.2f, stddev %.2f, cv %.3f\n", r.Mean, r.StdDev, *r.CV)
	u := r.Uniform
	fmt.Fprintf(&b, "uniform hash: %.2f ± %.2f per partition; chi-square %.1f on %d df", u.Expected, u.ExpectedStdDev, u.ChiSquare, u.DF)
	switch {
	case u.P == nil:
		fmt.Fprintf(&b, " (too few profiles per partition for a p-value)\n")
	case *u.P < 0.001:
		fmt.Fprintf(&b, ", p < 0.001\n")
	case *u.P > 0.999:
		fmt.Fprintf(&b, ", p > 0.999\n")
	default:
		fmt.Fprintf(&b, ", p = %.3f\n", *u.P)
	}
	if len(r.Largest) > 0 {
		fmt.Fprintf(&b, "\nlargest partitions:\n")
		for _, p := range r.Largest {
			fmt.Fprintf(&b, "  %s  %d\n", p.Name, p.Profiles)
		}
	}
	fmt.Fprintf(&b, "\nhistogram (profiles per partition, number of partitions):\n")
	writeHistogram(&b, r.Histogram, width)
	_, err := w.Write(b.Bytes())
	return err
}

// eighths are the partial blocks that end a bar, from none to seven eighths.
var eighths = []string{"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"}

// writeHistogram draws one line per bin, "LABEL COUNT │BAR", the longest bar
// filling the width.
func writeHistogram(b *bytes.Buffer, bins []Bin, width int) {
	labelW, countW, most := 0, 0, 0
	for _, bin := range bins {
		labelW = max(labelW, len(bin.Label()))
		countW = max(countW, len(fmt.Sprint(bin.Partitions)))
		most = max(most, bin.Partitions)
	}
	cells := max(width-labelW-countW-3, 10)
	for _, bin := range bins {
		bar := ""
		if most > 0 {
			n := (bin.Partitions*cells*8 + most/2) / most
			if n == 0 && bin.Partitions > 0 {
				n = 1 // a bin with any partition shows
			}
			bar = strings.Repeat("█", n/8) + eighths[n%8]
		}
		fmt.Fprintf(b, "%*s %*d │%s\n", labelW, bin.Label(), countW, bin.Partitions, bar)
	}
}
