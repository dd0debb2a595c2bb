package graphs

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/npy"
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

// ErrQuery is wrapped by errors about a query value.
var ErrQuery = errors.New("interp: bad query")

// UniformQueries are N points uniform on [Lo, Hi) from a PCG generator with
// a fixed seed, generated as they are read: they take no memory.
type UniformQueries struct {
	N      int
	Lo, Hi float64
	Seed   uint64
	rng    *rand.Rand
}

// Len is N.
func (u *UniformQueries) Len() int { return u.N }

func (u *UniformQueries) next() float64 {
	if u.rng == nil {
		u.rng = rand.New(rand.NewPCG(u.Seed, 0x7a9e100b))
	}
	return u.Lo + (u.Hi-u.Lo)*u.rng.Float64()
}

// Read32 generates len(dst) points.
func (u *UniformQueries) Read32(dst []float32, _ int) error {
	for i := range dst {
		dst[i] = float32(u.next())
	}
	return nil
}

// Read64 generates len(dst) points.
func (u *UniformQueries) Read64(dst []float64, _ int) error {
	for i := range dst {
		dst[i] = u.next()
	}
	return nil
}

// NpyQueries streams the queries of a (N,) .npy file of any numeric dtype.
type NpyQueries struct {
	R    *npy.Reader
	Path string
}

// NewNpyQueries checks that r holds a non-empty vector.
func NewNpyQueries(r *npy.Reader, path string) (*NpyQueries, error) {
	if len(r.Shape) != 1 {
		return nil, fmt.Errorf("%w: %s has shape %s, want a vector (N,)", ErrQuery, path, npy.ShapeString(r.Shape))
	}
	if r.Shape[0] == 0 {
		return nil, fmt.Errorf("%w: %s holds no queries", ErrQuery, path)
	}
	return &NpyQueries{R: r, Path: path}, nil
}

// Len is N.
func (q *NpyQueries) Len() int { return q.R.Shape[0] }

// Read32 reads and checks the next len(dst) queries.
func (q *NpyQueries) Read32(dst []float32, off int) error { return readChecked(q, dst, off) }

// Read64 reads and checks the next len(dst) queries.
func (q *NpyQueries) Read64(dst []float64, off int) error { return readChecked(q, dst, off) }

func readChecked[T float32 | float64](q *NpyQueries, dst []T, off int) error {
	var err error
	switch d := any(dst).(type) {
	case []float32:
		_, err = q.R.Read32(d)
	case []float64:
		_, err = q.R.Read64(d)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", q.Path, err)
	}
	for i, v := range dst {
		if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%w: %s: x[%d] is %g", ErrQuery, q.Path, off+i, f)
		}
	}
	return nil
}

// InterpConfig describes an interpolation run: a prepared table, queries,
// and optionally a .npy writer for the per-query results.
type InterpConfig struct {
	Table   *ops.InterpTable
	Reduce  ops.Reduce
	Method  ops.Method
	Dtype   tensor.Dtype
	Queries Queries
	// Out, when set, receives the results in order: (N,) for sumsq and
	// sum, (N, M) for none. Its shape must have been written accordingly.
	Out *npy.Writer
	// Device runs the op on a GPU (nil: the CPU).
	Device ops.Device
}

// Interp is the interpolation workload (seed 001) as a Job.
type Interp struct {
	cfg  InterpConfig
	next int     // the next query Feed expects
	Sum  float64 // Σ over consumed queries of the reduced values
}

// NewInterp checks cfg and returns the Job.
func NewInterp(cfg InterpConfig) (*Interp, error) {
	if cfg.Table == nil || cfg.Queries == nil {
		return nil, errors.New("interp: config needs a table and queries")
	}
	if cfg.Queries.Len() < 1 {
		return nil, fmt.Errorf("%w: no queries", ErrQuery)
	}
	if cfg.Dtype != tensor.Float32 && cfg.Dtype != tensor.Float64 {
		return nil, fmt.Errorf("interp: dtype %v not supported (want float32 or float64)", cfg.Dtype)
	}
	return &Interp{cfg: cfg}, nil
}

// Name is "interp".
func (w *Interp) Name() string { return "interp" }

// Dtype is the configured dtype.
func (w *Interp) Dtype() tensor.Dtype { return w.cfg.Dtype }

// Items is the number of queries.
func (w *Interp) Items() int { return w.cfg.Queries.Len() }

// MaxBatch caps batches at 65,536 queries: per-batch buffers stay in cache
// and telemetry sees enough batches; larger batches gain nothing on a CPU.
func (w *Interp) MaxBatch() int { return 1 << 16 }

// Build is x (batch,) → Interp1D → (batch,) or (batch, M).
func (w *Interp) Build(g *G.ExprGraph, batch int) (in, out []*G.Node, err error) {
	x := G.NewVector(g, w.cfg.Dtype, G.WithShape(batch), G.WithName("x"))
	op, err := ops.OnDevice(ops.NewInterp1D(w.cfg.Table, w.cfg.Reduce, w.cfg.Method, w.cfg.Dtype, batch), w.cfg.Device)
	if err != nil {
		return nil, nil, fmt.Errorf("interp: %w", err)
	}
	y, err := G.ApplyOpWithName(op, w.cfg.Reduce.String(), x)
	if err != nil {
		return nil, nil, fmt.Errorf("interp: build graph: %w", err)
	}
	return []*G.Node{x}, []*G.Node{y}, nil
}

// StagingBytes counts the file reader's and writer's buffers.
func (w *Interp) StagingBytes(batch int) int64 {
	var b int64
	if _, ok := w.cfg.Queries.(*NpyQueries); ok {
		b += int64(batch)*8 + 1<<16
	}
	if w.cfg.Out != nil {
		b += 1<<16 + 8192*8
	}
	return b
}

// Feed reads queries [off, off+n) into the input.
func (w *Interp) Feed(in []*tensor.Dense, off, n int) error {
	if off != w.next {
		return fmt.Errorf("interp: queries are read in order: want batch at %d, got %d", w.next, off)
	}
	var err error
	switch d := in[0].Data().(type) {
	case []float32:
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

// Consume adds the batch's results to Sum and writes them to Out.
func (w *Interp) Consume(out []*tensor.Dense, off, n int) error {
	rows := n
	if w.cfg.Reduce == ops.ReduceNone {
		rows = n * w.cfg.Table.M
	}
	var err error
	switch d := out[0].Data().(type) {
	case []float32:
		w.Sum += sum(d[:rows])
		if w.cfg.Out != nil {
			err = w.cfg.Out.Write32(d[:rows])
		}
	case []float64:
		w.Sum += sum(d[:rows])
		if w.cfg.Out != nil {
			err = w.cfg.Out.Write64(d[:rows])
		}
	}
	return err
}

func sum[T float32 | float64](x []T) float64 {
	var s float64
	for _, v := range x {
		s += float64(v)
	}
	return s
}

// InterpResult is the result block of an interp report.
type InterpResult struct {
	Sum          float64 `json:"sum"`
	Reduce       string  `json:"reduce"`
	Method       string  `json:"method"`
	Queries      int     `json:"queries"`
	Interpolants int     `json:"interpolants"`
	Grid         int     `json:"grid"`
}

// Result summarises the run so far.
func (w *Interp) Result() InterpResult {
	return InterpResult{Sum: w.Sum, Reduce: w.cfg.Reduce.String(), Method: w.cfg.Method.String(),
		Queries: w.Items(), Interpolants: w.cfg.Table.M, Grid: w.cfg.Table.G}
}

// SetDevice places the op of the next Compile on dev (nil: the CPU).
func (w *Interp) SetDevice(dev ops.Device) { w.cfg.Device = dev }
