package report

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WritePlots draws the plot of every table that asks for one into dir, as
// PlotFile names them, and returns the files written.
func WritePlots(dir string, scs []Scenario, s *Set) ([]string, error) {
	var files []string
	for _, sc := range scs {
		for i, t := range sc.Tables {
			if t.Plot == nil {
				continue
			}
			keys, _ := t.rows(s)
			if len(keys) == 0 {
				continue
			}
			p, err := drawTable(t, s, keys)
			if err != nil {
				return files, fmt.Errorf("plot %s table %d: %w", sc.ID, i+1, err)
			}
			file := filepath.Join(dir, PlotFile(sc.ID, i))
			width := vg.Length(max(4, 1.1*float64(len(keys)))) * vg.Inch
			if err := p.Save(width, 4*vg.Inch, file); err != nil {
				return files, fmt.Errorf("plot %s: %w", file, err)
			}
			files = append(files, file)
		}
	}
	return files, nil
}

func drawTable(t Table, s *Set, keys []string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = t.Caption
	p.Y.Label.Text = t.Plot.YLabel
	p.Legend.Top = true
	labels := make([]string, len(keys))
	for i, k := range keys {
		labels[i] = tickLabel(k)
	}
	var err error
	if t.Plot.Log {
		err = addLines(p, t, s, keys)
	} else {
		err = addBars(p, t, s, keys)
	}
	if err != nil {
		return nil, err
	}
	p.NominalX(labels...)
	// Room on both sides of the outer rows, and above the data for the
	// legend, which is drawn inside the plot.
	p.X.Min, p.X.Max = math.Min(p.X.Min, -0.5), math.Max(p.X.Max, float64(len(keys))-0.5)
	if t.Plot.Log {
		p.Y.Max *= 4
	} else {
		p.Y.Min, p.Y.Max = 0, p.Y.Max*1.3
	}
	return p, nil
}

// tickLabel shows a row key by its values, one per line.
func tickLabel(key string) string {
	var vals []string
	for _, seg := range strings.Split(key, "/") {
		_, v, ok := strings.Cut(seg, "=")
		if !ok {
			v = seg
		}
		vals = append(vals, v)
	}
	return strings.Join(vals, "\n")
}

// addBars adds one bar series per implementation; a missing figure is no bar.
func addBars(p *plot.Plot, t Table, s *Set, keys []string) error {
	n := len(t.Plot.Impls)
	w := vg.Points(min(60/float64(n), 14))
	for i, impl := range t.Plot.Impls {
		vals := make(plotter.Values, len(keys))
		for j, k := range keys {
			vals[j], _ = t.Cell(s, k, impl, t.Plot.Unit)
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		bars.Color = plotutil.Color(i)
		bars.LineStyle.Width = 0
		bars.Offset = w * vg.Length(float64(i)-float64(n-1)/2)
		p.Add(bars)
		p.Legend.Add(implLabel(impl), bars)
	}
	return nil
}

// addLines adds one line of points per implementation on a log scale; a
// missing figure is left out of its line.
func addLines(p *plot.Plot, t Table, s *Set, keys []string) error {
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	for i, impl := range t.Plot.Impls {
		var xys plotter.XYs
		for j, k := range keys {
			if v, ok := t.Cell(s, k, impl, t.Plot.Unit); ok && v > 0 {
				xys = append(xys, plotter.XY{X: float64(j), Y: v})
			}
		}
		if len(xys) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		line.Color = plotutil.Color(i)
		points.Color = plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		p.Add(line, points)
		p.Legend.Add(implLabel(impl), line, points)
	}
	return nil
}

func implLabel(impl string) string {
	if impl == "" {
		return "contiv"
	}
	return impl
}
