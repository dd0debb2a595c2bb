package filejob

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs/interp"
	"github.com/tapeloop/tapeloop/internal/atomicfile"
	"github.com/tapeloop/tapeloop/internal/checkpoint"
	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/parallel"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/internal/warnings"
	"github.com/tapeloop/tapeloop/ops"
)

// UniformQueries are N points uniform on [Lo, Hi) from a PCG generator with
// a fixed seed, generated as they are read: they take no memory. They are
// the built-in case's queries (InterpSpec without X). Query i is
// Lo + (Hi−Lo)·u_i with u_i the (i+1)-th Float64 of
// rand.New(rand.NewPCG(Seed, 0x7a9e100b)), whatever the batches and the
// number of threads: a read is split over the cores, each part generated
// from the stream's state at its first query, reached by jumping ahead.
type UniformQueries struct {
	N      int
	Lo, Hi float64
	Seed   uint64
	pos    int // the queries read so far
	state  pcg // the generator's state after pos queries
	batch  pcg // the state before the points the last Skip passed
}

// Len is N.
func (u *UniformQueries) Len() int { return u.N }

// Read32 generates the next len(dst) points.
func (u *UniformQueries) Read32(dst []float32, _ int) error {
	readUniform(u, dst)
	return nil
}

// Read64 generates the next len(dst) points.
func (u *UniformQueries) Read64(dst []float64, _ int) error {
	readUniform(u, dst)
	return nil
}

// Skip moves past the next n points without making them; Fill makes
// them where the op evaluates them (interp.Generated).
func (u *UniformQueries) Skip(n int) {
	if u.pos == 0 {
		u.state = pcg{u.Seed, 0x7a9e100b}
	}
	u.batch = u.state
	u.state = pcgStep.pow(uint64(n)).apply(u.state)
	u.pos += n
}

// Fill writes points [lo, hi) of those the last Skip passed into x[lo:hi],
// from the stream's state at point lo: the numbers a read would give.
func (u *UniformQueries) Fill(x any, lo, hi int) {
	st, span := pcgStep.pow(uint64(lo)).apply(u.batch), u.Hi-u.Lo
	switch d := x.(type) {
	case []float32:
		uniformFrom(d[lo:hi], st, u.Lo, span)
	case []float64:
		uniformFrom(d[lo:hi], st, u.Lo, span)
	}
}

// uniformFrom fills dst with the uniform numbers in [lo, lo+span) of the
// stream from state st: with AVX-512 on the C kernel, else in Go.
func uniformFrom[T float32 | float64](dst []T, st pcg, lo, span float64) {
	if !cpukern.PCGUniform(dst, st.hi, st.lo, lo, span) {
		uniformFill(dst, st, lo, span)
	}
}

// uniformChunk is the queries a goroutine generates at a time: a read is
// handed out in chunks to the cores as each is free, so that a core busy
// with something else, or a goroutine started late, does not hold up the
// batch.
const uniformChunk = 1 << 13

// readUniform generates the next len(dst) queries, each chunk from the
// stream's state at its first query: with AVX-512 on the C kernel, else
// in Go (uniformFill).
func readUniform[T float32 | float64](u *UniformQueries, dst []T) {
	if u.pos == 0 {
		u.state = pcg{u.Seed, 0x7a9e100b}
	}
	s, lo, span := u.state, u.Lo, u.Hi-u.Lo
	parallel.Dynamic(len(dst), uniformChunk, func(a, b int) {
		uniformFrom(dst[a:b], pcgStep.pow(uint64(a)).apply(s), lo, span)
	})
	u.state = pcgStep.pow(uint64(len(dst))).apply(s)
	u.pos += len(dst)
}

// NpyQueries streams the queries of a (N,) .npy file of any numeric dtype.
type NpyQueries struct {
	R    *npy.Reader
	Path string
}

// NewNpyQueries checks that r holds a non-empty vector.
func NewNpyQueries(r *npy.Reader, path string) (*NpyQueries, error) {
	if len(r.Shape) != 1 {
		return nil, fmt.Errorf("%w: %s has shape %s, want a vector (N,)", interp.ErrQuery, path, npy.ShapeString(r.Shape))
	}
	if r.Shape[0] == 0 {
		return nil, fmt.Errorf("%w: %s holds no queries", interp.ErrQuery, path)
	}
	return &NpyQueries{R: r, Path: path}, nil
}

// Len is N.
func (q *NpyQueries) Len() int { return q.R.Shape[0] }

// Read32 reads and checks the next len(dst) queries.
func (q *NpyQueries) Read32(dst []float32, off int) error { return readChecked(q, dst, off) }

// Read64 reads and checks the next len(dst) queries.
func (q *NpyQueries) Read64(dst []float64, off int) error { return readChecked(q, dst, off) }

// StagingBytes counts the reader's buffers.
func (q *NpyQueries) StagingBytes(batch int) int64 { return int64(batch)*8 + 1<<16 }

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
			return fmt.Errorf("%w: %s: x[%d] is %g", interp.ErrQuery, q.Path, off+i, f)
		}
	}
	return nil
}

// sum is Σ x in float64.
func sum[T float32 | float64](x []T) float64 {
	var s float64
	for _, v := range x {
		s += float64(v)
	}
	return s
}

// InterpSpec is an interpolation run as the command line states it: its
// Config, and the files and sizes of its data. The zero value of each
// field is its documented default.
type InterpSpec struct {
	interp.Config
	F string // (M, G) .npy of interpolant values; "": the built-in table
	X string // (N,) .npy of query points; "": Points uniform queries
	// Out is the .npy for the per-query results; "": none written.
	Out string
	// Without F: M interpolants of f = x² on G points over [0, 1].
	Interpolants, Grid int
	// Without X: N uniform queries over the grid from a fixed seed.
	Points int
	Seed   uint64
	// Warn receives warnings about the inputs (queries stored in float32
	// too coarsely for a grid far from zero, CoarseQueries), a line each;
	// nil: none.
	Warn io.Writer
}

// DefaultInterpSpec is the built-in case: 300 interpolants of f = x² on a
// 4096-point grid, evaluated at 10⁶ uniform points, reduced by Σ value².
func DefaultInterpSpec() InterpSpec {
	return InterpSpec{Config: interp.Config{Reduce: "sumsq", Method: "auto"}, Interpolants: 300, Grid: 4096, Points: 1_000_000, Seed: 1}
}

// Validate checks what can be checked before any file is read.
func (s InterpSpec) Validate() error {
	if _, _, _, err := s.Parse(); err != nil {
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
	if err := s.Config.Validate(); err != nil {
		return err
	}
	if s.DX != nil && s.F == "" && s.Grid >= 4 {
		if _, err := s.Spacing(s.Grid); err != nil {
			return err
		}
	}
	return nil
}

const (
	// maxTable is the most values the built-in table may have.
	maxTable = 1 << 31
	// maxPoints is the most built-in queries a run may make: days of work
	// already, and a bound that keeps every count derived from it in range.
	maxPoints = 1 << 36
)

// InterpTask is an opened interpolation run.
type InterpTask struct {
	job    *interp.Job
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
	reduce, method, fx, _ := s.Parse()
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
	dx, err := s.Spacing(g)
	if err != nil {
		return nil, err
	}
	dt := dev.Dtype()
	if dt == tensor.Float32 {
		if err := interp.CheckGrid32(s.A, dx, g); err != nil {
			return nil, err
		}
	}
	tab, err := ops.NewInterpTable(f, m, g, s.A, dx, reduce, method, dt)
	if err != nil {
		return nil, err
	}
	var q interp.Queries
	if s.X != "" {
		file, err := npy.Open(s.X)
		if err != nil {
			return nil, fmt.Errorf("--x: %w", err)
		}
		t.closer = append(t.closer, file)
		if q, err = NewNpyQueries(file.Reader, s.X); err != nil {
			return nil, fmt.Errorf("--x: %w", err)
		}
		if d := file.Reader.Dtype; d.Kind == 'f' && d.Size < 8 && s.Warn != nil {
			if msg := interp.CoarseQueries(s.A, dx, g, d.Name()); msg != "" {
				warnings.Printf(s.Warn, "--x %s: %s", s.X, msg)
			}
		}
	} else {
		q = &UniformQueries{N: s.Points, Lo: s.A, Hi: s.A + float64(g-1)*dx, Seed: s.Seed}
	}
	cfg := interp.Setup{Table: tab, Reduce: reduce, Method: method, Dtype: dt, Queries: q, FailOnNonFinite: s.FailOnNonFinite,
		SetUp: sysmem.Mul(int64(m), int64(g), 8)}
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
		cfg.Out = npyResults{t.writer, s.Out}
	}
	if t.job, err = interp.New(cfg); err != nil {
		return nil, err
	}
	return t, nil
}

// npyResults writes the results into the .npy file path (through its
// temporary file); a failed write names path and --out.
type npyResults struct {
	*npy.Writer
	path string
}

func (r npyResults) Write32(v []float32) error { return r.named(r.Writer.Write32(v)) }
func (r npyResults) Write64(v []float64) error { return r.named(r.Writer.Write64(v)) }

func (r npyResults) named(err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) { // the temporary file's name: the user gave path
		err = pe.Err
	}
	return fmt.Errorf("--out: write %s: %w", r.path, err)
}

// StagingBytes counts the writer's buffers.
func (npyResults) StagingBytes(int) int64 { return npy.WriterBytes }

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

// Result is the run's interp.Result.
func (t *InterpTask) Result() any { return t.job.Result() }

// Summary is the run's interp.Result.
func (t *InterpTask) Summary() interp.Result { return t.job.Result() }

// Commit flushes and renames the output.
func (t *InterpTask) Commit() error {
	if t.out == nil {
		return nil
	}
	if err := t.writer.Flush(); err != nil {
		return npyResults{path: t.out.Path}.named(err)
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
