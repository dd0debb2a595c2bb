package plot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	gonum "gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/tapeloop/tapeloop/internal/atomicfile"
)

// Config says what to draw and where.
type Config struct {
	// Out is the figure's file: .png or .svg.
	Out string
	// Column is the wavelet CSV column drawn; "" is energy.
	Column string
	// Title is a times figure's title; "" is "time per iteration" (or run).
	Title string
	// Width and Height are the figure's size in pixels (PNG) or points
	// (SVG); zero takes the figure kind's own.
	Width, Height int
}

// ErrInput is matched by the errors of inputs that cannot be drawn: an
// unknown extension, a file of the wrong content, an unknown column.
var ErrInput = errors.New("cannot draw")

// figure is a drawing function and its default size in points.
type figure struct {
	w, h vg.Length
	draw func(dc draw.Canvas)
}

// Draw reads the file at in and writes its figure to cfg.Out.
func Draw(in string, cfg Config) error {
	format, err := outFormat(cfg.Out)
	if err != nil {
		return err
	}
	if cfg.Width < 0 || cfg.Height < 0 {
		return fmt.Errorf("%w: the size must be positive, not %dx%d", ErrInput, cfg.Width, cfg.Height)
	}
	fig, err := read(in, cfg)
	if err != nil {
		return err
	}
	if cfg.Width > 0 {
		fig.w = vg.Length(cfg.Width)
	}
	if cfg.Height > 0 {
		fig.h = vg.Length(cfg.Height)
	}
	var buf bytes.Buffer
	if err := render(&buf, format, fig); err != nil {
		return err
	}
	return atomicfile.WriteFile(cfg.Out, buf.Bytes())
}

// read tells the kind of the file at in and reads it into a figure.
func read(in string, cfg Config) (figure, error) {
	switch ext := strings.ToLower(filepath.Ext(in)); ext {
	case ".json":
		return readReport(in)
	case ".csv":
		return readCSV(in, cfg)
	case ".npy":
		return readNpy(in)
	case ".npz":
		return readTopK(in)
	default:
		return figure{}, fmt.Errorf("%s: %w: unknown input extension %q (want a --report .json, a wavelet, trace or times .csv, an affinity or DRR .npy, a top-k .npz)", in, ErrInput, ext)
	}
}

// outFormat is "png" or "svg" after the extension of path.
func outFormat(path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("%w: no output file (--out FIG.png or FIG.svg)", ErrInput)
	}
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".png", ".svg":
		return ext[1:], nil
	default:
		return "", fmt.Errorf("%s: %w: unknown output extension %q (want .png or .svg)", path, ErrInput, ext)
	}
}

// render draws fig on a canvas of the format and writes it to w. The
// plotting library panics on what it cannot lay out (a figure too small
// for its labels, say): that is an error here.
func render(w io.Writer, format string, fig figure) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: the figure cannot be laid out at %gx%g: %v", ErrInput, fig.w, fig.h, p)
		}
	}()
	var c vg.CanvasWriterTo
	switch format {
	case "png":
		img := vgimg.NewWith(vgimg.UseWH(fig.w, fig.h), vgimg.UseDPI(72))
		c = vgimg.PngCanvas{Canvas: img}
	case "svg":
		c = vgsvg.New(fig.w, fig.h)
	default:
		return fmt.Errorf("%w: unknown output format %q", ErrInput, format)
	}
	dc := draw.New(c)
	dc.SetColor(white)
	dc.Fill(dc.Rectangle.Path())
	fig.draw(dc)
	_, err = c.WriteTo(w)
	return err
}

// newPlot is a plot with tapeloop's look: a title, axis labels, small
// fonts that suit panels.
func newPlot(title, x, y string) *gonum.Plot {
	p := gonum.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Title.TextStyle.Font.Size = 10
	for _, a := range []*gonum.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = 9
		a.Tick.Label.Font.Size = 7
	}
	p.Legend.TextStyle.Font.Size = 7
	return p
}

// drawGrid draws plots in rows × cols tiles over dc; nil plots leave their
// tile empty.
func drawGrid(dc draw.Canvas, plots [][]*gonum.Plot, pad vg.Length) {
	rows := len(plots)
	cols := len(plots[0])
	t := draw.Tiles{Rows: rows, Cols: cols, PadX: pad, PadY: pad, PadTop: pad / 2, PadBottom: pad / 2, PadLeft: pad / 2, PadRight: pad / 2}
	for r := range rows {
		for c := range cols {
			if p := plots[r][c]; p != nil {
				p.Draw(t.At(dc, c, r))
			}
		}
	}
}

// alignGrid draws plots in aligned tiles (equal plotting areas); every
// plot must be non-nil.
func alignGrid(dc draw.Canvas, plots [][]*gonum.Plot, pad vg.Length) {
	t := draw.Tiles{Rows: len(plots), Cols: len(plots[0]), PadX: pad, PadY: pad, PadTop: pad / 2, PadBottom: pad / 2, PadLeft: pad / 2, PadRight: pad / 2}
	cs := gonum.Align(plots, t, dc)
	for r := range plots {
		for c := range plots[r] {
			plots[r][c].Draw(cs[r][c])
		}
	}
}

// gonumPlot is gonum's plot, under a name that does not clash with this
// package's.
type gonumPlot = gonum.Plot

type gonumTick = gonum.Tick

// gonumDefaultTicks are gonum's default ticks over [lo, hi].
func gonumDefaultTicks(lo, hi float64) []gonum.Tick { return gonum.DefaultTicks{}.Ticks(lo, hi) }
