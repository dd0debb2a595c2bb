package interp

import (
	"errors"
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs/option"
	"github.com/tapeloop/tapeloop/ops"
)

// Queries supplies interpolation query points in order.
type Queries interface {
	// Len is the number of queries.
	Len() int
	// Read32 and Read64 fill dst with the next len(dst) queries; off is
	// the index of dst[0], for error messages.
	Read32(dst []float32, off int) error
	Read64(dst []float64, off int) error
}

// Generated is a query source that makes its queries rather than reading
// them: on the CPU the op then makes each chunk of a batch's queries
// itself, just before it evaluates them, on the core that evaluates them
// (ops.Interp1D.FillInput): no pass of their own, and the queries are in
// cache when they are used.
type Generated interface {
	Queries
	// Skip moves the source past its next n queries, as reading them
	// would, without making them.
	Skip(n int)
	// Fill writes queries [lo, hi) of the n the last Skip passed into
	// x[lo:hi] (x a []float32 or []float64): the values a read would have
	// given. Chunks may be filled at once from several goroutines.
	Fill(x any, lo, hi int)
}

// Results receives the per-query results in order: one value per query,
// or M for the reduction "none", in the Job's dtype.
type Results interface {
	Write32(v []float32) error
	Write64(v []float64) error
}

// Stager is implemented by Queries and Results that buffer: the bytes
// they hold for a batch, which the plan counts.
type Stager interface {
	StagingBytes(batch int) int64
}

// ErrQuery is wrapped by errors about a query value.
var ErrQuery = errors.New("interp: bad query")

// Setup is what a Job runs: a prepared table, queries, and optionally a
// receiver of the per-query results.
type Setup struct {
	Table   *ops.InterpTable
	Reduce  ops.Reduce
	Method  ops.Method
	Dtype   tensor.Dtype
	Queries Queries
	// Out, when set, receives the results in order: (N,) for sumsq and
	// sum, (N, M) for none.
	Out Results
	// Device runs the op on a GPU (nil: the CPU).
	Device ops.Device
	// Formula is the user's reduction, for ops.ReduceFormula;
	// FailOnNonFinite makes a NaN or infinite result of it an error.
	Formula         *ops.InterpFormula
	FailOnNonFinite bool
	// SetUp is the memory the table took as read (its float64 values),
	// freed before the run but still the process's: the plan's estimate
	// of the peak resident set counts it.
	SetUp int64
}

// SetUpBytes is Setup.SetUp (engine.SetUpHolder).
func (w *Job) SetUpBytes() int64 { return w.cfg.SetUp }

// Job is the interpolation workload as an engine.Job.
type Job struct {
	cfg  Setup
	next int     // the next query Feed expects
	Sum  float64 // Σ over consumed queries of the reduced values
	// gen, when set, is the generated queries the op makes itself
	// (Build): Feed only moves them on.
	gen Generated
	// local: a float32 job on a grid whose origin is not 0 feeds the op
	// each query as x − a (ops.Interp1D.Local), formed in float64 from
	// the queries read or made as float64 into x64 (a batch) and only
	// then rounded to float32; see Local.
	local bool
	x64   []float64
}

// Local reports whether a job of dtype dt on a grid with origin a feeds
// its op the queries' local coordinates, x − a, rather than x: in float32
// with a ≠ 0. The position of a query within the grid is then as precise
// as float32 allows for its distance from a, wherever the grid lies: x
// itself rounded to float32 keeps only its leading 24 bits, all of them
// spent on a when the grid is far from zero (at 1.7·10⁹, steps of 128).
// With a = 0 the two are the same and nothing is converted.
func Local(dt tensor.Dtype, a float64) bool { return dt == tensor.Float32 && a != 0 }

// toLocal sets dst[i] to x[i] − a, formed in float64 and rounded to
// float32.
func toLocal[X float32 | float64](dst []float32, x []X, a float64) {
	for i, v := range x {
		dst[i] = float32(float64(v) - a)
	}
}

// New checks s and returns the Job.
func New(s Setup) (*Job, error) {
	if s.Table == nil || s.Queries == nil {
		return nil, errors.New("interp: config needs a table and queries")
	}
	if s.Queries.Len() < 1 {
		return nil, fmt.Errorf("%w: no queries", ErrQuery)
	}
	if s.Dtype != tensor.Float32 && s.Dtype != tensor.Float64 {
		return nil, fmt.Errorf("interp: dtype %v not supported (want float32 or float64)", s.Dtype)
	}
	return &Job{cfg: s, local: Local(s.Dtype, s.Table.A)}, nil
}

// Name is "interp".
func (w *Job) Name() string { return "interp" }

// ItemUnit names the items for the progress bar.
func (w *Job) ItemUnit() string { return "points" }

// Dtype is the configured dtype.
func (w *Job) Dtype() tensor.Dtype { return w.cfg.Dtype }

// Items is the number of queries.
func (w *Job) Items() int { return w.cfg.Queries.Len() }

// MaxBatch caps batches at 65,536 queries, or up to 1,048,576 for runs
// of at least 32 batches that size: a batch costs a fixed time besides its
// queries (the graph's run, waking the cores, the batch's record), which
// larger batches spread over more queries, while telemetry still sees
// enough batches.
func (w *Job) MaxBatch() int {
	b := 1 << 16
	for b < 1<<20 && 2*b*32 <= w.Items() {
		b *= 2
	}
	return b
}

// Build is x (batch,) → Interp1D → y (batch,), or (batch, M) for
// ReduceNone → BatchStats → [Σ y, max y]. The interpolation op reduces
// over the M interpolants itself: with the Gram tables the reduction never
// forms the M values. On the CPU, BatchStats is fused into it
// (ops.BatchStats.Fuse): the sum and sum of squares on per-cell tables add
// up their output as they compute it.
func (w *Job) Build(g *G.ExprGraph, batch int) (in, out []*G.Node, err error) {
	x := G.NewVector(g, w.cfg.Dtype, G.WithShape(batch), G.WithName("x"))
	i1 := ops.NewInterp1D(w.cfg.Table, w.cfg.Reduce, w.cfg.Method, w.cfg.Dtype, batch)
	i1.Formula = w.cfg.Formula
	i1.Local = w.local
	if w.local && len(w.x64) < batch {
		w.x64 = make([]float64, batch)
	}
	op, err := ops.OnDevice(i1, w.cfg.Device)
	if err != nil {
		return nil, nil, fmt.Errorf("interp: %w", err)
	}
	y, err := G.ApplyOpWithName(op, w.cfg.Reduce.String(), x)
	if err != nil {
		return nil, nil, fmt.Errorf("interp: build graph: %w", err)
	}
	bs := ops.NewBatchStats(batch, y.Dims())
	w.gen = nil
	if op == G.Op(i1) { // on the CPU, the op sums its output as it goes
		bs.Fuse(i1)
		// and makes generated queries itself, chunk by chunk: Feed only
		// moves the source on.
		if gen, ok := w.cfg.Queries.(Generated); ok && i1.FillInput(w.filler(gen)) {
			w.gen = gen
		}
	}
	stats, err := G.ApplyOpWithName(bs, "stats", y)
	if err != nil {
		return nil, nil, fmt.Errorf("interp: build graph: %w", err)
	}
	return []*G.Node{x}, []*G.Node{y, stats}, nil
}

// filler is gen's Fill for the op: with local queries, each chunk made
// in float64 into the same chunk of x64 (the chunks of a batch do not
// overlap, so the goroutines filling them at once share it) and stored as
// x − a.
func (w *Job) filler(gen Generated) func(x any, lo, hi int) {
	if !w.local {
		return gen.Fill
	}
	a := w.cfg.Table.A
	return func(x any, lo, hi int) {
		d, ok := x.([]float32)
		if !ok {
			gen.Fill(x, lo, hi)
			return
		}
		gen.Fill(w.x64, lo, hi)
		toLocal(d[lo:hi], w.x64[lo:hi], a)
	}
}

// StagingBytes counts the buffers of the queries and the results that
// have any (Stager), and the float64 batch of local queries (Local).
func (w *Job) StagingBytes(batch int) int64 {
	var b int64
	if w.local {
		b += 8 * int64(batch)
	}
	if s, ok := w.cfg.Queries.(Stager); ok {
		b += s.StagingBytes(batch)
	}
	if s, ok := w.cfg.Out.(Stager); ok {
		b += s.StagingBytes(batch)
	}
	return b
}

// Feed reads queries [off, off+n) into the input.
func (w *Job) Feed(in []*tensor.Dense, off, n int) error {
	if off != w.next {
		return fmt.Errorf("interp: queries are read in order: want batch at %d, got %d", w.next, off)
	}
	if w.gen != nil {
		w.gen.Skip(n)
		w.next = off + n
		return nil
	}
	var err error
	switch d := in[0].Data().(type) {
	case []float32:
		if w.local {
			if err = w.cfg.Queries.Read64(w.x64[:n], off); err == nil {
				toLocal(d[:n], w.x64[:n], w.cfg.Table.A)
			}
			break
		}
		err = w.cfg.Queries.Read32(d[:n], off)
	case []float64:
		err = w.cfg.Queries.Read64(d[:n], off)
	}
	if err != nil {
		return err
	}
	w.next = off + n
	return nil
}

// Consume adds the batch's total to Sum and passes its results to Out.
func (w *Job) Consume(out []*tensor.Dense, off, n int) error {
	if f := w.cfg.Formula; f != nil && w.cfg.FailOnNonFinite && f.NonFinite() > 0 {
		return option.ErrNonFinite("--reduce", f.NonFinite())
	}
	w.Sum += out[1].Data().([]float64)[0]
	if w.cfg.Out == nil {
		return nil
	}
	rows := n
	if w.cfg.Reduce == ops.ReduceNone {
		rows = n * w.cfg.Table.M
	}
	switch d := out[0].Data().(type) {
	case []float32:
		return w.cfg.Out.Write32(d[:rows])
	case []float64:
		return w.cfg.Out.Write64(d[:rows])
	}
	return nil
}

// Result is the result block of an interp report.
type Result struct {
	Sum          float64 `json:"sum"`
	Reduce       string  `json:"reduce"`
	Method       string  `json:"method"`
	Queries      int     `json:"queries"`
	Interpolants int     `json:"interpolants"`
	Grid         int     `json:"grid"`
	// NonFinite counts the NaN or infinite results of a formula.
	NonFinite int64 `json:"nonfinite,omitempty"`
}

// Result summarises the run so far.
func (w *Job) Result() Result {
	r := Result{Sum: w.Sum, Reduce: w.cfg.Reduce.String(), Method: w.cfg.Method.String(),
		Queries: w.Items(), Interpolants: w.cfg.Table.M, Grid: w.cfg.Table.G}
	if f := w.cfg.Formula; f != nil {
		r.Reduce, r.NonFinite = f.F.Canonical(), f.NonFinite()
	}
	return r
}

// SetDevice places the op of the next Compile on dev (nil: the CPU).
func (w *Job) SetDevice(dev ops.Device) { w.cfg.Device = dev }
