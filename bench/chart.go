package main

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// writePNG draws the ratios (their medians, with several runs) as grouped
// bars, one group per workload: bloomkv over bloomkv-nodiff (where it ran),
// over Pebble, over pebble-l6 (where it ran) and over goleveldb, with a line
// at 1 (parity).
func (r *report) writePNG(path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("bloomkv throughput over the others (%d keys, %s)", r.Settings.Keys, r.Machine.CPU)
	if r.Runs > 1 {
		p.Title.Text = fmt.Sprintf("bloomkv throughput over the others (%d keys, %s; medians of %d runs)", r.Settings.Keys, r.Machine.CPU, r.Runs)
	}
	p.Y.Label.Text = "ops/s ratio (higher is better for bloomkv)"
	names := make([]string, len(r.Ratios))
	for i, ra := range r.Ratios {
		names[i] = ra.Workload
	}
	series := []struct {
		label string
		get   func(ratio) *float64
		col   color.Color
	}{
		{"bloomkv / bloomkv-nodiff", func(ra ratio) *float64 { return ra.VsNodiff }, color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}},
		{"bloomkv / pebble", func(ra ratio) *float64 { return ra.VsPebble }, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}},
		{"bloomkv / pebble-l6", func(ra ratio) *float64 { return ra.VsPebbleL6 }, color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}},
		{"bloomkv / goleveldb", func(ra ratio) *float64 { return ra.VsGoleveldb }, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}},
	}
	width := vg.Points(8)
	var bars []*plotter.BarChart
	top := 1.0
	for _, s := range series {
		vals := make(plotter.Values, len(r.Ratios))
		any := false
		for i, ra := range r.Ratios {
			if v := s.get(ra); v != nil {
				vals[i], any = *v, true
				top = max(top, *v)
			}
		}
		if !any {
			continue
		}
		bc, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return fmt.Errorf("chart: %w", err)
		}
		bc.Color = s.col
		bc.LineStyle.Width = 0
		p.Legend.Add(s.label, bc)
		bars = append(bars, bc)
	}
	for i, bc := range bars {
		bc.Offset = width * vg.Length(2*i-len(bars)+1) / 2
		p.Add(bc)
	}
	parity := plotter.NewFunction(func(float64) float64 { return 1 })
	parity.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(parity)
	p.Legend.Add("parity", parity)
	p.Legend.Top, p.Legend.Left = true, true
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = 0.8
	p.X.Tick.Label.XAlign = -0.9
	p.Y.Min, p.Y.Max = 0, top*1.15
	p.Add(plotter.NewGrid())
	return p.Save(vg.Length(len(names))*vg.Points(40)+vg.Inch, 6*vg.Inch, path)
}
