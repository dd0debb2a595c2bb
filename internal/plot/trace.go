package plot

import (
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// trace is a registration's trace.csv: per optimiser step its pyramid
// level, loss and the six parameters of the rigid transform.
type trace struct {
	step, level, loss []float64
	rot, trans        [3][]float64
}

func readTrace(t table) (figure, error) {
	var tr trace
	var err error
	cols := map[string]*[]float64{"step": &tr.step, "level": &tr.level, "loss": &tr.loss,
		"rx": &tr.rot[0], "ry": &tr.rot[1], "rz": &tr.rot[2], "tx": &tr.trans[0], "ty": &tr.trans[1], "tz": &tr.trans[2]}
	for name, dst := range cols {
		if *dst, err = t.floats(name); err != nil {
			return figure{}, err
		}
	}
	return figure{w: 480, h: 480, draw: tr.draw}, nil
}

// draw draws the loss, the rotation vector and the translation over the
// steps, with a dashed line where each pyramid level begins.
func (tr trace) draw(dc draw.Canvas) {
	xy := func(v []float64) plotter.XYs {
		p := make(plotter.XYs, len(v))
		for i := range v {
			p[i] = plotter.XY{X: tr.step[i], Y: v[i]}
		}
		return p
	}
	loss := newPlot("loss", "", "loss")
	addLine(loss, xy(tr.loss), blue, "", false)
	rot := newPlot("rotation vector", "", "rad")
	trans := newPlot("translation", "step", "mm")
	names := [2][3]string{{"rx", "ry", "rz"}, {"tx", "ty", "tz"}}
	for a := range 3 {
		addLine(rot, xy(tr.rot[a]), series[a], names[0][a], false)
		addLine(trans, xy(tr.trans[a]), series[a], names[1][a], false)
	}
	for _, p := range []*gonumPlot{loss, rot, trans} {
		p.Legend.Top = true
		p.Legend.Left = false
		for i := 1; i < len(tr.level); i++ {
			if tr.level[i] != tr.level[i-1] {
				levelMark(p, tr.step[i])
			}
		}
	}
	alignGrid(dc, [][]*gonumPlot{{loss}, {rot}, {trans}}, vg.Points(6))
}

// levelMark draws a dashed vertical line at step x across p's data range.
func levelMark(p *gonumPlot, x float64) {
	p.Add(vline{x: x})
}

// vline is a dashed gray vertical line at x over the whole plotting area.
type vline struct{ x float64 }

func (v vline) Plot(c draw.Canvas, p *gonumPlot) {
	trX, _ := p.Transforms(&c)
	x := trX(v.x)
	c.StrokeLine2(draw.LineStyle{Color: gray, Width: vg.Points(0.5), Dashes: dashes}, x, c.Min.Y, x, c.Max.Y)
}
