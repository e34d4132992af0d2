package stats

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"image/png"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/partmap/partmap"
)

// fixture is a map of 1000 partitions: partition 7 holds 5 profiles,
// partition 3 holds 3 and partitions 10 to 19 one each, 18 in all.
func fixture() []int64 {
	sizes := make([]int64, 1000)
	sizes[7], sizes[3] = 5, 3
	for p := 10; p < 20; p++ {
		sizes[p] = 1
	}
	return sizes
}

func TestSummarize(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		got := Summarize(fixture(), 3)
		if got.Profiles != 18 || got.Partitions != 1000 || got.PartitionsInUse != 12 ||
			got.Min != 0 || got.Median != 0 || got.P99 != 1 || got.Max != 5 {
			t.Errorf("counts and quantiles: %+v", got)
		}
		if math.Abs(got.Mean-0.018) > 1e-12 || math.Abs(got.StdDev-math.Sqrt(0.043676)) > 1e-9 {
			t.Errorf("mean %v stddev %v, want 0.018 and %v", got.Mean, got.StdDev, math.Sqrt(0.043676))
		}
		if got.CV == nil || math.Abs(*got.CV-math.Sqrt(0.043676)/0.018) > 1e-9 {
			t.Errorf("cv %v", got.CV)
		}
		// 0.018 expected per partition is too few for a p-value.
		if u := got.Uniform; u == nil || u.P != nil || u.DF != 999 || math.Abs(u.ChiSquare-43.676/0.018) > 1e-6 {
			t.Errorf("uniform %+v", u)
		}
		if want := []PartitionSize{{"partition-007", 5}, {"partition-003", 3}, {"partition-010", 1}}; !reflect.DeepEqual(got.Largest, want) {
			t.Errorf("largest %v, want %v", got.Largest, want)
		}
		if want := []Bin{{0, 0, 988}, {1, 1, 10}, {2, 2, 0}, {3, 3, 1}, {4, 4, 0}, {5, 5, 1}}; !reflect.DeepEqual(got.Histogram, want) {
			t.Errorf("histogram %v, want %v", got.Histogram, want)
		}
	})
	t.Run("PValue", func(t *testing.T) {
		sizes := make([]int64, 100)
		for i := range sizes {
			sizes[i] = 10 + int64(i%3) - 1 // 9, 10, 11...: more even than chance
		}
		u := Summarize(sizes, 0).Uniform
		if u == nil || u.P == nil || *u.P < 0.999 {
			t.Fatalf("uniform %+v: want p near 1", u)
		}
	})
	t.Run("Empty", func(t *testing.T) {
		got := Summarize(make([]int64, 1000), 10)
		if got.Profiles != 0 || got.CV != nil || got.Uniform != nil || len(got.Largest) != 0 || !reflect.DeepEqual(got.Histogram, []Bin{{0, 0, 1000}}) {
			t.Fatalf("got %+v", got)
		}
		// The JSON form says null, not 0, for what an empty map has not.
		b, err := json.Marshal(got)
		if err != nil || !bytes.Contains(b, []byte(`"cv":null,"uniform":null,"largest":[]`)) {
			t.Fatalf("got %s %v", b, err)
		}
	})
}

func TestWriteText(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		r := Summarize(fixture(), 2)
		var b bytes.Buffer
		if err := r.WriteText(&b, 40); err != nil {
			t.Fatal(err)
		}
		want := `18 profiles in 1000 partitions: 12 in use, 988 empty
profiles per partition: min 0, median 0, p99 1, max 5 (nearest rank)
mean 0.02, stddev 0.21, cv 11.610
uniform hash: 0.02 ± 0.13 per partition; chi-square 2426.4 on 999 df (too few profiles per partition for a p-value)

largest partitions:
  partition-007  5
  partition-003  3

histogram (profiles per partition, number of partitions):
0 988 │` + strings.Repeat("█", 33) + `
1  10 │▍
2   0 │
3   1 │▏
4   0 │
5   1 │▏
`
		if got := b.String(); got != want {
			t.Fatalf("got\n%s\nwant\n%s", got, want)
		}
	})
	t.Run("PValues", func(t *testing.T) {
		for _, tc := range []struct {
			p    float64
			want string
		}{{0.0001, ", p < 0.001\n"}, {0.9999, ", p > 0.999\n"}, {0.25, ", p = 0.250\n"}} {
			r := Summarize(make([]int64, 10), 0)
			r.Profiles, r.CV = 1, new(float64)
			r.Uniform = &Uniform{P: &tc.p}
			var b bytes.Buffer
			if err := r.WriteText(&b, 40); err != nil || !strings.Contains(b.String(), tc.want) {
				t.Errorf("p %v: got %q %v, want %q", tc.p, b.String(), err, tc.want)
			}
		}
	})
	t.Run("Empty", func(t *testing.T) {
		r := Summarize(make([]int64, 1000), 10)
		var b bytes.Buffer
		if err := r.WriteText(&b, 80); err != nil || b.String() != "the map holds no profiles: all 1000 partitions are empty\n" {
			t.Fatalf("got %q %v", b.String(), err)
		}
	})
	t.Run("ErrWrite", func(t *testing.T) {
		r := Summarize(fixture(), 2)
		if err := r.WriteText(failingWriter{}, 80); err != io.ErrClosedPipe {
			t.Fatalf("got %v, want the writer's error", err)
		}
	})
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func TestWriteSVG(t *testing.T) {
	r := Summarize(fixture(), 10)
	var out bytes.Buffer
	if err := r.WriteSVG(&out); err != nil {
		t.Fatal(err)
	}
	root, bars, title := "", 0, ""
	dec := xml.NewDecoder(bytes.NewReader(out.Bytes()))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not XML: %v\n%s", err, out.Bytes())
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
}

func TestWritePNG(t *testing.T) {
	r := Summarize(fixture(), 10)
	var out bytes.Buffer
	if err := r.WritePNG(&out); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&out)
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
}

func TestPlotFormat(t *testing.T) {
	r := Summarize(fixture(), 10)
	for name, want := range map[string]string{"sizes.svg": "<?xml", "dir.png/Sizes.SVG": "<?xml", "sizes.png": "\x89PNG", "SIZES.PNG": "\x89PNG",
		"sizes.jpg": "", "sizes": "", "svg": "", "sizes.svg.gz": ""} {
		write := PlotFormat(name)
		if want == "" {
			if write != nil {
				t.Errorf("%q: got a format, want none", name)
			}
			continue
		}
		var out bytes.Buffer
		if write == nil || write(&r, &out) != nil || !strings.HasPrefix(out.String(), want) {
			t.Errorf("%q: wrote %.8q, want %q", name, out.String(), want)
		}
	}
}

func TestPlotErrNoPartitions(t *testing.T) {
	r := Summarize(nil, 10)
	if err := r.WriteSVG(io.Discard); err != errNoPartitions {
		t.Errorf("SVG: got %v", err)
	}
	if err := r.WritePNG(io.Discard); err != errNoPartitions {
		t.Errorf("PNG: got %v", err)
	}
}

func TestNearestRank(t *testing.T) {
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

func TestBinSizes(t *testing.T) {
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
		want  []Bin // nil: check only first, last and count below
		first Bin
		last  Bin
		n     int
	}{
		{name: "Empty", sizes: nil},
		{name: "AllZero", sizes: []int64{0, 0, 0}, want: []Bin{{0, 0, 3}}},
		{name: "OnePartition", sizes: []int64{42}, want: []Bin{{42, 42, 1}}},
		{name: "TiesAndGaps", sizes: []int64{0, 3, 3, 1, 0}, want: []Bin{{0, 0, 2}, {1, 1, 1}, {2, 2, 0}, {3, 3, 2}}},
		{name: "TwentyValuesKeepWidthOne", sizes: spread(5, 24), first: Bin{5, 5, 1}, last: Bin{24, 24, 1}, n: 20},
		{name: "TwentyOneValuesWidenToTwo", sizes: spread(0, 20), first: Bin{0, 1, 2}, last: Bin{20, 21, 1}, n: 11},
		{name: "StartIsAMultipleOfTheWidth", sizes: spread(3, 50), first: Bin{0, 4, 2}, last: Bin{50, 54, 1}, n: 11},
		{name: "RealisticSpread", sizes: spread(70, 133), first: Bin{70, 74, 5}, last: Bin{130, 134, 4}, n: 13},
		{name: "WideSpread", sizes: []int64{0, 1, 12345}, first: Bin{0, 999, 2}, last: Bin{12000, 12999, 1}, n: 13},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := binSizes(tc.sizes, maxBins)
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

func TestLargest(t *testing.T) {
	sizes := []int64{0, 2, 5, 2, 0, 5, 1}
	for _, tc := range []struct {
		name string
		top  int
		want []PartitionSize
	}{
		{"TiesInPartitionOrder", 4, []PartitionSize{{"partition-002", 5}, {"partition-005", 5}, {"partition-001", 2}, {"partition-003", 2}}},
		{"TopBeyondInUse", 100, []PartitionSize{{"partition-002", 5}, {"partition-005", 5}, {"partition-001", 2}, {"partition-003", 2}, {"partition-006", 1}}},
		{"None", 0, []PartitionSize{}},
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

func TestSizes(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		got, err := Sizes(partmap.PartitionStats{TotalPartitions: 4, Partitions: []partmap.PartitionCount{{Partition: 1, Profiles: 4}, {Partition: 3, Profiles: 2}}})
		if want := []int64{0, 4, 0, 2}; err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("got %v %v, want %v", got, err, want)
		}
	})
	t.Run("DefaultPartitions", func(t *testing.T) {
		got, err := Sizes(partmap.PartitionStats{Partitions: []partmap.PartitionCount{{Partition: 999, Profiles: 1}}})
		if err != nil || len(got) != partmap.DefaultPartitions || got[999] != 1 {
			t.Fatalf("got %d sizes, %v", len(got), err)
		}
	})
	t.Run("ErrBeyondTheCount", func(t *testing.T) {
		_, err := Sizes(partmap.PartitionStats{TotalPartitions: 4, Partitions: []partmap.PartitionCount{{Partition: 4, Profiles: 1}}})
		if err == nil || !strings.Contains(err.Error(), "partition-004") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("ErrNegative", func(t *testing.T) {
		_, err := Sizes(partmap.PartitionStats{TotalPartitions: 4, Partitions: []partmap.PartitionCount{{Partition: 2, Profiles: -1}}})
		if err == nil {
			t.Fatal("a negative count passed")
		}
	})
}

func TestChiSquareUpperTail(t *testing.T) {
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

func TestHistogramBars(t *testing.T) {
	var b bytes.Buffer
	writeHistogram(&b, []Bin{{0, 4, 16}, {5, 9, 1}, {10, 14, 0}, {15, 19, 8}}, 40)
	// 40 columns less "10-14", the counts and the separators leave 30 cells.
	want := "  0-4 16 │" + strings.Repeat("█", 30) + "\n" +
		"  5-9  1 │█▉\n" + // 1/16 of 240 eighths is 15
		"10-14  0 │\n" +
		"15-19  8 │" + strings.Repeat("█", 15) + "\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}
