package plot

import (
	"fmt"
	"image"
	"image/color"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/tapeloop/tapeloop/internal/npy"
)

// maxCells bounds the cells of a matrix drawn along each side: a larger
// matrix is drawn as the means of blocks of cells.
const maxCells = 400

// matrix is an affinity matrix, or the means of its blocks of block ×
// block cells.
type matrix struct {
	rows, cols int // of the matrix as read
	block      int
	z          [][]float64 // z[i][j]: row i, column j of the drawn cells
	min, max   float64
}

func readMatrix(r *npy.Reader, rows, cols int) (figure, error) {
	if rows == 0 || cols == 0 {
		return figure{}, fmt.Errorf("%w: the matrix is empty (%d×%d)", ErrInput, rows, cols)
	}
	b := max(1, (max(rows, cols)+maxCells-1)/maxCells)
	m := matrix{rows: rows, cols: cols, block: b, min: math.Inf(1), max: math.Inf(-1)}
	zr, zc := (rows+b-1)/b, (cols+b-1)/b
	m.z = make([][]float64, zr)
	count := make([][]float64, zr)
	for i := range m.z {
		m.z[i] = make([]float64, zc)
		count[i] = make([]float64, zc)
	}
	row := make([]float64, cols)
	for i := range rows {
		if err := readRows(r, row); err != nil {
			return figure{}, err
		}
		for j, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			m.z[i/b][j/b] += v
			count[i/b][j/b]++
		}
	}
	for i := range m.z {
		for j := range m.z[i] {
			if count[i][j] == 0 {
				m.z[i][j] = nan
				continue
			}
			m.z[i][j] /= count[i][j]
			m.min = min(m.min, m.z[i][j])
			m.max = max(m.max, m.z[i][j])
		}
	}
	if m.min > m.max {
		return figure{}, fmt.Errorf("%w: the matrix holds no finite value", ErrInput)
	}
	return figure{w: 400, h: 340, draw: m.draw}, nil
}

// paletteIndex is the colour of v among n over [lo, hi].
func paletteIndex(v, lo, hi float64, n int) int {
	if hi <= lo {
		return n / 2
	}
	return min(n-1, max(0, int((v-lo)/(hi-lo)*float64(n-1)+0.5)))
}

// draw draws the matrix as an image, row 0 at the top, with its colour bar.
func (m matrix) draw(dc draw.Canvas) {
	cm := colorMap(m.min, m.max)
	title := fmt.Sprintf("affinity matrix %d×%d", m.rows, m.cols)
	if m.block > 1 {
		title += fmt.Sprintf(" (means of %d×%d blocks)", m.block, m.block)
	}
	p := newPlot(title, "column j", "row i")
	pal := cm.Palette(256).Colors()
	zr, zc := len(m.z), len(m.z[0])
	k := max(1, 600/max(zr, zc)) // pixels per cell: the image is scaled smoothly, so cells are drawn large
	img := image.NewRGBA(image.Rect(0, 0, zc*k, zr*k))
	for i := range zr {
		for j := range zc {
			col := color.Color(color.Transparent)
			if v := m.z[i][j]; !math.IsNaN(v) {
				col = pal[paletteIndex(v, m.min, m.max, len(pal))]
			}
			for y := i * k; y < (i+1)*k; y++ {
				for x := j * k; x < (j+1)*k; x++ {
					img.Set(x, y, col)
				}
			}
		}
	}
	p.Add(plotter.NewImage(img, 0, -float64(m.rows), float64(m.cols), 0))
	p.Y.Tick.Marker = negTicks{}
	barW := vg.Points(60)
	p.Draw(draw.Crop(dc, vg.Points(4), -barW, vg.Points(4), -vg.Points(4)))
	bar := newPlot("A", "", "")
	bar.HideX()
	bar.Add(&plotter.ColorBar{ColorMap: cm, Vertical: true})
	right := draw.Crop(dc, dc.Max.X-dc.Min.X-barW, 0, 0, 0)
	bar.Draw(draw.Crop(right, 0, 0, vg.Points(20), -vg.Points(20)))
}

// negTicks labels an axis whose values are negated row numbers with the
// row numbers.
type negTicks struct{}

func (negTicks) Ticks(lo, hi float64) []gonumTick {
	ts := gonumDefaultTicks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(-ts[i].Value+0, 'g', -1, 64) // +0: no "-0"
		}
	}
	return ts
}

// topk is the values of a top-k .npz.
type topk struct {
	k      int
	values plotter.Values
}

func readTopK(path string) (figure, error) {
	z, err := npy.OpenNPZ(path)
	if err != nil {
		return figure{}, err
	}
	defer z.Close()
	if !slices.Contains(z.Names(), "values") {
		return figure{}, fmt.Errorf("%s: %w: not a top-k .npz: it holds no values (tapeloop affinity --topk writes indices and values)", path, ErrInput)
	}
	r, c, err := z.Open("values")
	if err != nil {
		return figure{}, err
	}
	defer c.Close()
	if len(r.Shape) != 2 || r.Len() == 0 {
		return figure{}, fmt.Errorf("%s: %w: values of shape %s: want (N, K) with N, K > 0", path, ErrInput, npy.ShapeString(r.Shape))
	}
	v := make([]float64, r.Len())
	if err := readRows(r, v); err != nil {
		return figure{}, fmt.Errorf("%s: values: %w", path, err)
	}
	t := topk{k: r.Shape[1]}
	for _, x := range v {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			t.values = append(t.values, x)
		}
	}
	if len(t.values) == 0 {
		return figure{}, fmt.Errorf("%s: %w: the values hold no finite number", path, ErrInput)
	}
	return figure{w: 400, h: 300, draw: t.draw}, nil
}

// draw draws the histogram of the neighbour values.
func (t topk) draw(dc draw.Canvas) {
	p := newPlot(fmt.Sprintf("top-%d neighbour values (%d)", t.k, len(t.values)), "affinity", "count")
	bins := max(10, min(100, int(math.Sqrt(float64(len(t.values))))))
	h, err := plotter.NewHist(t.values, bins)
	if err == nil {
		h.FillColor = blue
		h.LineStyle.Width = 0
		p.Add(h)
	}
	p.Draw(draw.Crop(dc, vg.Points(4), -vg.Points(8), vg.Points(4), -vg.Points(4)))
}
