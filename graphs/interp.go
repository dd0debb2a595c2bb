package graphs

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"

	"github.com/tapeloop/tapeloop/graphs/option"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs/engine"
	"github.com/tapeloop/tapeloop/internal/atomicfile"
	"github.com/tapeloop/tapeloop/internal/checkpoint"
	"github.com/tapeloop/tapeloop/internal/formula"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/sysmem"
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
	// Formula is the user's reduction, for ops.ReduceFormula;
	// FailOnNonFinite makes a NaN or infinite result of it an error.
	Formula         *ops.InterpFormula
	FailOnNonFinite bool
}

// Interp is the interpolation workload as a Job.
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

// ItemUnit names the items for the progress bar.
func (w *Interp) ItemUnit() string { return "points" }

// Dtype is the configured dtype.
func (w *Interp) Dtype() tensor.Dtype { return w.cfg.Dtype }

// Items is the number of queries.
func (w *Interp) Items() int { return w.cfg.Queries.Len() }

// MaxBatch caps batches at 65,536 queries: per-batch buffers stay in cache
// and telemetry sees enough batches; larger batches gain nothing on a CPU.
func (w *Interp) MaxBatch() int { return 1 << 16 }

// Build is x (batch,) → Interp1D → y (batch,), or (batch, M) for
// ReduceNone → BatchStats → [Σ y, max y]. The interpolation op reduces
// over the M interpolants itself: with the Gram tables the reduction never
// forms the M values.
func (w *Interp) Build(g *G.ExprGraph, batch int) (in, out []*G.Node, err error) {
	x := G.NewVector(g, w.cfg.Dtype, G.WithShape(batch), G.WithName("x"))
	i1 := ops.NewInterp1D(w.cfg.Table, w.cfg.Reduce, w.cfg.Method, w.cfg.Dtype, batch)
	i1.Formula = w.cfg.Formula
	op, err := ops.OnDevice(i1, w.cfg.Device)
	if err != nil {
		return nil, nil, fmt.Errorf("interp: %w", err)
	}
	y, err := G.ApplyOpWithName(op, w.cfg.Reduce.String(), x)
	if err != nil {
		return nil, nil, fmt.Errorf("interp: build graph: %w", err)
	}
	stats, err := G.ApplyOpWithName(ops.NewBatchStats(batch, y.Dims()), "total", y)
	if err != nil {
		return nil, nil, fmt.Errorf("interp: build graph: %w", err)
	}
	return []*G.Node{x}, []*G.Node{y, stats}, nil
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

// Consume adds the batch's total to Sum and writes its results to Out.
func (w *Interp) Consume(out []*tensor.Dense, off, n int) error {
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
	// NonFinite counts the NaN or infinite results of a formula.
	NonFinite int64 `json:"nonfinite,omitempty"`
}

// Result summarises the run so far.
func (w *Interp) Result() InterpResult {
	r := InterpResult{Sum: w.Sum, Reduce: w.cfg.Reduce.String(), Method: w.cfg.Method.String(),
		Queries: w.Items(), Interpolants: w.cfg.Table.M, Grid: w.cfg.Table.G}
	if f := w.cfg.Formula; f != nil {
		r.Reduce, r.NonFinite = f.F.Canonical(), f.NonFinite()
	}
	return r
}

// SetDevice places the op of the next Compile on dev (nil: the CPU).
func (w *Interp) SetDevice(dev ops.Device) { w.cfg.Device = dev }

// InterpSpec is an interpolation run as the user states it: files, sizes
// and names. The zero value of each field is its documented default.
type InterpSpec struct {
	F string // (M, G) .npy of interpolant values; "": the built-in table
	X string // (N,) .npy of query points; "": Points uniform queries
	A float64
	// DX is the grid spacing; nil means 1/(G−1).
	DX *float64
	// Reduce is "sumsq" (default), "sum", "none", or a formula over the M
	// values v at a point x reducing to one number, e.g. "max(v)" or
	// "mean(exp(-v))", with Params; "sum(v^2)" is sumsq, "sum(v)" sum.
	Reduce string
	Params map[string]float64
	// FailOnNonFinite makes a NaN or infinite result of a formula an error.
	FailOnNonFinite bool
	Method          string // "auto" (default) or "direct"
	Out             string // .npy for the per-query results; "": none written
	// Without F: M interpolants of f = x² on G points over [0, 1].
	Interpolants, Grid int
	// Without X: N uniform queries over the grid from a fixed seed.
	Points int
	Seed   uint64
}

// DefaultInterpSpec is the built-in case: 300 interpolants of f = x² on a
// 4096-point grid, evaluated at 10⁶ uniform points, reduced by Σ value².
func DefaultInterpSpec() InterpSpec {
	return InterpSpec{Interpolants: 300, Grid: 4096, Points: 1_000_000, Seed: 1, Reduce: "sumsq", Method: "auto"}
}

// parse reads the reduction and the method: a formula that is a built-in
// reduction runs as the built-in.
func (s InterpSpec) parse() (ops.Reduce, ops.Method, *formula.Formula, error) {
	method, err := ops.ParseMethod(option.OrDefault(s.Method, "auto"))
	if err != nil {
		return 0, 0, nil, fmt.Errorf("--method: %w", err)
	}
	reduce, err := ops.ParseReduce(option.OrDefault(s.Reduce, "sumsq"))
	if err == nil {
		if err := option.NoParams(s.Params, "--reduce"); err != nil {
			return 0, 0, nil, err
		}
		if s.FailOnNonFinite {
			return 0, 0, nil, errors.New("--fail-on-nonfinite: it is for a formula in --reduce, and there is none")
		}
		return reduce, method, nil, nil
	}
	f, err := option.ParseFormula("--reduce", s.Reduce, ops.InterpVars, s.Params, true)
	if err != nil {
		return 0, 0, nil, err
	}
	for _, b := range []struct {
		src    string
		reduce ops.Reduce
	}{{"sum(v^2)", ops.ReduceSumSq}, {"sum(v)", ops.ReduceSum}} {
		if same, err := formula.Same(f, b.src); err == nil && same {
			return b.reduce, method, nil, nil
		}
	}
	return ops.ReduceFormula, method, f, nil
}

// Validate checks what can be checked before any file is read.
func (s InterpSpec) Validate() error {
	if _, _, _, err := s.parse(); err != nil {
		return err
	}
	if s.F == "" {
		if s.Interpolants < 1 {
			return fmt.Errorf("--interpolants %d: need at least 1", s.Interpolants)
		}
		if s.Grid < 4 {
			return fmt.Errorf("--grid %d: need at least 4 grid points", s.Grid)
		}
		if n := sysmem.Mul(int64(s.Interpolants), int64(s.Grid)); n < 0 || n > maxTable {
			return fmt.Errorf("--interpolants %d × --grid %d: table too large (at most %d values, 2³¹)", s.Interpolants, s.Grid, int64(maxTable))
		}
	}
	if s.X == "" && (s.Points < 1 || s.Points > maxPoints) {
		return fmt.Errorf("--points %d: want 1 to %d (2³⁶) built-in queries", s.Points, int64(maxPoints))
	}
	if s.DX != nil {
		if err := checkDX(*s.DX); err != nil {
			return err
		}
		if s.F == "" && s.Grid >= 4 {
			if err := checkGridEnd(s.A, *s.DX, s.Grid); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkDX refuses a grid spacing the interpolation cannot compute with:
// not a finite number above 0, or so small (subnormal) or so large that
// it or its reciprocal, by which every query is placed on the grid, is
// not a normal number.
func checkDX(dx float64) error {
	switch {
	case math.IsNaN(dx) || math.IsInf(dx, 0) || dx <= 0:
		return fmt.Errorf("--dx %g: the grid spacing must be a finite number above 0", dx)
	case dx < minNormal:
		return fmt.Errorf("--dx %g: too small: a grid spacing must be at least %g (a subnormal spacing has too few digits)", dx, minNormal)
	case 1/dx < minNormal:
		return fmt.Errorf("--dx %g: too large: 1/dx is %g, below the smallest normal number %g", dx, 1/dx, minNormal)
	}
	return nil
}

// checkGrid32 refuses a grid that float32 queries cannot lie on: a
// spacing below float32's smallest normal number (the queries would keep
// too few digits, or be rounded to 0), or a grid whose end a + (G+1)·dx
// is beyond float32's range (the queries would be infinite).
func checkGrid32(a, dx float64, g int) error {
	if math.IsNaN(a) || math.IsInf(a, 0) || !(dx > 0) || math.IsInf(dx, 0) {
		return nil // ops.NewInterpTable names these
	}
	if dx < math.SmallestNonzeroFloat32*(1<<23) {
		return fmt.Errorf("--dx %g: too small for float32 queries (at least %g); use --dtype float64", dx, math.SmallestNonzeroFloat32*(1<<23))
	}
	if lo, hi := math.Abs(a), math.Abs(a+float64(g+1)*dx); max(lo, hi) > math.MaxFloat32 {
		return fmt.Errorf("--a %g, --dx %g: the grid's end a + (G+1)·dx = %g is beyond float32's range (%g); use --dtype float64", a, dx, a+float64(g+1)*dx, math.MaxFloat32)
	}
	return nil
}

// minNormal is the smallest normal float64, 2⁻¹⁰²².
const minNormal = 0x1p-1022

const (
	// maxTable is the most values the built-in table may have.
	maxTable = 1 << 31
	// maxPoints is the most built-in queries a run may make: days of work
	// already, and a bound that keeps every count derived from it in range.
	maxPoints = 1 << 36
)

// checkGridEnd refuses a grid whose last point a + (G−1)·dx is not a
// finite number (an a or dx that is itself not valid is left to
// ops.NewInterpTable to name).
func checkGridEnd(a, dx float64, g int) error {
	if !(dx > 0) || math.IsInf(dx, 0) || math.IsNaN(a) || math.IsInf(a, 0) {
		return nil
	}
	if end := a + float64(g-1)*dx; math.IsInf(end, 0) || math.IsNaN(end) {
		return fmt.Errorf("--dx %g: the grid's last point a + (G−1)·dx = %g + %d·%g is not finite", dx, a, g-1, dx)
	}
	// Queries are clamped to a + (G+1)·dx, one step past the padding.
	if ub := a + float64(g+1)*dx; math.IsInf(ub, 0) || math.IsInf(float64(g+1)*dx, 0) {
		return fmt.Errorf("--dx %g: the grid's extent (G+1)·dx = %d·%g is not finite", dx, g+1, dx)
	}
	return nil
}

// InterpTask is an opened interpolation run.
type InterpTask struct {
	job    *Interp
	closer []io.Closer
	out    *atomicfile.File
	writer *npy.Writer
	lock   *checkpoint.Lock // the output's, while it is written
}

// OpenInterp validates s, reads the table, opens the queries and creates
// the output on dev. With withOutput false (for printing the graph), Out
// is ignored.
func OpenInterp(s InterpSpec, dev *engine.Device, withOutput bool) (_ *InterpTask, err error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	reduce, method, fx, _ := s.parse()
	if fx != nil && dev.GPU() {
		return nil, errors.New("--reduce: a formula in interp runs on the CPU only; use --device cpu")
	}
	t := &InterpTask{}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	var f []float64
	var m, g int
	if s.F != "" {
		if f, m, g, err = readTable(s.F, dev.MemLimit); err != nil {
			return nil, err
		}
	} else {
		m, g = s.Interpolants, s.Grid
		if err := checkTableBytes(m, g, dev.MemLimit); err != nil {
			return nil, err
		}
		f = squareTable(m, g)
	}
	dx := 1 / float64(g-1)
	if s.DX != nil {
		dx = *s.DX
		if err := checkDX(dx); err != nil {
			return nil, err
		}
		if err := checkGridEnd(s.A, dx, g); err != nil {
			return nil, err
		}
	}
	dt := dev.Dtype()
	if dt == tensor.Float32 {
		if err := checkGrid32(s.A, dx, g); err != nil {
			return nil, err
		}
	}
	tab, err := ops.NewInterpTable(f, m, g, s.A, dx, reduce, method, dt)
	if err != nil {
		return nil, err
	}
	var q Queries
	if s.X != "" {
		file, err := npy.Open(s.X)
		if err != nil {
			return nil, fmt.Errorf("--x: %w", err)
		}
		t.closer = append(t.closer, file)
		if q, err = NewNpyQueries(file.Reader, s.X); err != nil {
			return nil, fmt.Errorf("--x: %w", err)
		}
	} else {
		q = &UniformQueries{N: s.Points, Lo: s.A, Hi: s.A + float64(g-1)*dx, Seed: s.Seed}
	}
	cfg := InterpConfig{Table: tab, Reduce: reduce, Method: method, Dtype: dt, Queries: q, FailOnNonFinite: s.FailOnNonFinite}
	if fx != nil {
		if cfg.Formula, err = ops.NewInterpFormula(fx, m); err != nil {
			return nil, err
		}
	}
	if s.Out != "" && withOutput {
		if t.lock, err = lockOutput(s.Out); err != nil {
			return nil, err
		}
		shape := []int{q.Len()}
		if reduce == ops.ReduceNone {
			shape = append(shape, m)
		}
		size := sysmem.Mul(int64(q.Len()), int64(dt.Size()))
		if reduce == ops.ReduceNone {
			size = sysmem.Mul(size, int64(m))
		}
		if err := atomicfile.CheckSpace(s.Out, size); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		if t.out, err = atomicfile.Create(s.Out); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		if t.writer, err = npy.NewWriter(t.out, npyDtype(dt), shape); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		cfg.Out = t.writer
	}
	if t.job, err = NewInterp(cfg); err != nil {
		return nil, err
	}
	return t, nil
}

// readTable reads the (M, G) table of interpolant values at path, as
// float64, after checking its shape and that it fits limit.
func readTable(path string, limit int64) (f []float64, m, g int, err error) {
	file, err := npy.Open(path)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("--f: %w", err)
	}
	defer file.Close()
	if len(file.Shape) != 2 {
		return nil, 0, 0, fmt.Errorf("--f: %s has shape %s, want (M, G)", path, npy.ShapeString(file.Shape))
	}
	m, g = file.Shape[0], file.Shape[1]
	if m == 0 {
		return nil, 0, 0, fmt.Errorf("--f: %s holds no interpolants (M = 0)", path)
	}
	if g < 4 {
		return nil, 0, 0, fmt.Errorf("--f: the grid needs at least 4 points, got G = %d", g)
	}
	if err := checkTableBytes(m, g, limit); err != nil {
		return nil, 0, 0, fmt.Errorf("--f: %s: %w", path, err)
	}
	f = make([]float64, m*g)
	if _, err := file.Read64(f); err != nil {
		return nil, 0, 0, fmt.Errorf("--f: %s: %w", path, err)
	}
	return f, m, g, nil
}

// checkTableBytes refuses, before it is read or made, an (M, G) table
// whose float64 values alone would not fit limit.
func checkTableBytes(m, g int, limit int64) error {
	if need := sysmem.Mul(int64(m), int64(g), 8); need < 0 || need > limit {
		if need < 0 {
			need = math.MaxInt64
		}
		return &engine.BudgetError{Workload: fmt.Sprintf("interp's table of %d × %d values", m, g), Need: need, Limit: limit}
	}
	return nil
}

// npyDtype is the .npy element type of a float32 or float64 computation.
func npyDtype(dt tensor.Dtype) npy.Dtype {
	if dt == tensor.Float64 {
		return npy.Float64
	}
	return npy.Float32
}

// squareTable is the built-in table: f = x² on linspace(0, 1, g), in every
// row.
func squareTable(m, g int) []float64 {
	f := make([]float64, m*g)
	for i := range g {
		x := float64(i) / float64(g-1)
		f[i] = x * x
	}
	for j := 1; j < m; j++ {
		copy(f[j*g:(j+1)*g], f[:g])
	}
	return f
}

// Job is the interpolation job.
func (t *InterpTask) Job() engine.Job { return t.job }

// Result is the run's InterpResult.
func (t *InterpTask) Result() any { return t.job.Result() }

// Summary is the run's InterpResult.
func (t *InterpTask) Summary() InterpResult { return t.job.Result() }

// Commit flushes and renames the output.
func (t *InterpTask) Commit() error {
	if t.out == nil {
		return nil
	}
	if err := t.writer.Flush(); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if err := t.out.Commit(); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	t.out = nil
	t.lock.Release()
	return nil
}

// Close closes the queries and removes an uncommitted output.
func (t *InterpTask) Close() error {
	for _, c := range t.closer {
		c.Close()
	}
	t.closer = nil
	if t.out != nil {
		t.out.Abort()
		t.out = nil
	}
	t.lock.Release()
	return nil
}
