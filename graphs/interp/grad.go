package interp

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/ops"
)

// gradState is what Grad builds at its first call and reuses: the
// forward with the values as an input, its two backwards, and one block's
// inputs.
type gradState struct {
	fwd    *ops.Interp1D
	gx, gf *ops.Interp1DGrad
	x, up  *tensor.Dense
	f      *tensor.Dense
}

// Grad computes the gradients of a cost with respect to the queries and to
// the table's values, given up, the gradient of the cost with respect to
// Run's output at x (OutLen(len(x)) values of the program's dtype): dx
// (len(x) values of the program's dtype) receives, for each query, the
// upstream gradient times the derivative of the output with respect to
// the query (the interpolant's derivative; zero where the query is
// clamped, outside [a, a + (G+1)·dx]), and df ((M, G) float64, row-major)
// the transpose of the interpolation weights applied to the upstream
// gradient (ops.Interp1DGrad). x is taken as Run takes it (a float32
// program also takes float64 queries). The blocks of Batch queries are
// computed on the CPU, one after another, and their values' gradients
// added in float64 in order: the result does not depend on the thread
// count. A formula reduction has no gradient.
func (p *Program) Grad(x, up, dx any, df []float64) error {
	if p.reduce == ops.ReduceFormula {
		return fmt.Errorf("%w: a formula reduction has no gradient", engine.ErrBatch)
	}
	switch p.Dtype {
	case tensor.Float32:
		u, ok1 := up.([]float32)
		d, ok2 := dx.([]float32)
		if ok1 && ok2 {
			switch xv := x.(type) {
			case []float32:
				return grad(p, xv, u, d, df)
			case []float64:
				return grad(p, xv, u, d, df)
			}
		}
	case tensor.Float64:
		xv, ok0 := x.([]float64)
		u, ok1 := up.([]float64)
		d, ok2 := dx.([]float64)
		if ok0 && ok1 && ok2 {
			return grad(p, xv, u, d, df)
		}
	}
	return fmt.Errorf("%w: the program is %v: x is %T, the upstream gradient %T and dx %T", engine.ErrBatch, p.Dtype, x, up, dx)
}

func grad[X, T float32 | float64](p *Program, x []X, up, dx []T, df []float64) error {
	n, w := len(x), max(p.Cols, 1)
	switch {
	case n < 1:
		return fmt.Errorf("%w: x has no queries", engine.ErrBatch)
	case len(up) != p.OutLen(n):
		return fmt.Errorf("%w: the upstream gradient has %d values, want %d", engine.ErrBatch, len(up), p.OutLen(n))
	case len(dx) != n:
		return fmt.Errorf("%w: dx has %d values, want %d", engine.ErrBatch, len(dx), n)
	case len(df) != p.M*p.g:
		return fmt.Errorf("%w: df has %d values, want M·G = %d", engine.ErrBatch, len(df), p.M*p.g)
	}
	for i, v := range x {
		if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%w: x[%d] is %g", ErrQuery, i, f)
		}
	}
	s, err := p.gradOps()
	if err != nil {
		return err
	}
	local := Local(p.Dtype, p.a)
	xb, ub := s.x.Data().([]T), s.up.Data().([]T)
	clear(df)
	for off := 0; off < n; off += p.Batch {
		k := min(p.Batch, n-off)
		// A short last block: its padding queries get a zero upstream
		// gradient, so they add nothing.
		clear(xb[k:])
		clear(ub[k*w:])
		if d, ok := any(xb).([]float32); ok && local {
			toLocal(d[:k], x[off:off+k], p.a)
		} else {
			for i, v := range x[off : off+k] {
				xb[i] = T(v)
			}
		}
		copy(ub, up[off*w:(off+k)*w])
		gx, err := s.gx.Do(s.x, s.f, s.up)
		if err != nil {
			return err
		}
		copy(dx[off:off+k], gx.Data().([]T)[:k])
		gf, err := s.gf.Do(s.x, s.f, s.up)
		if err != nil {
			return err
		}
		for i, v := range gf.Data().([]T) {
			df[i] += float64(v)
		}
	}
	return nil
}

// gradOps makes Grad's ops and buffers at its first call.
func (p *Program) gradOps() (*gradState, error) {
	if p.grad != nil {
		return p.grad, nil
	}
	fwd, err := ops.NewInterp1DValues(p.M, p.g, p.a, p.dx, p.reduce, p.method, p.Dtype, p.Batch)
	if err != nil {
		return nil, err
	}
	fwd.Local = Local(p.Dtype, p.a)
	s := &gradState{fwd: fwd, gx: ops.NewInterp1DGrad(fwd, ops.WRTQueries), gf: ops.NewInterp1DGrad(fwd, ops.WRTValues)}
	s.x = tensor.New(tensor.WithShape(p.Batch), tensor.Of(p.Dtype))
	if p.Cols > 0 {
		s.up = tensor.New(tensor.WithShape(p.Batch, p.Cols), tensor.Of(p.Dtype))
	} else {
		s.up = tensor.New(tensor.WithShape(p.Batch), tensor.Of(p.Dtype))
	}
	if p.Dtype == tensor.Float32 {
		f := make([]float32, len(p.f))
		for i, v := range p.f {
			f[i] = float32(v)
		}
		s.f = tensor.New(tensor.WithShape(p.M, p.g), tensor.WithBacking(f))
	} else {
		s.f = tensor.New(tensor.WithShape(p.M, p.g), tensor.WithBacking(p.f))
	}
	p.grad = s
	return s, nil
}
