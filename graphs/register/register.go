package register

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/optimize"

	"github.com/tapeloop/tapeloop/internal/rigid"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops"
)

// Problem is what is registered: a volume (attenuation per mm, placed in
// world mm), the views (poses as ops.DRR takes them) and one target image
// per view, (views, Rows, Cols) in order. The transform sought moves the
// volume so that its DRRs match the targets; it turns about Center.
type Problem struct {
	Vol        *volume.Volume
	Views      []float64
	Rows, Cols int
	Targets    []float64
	Center     [3]float64
	// Init is the start (its Center is ignored: Center is used); the zero
	// value is the identity.
	Init rigid.Transform
}

// Config is how the registration runs.
type Config struct {
	// Loss is the loss minimised (its flag is parsed by ops.ParseLossKind).
	Loss ops.LossKind `flag:"loss" help:"ncc (normalised cross-correlation), gncc (NCC of the images' Sobel gradients) or mse"`
	// Patch is the loss's patch size in pixels at the finest level (0:
	// whole images); coarser levels take it in proportion, at least 3.
	Patch int `flag:"patch" help:"compute the loss over patches of N×N pixels (at the finest level) and average them (default: whole images)" arg:"N"`
	// Levels is the number of pyramid levels: blocks of 2^(Levels−1) …
	// 2, 1 pixels and voxels, coarse to fine.
	Levels int `flag:"levels" help:"coarse-to-fine pyramid levels: the first renders blocks of 2^(levels−1) pixels and voxels"`
	// Step is the trilinear sample spacing in mm at the finest level
	// (scaled with the blocks); ≤ 0 renders by Siddon's exact path. It
	// has no flag of its own: it is the DRR's (--step and --method).
	Step float64 `flag:"-"`
	// MaxSteps bounds the optimiser's iterations per level.
	MaxSteps int `flag:"max-steps" help:"at most N optimiser steps per level" arg:"N"`
	// Tolerance stops a level when the loss has improved by less than
	// Tolerance (relative) over 3 iterations.
	Tolerance float64 `flag:"tolerance" help:"a level ends when the loss improved by less than this (relative) over 3 steps"`
	// Accept is the largest final loss taken for a fit: a run that ends
	// above it did not converge (a start outside the capture range).
	Accept float64 `flag:"accept" help:"the largest final loss taken as a fit; above it the run is not converged (exit status 2)"`
}

// DefaultConfig registers by NCC over three levels with trilinear samples
// 1 mm apart.
func DefaultConfig() Config {
	return Config{Loss: ops.LossNCC, Levels: 3, Step: 1, MaxSteps: 100, Tolerance: 1e-5, Accept: 0.1}
}

// Step is one optimiser iteration as the trace records it.
type Step struct {
	N       int // counted over the whole run
	Level   int // 0 is the coarsest
	Loss    float64
	Params  [6]float64 // ω (radians), t (mm)
	Seconds float64    // since the start
}

// Result is a registration's outcome.
type Result struct {
	Transform rigid.Transform
	Loss      float64 // at the finest level, at Transform
	Trace     []Step
	// Converged says the last level ended at a minimum (not on a limit)
	// with the loss at most Config.Accept; Reason says why not otherwise.
	Converged bool
	Reason    string
	Evals     int // loss-and-gradient evaluations, all levels
}

// Validate checks the problem's sizes and values.
func (p *Problem) Validate() error {
	if len(p.Views) == 0 || len(p.Views)%ops.PoseWidth != 0 {
		return errors.New("no views")
	}
	nv := len(p.Views) / ops.PoseWidth
	if want := nv * p.Rows * p.Cols; len(p.Targets) != want {
		return fmt.Errorf("%d target values for %d views of %d×%d pixels (%d)", len(p.Targets), nv, p.Rows, p.Cols, want)
	}
	for i, x := range p.Targets {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			v, r := i/(p.Rows*p.Cols), i%(p.Rows*p.Cols)
			return fmt.Errorf("target of view %d: pixel (%d, %d) is %g; targets must be finite", v, r/p.Cols, r%p.Cols, x)
		}
	}
	return nil
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Levels < 1 || c.Levels > 6:
		return fmt.Errorf("--levels %d: want 1 to 6", c.Levels)
	case c.MaxSteps < 1:
		return fmt.Errorf("--max-steps %d: want at least 1", c.MaxSteps)
	case !(c.Tolerance >= 0) || math.IsInf(c.Tolerance, 0):
		return fmt.Errorf("--tolerance %g: want a finite number ≥ 0", c.Tolerance)
	case c.Patch < 0:
		return fmt.Errorf("--patch %d: want 0 (whole images) or a size in pixels", c.Patch)
	case math.IsNaN(c.Step) || math.IsInf(c.Step, 0):
		return fmt.Errorf("--step %g: want a finite number", c.Step)
	case math.IsNaN(c.Accept):
		return errors.New("--accept: want a number")
	}
	return nil
}

// Registration is a problem compiled for a configuration: one Level per
// pyramid level, coarse to fine.
type Registration struct {
	P      *Problem
	Cfg    Config
	Levels []*Level
	scale  float64 // mm per radian of rotation, for the optimiser's units
}

// New builds and compiles every level.
func New(p *Problem, cfg Config) (*Registration, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	r := &Registration{P: p, Cfg: cfg}
	// Rotations are optimised as the displacement (mm) they give at the
	// volume's half-diagonal, so that both kinds of parameter have one
	// scale.
	for a := range 3 {
		e := float64(p.Vol.N[a]) * p.Vol.Spacing[a]
		r.scale += e * e
	}
	r.scale = math.Sqrt(r.scale) / 2
	for k := cfg.Levels - 1; k >= 0; k-- {
		f := 1 << k
		l, err := newLevel(p, cfg, volume.Downsample(p.Vol, f), f)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.Levels = append(r.Levels, l)
	}
	return r, nil
}

// Close frees every level.
func (r *Registration) Close() {
	for _, l := range r.Levels {
		l.Close()
	}
}

// Run registers from the problem's Init, level after level, calling
// progress (if not nil) after every iteration. A cancelled ctx ends it
// with ctx's error and the result so far.
func (r *Registration) Run(ctx context.Context, progress func(Step)) (Result, error) {
	start := time.Now()
	cur := r.P.Init
	cur.Center = r.P.Center
	var res Result
	var status optimize.Status
	for li, l := range r.Levels {
		st, loss, err := r.runLevel(ctx, li, l, &cur, &res, start, progress)
		if err != nil {
			res.Transform = cur
			return res, err
		}
		status, res.Loss = st, loss
	}
	res.Transform = cur
	switch {
	case limited(status):
		res.Reason = fmt.Sprintf("the finest level reached its limit (%s, --max-steps %d) before its loss settled", status, r.Cfg.MaxSteps)
	case res.Loss > r.Cfg.Accept:
		res.Reason = fmt.Sprintf("the loss stopped improving at %.4g, above --accept %.4g: the start may be outside the capture range", res.Loss, r.Cfg.Accept)
	default:
		res.Converged = true
	}
	return res, nil
}

// limited says the optimiser stopped on a limit of steps, evaluations or
// time: not converged. Any other end (the loss settled, the gradient
// vanished, or a line search could not find a lower loss, as happens at a
// minimum of Siddon's piecewise-smooth loss) is a minimum, taken for a fit
// when its loss is at most Accept.
func limited(s optimize.Status) bool {
	switch s {
	case optimize.IterationLimit, optimize.RuntimeLimit, optimize.FunctionEvaluationLimit, optimize.GradientEvaluationLimit, optimize.HessianEvaluationLimit:
		return true
	}
	return false
}

// errCancelled carries ctx's error out of the optimiser's callbacks.
type errCancelled struct{ err error }

func (e errCancelled) Error() string { return e.err.Error() }

func (r *Registration) runLevel(ctx context.Context, li int, l *Level, cur *rigid.Transform, res *Result, start time.Time, progress func(Step)) (optimize.Status, float64, error) {
	// x = (ω·scale, t): the optimiser's variables.
	toParams := func(x []float64) [6]float64 {
		return [6]float64{x[0] / r.scale, x[1] / r.scale, x[2] / r.scale, x[3], x[4], x[5]}
	}
	var (
		lastX   [6]float64
		lastF   float64
		lastG   [6]float64
		have    bool
		evalErr error
		bestF   = math.Inf(1)
		bestX   [6]float64
	)
	eval := func(x []float64) {
		if have && [6]float64(x) == lastX {
			return
		}
		if err := ctx.Err(); err != nil {
			evalErr = errCancelled{err}
		}
		if evalErr != nil {
			lastF, have = math.NaN(), false
			return
		}
		f, g, err := l.Eval(toParams(x))
		res.Evals++
		if err != nil {
			evalErr = err
			lastF, have = math.NaN(), false
			return
		}
		lastX, lastF, have = [6]float64(x), f, true
		for j := range 3 {
			lastG[j] = g[j] / r.scale
			lastG[3+j] = g[3+j]
		}
		if f < bestF {
			bestF, bestX = f, [6]float64(x)
		}
	}
	prob := optimize.Problem{
		Func: func(x []float64) float64 { eval(x); return lastF },
		Grad: func(grad, x []float64) {
			eval(x)
			copy(grad, lastG[:])
		},
	}
	p0 := cur.Params()
	x0 := []float64{p0[0] * r.scale, p0[1] * r.scale, p0[2] * r.scale, p0[3], p0[4], p0[5]}
	settings := &optimize.Settings{
		MajorIterations:   r.Cfg.MaxSteps,
		GradientThreshold: 1e-9,
		Converger:         &optimize.FunctionConverge{Relative: r.Cfg.Tolerance, Absolute: 1e-12, Iterations: 3},
		Recorder: recorder(func(loc *optimize.Location) {
			s := Step{N: len(res.Trace), Level: li, Loss: loc.F, Params: toParams(loc.X), Seconds: time.Since(start).Seconds()}
			res.Trace = append(res.Trace, s)
			if progress != nil {
				progress(s)
			}
		}),
	}
	out, err := optimize.Minimize(prob, x0, settings, &optimize.LBFGS{})
	if evalErr != nil {
		var c errCancelled
		if errors.As(evalErr, &c) {
			evalErr = c.err
		}
		*cur = cur.WithParams(sliceOf(toParams(bestX[:])))
		return 0, bestF, evalErr
	}
	status := optimize.Failure
	if out != nil {
		status = out.Status
	}
	if err != nil && out == nil {
		return status, 0, err
	}
	// The optimiser's answer, or the best point it evaluated if that is
	// better (a line search can end on a worse one when it fails).
	x := bestX
	if out != nil && out.F <= bestF {
		x = [6]float64(out.X)
	}
	*cur = cur.WithParams(sliceOf(toParams(x[:])))
	return status, math.Min(bestF, lossOr(out, bestF)), nil
}

func sliceOf(p [6]float64) []float64 { return p[:] }

func lossOr(out *optimize.Result, f float64) float64 {
	if out == nil {
		return f
	}
	return out.F
}

// recorder calls fn at every major iteration.
type recorder func(*optimize.Location)

func (recorder) Init() error { return nil }

func (r recorder) Record(loc *optimize.Location, op optimize.Operation, _ *optimize.Stats) error {
	if op == optimize.MajorIteration {
		r(loc)
	}
	return nil
}
