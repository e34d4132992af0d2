package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/term"

	"github.com/partmap/partmap"
)

const (
	defaultTop       = 10
	maxHistogramBins = 20
	defaultWidth     = 80 // columns, when stdout is not a terminal
	minWidth         = 40
	// minChiSquareExpected is the usual rule of thumb below which the
	// chi-square approximation of the counts' distribution is poor.
	minChiSquareExpected = 5
)

var statsHelp = fmt.Sprintf(`usage: partmap stats [flags]

Shows how the profiles spread over all the partitions of the map (%[1]d
unless resized), an empty partition counting as 0: the profile count, the
partitions in use,
min/median/p99/max profiles per partition, the mean, standard deviation and
coefficient of variation (stddev/mean), a chi-square test against a uniform
hash, the largest partitions and a histogram of partition sizes.

Quantiles are nearest-rank: of the %[1]d sizes sorted in ascending order, the
p-quantile is the one at rank ceil(p*%[1]d), counting from 1. It is always
the size of a real partition; the median is the lower of the middle two.

The chi-square line sums (observed-expected)^2/expected over the partitions.
A random, uniform hash gives about its degrees of freedom. p is the chance
that such a hash spreads the profiles at least this unevenly (Wilson-Hilferty
approximation; left out under %[2]d expected profiles per partition): near 0
the hash favours some partitions, near 1 the keys spread more evenly than
chance, as sequential keys can.

flags:
`, partmap.DefaultPartitions, minChiSquareExpected)

func runStats(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "stats", "")
	cf.fs.Usage = func() {
		fmt.Fprint(e.stderr, statsHelp)
		cf.fs.PrintDefaults()
	}
	top := cf.fs.Int("top", defaultTop, "list the `N` largest partitions (0: none)")
	asJSON := cf.fs.Bool("json", false, "print the statistics and histogram as JSON")
	plot := cf.fs.String("plot", "", "also draw the histogram into `FILE`, an SVG or PNG image by its extension (.svg or .png)")
	width := cf.fs.Int("width", 0, fmt.Sprintf("histogram width in `columns` (default: the terminal's, or %d)", defaultWidth))
	_, cl, err := cf.parse(args, 0, 0)
	if err != nil {
		return err
	}
	if *top < 0 {
		return usagef("--top must not be negative")
	}
	if *width != 0 && *width < minWidth {
		return usagef("--width must be at least %d", minWidth)
	}
	var render func(io.Writer, statsReport) error
	if *plot != "" {
		switch strings.ToLower(filepath.Ext(*plot)) {
		case ".svg":
			render = writeSVG
		case ".png":
			render = writePNG
		default:
			return usagef("--plot %s: the file name must end in .svg or .png", *plot)
		}
	}
	if *width == 0 {
		*width = terminalWidth(e.stdout)
	}

	ps, err := cl.ListPartitions(ctx)
	if err != nil {
		return err
	}
	sizes, err := partitionSizes(ps, mapPartitions(ps))
	if err != nil {
		return err
	}
	r := newStatsReport(sizes, *top)

	if *asJSON {
		if err := printJSON(e.stdout, r); err != nil {
			return err
		}
	} else {
		printStats(e.stdout, r, *width)
	}
	if render != nil {
		if r.Profiles == 0 {
			fmt.Fprintf(e.stderr, "no plot written: the map holds no profiles\n")
			return nil
		}
		if err := writeFileAtomic(*plot, func(w io.Writer) error { return render(w, r) }); err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "wrote %s\n", *plot)
	}
	return nil
}

// statsReport is what `partmap stats` shows, and its --json form.
type statsReport struct {
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
	Uniform         *uniformCheck   `json:"uniform"` // null for an empty map
	Largest         []partitionSize `json:"largest"`
	Histogram       []bin           `json:"histogram"`
}

// uniformCheck compares the sizes with what a uniform hash would give.
type uniformCheck struct {
	Expected       float64  `json:"expected"`       // profiles per partition
	ExpectedStdDev float64  `json:"expectedStddev"` // of a multinomial spread
	ChiSquare      float64  `json:"chiSquare"`
	DF             int      `json:"degreesOfFreedom"`
	P              *float64 `json:"p"` // null when too few profiles are expected per partition
}

type partitionSize struct {
	Name     string `json:"name"`
	Profiles int64  `json:"profiles"`
}

// bin counts the partitions holding From to To profiles, both included.
type bin struct {
	From       int64 `json:"from"`
	To         int64 `json:"to"`
	Partitions int   `json:"partitions"`
}

func (b bin) label() string {
	if b.From == b.To {
		return fmt.Sprint(b.From)
	}
	return fmt.Sprintf("%d-%d", b.From, b.To)
}

// partitionSizes spreads the server's counts over all n partitions, so that
// the partitions it does not list count as empty.
func partitionSizes(ps partmap.PartitionStats, n int) ([]int64, error) {
	sizes := make([]int64, n)
	for _, p := range ps.Partitions {
		if int(p.Partition) >= n || p.Profiles < 0 {
			return nil, fmt.Errorf("the server reports %d profiles in %s, but partmap has %d partitions", p.Profiles, p.Partition, n)
		}
		sizes[p.Partition] += p.Profiles
	}
	return sizes, nil
}

func newStatsReport(sizes []int64, top int) statsReport {
	r := statsReport{Partitions: len(sizes), Largest: []partitionSize{}}
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
		u := &uniformCheck{Expected: r.Mean, ExpectedStdDev: math.Sqrt(r.Mean * (1 - 1/n)), ChiSquare: sq / r.Mean, DF: len(sizes) - 1}
		if u.Expected >= minChiSquareExpected && u.DF > 0 {
			p := chiSquareUpperTail(u.ChiSquare, u.DF)
			u.P = &p
		}
		r.Uniform = u
	}
	r.Largest = largest(sizes, top)
	r.Histogram = binSizes(sizes, maxHistogramBins)
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
func largest(sizes []int64, top int) []partitionSize {
	idx := make([]int, 0, len(sizes))
	for p, s := range sizes {
		if s > 0 {
			idx = append(idx, p)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(sizes[b], sizes[a]) })
	out := make([]partitionSize, 0, min(top, len(idx)))
	for _, p := range idx[:min(top, len(idx))] {
		out = append(out, partitionSize{partmap.Partition(p).String(), sizes[p]})
	}
	return out
}

// binSizes groups sizes into at most maxBins bins of one integer width, the
// smallest of 1, 2, 5, 10, 20, 50... that fits, the first bin starting at a
// multiple of the width so that the labels stay round. Bins between the
// smallest and largest size are kept even when empty.
func binSizes(sizes []int64, maxBins int) []bin {
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
	bins := make([]bin, (hi-start)/width+1)
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

func printStats(w io.Writer, r statsReport, width int) {
	if r.Profiles == 0 {
		fmt.Fprintf(w, "the map holds no profiles: all %d partitions are empty\n", r.Partitions)
		return
	}
	fmt.Fprintf(w, "%d profiles in %d partitions: %d in use, %d empty\n", r.Profiles, r.Partitions, r.PartitionsInUse, r.Partitions-r.PartitionsInUse)
	fmt.Fprintf(w, "profiles per partition: min %d, median %d, p99 %d, max %d (nearest rank)\n", r.Min, r.Median, r.P99, r.Max)
	fmt.Fprintf(w, "mean %.2f, stddev %.2f, cv %.3f\n", r.Mean, r.StdDev, *r.CV)
	u := r.Uniform
	fmt.Fprintf(w, "uniform hash: %.2f ± %.2f per partition; chi-square %.1f on %d df", u.Expected, u.ExpectedStdDev, u.ChiSquare, u.DF)
	switch {
	case u.P == nil:
		fmt.Fprintf(w, " (too few profiles per partition for a p-value)\n")
	case *u.P < 0.001:
		fmt.Fprintf(w, ", p < 0.001\n")
	case *u.P > 0.999:
		fmt.Fprintf(w, ", p > 0.999\n")
	default:
		fmt.Fprintf(w, ", p = %.3f\n", *u.P)
	}
	if len(r.Largest) > 0 {
		fmt.Fprintf(w, "\nlargest partitions:\n")
		for _, p := range r.Largest {
			fmt.Fprintf(w, "  %s  %d\n", p.Name, p.Profiles)
		}
	}
	fmt.Fprintf(w, "\nhistogram (profiles per partition, number of partitions):\n")
	printHistogram(w, r.Histogram, width)
}

// eighths are the partial blocks that end a bar, from none to seven eighths.
var eighths = []string{"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"}

// printHistogram draws one line per bin, "LABEL COUNT │BAR", the longest bar
// filling the width.
func printHistogram(w io.Writer, bins []bin, width int) {
	labelW, countW, most := 0, 0, 0
	for _, b := range bins {
		labelW = max(labelW, len(b.label()))
		countW = max(countW, len(fmt.Sprint(b.Partitions)))
		most = max(most, b.Partitions)
	}
	cells := max(width-labelW-countW-3, 10)
	for _, b := range bins {
		bar := ""
		if most > 0 {
			n := (b.Partitions*cells*8 + most/2) / most
			if n == 0 && b.Partitions > 0 {
				n = 1 // a bin with any partition shows
			}
			bar = strings.Repeat("█", n/8) + eighths[n%8]
		}
		fmt.Fprintf(w, "%*s %*d │%s\n", labelW, b.label(), countW, b.Partitions, bar)
	}
}

func terminalWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			return cols
		}
	}
	return defaultWidth
}

// writeFileAtomic writes a temporary file beside path and renames it over
// path, so that a failure leaves no partial file behind.
func writeFileAtomic(path string, write func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = write(f); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil { // CreateTemp makes 0600; a plot is no secret
		return err
	}
	if err = f.Sync(); err != nil { // else a crash could leave the new name on an empty file
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
