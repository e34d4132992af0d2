package stats

import (
	"bufio"
	"encoding/xml"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"path/filepath"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// The plots of the histogram: one layout, drawn as SVG or PNG.
const (
	plotWidth, plotHeight = 800, 450
	plotLeft, plotRight   = 70, 780 // the plot area, in pixels
	plotTop, plotBottom   = 60, 390
	plotCharWidth         = 7 // of basicfont's 7x13 face, and about that of a 12px sans-serif digit
	plotBarGap            = 2 // pixels each side of a bar
)

var barColor = color.RGBA{0x4e, 0x79, 0xa7, 0xff}

// plotLayout places everything in pixels, y growing downwards.
type plotLayout struct {
	title, xLabel, yLabel string
	bars                  []image.Rectangle // one per bin, empty bins included
	counts                []tick            // above the bars, where they fit
	xTicks, yTicks        []tick
}

type tick struct {
	x, y  int
	label string
}

func layoutPlot(r *Report) plotLayout {
	l := plotLayout{
		title:  fmt.Sprintf("Partition sizes: %d profiles in %d partitions (%d in use)", r.Profiles, r.Partitions, r.PartitionsInUse),
		xLabel: "profiles per partition",
		yLabel: "partitions",
	}
	most := 0
	for _, b := range r.Histogram {
		most = max(most, b.Partitions)
	}
	step := niceAtLeast(max(int64(most+4)/5, 1))
	yMax := (int64(most) + step - 1) / step * step
	y := func(v int64) int { return plotBottom - int(v*(plotBottom-plotTop)/yMax) }
	for v := int64(0); v <= yMax; v += step {
		l.yTicks = append(l.yTicks, tick{plotLeft, y(v), fmt.Sprint(v)})
	}

	n := len(r.Histogram)
	x := func(i int) int { return plotLeft + i*(plotRight-plotLeft)/n }
	slot := (plotRight - plotLeft) / n
	for i, b := range r.Histogram {
		bar := image.Rect(x(i)+plotBarGap, y(int64(b.Partitions)), x(i+1)-plotBarGap, plotBottom)
		l.bars = append(l.bars, bar)
		if s := fmt.Sprint(b.Partitions); b.Partitions > 0 && len(s)*plotCharWidth <= slot {
			l.counts = append(l.counts, tick{(bar.Min.X + bar.Max.X) / 2, bar.Min.Y - 4, s})
		}
	}
	// One integer per bin sits under its middle; wider bins are labelled at
	// their edges, the last edge being one past the largest size.
	var xs []tick
	if r.Histogram[0].From == r.Histogram[0].To {
		for i, b := range r.Histogram {
			xs = append(xs, tick{(x(i) + x(i+1)) / 2, plotBottom, b.Label()})
		}
	} else {
		for i, b := range r.Histogram {
			xs = append(xs, tick{x(i), plotBottom, fmt.Sprint(b.From)})
		}
		xs = append(xs, tick{x(n), plotBottom, fmt.Sprint(r.Histogram[n-1].To + 1)})
	}
	widest := 0
	for _, t := range xs {
		widest = max(widest, len(t.label))
	}
	every := (widest*plotCharWidth + 2*plotCharWidth + slot - 1) / slot // ticks per label, so labels do not touch
	for i, t := range xs {
		if i%every == 0 {
			l.xTicks = append(l.xTicks, t)
		}
	}
	return l
}

// PlotFormat returns the method that draws the histogram in the image
// format a file name's extension names, in any case: WriteSVG for .svg,
// WritePNG for .png. Any other name has none: nil.
func PlotFormat(name string) func(*Report, io.Writer) error {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".svg":
		return (*Report).WriteSVG
	case ".png":
		return (*Report).WritePNG
	}
	return nil
}

// errNoPartitions refuses to plot a report of no partitions at all.
var errNoPartitions = errors.New("stats: no partitions to plot")

// WriteSVG draws the histogram as an SVG image of 800x450 pixels, each bar
// titled with its bin and count.
func (r *Report) WriteSVG(w io.Writer) error {
	if len(r.Histogram) == 0 {
		return errNoPartitions
	}
	l := layoutPlot(r)
	bw := bufio.NewWriter(w)
	esc := func(s string) string {
		var b strings.Builder
		xml.EscapeText(&b, []byte(s))
		return b.String()
	}
	fmt.Fprintf(bw, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">
<title>%s</title>
<rect width="100%%" height="100%%" fill="white"/>
<text x="%d" y="28" text-anchor="middle" font-size="16">%s</text>
`, plotWidth, plotHeight, plotWidth, plotHeight, esc(l.title), plotWidth/2, esc(l.title))
	fmt.Fprintf(bw, "<g fill=\"#%02x%02x%02x\">\n", barColor.R, barColor.G, barColor.B)
	for i, b := range l.bars {
		h := r.Histogram[i]
		fmt.Fprintf(bw, `<rect class="bar" x="%d" y="%d" width="%d" height="%d"><title>%s: %d partitions</title></rect>`+"\n",
			b.Min.X, b.Min.Y, b.Dx(), b.Dy(), esc(h.Label()), h.Partitions)
	}
	fmt.Fprintf(bw, "</g>\n<g text-anchor=\"middle\">\n")
	for _, c := range l.counts {
		fmt.Fprintf(bw, `<text x="%d" y="%d">%s</text>`+"\n", c.x, c.y, c.label)
	}
	for _, t := range l.xTicks {
		fmt.Fprintf(bw, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/><text x="%d" y="%d">%s</text>`+"\n",
			t.x, t.y, t.x, t.y+5, t.x, t.y+18, t.label)
	}
	fmt.Fprintf(bw, `<text x="%d" y="%d">%s</text>`+"\n</g>\n", (plotLeft+plotRight)/2, plotBottom+42, esc(l.xLabel))
	fmt.Fprintf(bw, "<g text-anchor=\"end\">\n")
	for _, t := range l.yTicks {
		fmt.Fprintf(bw, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/><text x="%d" y="%d">%s</text>`+"\n",
			t.x-5, t.y, t.x, t.y, t.x-8, t.y+4, t.label)
	}
	fmt.Fprintf(bw, "</g>\n")
	fmt.Fprintf(bw, `<text x="%d" y="%d">%s</text>`+"\n", plotLeft-30, plotTop-12, esc(l.yLabel))
	fmt.Fprintf(bw, `<path d="M%d %dV%dH%d" fill="none" stroke="black"/>`+"\n", plotLeft, plotTop, plotBottom, plotRight)
	fmt.Fprintf(bw, "</svg>\n")
	return bw.Flush()
}

// WritePNG draws the histogram as a PNG image, laid out as WriteSVG's.
func (r *Report) WritePNG(w io.Writer) error {
	if len(r.Histogram) == 0 {
		return errNoPartitions
	}
	l := layoutPlot(r)
	img := image.NewRGBA(image.Rect(0, 0, plotWidth, plotHeight))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	for _, b := range l.bars {
		draw.Draw(img, b, &image.Uniform{barColor}, image.Point{}, draw.Src)
	}
	black := image.NewUniform(color.Black)
	line := func(x0, y0, x1, y1 int) { // horizontal or vertical, ends included
		draw.Draw(img, image.Rect(x0, y0, x1+1, y1+1), black, image.Point{}, draw.Src)
	}
	line(plotLeft, plotTop, plotLeft, plotBottom)
	line(plotLeft, plotBottom, plotRight, plotBottom)

	d := &font.Drawer{Dst: img, Src: black, Face: basicfont.Face7x13}
	// text draws s with its baseline at y; align is 0 for left, 1/2 for
	// centred, 1 for right.
	text := func(s string, x, y int, align float64) {
		adv := d.MeasureString(s).Round()
		d.Dot = fixed.P(x-int(float64(adv)*align), y)
		d.DrawString(s)
	}
	text(l.title, plotWidth/2, 28, 0.5)
	for _, c := range l.counts {
		text(c.label, c.x, c.y, 0.5)
	}
	for _, t := range l.xTicks {
		line(t.x, t.y, t.x, t.y+5)
		text(t.label, t.x, t.y+18, 0.5)
	}
	text(l.xLabel, (plotLeft+plotRight)/2, plotBottom+42, 0.5)
	for _, t := range l.yTicks {
		line(t.x-5, t.y, t.x, t.y)
		text(t.label, t.x-8, t.y+4, 1)
	}
	text(l.yLabel, plotLeft-30, plotTop-12, 0)
	return png.Encode(w, img)
}
