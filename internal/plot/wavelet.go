package plot

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var nan = math.NaN()

// sweep is one statistic of a wavelet sweep on its θ × φ × ξ grid.
type sweep struct {
	column         string
	theta, phi, xi []float64 // the distinct values, ascending
	// z[k][i][j] is the statistic at xi[k], theta[i], phi[j]; NaN where
	// the CSV has no row.
	z        [][][]float64
	min, max float64
}

// waveletKeys are the columns that place a row, not statistics.
var waveletKeys = []string{"theta", "phi", "xi"}

func readWavelet(t table, column string) (figure, error) {
	if column == "" {
		column = "energy"
	}
	var stats []string
	for _, h := range t.header {
		if !slices.Contains(waveletKeys, h) {
			stats = append(stats, h)
		}
	}
	if !slices.Contains(stats, column) {
		return figure{}, fmt.Errorf("%s: %w: no column %q (--column takes one of %s)", t.path, ErrInput, column, strings.Join(stats, ", "))
	}
	th, err := t.floats("theta")
	if err != nil {
		return figure{}, err
	}
	ph, err := t.floats("phi")
	if err != nil {
		return figure{}, err
	}
	xi, err := t.floats("xi")
	if err != nil {
		return figure{}, err
	}
	v, err := t.floats(column)
	if err != nil {
		return figure{}, err
	}
	s := sweep{column: column, theta: distinct(th), phi: distinct(ph), xi: distinct(xi), min: math.Inf(1), max: math.Inf(-1)}
	if len(s.xi) > maxPanels {
		return figure{}, fmt.Errorf("%s: %w: %d values of xi; the figure draws at most %d panels", t.path, ErrInput, len(s.xi), maxPanels)
	}
	s.z = make([][][]float64, len(s.xi))
	for k := range s.z {
		s.z[k] = make([][]float64, len(s.theta))
		for i := range s.z[k] {
			s.z[k][i] = make([]float64, len(s.phi))
			for j := range s.z[k][i] {
				s.z[k][i][j] = nan
			}
		}
	}
	for r := range v {
		i, _ := slices.BinarySearch(s.theta, th[r])
		j, _ := slices.BinarySearch(s.phi, ph[r])
		k, _ := slices.BinarySearch(s.xi, xi[r])
		s.z[k][i][j] = v[r]
		if !math.IsNaN(v[r]) && !math.IsInf(v[r], 0) {
			s.min = min(s.min, v[r])
			s.max = max(s.max, v[r])
		}
	}
	if s.min > s.max {
		return figure{}, fmt.Errorf("%s: %w: column %s holds no finite value", t.path, ErrInput, column)
	}
	cols, rows := panelGrid(len(s.xi))
	return figure{w: vg.Length(60 + 200*cols), h: vg.Length(20 + 170*rows), draw: s.draw}, nil
}

// maxPanels bounds the panels of one figure.
const maxPanels = 64

// distinct is the distinct values of v, NaN left out, ascending.
func distinct(v []float64) []float64 {
	d := slices.Clone(v)
	d = slices.DeleteFunc(d, math.IsNaN)
	slices.Sort(d)
	return slices.Compact(d)
}

// panelGrid is the columns and rows of a grid of n panels, about square,
// wider than tall.
func panelGrid(n int) (cols, rows int) {
	cols = int(math.Ceil(math.Sqrt(float64(n))))
	rows = (n + cols - 1) / cols
	return cols, rows
}

// grid is one ξ's θ × φ slice as plotter.GridXYZ: columns are θ, rows φ.
type grid struct {
	s *sweep
	k int
}

func (g grid) Dims() (c, r int)   { return len(g.s.theta), len(g.s.phi) }
func (g grid) Z(c, r int) float64 { return g.s.z[g.k][c][r] }
func (g grid) X(c int) float64    { return g.s.theta[c] }
func (g grid) Y(r int) float64    { return g.s.phi[r] }

// num formats a grid value short: 0.785, 2, 1e+03.
func num(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) }

// colorMap is the one colour scale of a figure's heatmaps, over [lo, hi]:
// black through red and yellow, short of the white at the end of the
// extended black body, which would look like a missing cell.
func colorMap(lo, hi float64) palette.ColorMap {
	if hi <= lo { // a constant: any range that holds it
		lo, hi = lo-0.5, hi+0.5
	}
	cm := moreland.ExtendedBlackBody()
	cm.SetMin(lo)
	cm.SetMax(lo + (hi-lo)/blackBodyPart)
	return trimmed{ColorMap: cm, max: hi}
}

// blackBodyPart is the part of the extended black body a colour map uses.
const blackBodyPart = 0.85

// trimmed is a colour map cut at max, short of its own end.
type trimmed struct {
	palette.ColorMap
	max float64
}

func (t trimmed) Max() float64 { return t.max }

func (t trimmed) Palette(n int) palette.Palette {
	lo := t.Min()
	c := make([]color.Color, n)
	for i := range c {
		c[i], _ = t.At(lo + (t.max-lo)*float64(i)/float64(max(1, n-1)))
	}
	return plainPalette(c)
}

// plainPalette is a list of colours as a palette.Palette.
type plainPalette []color.Color

func (p plainPalette) Colors() []color.Color { return p }

// draw draws one heatmap per ξ with a shared scale, and the colour bar.
func (s *sweep) draw(dc draw.Canvas) {
	cm := colorMap(s.min, s.max)
	pal := cm.Palette(256)
	cols, rows := panelGrid(len(s.xi))
	barW := vg.Points(60)
	left := draw.Crop(dc, 0, -barW, 0, 0)
	right := draw.Crop(dc, dc.Max.X-dc.Min.X-barW, 0, 0, 0)
	plots := make([][]*gonumPlot, rows)
	for r := range plots {
		plots[r] = make([]*gonumPlot, cols)
	}
	for k, xi := range s.xi {
		p := newPlot("ξ = "+num(xi), "θ (rad)", "φ (rad)")
		hm := plotter.NewHeatMap(grid{s: s, k: k}, pal)
		hm.Min, hm.Max = s.min, s.max
		if s.max <= s.min {
			hm.Min, hm.Max = cm.Min(), cm.Max()
		}
		hm.Underflow, hm.Overflow = pal.Colors()[0], pal.Colors()[len(pal.Colors())-1]
		p.Add(hm)
		plots[k/cols][k%cols] = p
	}
	drawGrid(left, plots, vg.Points(8))
	bar := newPlot(s.column, "", "")
	bar.HideX()
	bar.Y.Padding = 0
	bar.Add(&plotter.ColorBar{ColorMap: cm, Vertical: true})
	bar.Draw(draw.Crop(right, 0, 0, vg.Points(20), -vg.Points(20)))
}
