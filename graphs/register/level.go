package register

import (
	"errors"
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops"
)

// Level is one level of the pyramid: its graph (parameters → images →
// loss, and the loss's gradient with respect to the parameters) compiled
// into a TapeMachine.
type Level struct {
	// Factor is the level's block size: its detector pixels and voxels
	// are Factor times the problem's along each axis.
	Factor     int
	Rows, Cols int
	Render     *ops.RigidDRR
	Target     []float64 // the targets averaged over Factor×Factor blocks

	g          *G.ExprGraph
	m          G.VM
	tape       onCaller // m
	theta      *tensor.Dense
	loss, grad *G.Node
	images     *G.Node
}

// coarseViews returns the views with pixels f times larger: the pixel
// (r, c) of the result is the centre of the block of f×f pixels at (f·r,
// f·c).
func coarseViews(views []float64, f int) []float64 {
	out := append([]float64(nil), views...)
	h := float64(f-1) / 2
	for b := 0; b < len(out); b += ops.PoseWidth {
		p := out[b : b+ops.PoseWidth]
		for a := range 3 {
			p[3+a] += h * (p[6+a] + p[9+a])
			p[6+a] *= float64(f)
			p[9+a] *= float64(f)
		}
	}
	return out
}

// coarseImages averages each of the views' rows×cols images over f×f
// blocks (a remainder of fewer than f rows or columns left out).
func coarseImages(img []float64, views, rows, cols, f int) []float64 {
	r2, c2 := rows/f, cols/f
	out := make([]float64, views*r2*c2)
	for v := range views {
		for r := range r2 {
			for c := range c2 {
				s := 0.0
				for i := range f {
					row := img[(v*rows+r*f+i)*cols+c*f:]
					for j := range f {
						s += row[j]
					}
				}
				out[(v*r2+r)*c2+c] = s / float64(f*f)
			}
		}
	}
	return out
}

// newLevel builds and compiles the level of block size f.
func newLevel(p *Problem, cfg Config, vol *volume.Volume, f int) (*Level, error) {
	l := &Level{Factor: f, Rows: p.Rows / f, Cols: p.Cols / f}
	if l.Rows < 2 || l.Cols < 2 {
		return nil, fmt.Errorf("a pyramid level of %d×%d pixels: give fewer levels for %d×%d views", l.Rows, l.Cols, p.Rows, p.Cols)
	}
	nv := len(p.Views) / ops.PoseWidth
	step := cfg.Step
	if step > 0 {
		step *= float64(f)
	}
	var err error
	if l.Render, err = ops.NewRigidDRR(vol, coarseViews(p.Views, f), l.Rows, l.Cols, step, p.Center); err != nil {
		return nil, err
	}
	l.Target = p.Targets
	if f > 1 {
		l.Target = coarseImages(p.Targets, nv, p.Rows, p.Cols, f)
	}
	patch := cfg.Patch
	if patch > 0 {
		// In proportion to the level's pixels, at least 3, and within the
		// images (gncc's Sobel images are 2 pixels smaller).
		room := min(l.Rows, l.Cols)
		if cfg.Loss == ops.LossGradNCC {
			room -= 2
		}
		patch = min(max(3, patch/f), room)
	}
	lossOp, err := ops.NewImageLoss(cfg.Loss, nv, l.Rows, l.Cols, patch)
	if err != nil {
		return nil, err
	}
	l.g = G.NewGraph()
	l.theta = tensor.New(tensor.WithShape(6), tensor.WithBacking(make([]float64, 6)))
	theta := G.NewVector(l.g, tensor.Float64, G.WithShape(6), G.WithName("θ"), G.WithValue(l.theta))
	if l.images, err = G.ApplyOp(l.Render, theta); err != nil {
		return nil, err
	}
	target := G.NewConstant(tensor.New(tensor.WithShape(nv, l.Rows, l.Cols), tensor.WithBacking(l.Target)), G.WithName("target"))
	if l.loss, err = G.ApplyOp(lossOp, l.images, target); err != nil {
		return nil, err
	}
	grads, err := G.Grad(l.loss, theta)
	if err != nil {
		return nil, fmt.Errorf("differentiating the loss: %w", err)
	}
	l.grad = grads[0]
	l.m = G.NewTapeMachine(l.g)
	var ok bool
	if l.tape, ok = l.m.(onCaller); !ok {
		l.m.Close()
		return nil, errors.New("register: gorgonia's TapeMachine has no RunOnCaller: build with the replace directive of tapeloop's go.mod")
	}
	return l, nil
}

// onCaller is a TapeMachine that runs its tape on the calling goroutine,
// as the engine runs its own: RunOnCaller, which tapeloop's copy of
// gorgonia (third_party/gorgonia) adds.
type onCaller interface{ RunOnCaller() error }

// run replays the tape once on the calling goroutine.
func (l *Level) run() error { return l.tape.RunOnCaller() }

// Eval returns the loss and its gradient at the parameters p: one replay
// of the level's tape.
func (l *Level) Eval(p [6]float64) (float64, [6]float64, error) {
	var g [6]float64
	copy(l.theta.Data().([]float64), p[:])
	defer l.m.Reset()
	if err := l.run(); err != nil {
		return 0, g, err
	}
	loss := l.loss.Value().Data().(float64)
	copy(g[:], l.grad.Value().Data().([]float64))
	return loss, g, nil
}

// Images returns the images rendered by the last Eval.
func (l *Level) Images() []float64 { return l.images.Value().Data().([]float64) }

// Graph is the level's expression graph, for DOT export.
func (l *Level) Graph() *G.ExprGraph { return l.g }

// Close frees the machine.
func (l *Level) Close() {
	if l.m != nil {
		l.m.Close()
	}
}
