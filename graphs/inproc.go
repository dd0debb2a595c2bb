package graphs

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/ops"
)

// InterpProgram is an interpolation compiled once for a fixed batch of
// in-memory queries, for callers in the same process (the C ABI): the
// table is prepared at compile time and each Run replays the same program
// over the same buffers.
type InterpProgram struct {
	job   *Interp
	prog  *Program
	Batch int
	M     int // interpolants
	// Cols is M for the reduction "none" (an (Batch, M) result), else 0
	// (a (Batch,) result).
	Cols  int
	Dtype tensor.Dtype
}

// fixedQueries only counts: InterpProgram feeds its input itself.
type fixedQueries int

func (q fixedQueries) Len() int                          { return int(q) }
func (q fixedQueries) Read32(dst []float32, _ int) error { return nil }
func (q fixedQueries) Read64(dst []float64, _ int) error { return nil }

// CompileInterp validates s as the CLI does (its F, X, Out, Points and
// Seed are not used: the table is f, (m, g) row-major, and the queries
// come with each Run) and compiles the program for batch queries at dt.
func CompileInterp(s InterpSpec, f []float64, m, g, batch int, dt tensor.Dtype) (_ *InterpProgram, err error) {
	s.F, s.X, s.Out = "(array)", "(array)", ""
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if batch < 1 {
		return nil, fmt.Errorf("batch %d: must be at least 1", batch)
	}
	if dt != tensor.Float32 && dt != tensor.Float64 {
		return nil, fmt.Errorf("--dtype %v: want float32 or float64", dt)
	}
	if m < 1 || g < 4 || len(f) != m*g {
		return nil, fmt.Errorf("--f: need an (M, G) table with M ≥ 1 and G ≥ 4, got M = %d, G = %d and %d values", m, g, len(f))
	}
	reduce, method, fx, _ := s.parse()
	dx := 1 / float64(g-1)
	if s.DX != nil {
		dx = *s.DX
	}
	if err := checkGridEnd(s.A, dx, g); err != nil {
		return nil, err
	}
	tab, err := ops.NewInterpTable(append([]float64(nil), f...), m, g, s.A, dx, reduce, method, dt)
	if err != nil {
		return nil, err
	}
	cfg := InterpConfig{Table: tab, Reduce: reduce, Method: method, Dtype: dt, Queries: fixedQueries(batch), FailOnNonFinite: s.FailOnNonFinite}
	if fx != nil {
		if cfg.Formula, err = ops.NewInterpFormula(fx, m); err != nil {
			return nil, err
		}
	}
	job, err := NewInterp(cfg)
	if err != nil {
		return nil, err
	}
	prog, err := Compile(job, batch)
	if err != nil {
		return nil, err
	}
	p := &InterpProgram{job: job, prog: prog, Batch: batch, M: m, Dtype: dt}
	if reduce == ops.ReduceNone {
		p.Cols = m
	}
	return p, nil
}

// OutLen is the number of values a Run writes: Batch, or Batch·M for the
// reduction "none".
func (p *InterpProgram) OutLen() int {
	if p.Cols > 0 {
		return p.Batch * p.Cols
	}
	return p.Batch
}

// Run evaluates the batch x (Batch queries) into dst (OutLen values),
// both of the program's dtype ([]float32 or []float64). Neither is kept
// after Run returns.
func (p *InterpProgram) Run(x, dst any) error {
	switch xv := x.(type) {
	case []float32:
		d, ok := dst.([]float32)
		if !ok || p.Dtype != tensor.Float32 {
			return fmt.Errorf("%w: the program is %v, x is float32 and out is %T", ErrBatch, p.Dtype, dst)
		}
		return runInterp(p, xv, d)
	case []float64:
		d, ok := dst.([]float64)
		if !ok || p.Dtype != tensor.Float64 {
			return fmt.Errorf("%w: the program is %v, x is float64 and out is %T", ErrBatch, p.Dtype, dst)
		}
		return runInterp(p, xv, d)
	}
	return fmt.Errorf("%w: x is %T, want []float32 or []float64", ErrBatch, x)
}

func runInterp[T float32 | float64](p *InterpProgram, x, dst []T) error {
	if len(x) != p.Batch {
		return fmt.Errorf("%w: x has %d queries, the program's batch is %d", ErrBatch, len(x), p.Batch)
	}
	if len(dst) != p.OutLen() {
		return fmt.Errorf("%w: out has %d values, want %d", ErrBatch, len(dst), p.OutLen())
	}
	copy(p.prog.Inputs()[0].Data().([]T), x)
	if _, err := p.prog.Run(); err != nil {
		return err
	}
	if f := p.job.cfg.Formula; f != nil && p.job.cfg.FailOnNonFinite && f.NonFinite() > 0 {
		return errNonFinite("--reduce", f.NonFinite())
	}
	copy(dst, p.prog.Outputs()[0].Data().([]T))
	return nil
}

// Close releases the program.
func (p *InterpProgram) Close() error { return p.prog.Close() }
