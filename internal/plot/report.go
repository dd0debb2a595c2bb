package plot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/color"
	"slices"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/sysmem"
)

// report is what the report figure reads of a --report JSON.
type report struct {
	Workload      string `json:"workload"`
	MemLimitBytes int64  `json:"mem_limit_bytes"`
	Summary       *struct {
		Drift *float64 `json:"drift"`
	} `json:"summary"`
	Iterations []struct {
		Seconds  float64 `json:"seconds"`
		RSSBytes int64   `json:"rss_bytes"`
	} `json:"iterations"`
}

// readFile reads the whole input file at path.
func readFile(path string) ([]byte, error) {
	f, err := npy.OpenFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(f); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b.Bytes(), nil
}

func readReport(path string) (figure, error) {
	data, err := readFile(path)
	if err != nil {
		return figure{}, err
	}
	var r report
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return figure{}, fmt.Errorf("%s: %w: not a tapeloop report (%v)", path, ErrInput, err)
	}
	if keys["workload"] == nil || keys["iterations"] == nil {
		return figure{}, fmt.Errorf("%s: %w: not a tapeloop report (it has no \"workload\" and \"iterations\"; write one with --report)", path, ErrInput)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return figure{}, fmt.Errorf("%s: %w: not a tapeloop report (%v)", path, ErrInput, err)
	}
	if len(r.Iterations) == 0 {
		return figure{}, fmt.Errorf("%s: %w: the report holds no batches", path, ErrInput)
	}
	return figure{w: 480, h: 360, draw: r.draw}, nil
}

var (
	white    = color.White
	black    = color.Black
	blue     = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	orange   = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	green    = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	red      = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	purple   = color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}
	brown    = color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}
	gray     = color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}
	series   = []color.Color{blue, orange, green, red, purple, brown, gray}
	dashes   = []vg.Length{vg.Points(4), vg.Points(2)}
	mib      = float64(1 << 20)
	thinLine = vg.Points(1)
)

// fewBatches is the most batches whose records are also drawn as dots (a
// run of one batch has no line).
const fewBatches = 30

// legendRoom is the top of a panel's y axis over the data's largest
// value: the room above the curves holds the legend.
const legendRoom = 1.3

// limitOffScale is how far above the largest resident set the memory
// limit may be and still be drawn as a line: further, the panel would
// squash the curve, and the legend gives the limit instead.
const limitOffScale = 3

// draw draws time per batch (with the drift: the median of the first and
// last decile of batches) over resident memory (with the plan's limit).
func (r report) draw(dc draw.Canvas) {
	n := len(r.Iterations)
	times := make(plotter.XYs, n)
	rss := make(plotter.XYs, n)
	maxRSS := 0.0
	for i, it := range r.Iterations {
		times[i] = plotter.XY{X: float64(i + 1), Y: it.Seconds * 1e3}
		rss[i] = plotter.XY{X: float64(i + 1), Y: float64(it.RSSBytes) / mib}
		maxRSS = max(maxRSS, rss[i].Y)
	}
	title := "time per batch"
	if r.Workload != "" {
		title = r.Workload + ": " + title
	}
	top := newPlot(title, "", "ms")
	top.Legend.Top = true
	addLine(top, times, blue, "", false)
	if n <= fewBatches {
		addPoints(top, times, blue)
	}
	if r.Summary != nil && r.Summary.Drift != nil && n > 1 {
		k := max(1, n/10)
		first := median(times[:k])
		last := median(times[n-k:])
		lo := float64(1) - 0.5
		hi := float64(n) + 0.5
		seg := plotter.XYs{{X: lo, Y: first}, {X: lo + float64(k), Y: first}}
		addLine(top, seg, red, fmt.Sprintf("drift %.3g (median of last decile / first)", *r.Summary.Drift), true)
		addLine(top, plotter.XYs{{X: hi - float64(k), Y: last}, {X: hi, Y: last}}, red, "", true)
	}
	top.Y.Min = 0

	bottom := newPlot("resident memory", "batch", "MiB")
	bottom.Legend.Top = true
	addLine(bottom, rss, green, "RSS", false)
	if n <= fewBatches {
		addPoints(bottom, rss, green)
	}
	bottom.Y.Min = 0
	if r.MemLimitBytes > 0 {
		lim := float64(r.MemLimitBytes) / mib
		label := "--mem-limit " + sysmem.Format(r.MemLimitBytes)
		if lim <= limitOffScale*maxRSS {
			addLine(bottom, plotter.XYs{{X: 0.5, Y: lim}, {X: float64(n) + 0.5, Y: lim}}, red, label, true)
		} else {
			bottom.Legend.Add(label + " (above the axis)")
		}
	}
	for _, p := range []*gonumPlot{top, bottom} {
		p.X.Min, p.X.Max = 0.5, float64(n)+0.5
		p.Y.Max *= legendRoom
	}
	alignGrid(dc, [][]*gonumPlot{{top}, {bottom}}, vg.Points(6))
}

// median is the median Y of xy.
func median(xy plotter.XYs) float64 {
	ys := make([]float64, len(xy))
	for i, p := range xy {
		ys[i] = p.Y
	}
	slices.Sort(ys)
	m := len(ys) / 2
	if len(ys)%2 == 1 {
		return ys[m]
	}
	return (ys[m-1] + ys[m]) / 2
}

// addLine adds xy to p as a line of colour c, named in the legend unless
// name is "", dashed when dashed.
func addLine(p *gonumPlot, xy plotter.XYs, c color.Color, name string, dashed bool) {
	l, err := plotter.NewLine(xy)
	if err != nil { // NaN or Inf: leave the line out rather than fail the figure
		return
	}
	l.Color = c
	l.Width = thinLine
	if dashed {
		l.Dashes = dashes
	}
	p.Add(l)
	if name != "" {
		p.Legend.Add(name, l)
	}
}

// addPoints marks xy's points on p with dots of colour c.
func addPoints(p *gonumPlot, xy plotter.XYs, c color.Color) {
	s, err := plotter.NewScatter(xy)
	if err != nil {
		return
	}
	s.GlyphStyle.Color = c
	s.GlyphStyle.Radius = vg.Points(1.5)
	s.GlyphStyle.Shape = draw.CircleGlyph{}
	p.Add(s)
}
