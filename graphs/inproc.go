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

// AffinityProgram is the affinity of a batch of N images against itself,
// compiled once for a fixed (N, D) in memory: each Run replaces the images
// in the buffers the program holds and replays it.
type AffinityProgram struct {
	job   *Affinity
	prog  *Program
	data  *ops.PairData
	N, D  int
	Dtype tensor.Dtype
}

// CompileAffinity validates s as the CLI does (its Images, Out, TopK,
// Block and shard settings are not used: the images come with each Run)
// and compiles the (N, N) affinity of n images of d values at dt.
func CompileAffinity(s AffinitySpec, n, d int, dt tensor.Dtype) (_ *AffinityProgram, err error) {
	s.Images, s.Out, s.TopK, s.Block, s.Shard, s.Shards = "(array)", "", nil, nil, nil, nil
	s.FailOnNonFinite = false
	p, err := s.check(nil)
	if err != nil {
		return nil, err
	}
	if n < 1 || d < 1 {
		return nil, fmt.Errorf("shape (%d, %d): need N ≥ 1 images of D ≥ 1 values", n, d)
	}
	var data *ops.PairData
	switch dt {
	case tensor.Float32:
		data, err = ops.NewPairData(ones[float32](n*d), n, d, p.metric)
	case tensor.Float64:
		data, err = ops.NewPairData(ones[float64](n*d), n, d, p.metric)
	default:
		return nil, fmt.Errorf("--dtype %v: want float32 or float64", dt)
	}
	if err != nil {
		return nil, err
	}
	cfg := AffinityConfig{Data: data, Metric: p.metric, Lo: 0, Hi: n}
	if p.formula != nil {
		if cfg.Formula, err = ops.NewPairFormula(p.formula, data, p.direct); err != nil {
			return nil, err
		}
	}
	cfg.Symmetric = cfg.Formula == nil || cfg.Formula.Symmetric
	job, err := NewAffinity(cfg)
	if err != nil {
		return nil, err
	}
	prog, err := Compile(job, n)
	if err != nil {
		return nil, err
	}
	return &AffinityProgram{job: job, prog: prog, data: data, N: n, D: d, Dtype: dt}, nil
}

func ones[T float32 | float64](n int) []T {
	x := make([]T, n)
	for i := range x {
		x[i] = 1
	}
	return x
}

// Run computes the (N, N) affinities of the images x (N·D values, row
// major) into dst (N·N values), both of the program's dtype. Neither is
// kept after Run returns.
func (p *AffinityProgram) Run(x, dst any) error {
	switch xv := x.(type) {
	case []float32:
		d, ok := dst.([]float32)
		if !ok || p.Dtype != tensor.Float32 {
			return fmt.Errorf("%w: the program is %v, x is float32 and out is %T", ErrBatch, p.Dtype, dst)
		}
		return runAffinity(p, xv, d, p.job.full32)
	case []float64:
		d, ok := dst.([]float64)
		if !ok || p.Dtype != tensor.Float64 {
			return fmt.Errorf("%w: the program is %v, x is float64 and out is %T", ErrBatch, p.Dtype, dst)
		}
		return runAffinity(p, xv, d, p.job.full64)
	}
	return fmt.Errorf("%w: x is %T, want []float32 or []float64", ErrBatch, x)
}

func runAffinity[T float32 | float64](p *AffinityProgram, x, dst, full []T) error {
	if len(x) != p.N*p.D {
		return fmt.Errorf("%w: x has %d values, the program's images are (%d, %d)", ErrBatch, len(x), p.N, p.D)
	}
	if len(dst) != p.N*p.N {
		return fmt.Errorf("%w: out has %d values, want %d·%d", ErrBatch, len(dst), p.N, p.N)
	}
	if err := p.data.Reload(x); err != nil {
		return err
	}
	if f := p.job.cfg.Formula; f != nil {
		f.Reload(p.data)
	}
	if err := p.job.Feed(p.prog.Inputs(), 0, p.N); err != nil {
		return err
	}
	if _, err := p.prog.Run(); err != nil {
		return err
	}
	if full != nil { // symmetric: the graph filled the matrix
		copy(dst, full)
		return nil
	}
	copy(dst, p.prog.Outputs()[0].Data().([]T))
	return nil
}

// Close releases the program.
func (p *AffinityProgram) Close() error { return p.prog.Close() }
