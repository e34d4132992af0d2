package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/partmap/partmap"
)

// statsFixture picks emails so that partition groups[i] holds want[i]
// profiles: the partitions are distinct and found with PartitionOf, the
// first of each group being the first unused email's partition.
func statsFixture(t *testing.T, want ...int) (emails []string, groups []partmap.Partition) {
	t.Helper()
	used := map[partmap.Partition]bool{}
	next := 0
	email := func(i int) string { return fmt.Sprintf("stats%d@example.com", i) }
	for _, n := range want {
		for used[partmap.PartitionOf(email(next), partmap.DefaultPartitions)] {
			next++
		}
		p := partmap.PartitionOf(email(next), partmap.DefaultPartitions)
		used[p] = true
		groups = append(groups, p)
		for i, found := next, 0; found < n; i++ {
			if partmap.PartitionOf(email(i), partmap.DefaultPartitions) == p {
				emails = append(emails, email(i))
				found++
			}
		}
	}
	return emails, groups
}

// serveStatsFixture starts a server holding one partition of 5 profiles,
// one of 3 and ten of 1: 18 profiles in 12 partitions.
func serveStatsFixture(t *testing.T) (srv string, groups []partmap.Partition) {
	t.Helper()
	emails, groups := statsFixture(t, 5, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
	url, _ := serveInProcess(t)
	srv = "--server=" + url
	var jsonl strings.Builder
	for _, e := range emails {
		fmt.Fprintf(&jsonl, "{\"emailAddress\":%q}\n", e)
	}
	if code, _, errOut := run(t, "", "start", srv); code != 0 {
		t.Fatalf("start: %d %s", code, errOut)
	}
	if code, _, errOut := run(t, jsonl.String(), "import", "-", srv); code != 0 || !strings.Contains(errOut, "imported 18 profiles") {
		t.Fatalf("import: %d %s", code, errOut)
	}
	return srv, groups
}

func TestStatsCommand(t *testing.T) {
	srv, groups := serveStatsFixture(t)
	ones := slices.Sorted(slices.Values(groups[2:]))

	code, out, errOut := run(t, "", "stats", srv, "--top", "4", "--width", "40")
	bar33 := strings.Repeat("█", 33)
	want := fmt.Sprintf(`18 profiles in 1000 partitions: 12 in use, 988 empty
profiles per partition: min 0, median 0, p99 1, max 5 (nearest rank)
mean 0.02, stddev 0.21, cv 11.610
uniform hash: 0.02 ± 0.13 per partition; chi-square 2426.4 on 999 df (too few profiles per partition for a p-value)

largest partitions:
  %s  5
  %s  3
  %s  1
  %s  1

histogram (profiles per partition, number of partitions):
0 988 │%s
1  10 │▍
2   0 │
3   1 │▏
4   0 │
5   1 │▏
`, groups[0], groups[1], ones[0], ones[1], bar33)
	if code != 0 || out != want || errOut != "" {
		t.Fatalf("got %d\n%s%q\nwant 0\n%s", code, out, errOut, want)
	}

	t.Run("JSON", func(t *testing.T) {
		code, out, errOut := run(t, "", "stats", srv, "--json", "--top", "2")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var got statsReport
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if got.Profiles != 18 || got.Partitions != 1000 || got.PartitionsInUse != 12 ||
			got.Min != 0 || got.Median != 0 || got.P99 != 1 || got.Max != 5 {
			t.Errorf("counts and quantiles: %+v", got)
		}
		if math.Abs(got.Mean-0.018) > 1e-12 || math.Abs(got.StdDev-math.Sqrt(0.043676)) > 1e-9 {
			t.Errorf("mean %v stddev %v, want 0.018 and %v", got.Mean, got.StdDev, math.Sqrt(0.043676))
		}
		if got.CV == nil || got.Uniform == nil || got.Uniform.P != nil || got.Uniform.DF != 999 || math.Abs(got.Uniform.ChiSquare-43.676/0.018) > 1e-6 {
			t.Errorf("cv and chi-square: %v %+v", got.CV, got.Uniform)
		}
		if want := []partitionSize{{groups[0].String(), 5}, {groups[1].String(), 3}}; !reflect.DeepEqual(got.Largest, want) {
			t.Errorf("largest %v, want %v", got.Largest, want)
		}
		if want := []bin{{0, 0, 988}, {1, 1, 10}, {2, 2, 0}, {3, 3, 1}, {4, 4, 0}, {5, 5, 1}}; !reflect.DeepEqual(got.Histogram, want) {
			t.Errorf("histogram %v, want %v", got.Histogram, want)
		}
	})

	t.Run("SVG", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "sizes.SVG")
		if code, _, errOut := run(t, "", "stats", srv, "--plot", path); code != 0 || !strings.Contains(errOut, "wrote "+path) {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		root, bars, title := "", 0, ""
		dec := xml.NewDecoder(bytes.NewReader(b))
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("the SVG is not XML: %v\n%s", err, b)
			}
			if se, ok := tok.(xml.StartElement); ok {
				if root == "" {
					root = se.Name.Space + " " + se.Name.Local
				}
				for _, a := range se.Attr {
					if se.Name.Local == "rect" && a.Name.Local == "class" && a.Value == "bar" {
						bars++
					}
				}
				if se.Name.Local == "title" && title == "" {
					dec.DecodeElement(&title, &se)
				}
			}
		}
		if root != "http://www.w3.org/2000/svg svg" || bars != 6 || !strings.Contains(title, "18 profiles") {
			t.Fatalf("root %q, %d bars, title %q; want an svg with 6 bars and the total", root, bars, title)
		}
	})

	t.Run("PNG", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "sizes.png")
		if code, _, errOut := run(t, "", "stats", srv, "--plot", path, "--json"); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		img, err := png.Decode(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := img.Bounds().Size(); got.X != plotWidth || got.Y != plotHeight {
			t.Fatalf("size %v, want %dx%d", got, plotWidth, plotHeight)
		}
		// The tallest bar (988 partitions, the first of six) is drawn.
		x, y := plotLeft+(plotRight-plotLeft)/12, plotBottom-10
		if r, g, b, _ := img.At(x, y).RGBA(); r>>8 != uint32(barColor.R) || g>>8 != uint32(barColor.G) || b>>8 != uint32(barColor.B) {
			t.Fatalf("pixel (%d,%d) is %v, not the bar colour", x, y, img.At(x, y))
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
			t.Errorf("mode %v, want 0644", fi.Mode().Perm())
		}
	})

	t.Run("ErrPlotFails", func(t *testing.T) {
		dir := t.TempDir()
		missing := filepath.Join(dir, "no", "such", "dir.svg")
		if code, _, errOut := run(t, "", "stats", srv, "--plot", missing); code != 1 || !strings.Contains(errOut, "no such file") {
			t.Errorf("plot into a missing directory: %d %q", code, errOut)
		}
		// The rename fails onto a directory: the temporary file goes too.
		taken := filepath.Join(dir, "taken.png")
		if err := os.Mkdir(taken, 0o755); err != nil {
			t.Fatal(err)
		}
		if code, _, _ := run(t, "", "stats", srv, "--plot", taken); code != 1 {
			t.Errorf("plot over a directory: exit %d, want 1", code)
		}
		if names, _ := os.ReadDir(dir); len(names) != 1 || names[0].Name() != "taken.png" {
			t.Errorf("a failed plot left %v", names)
		}
	})
}

func TestStatsCommandErrors(t *testing.T) {
	url, _ := serveInProcess(t)
	srv := "--server=" + url
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"ErrNotStarted", []string{"stats"}, 1, "not started"},
		{"ErrNegativeTop", []string{"stats", "--top", "-1"}, 2, "--top must not be negative"},
		{"ErrTopNotANumber", []string{"stats", "--top", "ten"}, 2, "invalid value"},
		{"ErrNarrowWidth", []string{"stats", "--width", "39"}, 2, "--width must be at least 40"},
		{"ErrNegativeWidth", []string{"stats", "--width", "-80"}, 2, "--width must be at least 40"},
		{"ErrPlotExtension", []string{"stats", "--plot", filepath.Join(dir, "sizes.jpg")}, 2, "must end in .svg or .png"},
		{"ErrPlotNoExtension", []string{"stats", "--plot", filepath.Join(dir, "sizes")}, 2, "must end in .svg or .png"},
		{"ErrArgument", []string{"stats", "extra"}, 2, "usage: partmap stats"},
		{"HelpNamesTheQuantiles", []string{"stats", "--help"}, 0, "nearest-rank"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(t, "", append(tc.args, srv)...)
			if code != tc.code || !strings.Contains(errOut, tc.msg) || out != "" {
				t.Fatalf("got %d %q %q, want %d and %q", code, out, errOut, tc.code, tc.msg)
			}
		})
	}
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Errorf("a refused --plot wrote %v", names)
	}

	run(t, "", "start", srv)
	plot := filepath.Join(dir, "empty.svg")
	code, out, errOut := run(t, "", "stats", srv, "--plot", plot)
	if code != 0 || out != "the map holds no profiles: all 1000 partitions are empty\n" || !strings.Contains(errOut, "no plot written") {
		t.Fatalf("empty map: %d %q %q", code, out, errOut)
	}
	if _, err := os.Stat(plot); !os.IsNotExist(err) {
		t.Errorf("an empty map wrote a plot: %v", err)
	}
	code, out, _ = run(t, "", "stats", srv, "--json")
	var r statsReport
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || r.Profiles != 0 || r.PartitionsInUse != 0 || r.CV != nil ||
		r.Uniform != nil || len(r.Largest) != 0 || !reflect.DeepEqual(r.Histogram, []bin{{0, 0, 1000}}) {
		t.Fatalf("empty map --json: %d %v %s", code, err, out)
	}
}

func TestStatsNearestRank(t *testing.T) {
	thousand := make([]int64, 1000)
	for i := range thousand {
		thousand[i] = int64(i + 1) // 1 to 1000
	}
	for _, tc := range []struct {
		name     string
		sorted   []int64
		num, den int
		want     int64
	}{
		{"Empty", nil, 1, 2, 0},
		{"OnePartitionMin", []int64{7}, 0, 1, 7},
		{"OnePartitionMedian", []int64{7}, 1, 2, 7},
		{"OnePartitionP99", []int64{7}, 99, 100, 7},
		{"AllZero", []int64{0, 0, 0, 0}, 99, 100, 0},
		{"MinIsRankOne", []int64{1, 2, 3}, 0, 1, 1},
		{"MaxIsRankN", []int64{1, 2, 3}, 1, 1, 3},
		{"EvenMedianIsTheLowerMiddle", []int64{1, 2, 3, 4}, 1, 2, 2},
		{"OddMedian", []int64{1, 2, 3, 4, 5}, 1, 2, 3},
		{"Ties", []int64{0, 5, 5, 5, 9}, 1, 2, 5},
		{"P99Of1000IsRank990", thousand, 99, 100, 990},
		{"P99Of101IsRank100", thousand[:101], 99, 100, 100},
		{"P99Of10IsTheMax", thousand[:10], 99, 100, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nearestRank(tc.sorted, tc.num, tc.den); got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
		})
	}
}

func TestStatsBinSizes(t *testing.T) {
	spread := func(from, to int64) []int64 {
		var s []int64
		for v := from; v <= to; v++ {
			s = append(s, v)
		}
		return s
	}
	for _, tc := range []struct {
		name  string
		sizes []int64
		want  []bin // nil: check only first, last and count below
		first bin
		last  bin
		n     int
	}{
		{name: "Empty", sizes: nil},
		{name: "AllZero", sizes: []int64{0, 0, 0}, want: []bin{{0, 0, 3}}},
		{name: "OnePartition", sizes: []int64{42}, want: []bin{{42, 42, 1}}},
		{name: "TiesAndGaps", sizes: []int64{0, 3, 3, 1, 0}, want: []bin{{0, 0, 2}, {1, 1, 1}, {2, 2, 0}, {3, 3, 2}}},
		{name: "TwentyValuesKeepWidthOne", sizes: spread(5, 24), first: bin{5, 5, 1}, last: bin{24, 24, 1}, n: 20},
		{name: "TwentyOneValuesWidenToTwo", sizes: spread(0, 20), first: bin{0, 1, 2}, last: bin{20, 21, 1}, n: 11},
		{name: "StartIsAMultipleOfTheWidth", sizes: spread(3, 50), first: bin{0, 4, 2}, last: bin{50, 54, 1}, n: 11},
		{name: "RealisticSpread", sizes: spread(70, 133), first: bin{70, 74, 5}, last: bin{130, 134, 4}, n: 13},
		{name: "WideSpread", sizes: []int64{0, 1, 12345}, first: bin{0, 999, 2}, last: bin{12000, 12999, 1}, n: 13},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := binSizes(tc.sizes, maxHistogramBins)
			if tc.want != nil || len(tc.sizes) == 0 {
				if !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
				return
			}
			if len(got) != tc.n || got[0] != tc.first || got[len(got)-1] != tc.last {
				t.Fatalf("got %d bins %v ... %v, want %d bins %v ... %v", len(got), got[0], got[len(got)-1], tc.n, tc.first, tc.last)
			}
			total := 0
			for i, b := range got {
				total += b.Partitions
				if i > 0 && b.From != got[i-1].To+1 {
					t.Errorf("bin %d starts at %d after %d", i, b.From, got[i-1].To)
				}
			}
			if total != len(tc.sizes) {
				t.Errorf("the bins hold %d partitions, want %d", total, len(tc.sizes))
			}
		})
	}
}

func TestStatsLargest(t *testing.T) {
	sizes := []int64{0, 2, 5, 2, 0, 5, 1}
	for _, tc := range []struct {
		name string
		top  int
		want []partitionSize
	}{
		{"TiesInPartitionOrder", 4, []partitionSize{{"partition-002", 5}, {"partition-005", 5}, {"partition-001", 2}, {"partition-003", 2}}},
		{"TopBeyondInUse", 100, []partitionSize{{"partition-002", 5}, {"partition-005", 5}, {"partition-001", 2}, {"partition-003", 2}, {"partition-006", 1}}},
		{"None", 0, []partitionSize{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := largest(sizes, tc.top); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	if got := largest(make([]int64, 5), 3); len(got) != 0 {
		t.Errorf("all empty: %v", got)
	}
}

func TestStatsPartitionSizes(t *testing.T) {
	got, err := partitionSizes(partmap.PartitionStats{Partitions: []partmap.PartitionCount{{Partition: 1, Profiles: 4}, {Partition: 3, Profiles: 2}}}, 4)
	if err != nil || !reflect.DeepEqual(got, []int64{0, 4, 0, 2}) {
		t.Fatalf("got %v %v, want [0 4 0 2]", got, err)
	}
	if _, err := partitionSizes(partmap.PartitionStats{Partitions: []partmap.PartitionCount{{Partition: 4, Profiles: 1}}}, 4); err == nil || !strings.Contains(err.Error(), "partition-004") {
		t.Fatalf("a partition beyond the count: %v", err)
	}
}

func TestStatsChiSquareUpperTail(t *testing.T) {
	// Critical values from the chi-square table.
	for _, tc := range []struct {
		x    float64
		df   int
		want float64
	}{
		{124.342, 100, 0.05},
		{135.807, 100, 0.01},
		{77.929, 100, 0.95},
		{1073.643, 999, 0.05},
	} {
		if got := chiSquareUpperTail(tc.x, tc.df); math.Abs(got-tc.want) > 0.002 {
			t.Errorf("P(X >= %v | df %d) = %.4f, want %.3f", tc.x, tc.df, got, tc.want)
		}
	}
}

func TestStatsHistogramBars(t *testing.T) {
	var b strings.Builder
	printHistogram(&b, []bin{{0, 4, 16}, {5, 9, 1}, {10, 14, 0}, {15, 19, 8}}, 40)
	// 40 columns less "10-14", the counts and the separators leave 30 cells.
	want := "  0-4 16 │" + strings.Repeat("█", 30) + "\n" +
		"  5-9  1 │█▉\n" + // 1/16 of 240 eighths is 15
		"10-14  0 │\n" +
		"15-19  8 │" + strings.Repeat("█", 15) + "\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}
