package plot

import (
	"fmt"
	"image"
	"math"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/tapeloop/tapeloop/internal/npy"
)

// stack is a contact sheet of DRRs: the poses drawn (all of them, or
// maxPanels evenly spread), on one gray scale.
type stack struct {
	poses, rows, cols int
	index             []int       // the poses drawn
	images            [][]float64 // their pixels, row-major
	min, max          float64
}

func readStack(r *npy.Reader, poses, rows, cols int) (figure, error) {
	if poses == 0 || rows == 0 || cols == 0 {
		return figure{}, fmt.Errorf("%w: the stack is empty (%d poses of %d×%d)", ErrInput, poses, rows, cols)
	}
	s := stack{poses: poses, rows: rows, cols: cols, min: math.Inf(1), max: math.Inf(-1)}
	shown := min(poses, maxPanels)
	for i := range shown {
		s.index = append(s.index, i*poses/shown)
	}
	img := make([]float64, rows*cols)
	next := 0
	for p := range poses {
		if err := readRows(r, img); err != nil {
			return figure{}, err
		}
		if next == len(s.index) || s.index[next] != p {
			continue
		}
		next++
		s.images = append(s.images, append([]float64(nil), img...))
		for _, v := range img {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				s.min = min(s.min, v)
				s.max = max(s.max, v)
			}
		}
	}
	if s.min > s.max {
		return figure{}, fmt.Errorf("%w: the stack holds no finite value", ErrInput)
	}
	gc, gr := panelGrid(len(s.index))
	// Tiles about the images' aspect, 120 points on their longer side.
	side := 120.0
	tw, th := side, side*float64(rows)/float64(cols)
	if rows > cols {
		tw, th = side*float64(cols)/float64(rows), side
	}
	return figure{w: vg.Length(float64(gc)*(tw+10) + 10), h: vg.Length(float64(gr)*(th+24) + 30), draw: s.draw}, nil
}

// gray is pose p's image on the sheet's gray scale, row 0 at the top.
func (s stack) gray(p int) *image.Gray {
	img := image.NewGray(image.Rect(0, 0, s.cols, s.rows))
	scale := 255 / (s.max - s.min)
	if s.max == s.min {
		scale = 0
	}
	for i, v := range s.images[p] {
		g := 0.0
		if !math.IsNaN(v) {
			g = math.Round(min(max((v-s.min)*scale, 0), 255))
		}
		img.Pix[i] = uint8(g)
	}
	return img
}

// draw draws the sheet: one gray image per pose, titled by its index.
func (s stack) draw(dc draw.Canvas) {
	gc, gr := panelGrid(len(s.index))
	title := fmt.Sprintf("DRRs: %d poses of %d×%d, line integrals %s to %s", s.poses, s.rows, s.cols, num(s.min), num(s.max))
	if len(s.index) < s.poses {
		title = fmt.Sprintf("DRRs: %d of %d poses of %d×%d, line integrals %s to %s", len(s.index), s.poses, s.rows, s.cols, num(s.min), num(s.max))
	}
	style := newPlot("", "", "").Title.TextStyle
	style.Font.Size = 9
	style.XAlign, style.YAlign = draw.XCenter, draw.YTop
	dc.FillText(style, vg.Point{X: (dc.Min.X + dc.Max.X) / 2, Y: dc.Max.Y - 4}, title)
	sheet := draw.Crop(dc, 0, 0, 0, -vg.Points(20))
	plots := make([][]*gonumPlot, gr)
	for r := range plots {
		plots[r] = make([]*gonumPlot, gc)
	}
	for k, p := range s.index {
		pl := newPlot(fmt.Sprintf("pose %d", p), "", "")
		pl.Title.TextStyle.Font.Size = 8
		pl.Title.Padding = vg.Points(2)
		pl.HideAxes()
		pl.Add(plotter.NewImage(s.gray(k), 0, 0, float64(s.cols), float64(s.rows)))
		plots[k/gc][k%gc] = pl
	}
	drawGrid(sheet, plots, vg.Points(4))
}
