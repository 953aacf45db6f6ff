package main

import (
	"fmt"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// writePNG draws the ratios (their medians, with several runs) as grouped
// bars, one group per workload: bloomkv over bloomkv-nodiff (where it ran),
// bloomkv's differential filter's reads on over off on one store (paired,
// where it ran),
// over Pebble, over pebble-l6 (where it ran), over goleveldb, and over badger
// and bbolt (where they ran), with a line
// at 1 (parity). The Y axis is logarithmic, so that one large ratio does not
// flatten the others, and a ratio of 2 sits as far above parity as one of
// 0.5 sits below it. Each bar starts at parity and ends at its ratio (a log
// axis has no 0 to start from); with several runs, a whisker spans each
// ratio's min–max.
func (r *report) writePNG(path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("bloomkv throughput over the others (%d keys, %s)", r.Settings.Keys, r.Machine.CPU)
	if r.Runs > 1 {
		p.Title.Text = fmt.Sprintf("bloomkv throughput over the others (%d keys, %s; medians of %d runs, min–max whiskers)", r.Settings.Keys, r.Machine.CPU, r.Runs)
	}
	p.Y.Label.Text = "ops/s ratio, log scale (above 1: bloomkv faster)"
	names := make([]string, len(r.Ratios))
	for i, ra := range r.Ratios {
		names[i] = ra.Workload
	}
	series := []struct {
		label string
		get   func(ratio) [3]*float64
		col   color.Color
	}{
		{"bloomkv / bloomkv-nodiff", func(ra ratio) [3]*float64 { return [3]*float64{ra.VsNodiff, ra.VsNodiffMin, ra.VsNodiffMax} },
			color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}},
		{"bloomkv diff filter reads on / off, paired", func(ra ratio) [3]*float64 { return [3]*float64{ra.Paired, ra.PairedMin, ra.PairedMax} },
			color.RGBA{R: 0x98, G: 0xdf, B: 0x8a, A: 0xff}},
		{"bloomkv / pebble", func(ra ratio) [3]*float64 { return [3]*float64{ra.VsPebble, ra.VsPebbleMin, ra.VsPebbleMax} },
			color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}},
		{"bloomkv / pebble-l6", func(ra ratio) [3]*float64 { return [3]*float64{ra.VsPebbleL6, ra.VsPebbleL6Min, ra.VsPebbleL6Max} },
			color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}},
		{"bloomkv / goleveldb", func(ra ratio) [3]*float64 { return [3]*float64{ra.VsGoleveldb, ra.VsGoleveldbMin, ra.VsGoleveldbMax} },
			color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}},
		{"bloomkv / badger", func(ra ratio) [3]*float64 { return [3]*float64{ra.VsBadger, ra.VsBadgerMin, ra.VsBadgerMax} },
			color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}},
		{"bloomkv / bbolt", func(ra ratio) [3]*float64 { return [3]*float64{ra.VsBbolt, ra.VsBboltMin, ra.VsBboltMax} },
			color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}},
	}
	width := vg.Points(8)
	var bars []*ratioBars
	// The axis spans parity and every value drawn, bars and whiskers.
	lo, hi := 1.0, 1.0
	for _, s := range series {
		b := &ratioBars{width: width, color: s.col, whiskers: r.Runs > 1}
		drawn := false
		for _, ra := range r.Ratios {
			v := s.get(ra)
			med, mn, mx := logValue(v[0]), logValue(v[1]), logValue(v[2])
			b.vals, b.lo, b.hi = append(b.vals, med), append(b.lo, mn), append(b.hi, mx)
			for _, x := range []float64{med, mn, mx} {
				if !math.IsNaN(x) {
					lo, hi, drawn = min(lo, x), max(hi, x), true
				}
			}
		}
		if !drawn {
			continue
		}
		p.Legend.Add(s.label, b)
		bars = append(bars, b)
	}
	for i, b := range bars {
		b.offset = width * vg.Length(2*i-len(bars)+1) / 2
		p.Add(b)
	}
	parity := plotter.NewFunction(func(float64) float64 { return 1 })
	parity.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(parity)
	p.Legend.Add("parity", parity)
	p.Legend.Top, p.Legend.Left = true, true
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = 0.8
	p.X.Tick.Label.XAlign = -0.9
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
	// A margin of a fifth of a decade on either side, and at least a
	// labelled tick on either side of parity.
	p.Y.Min, p.Y.Max = min(lo/1.6, 0.5), max(hi*1.6, 2)
	p.Add(plotter.NewGrid())
	// At least 8 inches wide, so that the title and the legend fit over a
	// few workloads.
	if err := p.Save(max(vg.Length(len(names))*vg.Points(40)+vg.Inch, 8*vg.Inch), 6*vg.Inch, path); err != nil {
		return fmt.Errorf("chart %s: %w", path, err)
	}
	return nil
}

// logValue is a ratio as the log axis can draw it: NaN when absent, not
// finite or not positive.
func logValue(f *float64) float64 {
	if f == nil || !(*f > 0) || math.IsInf(*f, 0) {
		return math.NaN()
	}
	return *f
}

// ratioBars draws one series of ratios, one bar per workload, from parity
// (1) to the ratio: upward where bloomkv is faster, downward where it is
// slower. NaN values draw nothing.
type ratioBars struct {
	// vals are the bars' ends; lo and hi the whiskers' ends.
	vals, lo, hi  []float64
	width, offset vg.Length
	color         color.Color
	whiskers      bool
}

func (b *ratioBars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	whisker := draw.LineStyle{Color: color.Black, Width: vg.Points(0.75)}
	for i, v := range b.vals {
		x := trX(float64(i))
		if math.IsNaN(v) || !c.ContainsX(x) {
			continue
		}
		x += b.offset
		y0, y1 := trY(1), trY(v)
		c.FillPolygon(b.color, c.ClipPolygonY([]vg.Point{
			{X: x - b.width/2, Y: y0}, {X: x - b.width/2, Y: y1}, {X: x + b.width/2, Y: y1}, {X: x + b.width/2, Y: y0},
		}))
		if b.whiskers && !math.IsNaN(b.lo[i]) && !math.IsNaN(b.hi[i]) {
			ylo, yhi := trY(b.lo[i]), trY(b.hi[i])
			c.StrokeLines(whisker, c.ClipLinesY(
				[]vg.Point{{X: x, Y: ylo}, {X: x, Y: yhi}},
				[]vg.Point{{X: x - b.width/4, Y: ylo}, {X: x + b.width/4, Y: ylo}},
				[]vg.Point{{X: x - b.width/4, Y: yhi}, {X: x + b.width/4, Y: yhi}},
			)...)
		}
	}
}

// DataRange spans the workloads and, on Y, parity and every value drawn.
func (b *ratioBars) DataRange() (xmin, xmax, ymin, ymax float64) {
	ymin, ymax = 1, 1
	for _, vs := range [][]float64{b.vals, b.lo, b.hi} {
		for _, v := range vs {
			if !math.IsNaN(v) {
				ymin, ymax = min(ymin, v), max(ymax, v)
			}
		}
	}
	return 0, float64(len(b.vals) - 1), ymin, ymax
}

// GlyphBoxes keeps the outermost bars of a group inside the plot.
func (b *ratioBars) GlyphBoxes(p *plot.Plot) []plot.GlyphBox {
	boxes := make([]plot.GlyphBox, len(b.vals))
	for i := range b.vals {
		boxes[i].X = p.X.Norm(float64(i))
		boxes[i].Rectangle = vg.Rectangle{Min: vg.Point{X: b.offset - b.width/2}, Max: vg.Point{X: b.offset + b.width/2}}
	}
	return boxes
}

// Thumbnail draws the series' legend entry.
func (b *ratioBars) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(b.color, []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Min.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Min.Y}})
}

// logTicks marks a log axis at 1, 2, 5 and their powers of ten, with
// unlabelled minor ticks at the other multiples: plot.LogTicks labels the
// powers of ten alone, too few for a span of one or two decades.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	if !(lo > 0) || !(hi >= lo) || math.IsInf(hi, 0) {
		return ticks
	}
	for e := int(math.Floor(math.Log10(lo))); e <= int(math.Ceil(math.Log10(hi))); e++ {
		for m := 1; m <= 9; m++ {
			// m/10^-e rather than m*10^e: 3/10 is 0.3, 3*0.1 is not.
			v := float64(m) * math.Pow10(e)
			if e < 0 {
				v = float64(m) / math.Pow10(-e)
			}
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'f', max(0, -e), 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}
