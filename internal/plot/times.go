package plot

import (
	"fmt"
	"math"
	"strings"

	gonum "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// times is a table of timings: per series, seconds per iteration (or
// per run: the x axis is named for the table's column).
type times struct {
	names []string // in order of first appearance
	xy    map[string]plotter.XYs
	title string
	x     string // "iteration" or "run"
}

func readTimes(t table, title string) (figure, error) {
	x := "iteration"
	if t.col(x) < 0 {
		x = "run"
	}
	it, err := t.floats(x)
	if err != nil {
		return figure{}, err
	}
	sec, err := t.floats("seconds")
	if err != nil {
		return figure{}, err
	}
	s := t.col("series")
	ts := times{xy: map[string]plotter.XYs{}, title: title, x: x}
	if ts.title == "" {
		ts.title = "time per " + x
	}
	for i, r := range t.rows {
		name := strings.TrimSpace(r[s])
		if _, ok := ts.xy[name]; !ok {
			ts.names = append(ts.names, name)
		}
		ts.xy[name] = append(ts.xy[name], plotter.XY{X: it[i], Y: sec[i] * 1e3})
	}
	if len(ts.names) > maxSeries {
		return figure{}, fmt.Errorf("%s: %w: %d series; the figure draws at most %d", t.path, ErrInput, len(ts.names), maxSeries)
	}
	return figure{w: 480, h: 300, draw: ts.draw}, nil
}

// logSpread is the ratio of the largest series median to the smallest
// past which the y axis is logarithmic: on a linear one the faster series
// would lie flat on zero.
const logSpread = 100

// maxSeries bounds the lines of one figure.
const maxSeries = 16

// draw draws one line per series, in milliseconds. Series whose names
// share their first word share a colour, the second and later dashed
// ("interp naive", "interp planned").
func (ts times) draw(dc draw.Canvas) {
	lo, hi, positive := math.Inf(1), 0.0, true
	for _, name := range ts.names {
		m := median(ts.xy[name])
		lo, hi = min(lo, m), max(hi, m)
		for _, p := range ts.xy[name] {
			positive = positive && p.Y > 0
		}
	}
	log := positive && hi > logSpread*lo
	y := "ms"
	if log {
		y = "ms (log scale)"
	}
	p := newPlot(ts.title, ts.x, y)
	p.Legend.Top = true
	colour := map[string]int{}
	for _, name := range ts.names {
		group, _, _ := strings.Cut(name, " ")
		c, seen := colour[group]
		if !seen {
			c = len(colour)
			colour[group] = c
		}
		addLine(p, ts.xy[name], series[c%len(series)], name, seen)
	}
	if log {
		p.Y.Max *= legendRoom * legendRoom * legendRoom
		p.Y.Scale = gonum.LogScale{}
		p.Y.Tick.Marker = gonum.LogTicks{Prec: -1}
	} else {
		p.Y.Min = 0
		p.Y.Max *= legendRoom
	}
	p.Draw(draw.Crop(dc, vg.Points(4), -vg.Points(8), vg.Points(4), -vg.Points(4)))
}
