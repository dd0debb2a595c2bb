package affinity

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/shard"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/ops/pairwise"
)

// Program is the affinity of a batch of N images of D values, against
// itself or against Cols other images, compiled once in memory: each Run
// replaces the images in the buffers the program holds and replays it
// block by block.
type Program struct {
	ses        *engine.Session
	job        *Job
	data       *pairwise.PairData
	cols, topk int
	lo, hi     int // the rows computed: [0, N), or a shard's
	N, D       int
	Dtype      tensor.Dtype
}

// Compile checks cfg and compiles the affinity of n images of d values on
// dev (nil: the CPU) in its dtype, in blocks of its batch of rows (0:
// planned under its memory limit). With cols > 0 the n rows are computed
// against cols other images too, and each Run gives the (n, cols)
// affinities (N·(N+Cols) pairs); cfg.TopK is of a batch against itself.
func Compile(cfg Config, n, d, cols int, dev *engine.Device) (*Program, error) {
	return compile(cfg, n, d, cols, 0, n, dev)
}

// CompileShard is Compile of the rows [lo, hi) of the (N, N) matrix of n
// images against themselves: shard index of count, split as the CLI's
// --shard splits them (shard.Rows). Each Run gives those rows, (hi − lo,
// N), or their top k, the numbers the CLI's shard of the same rows holds,
// bit for bit.
func CompileShard(cfg Config, n, d, index, count int, dev *engine.Device) (*Program, error) {
	if count < 1 || index < 0 || index >= count {
		return nil, fmt.Errorf("%w: shard %d of %d: want 0 ≤ index < count", shard.ErrShards, index, count)
	}
	lo, hi := shard.Rows(index, count, n)
	if lo >= hi {
		return nil, fmt.Errorf("%w: shard %d/%d of %d images has no rows (more shards than images)", shard.ErrShards, index, count, n)
	}
	return compile(cfg, n, d, 0, lo, hi, dev)
}

func compile(cfg Config, n, d, cols, lo, hi int, dev *engine.Device) (_ *Program, err error) {
	if dev, err = engine.InProcess(dev); err != nil {
		return nil, err
	}
	dt := cfg.Compute(dev)
	p, err := cfg.Parse()
	if err != nil {
		return nil, err
	}
	if err := cfg.CheckRun(&p, dev); err != nil {
		return nil, err
	}
	if p.Int != (tensor.Dtype{}) {
		return nil, errInt(cfg.Dtype, "a compiled program takes float32 or float64 images")
	}
	if n < 1 || d < 1 {
		return nil, fmt.Errorf("shape (%d, %d): need N ≥ 1 images of D ≥ 1 values", n, d)
	}
	if cols < 0 {
		return nil, fmt.Errorf("cols %d: want at least 1 column image", cols)
	}
	if p.TopK != 0 && cols > 0 {
		return nil, fmt.Errorf("--topk with cols: top-k is of a batch against itself")
	}
	if p.TopK >= n {
		return nil, fmt.Errorf("--topk %d: must be between 1 and N−1 = %d (self is excluded)", p.TopK, n-1)
	}
	all := n + cols
	// The images (and the whole matrix of a batch against itself) are made
	// here, before the plan: refuse what the limit cannot hold first.
	need := sysmem.Mul(int64(all), int64(d), int64(dt.Size()))
	if p.TopK == 0 && cols == 0 {
		need = engine.AddBytes(need, sysmem.Mul(int64(hi-lo), int64(n), int64(dt.Size())))
	}
	if need < 0 || need > dev.MemLimit {
		if need < 0 {
			need = math.MaxInt64
		}
		return nil, &engine.BudgetError{Workload: "affinity's images and matrix", Need: need, Limit: dev.MemLimit}
	}
	var data *pairwise.PairData
	switch dt {
	case tensor.Float32:
		data, err = pairwise.NewPairData(ones[float32](all*d), all, d, p.Metric)
	case tensor.Float64:
		data, err = pairwise.NewPairData(ones[float64](all*d), all, d, p.Metric)
	default:
		return nil, fmt.Errorf("--dtype %v: want float32 or float64", dt)
	}
	if err != nil {
		return nil, err
	}
	if cols > 0 {
		data.SetBatch(n) // column images that repeat the batch give its own matrix
	}
	s := Setup{Data: data, Metric: p.Metric, Lo: lo, Hi: hi, TopK: p.TopK, TF32: cfg.TF32, FailOnNonFinite: cfg.FailOnNonFinite}
	if p.Formula != nil {
		if s.Formula, err = pairwise.NewPairFormula(p.Formula, data, p.Direct); err != nil {
			return nil, err
		}
	}
	s.Symmetric = (s.Formula == nil || s.Formula.Symmetric) && p.TopK == 0 && cols == 0 && lo == 0 && hi == n
	job, err := New(s)
	if err != nil {
		return nil, err
	}
	ses, err := engine.NewSession(job, dev, false)
	if err != nil {
		return nil, err
	}
	return &Program{ses: ses, job: job, data: data, cols: cols, topk: p.TopK, lo: lo, hi: hi, N: n, D: d, Dtype: dt}, nil
}

func ones[T float32 | float64](n int) []T {
	x := make([]T, n)
	for i := range x {
		x[i] = 1
	}
	return x
}

// Cols is the number of column images (0: the batch against itself).
func (p *Program) Cols() int { return p.cols }

// TopK is the number of affinities kept per row (0: all).
func (p *Program) TopK() int { return p.topk }

// Rows is the range of rows Run computes: [0, N), or a shard's.
func (p *Program) Rows() (lo, hi int) { return p.lo, p.hi }

// OutLen is the number of values Run writes: R·N, R·Cols or R·TopK, R
// the rows (N, or a shard's).
func (p *Program) OutLen() int {
	r := p.hi - p.lo
	switch {
	case p.topk > 0:
		return r * p.topk
	case p.cols > 0:
		return r * p.cols
	}
	return r * p.N
}

// Run computes the affinities of the images x (N·D values, row major)
// against themselves, or against y (Cols·D values) when the program has
// Cols, into dst (OutLen values), all of the program's dtype; y is nil
// without Cols. Without top-k dst is the matrix; with it, idx and vals
// (N·TopK each) receive each row's columns and affinities, best first,
// and dst is nil. Nothing is kept after Run returns.
func (p *Program) Run(x, y, dst any, idx []int64, vals []float64) error {
	switch xv := x.(type) {
	case []float32:
		return runAffinity(p, xv, y, dst, idx, vals)
	case []float64:
		return runAffinity(p, xv, y, dst, idx, vals)
	}
	return fmt.Errorf("%w: x is %T, want []float32 or []float64", engine.ErrBatch, x)
}

func runAffinity[T float32 | float64](p *Program, x []T, y, dst any, idx []int64, vals []float64) error {
	var zero T
	if _, f32 := any(zero).(float32); f32 != (p.Dtype == tensor.Float32) {
		return fmt.Errorf("%w: the program is %v, x is %T", engine.ErrBatch, p.Dtype, x)
	}
	if len(x) != p.N*p.D {
		return fmt.Errorf("%w: x has %d values, the program's images are (%d, %d)", engine.ErrBatch, len(x), p.N, p.D)
	}
	c := &call[T]{Job: p.job, p: p}
	if p.topk > 0 {
		if len(idx) != p.OutLen() || len(vals) != p.OutLen() {
			return fmt.Errorf("%w: top-k outputs of %d and %d values, want %d·%d", engine.ErrBatch, len(idx), len(vals), p.hi-p.lo, p.topk)
		}
		c.idx, c.vals = idx, vals
	} else {
		d, ok := dst.([]T)
		if !ok || len(d) != p.OutLen() {
			return fmt.Errorf("%w: out is %T of %d values, want %d %v values", engine.ErrBatch, dst, pairwise.SliceLen(dst), p.OutLen(), p.Dtype)
		}
		c.dst = d
	}
	if err := p.data.ReloadRows(x, 0); err != nil {
		return err
	}
	if p.cols > 0 {
		yv, ok := y.([]T)
		if !ok || len(yv) != p.cols*p.D {
			return fmt.Errorf("%w: y is %T of %d values, the program's column images are (%d, %d) %v", engine.ErrBatch, y, pairwise.SliceLen(y), p.cols, p.D, p.Dtype)
		}
		if err := p.data.ReloadRows(yv, p.N); err != nil {
			return err
		}
	} else if y != nil {
		return fmt.Errorf("%w: column images given, the program is a batch against itself", engine.ErrBatch)
	}
	if f := p.job.cfg.Formula; f != nil {
		f.Reload(p.data)
		p.job.bad0 = f.NonFinite() // FailOnNonFinite: this call's
	}
	p.job.Checksum = 0
	return p.ses.Run(c)
}

// call is one Run as a Job: the blocks' results copied into the caller's
// arrays.
type call[T float32 | float64] struct {
	*Job
	p    *Program
	dst  []T
	idx  []int64
	vals []float64
}

func (c *call[T]) Consume(out []*tensor.Dense, off, n int) error {
	a := c.Job
	if err := a.checkFinite(); err != nil {
		return err
	}
	switch {
	case a.cfg.Symmetric:
		return nil
	case a.cfg.TopK > 0:
		return a.Consume(out, off, n)
	}
	blk := out[0].Data().([]T)
	all, c0 := a.cfg.Data.N, c.p.N
	if c.p.cols == 0 {
		c0 = 0
	}
	w := all - c0
	for r := range n {
		copy(c.dst[(off+r)*w:(off+r+1)*w], blk[r*all+c0:(r+1)*all])
	}
	return nil
}

// Finish copies the whole matrix (symmetric) or the top-k results.
func (c *call[T]) Finish() error {
	a := c.Job
	switch {
	case a.cfg.Symmetric:
		copy(c.dst, a.full.([]T))
	case a.cfg.TopK > 0:
		copy(c.idx, a.Indices)
		copy(c.vals, a.Values)
	}
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
