package interp

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs/option"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/ops"
)

// Program is an interpolation compiled once for blocks of Batch
// in-memory queries: the table is prepared at compile time, and each Run
// evaluates any number of queries block by block, replaying the same
// program over the same buffers.
type Program struct {
	ses   *engine.Session
	job   *Job
	Batch int
	M     int // interpolants
	// Cols is M for the reduction "none" (an (n, M) result), else 0
	// (an (n,) result).
	Cols  int
	Dtype tensor.Dtype

	f      []float64 // the table's values, (M, G): Grad's
	g      int
	reduce ops.Reduce
	method ops.Method
	a, dx  float64
	grad   *gradState // made at the first Grad
}

// fixedQueries only counts: Program feeds its input itself, the queries
// of each call.
type fixedQueries int

func (q fixedQueries) Len() int                          { return int(q) }
func (q fixedQueries) Read32(dst []float32, _ int) error { return nil }
func (q fixedQueries) Read64(dst []float64, _ int) error { return nil }

// Compile validates cfg and compiles the interpolation of the table f
// ((m, g) row-major, copied) on dev (nil: the CPU) in its dtype, for
// blocks of its batch of queries (0: planned under its memory limit); the
// queries come with each Run.
func Compile(cfg Config, f []float64, m, g int, dev *engine.Device) (_ *Program, err error) {
	if dev, err = engine.InProcess(dev); err != nil {
		return nil, err
	}
	dt := dev.Dtype()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if m < 1 || g < 4 || len(f) != m*g {
		return nil, fmt.Errorf("--f: need an (M, G) table with M ≥ 1 and G ≥ 4, got M = %d, G = %d and %d values", m, g, len(f))
	}
	need := sysmem.Mul(int64(m), int64(g), 8) // the copy made here, before the plan
	if need < 0 {
		need = math.MaxInt64
	}
	if need > dev.MemLimit {
		return nil, &engine.BudgetError{Workload: "interp's table", Need: need, Limit: dev.MemLimit}
	}
	reduce, method, fx, _ := cfg.Parse()
	dx, err := cfg.Spacing(g)
	if err != nil {
		return nil, err
	}
	if dt == tensor.Float32 {
		if err := CheckGrid32(cfg.A, dx, g); err != nil {
			return nil, err
		}
	}
	f = append([]float64(nil), f...)
	tab, err := ops.NewInterpTable(f, m, g, cfg.A, dx, reduce, method, dt)
	if err != nil {
		return nil, err
	}
	s := Setup{Table: tab, Reduce: reduce, Method: method, Dtype: dt, Queries: fixedQueries(1), FailOnNonFinite: cfg.FailOnNonFinite}
	if fx != nil {
		if s.Formula, err = ops.NewInterpFormula(fx, m); err != nil {
			return nil, err
		}
	}
	job, err := New(s)
	if err != nil {
		return nil, err
	}
	ses, err := engine.NewSession(job, dev, true)
	if err != nil {
		return nil, err
	}
	p := &Program{ses: ses, job: job, Batch: ses.Batch(), M: m, Dtype: dt, f: f, g: g, reduce: reduce, method: method, a: cfg.A, dx: dx}
	if reduce == ops.ReduceNone {
		p.Cols = m
	}
	return p, nil
}

// OutLen is the number of values a Run of n queries writes: n, or n·M
// for the reduction "none".
func (p *Program) OutLen(n int) int {
	if p.Cols > 0 {
		return n * p.Cols
	}
	return n
}

// Run evaluates the queries x (any number, at least one) into dst
// (OutLen(len(x)) values), both of the program's dtype ([]float32 or
// []float64); a float32 program also takes float64 queries, placed on the
// grid in float64 before anything is rounded to float32 (Local): the way
// to keep their digits on a grid far from zero. Neither is kept after Run
// returns.
func (p *Program) Run(x, dst any) error {
	switch xv := x.(type) {
	case []float32:
		d, ok := dst.([]float32)
		if !ok || p.Dtype != tensor.Float32 {
			return fmt.Errorf("%w: the program is %v, x is float32 and out is %T", engine.ErrBatch, p.Dtype, dst)
		}
		return p.run(&call[float32, float32]{p: p, x: xv, dst: d})
	case []float64:
		switch d := dst.(type) {
		case []float64:
			if p.Dtype == tensor.Float64 {
				return p.run(&call[float64, float64]{p: p, x: xv, dst: d})
			}
		case []float32:
			if p.Dtype == tensor.Float32 {
				return p.run(&call[float64, float32]{p: p, x: xv, dst: d})
			}
		}
		return fmt.Errorf("%w: the program is %v, x is float64 and out is %T", engine.ErrBatch, p.Dtype, dst)
	}
	return fmt.Errorf("%w: x is %T, want []float32 or []float64", engine.ErrBatch, x)
}

func (p *Program) run(c interface {
	engine.Job
	check() error
}) error {
	if err := c.check(); err != nil {
		return err
	}
	return p.ses.Run(c)
}

// call is one Run as a Job: its queries fed block by block from x, the
// results copied into dst.
type call[X, T float32 | float64] struct {
	*Job
	p   *Program
	x   []X
	dst []T
	bad int64 // the formula's non-finite count before the call
}

func (c *call[X, T]) check() error {
	c.Job = c.p.job
	if len(c.x) < 1 {
		return fmt.Errorf("%w: x has no queries", engine.ErrBatch)
	}
	if len(c.dst) != c.p.OutLen(len(c.x)) {
		return fmt.Errorf("%w: out has %d values, want %d", engine.ErrBatch, len(c.dst), c.p.OutLen(len(c.x)))
	}
	if f := c.p.job.cfg.Formula; f != nil {
		c.bad = f.NonFinite()
	}
	return nil
}

func (c *call[X, T]) Items() int { return len(c.x) }

// Feed copies the block's queries, refusing NaN and ±Inf as the CLI's
// reader does; a float32 program on a grid whose origin is not 0 takes
// them as x − a (Local), formed in float64.
func (c *call[X, T]) Feed(in []*tensor.Dense, off, n int) error {
	x := c.x[off : off+n]
	for i, v := range x {
		if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%w: x[%d] is %g", ErrQuery, off+i, f)
		}
	}
	switch d := in[0].Data().(type) {
	case []float32:
		a := 0.0 // x − 0 rounded: x rounded, or x itself
		if c.p.job.local {
			a = c.p.job.cfg.Table.A
		}
		if xs, ok := any(x).([]float32); ok && a == 0 {
			copy(d, xs)
		} else {
			toLocal(d, x, a)
		}
	case []float64:
		for i, v := range x {
			d[i] = float64(v)
		}
	}
	return nil
}

func (c *call[X, T]) Consume(out []*tensor.Dense, off, n int) error {
	if f := c.p.job.cfg.Formula; f != nil && c.p.job.cfg.FailOnNonFinite && f.NonFinite() > c.bad {
		return option.ErrNonFinite("--reduce", f.NonFinite()-c.bad)
	}
	w := max(c.p.Cols, 1)
	copy(c.dst[off*w:(off+n)*w], out[0].Data().([]T)[:n*w])
	return nil
}

// Close releases the program.
func (p *Program) Close() error { return p.ses.Close() }

// Interrupt stops the call in progress (one made between calls stops the
// next).
func (p *Program) Interrupt() { p.ses.Interrupt() }

// Report says how the calls so far went.
func (p *Program) Report() engine.Report { return p.ses.Report() }

// DOT is the compiled graph as Graphviz DOT.
func (p *Program) DOT() (string, error) { return p.ses.DOT() }
