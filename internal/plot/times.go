package plot

import (
	"fmt"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// times is a table of timings: per series, seconds per iteration.
type times struct {
	names []string // in order of first appearance
	xy    map[string]plotter.XYs
	title string
}

func readTimes(t table) (figure, error) {
	it, err := t.floats("iteration")
	if err != nil {
		return figure{}, err
	}
	sec, err := t.floats("seconds")
	if err != nil {
		return figure{}, err
	}
	s := t.col("series")
	ts := times{xy: map[string]plotter.XYs{}, title: "time per iteration"}
	for i, r := range t.rows {
		name := strings.TrimSpace(r[s])
		if _, ok := ts.xy[name]; !ok {
			ts.names = append(ts.names, name)
		}
		ts.xy[name] = append(ts.xy[name], plotter.XY{X: it[i], Y: sec[i] * 1e3})
	}
	if len(ts.names) > len(series)*2 {
		return figure{}, fmt.Errorf("%s: %w: %d series; the figure draws at most %d", t.path, ErrInput, len(ts.names), len(series)*2)
	}
	return figure{w: 480, h: 300, draw: ts.draw}, nil
}

// draw draws one line per series, in milliseconds.
func (ts times) draw(dc draw.Canvas) {
	p := newPlot(ts.title, "iteration", "ms")
	p.Legend.Top = true
	for i, name := range ts.names {
		addLine(p, ts.xy[name], series[i%len(series)], name, i >= len(series))
	}
	p.Y.Min = 0
	p.Draw(draw.Crop(dc, vg.Points(4), -vg.Points(8), vg.Points(4), -vg.Points(4)))
}
