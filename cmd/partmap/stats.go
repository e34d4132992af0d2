package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"golang.org/x/term"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/atomicfile"
	"github.com/partmap/partmap/stats"
)

const (
	defaultTop   = 10
	defaultWidth = 80 // columns, when stdout is not a terminal
	minWidth     = 40
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
`, partmap.DefaultPartitions, stats.MinChiSquareExpected)

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
	render := stats.PlotFormat(*plot)
	if *plot != "" && render == nil {
		return usagef("--plot %s: the file name must end in .svg or .png", *plot)
	}
	if *width == 0 {
		*width = terminalWidth(e.stdout)
	}

	ps, err := cl.ListPartitions(ctx)
	if err != nil {
		return err
	}
	sizes, err := stats.Sizes(ps)
	if err != nil {
		return err
	}
	r := stats.Summarize(sizes, *top)

	if *asJSON {
		err = printJSON(e.stdout, r)
	} else {
		err = r.WriteText(e.stdout, *width)
	}
	if err != nil {
		return err
	}
	if render != nil {
		if r.Profiles == 0 {
			fmt.Fprintf(e.stderr, "no plot written: the map holds no profiles\n")
			return nil
		}
		if err := atomicfile.Write(*plot, 0o644, func(w io.Writer) error { return render(&r, w) }); err != nil { // a plot is no secret
			return err
		}
		fmt.Fprintf(e.stderr, "wrote %s\n", *plot)
	}
	return nil
}

func terminalWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			return cols
		}
	}
	return defaultWidth
}
