package affinity

import (
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs/option"
	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/ops"
	"github.com/tapeloop/tapeloop/ops/pairwise"
)

// Setup describes a Job: the images, prepared, and what to compute of
// rows [Lo, Hi) of the (N, N) matrix (all of it, or one shard). The file
// layer (package filejob) and Compile make it from a Config.
type Setup struct {
	Data   *pairwise.PairData
	Metric pairwise.Metric
	Lo, Hi int // rows to compute; Hi == 0 means N
	TopK   int // > 0: keep the K largest affinities per row, self excluded
	// Symmetric holds the whole (N, N) matrix in memory and computes each
	// pair once (the upper triangle, mirrored); it needs all rows and no
	// top-k. Otherwise rows are computed whole and streamed.
	Symmetric bool
	// Rows, when set and TopK is 0, receives the (Hi−Lo, N) rows in order
	// (with Symmetric, each range of rows once the blocks have finished
	// it).
	Rows RowWriter
	// Matrix, with Symmetric, is where the (N, N) matrix is computed when
	// the caller holds its memory (the output file mapped into memory):
	// N·N elements of the affinities' type ([]float32 or []float64, the
	// images' dtype; []int32 or []int64 with Int); nil: it is allocated.
	// Finished, when set, is called with each range of rows [lo, hi) once
	// final, after Rows has received it (with Matrix, typically in place
	// of Rows: the rows are already where they belong).
	Matrix   any
	Finished func(lo, hi int)
	// Device runs the op on a GPU (nil: the CPU); TF32 lets its dot
	// products use TF32 tensor cores.
	Device ops.Device
	TF32   bool
	// Formula, when set, is the user's affinity, replacing Metric;
	// FailOnNonFinite makes a NaN or infinite value of it an error.
	Formula         *pairwise.PairFormula
	FailOnNonFinite bool
	// Int, for 8-bit images (Data.U8) with dot, l1 or l2, is the integer
	// type of the affinities: tensor.Int32 (every value must fit: see
	// Plan.CheckInt) or tensor.Int64; zero: Data.Dtype. A symmetric run
	// holds the matrix in it; otherwise blocks are computed in Data.Dtype,
	// float64, which holds each value exactly, and Rows receives them as
	// float64 to write as integers.
	Int tensor.Dtype
}

// RowWriter receives rows of affinities, row-major, in order, in the
// images' dtype or the integer type Int (an .npy writer, in package
// graphs).
type RowWriter interface {
	Write32([]float32) error
	Write64([]float64) error
	WriteInt32([]int32) error
	WriteInt64([]int64) error
}

// Job is the pairwise-affinity workload as an engine.Job: each batch is a
// block of rows compared against all N images.
type Job struct {
	cfg Setup
	// Checksum is Σ of every affinity computed (TopK: of those kept), in
	// float64: streamed, the sum of each block's BatchStats Σ; symmetric,
	// of the whole matrix, each row's sum added in row order (8-bit images
	// with dot, l1 or l2: the kernel's exact sum); top-k, of the kept
	// values in row order.
	Checksum float64
	// With TopK, the selected column indices and their affinities,
	// (Hi−Lo, K) row-major, filled as batches are consumed.
	Indices []int64
	Values  []float64

	// full is the (N, N) matrix in symmetric mode ([]float32 or
	// []float64, the images' dtype; for 8-bit images []int32 or []int64
	// with Int), or nil; byU8, it is written by the 8-bit op itself
	// (WriteFull), else by the matrix product or Mirror.
	full any
	byU8 bool
	u8   *pairwise.PairwiseU8 // the op that writes full, byU8
	bad0 int64                // the formula's non-finite values before this run
	// sink sums and writes a symmetric run's finished rows while the next
	// blocks are computed (nil until its first block).
	sink *rowSink
	// finishing is when Finish was called: the last block's end.
	finishing time.Time
}

// rowSink adds up the rows of a symmetric run's matrix, in row order, and
// writes them to Rows, on a goroutine of its own, as the blocks that
// finish them are consumed: rows [off, off+n) are final once blocks 0 to
// the one holding them are done (a block writes its own rows and, by
// symmetry, parts of later rows only). The write and the sum then overlap
// the next block's computation.
type rowSink struct {
	rows chan [2]int
	done chan struct{}
	mu   sync.Mutex
	err  error
	sum  float64
}

func (a *Job) startSink() *rowSink {
	s := &rowSink{rows: make(chan [2]int, 1024), done: make(chan struct{})}
	n, w, full, sums, finished := a.cfg.Data.N, a.cfg.Rows, a.full, a.sumsRows(), a.cfg.Finished
	go func() {
		defer close(s.done)
		var sum float64
		for r := range s.rows {
			// The rows written first, then summed: the sum overlaps their
			// way to the disk.
			var err error
			if w != nil {
				err = writeRows(w, full, r[0]*n, r[1]*n)
			}
			if sums {
				sum = addRows(sum, full, r[0], r[1], n)
			}
			if finished != nil && err == nil {
				finished(r[0], r[1])
			}
			s.mu.Lock()
			s.sum = sum
			if err != nil && s.err == nil {
				s.err = err
				w = nil // write nothing more; the run stops at the next block
			}
			s.mu.Unlock()
		}
	}()
	return s
}

// sumsRows reports whether a symmetric run's checksum is the sum of its
// rows as written (rowSink's); else the 8-bit kernel's exact sum is.
func (a *Job) sumsRows() bool {
	if !a.byU8 {
		return true
	}
	_, f32 := a.full.([]float32)
	return f32 || a.cfg.Metric == pairwise.MetricCosine
}

// writeRows writes full[lo:hi] to w.
func writeRows(w RowWriter, full any, lo, hi int) error {
	switch f := full.(type) {
	case []float32:
		return w.Write32(f[lo:hi])
	case []float64:
		return w.Write64(f[lo:hi])
	case []int32:
		return w.WriteInt32(f[lo:hi])
	case []int64:
		return w.WriteInt64(f[lo:hi])
	}
	return fmt.Errorf("affinity: matrix of %T", full)
}

// addRows adds rows [lo, hi) of the (·, n) matrix full to s: each row's
// sum (cpukern.SumMax's eight partial sums) in row order, so the total
// depends on the matrix alone, not on how its rows were grouped into
// blocks. Integer matrices add nothing (their sum is the kernel's).
func addRows(s float64, full any, lo, hi, n int) float64 {
	for r := lo; r < hi; r++ {
		switch f := full.(type) {
		case []float32:
			v, _ := cpukern.SumMax(f[r*n : (r+1)*n])
			s += v
		case []float64:
			v, _ := cpukern.SumMax(f[r*n : (r+1)*n])
			s += v
		}
	}
	return s
}

// failed is the sink's first write error, or nil.
func (s *rowSink) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// close waits for the rows sent so far, and returns their sum and the
// first write error.
func (s *rowSink) close() (float64, error) {
	close(s.rows)
	<-s.done
	return s.sum, s.err
}

// Close stops the row writer of a run that did not finish.
func (a *Job) Close() {
	if a.sink != nil {
		a.sink.close()
		a.sink = nil
	}
}

// New checks cfg and returns the Job.
func New(cfg Setup) (*Job, error) {
	if cfg.Data == nil {
		return nil, errors.New("affinity: config needs the images")
	}
	n := cfg.Data.N
	if cfg.Hi == 0 {
		cfg.Hi = n
	}
	if cfg.Lo < 0 || cfg.Hi > n || cfg.Lo >= cfg.Hi {
		return nil, fmt.Errorf("affinity: rows [%d, %d) outside [0, %d) or empty", cfg.Lo, cfg.Hi, n)
	}
	if cfg.TopK < 0 || (cfg.TopK > 0 && cfg.TopK >= n) {
		return nil, fmt.Errorf("affinity: top-k %d must be between 1 and N−1 = %d (self is excluded)", cfg.TopK, n-1)
	}
	if cfg.Symmetric && (cfg.TopK > 0 || cfg.Lo != 0 || cfg.Hi != n) {
		return nil, errors.New("affinity: symmetric mode computes all rows and no top-k")
	}
	isInt := cfg.Int != (tensor.Dtype{})
	if isInt && (cfg.Data.U8 == nil || cfg.Formula != nil || cfg.Metric == pairwise.MetricCosine || cfg.Data.Dtype != tensor.Float64) {
		return nil, fmt.Errorf("affinity: %v affinities need 8-bit images computed in float64 with dot, l1 or l2", cfg.Int)
	}
	a := &Job{cfg: cfg}
	if cfg.Matrix != nil && !cfg.Symmetric {
		return nil, errors.New("affinity: a matrix to fill needs symmetric mode")
	}
	// 8-bit images: the op writes the matrix itself (WriteFull).
	a.byU8 = cfg.Symmetric && cfg.Data.U8 != nil && cfg.Formula == nil
	var err error
	switch {
	case !cfg.Symmetric:
	case cfg.Int == tensor.Int32:
		a.full, err = fullMatrix[int32](cfg.Matrix, n)
	case cfg.Int == tensor.Int64:
		a.full, err = fullMatrix[int64](cfg.Matrix, n)
	case cfg.Data.Dtype == tensor.Float32:
		a.full, err = fullMatrix[float32](cfg.Matrix, n)
	default:
		a.full, err = fullMatrix[float64](cfg.Matrix, n)
	}
	if err != nil {
		return nil, err
	}
	if cfg.TopK > 0 {
		rows := cfg.Hi - cfg.Lo
		a.Indices = make([]int64, rows*cfg.TopK)
		a.Values = make([]float64, rows*cfg.TopK)
	}
	return a, nil
}

// fullMatrix is the (n, n) matrix of a symmetric run: given, checked
// for its type and length, or made (makeFull).
func fullMatrix[T float32 | float64 | int32 | int64](given any, n int) ([]T, error) {
	if given == nil {
		return makeFull[T](n), nil
	}
	if m, ok := given.([]T); ok && len(m) == n*n {
		return m, nil
	}
	var zero T
	return nil, fmt.Errorf("affinity: the matrix to fill is %T, not %d elements of %T", given, n*n, zero)
}

// makeFull is an (n, n) matrix, advised into huge pages: it is written
// once, in blocks, and the faults of 4 KiB pages would cost more than the
// writes.
func makeFull[T float32 | float64 | int32 | int64](n int) []T {
	x := make([]T, n*n)
	if len(x) > 0 {
		sysmem.AdviseHugePages(unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), len(x)*int(unsafe.Sizeof(x[0]))))
	}
	return x
}

// Name is "affinity".
func (a *Job) Name() string { return "affinity" }

// ItemUnit names the items for the progress bar.
func (a *Job) ItemUnit() string { return "rows" }

// Dtype is the affinities' dtype: the images' (as computed), or Int.
func (a *Job) Dtype() tensor.Dtype {
	if a.cfg.Int != (tensor.Dtype{}) {
		return a.cfg.Int
	}
	return a.cfg.Data.Dtype
}

// Items is the number of rows to compute.
func (a *Job) Items() int { return a.cfg.Hi - a.cfg.Lo }

// MaxBatch caps blocks at 1024 rows: large enough for an efficient gemm,
// small enough that the first batch is not most of the run.
func (a *Job) MaxBatch() int { return 1024 }

// Build is the pipeline for a block of batch rows: index (batch,) →
// Pairwise → (batch, N), the op reading the block's rows from the images
// it holds (no copy per block; on a GPU, nothing sent per block), then by
// mode:
//
//   - streamed rows: → BatchStats → [Σ, max] of the block's valid rows,
//     the outputs the block and its statistics;
//   - top-k: (block, index) → TopK → (batch, K) columns, the outputs the
//     block and the columns; on a GPU that selects them itself, one fused
//     op instead, PairwiseTopK: index → (2, batch, K) columns and values;
//   - symmetric: Pairwise computes the upper block, (block, index) →
//     Mirror → the (N, N) matrix; on a GPU that writes the blocks into the
//     matrix itself, one fused op instead, PairwiseMatrix: index → (N, N).
func (a *Job) Build(g *G.ExprGraph, batch int) (in, out []*G.Node, err error) {
	d := a.cfg.Data
	index := G.NewVector(g, tensor.Float64, G.WithShape(batch), G.WithName("index"))
	in = []*G.Node{index}
	metric := a.cfg.Metric
	if f := a.cfg.Formula; f != nil && f.Plan.Product != nil {
		metric = pairwise.MetricDot
	}
	var pw G.Op // the block's affinities: a formula per pair, 8-bit images, or a metric
	switch f := a.cfg.Formula; {
	case f != nil && f.Plan.Product == nil:
		op := pairwise.NewPairwiseFormula(f, d, batch)
		op.Upper, op.RowsFromData = a.cfg.Symmetric, true
		pw = op
	case a.byU8:
		// Each block written straight into the matrix, both halves.
		op := pairwise.NewPairwiseU8(d, metric, batch)
		op.Upper, op.RowsFromData = true, true
		op.WriteFull(a.full)
		a.u8 = op
		m, err := G.ApplyOpWithName(op, "matrix", index)
		if err != nil {
			return nil, nil, fmt.Errorf("affinity: build graph: %w", err)
		}
		return in, []*G.Node{m}, nil
	case d.U8 != nil:
		op := pairwise.NewPairwiseU8(d, metric, batch)
		op.Upper, op.RowsFromData = a.cfg.Symmetric, true
		pw = op
	default:
		op := pairwise.NewPairwise(d, metric, batch)
		op.Upper, op.TF32, op.RowsFromData = a.cfg.Symmetric, a.cfg.TF32, true
		pw = op
	}
	apply := func(op G.Op, name string, args ...*G.Node) (*G.Node, error) {
		n, err := G.ApplyOpWithName(op, name, args...)
		if err != nil {
			return nil, fmt.Errorf("affinity: build graph: %w", err)
		}
		return n, nil
	}
	if f := a.cfg.Formula; f != nil {
		// The user's formula: per pair, or after the dot products (on a
		// GPU, the dot products there and the formula over them on the
		// host).
		if f.Plan.Product == nil {
			op, err := ops.OnDevice(pw, a.cfg.Device)
			if err != nil {
				return nil, nil, fmt.Errorf("affinity: %w", err)
			}
			blk, err := apply(op, "formula", index)
			if err != nil {
				return nil, nil, err
			}
			return a.finishGraph(blk, index, batch, in)
		}
		op, err := ops.OnDevice(pw, a.cfg.Device)
		if err != nil {
			return nil, nil, fmt.Errorf("affinity: %w", err)
		}
		dot, err := apply(op, "a·b", index)
		if err != nil {
			return nil, nil, err
		}
		pm := pairwise.NewPairMap(f, d, batch)
		pm.Upper = a.cfg.Symmetric
		blk, err := apply(pm, "formula", dot, index)
		if err != nil {
			return nil, nil, err
		}
		return a.finishGraph(blk, index, batch, in)
	}
	op, err := ops.OnDevice(pw, a.cfg.Device)
	if err != nil {
		return nil, nil, fmt.Errorf("affinity: %w", err)
	}
	switch {
	case a.cfg.Symmetric && a.cfg.Data.Dtype == tensor.Float32:
		if f, ok := pairwise.FuseMatrix(op, a.full.([]float32)); ok {
			m, err := apply(f, "matrix", index)
			return in, []*G.Node{m}, err
		}
	case a.cfg.TopK > 0:
		if f, ok := pairwise.FuseTopK(op, a.cfg.TopK); ok {
			top, err := apply(f, "topk", index)
			return in, []*G.Node{top}, err
		}
	}
	name := a.cfg.Metric.String()
	blk, err := apply(op, name, index)
	if err != nil {
		return nil, nil, err
	}
	return a.finishGraph(blk, index, batch, in)
}

// finishGraph adds the nodes after the block of affinities blk: Mirror
// (symmetric), TopK, or BatchStats (streamed rows).
func (a *Job) finishGraph(blk, index *G.Node, batch int, in []*G.Node) (_, out []*G.Node, err error) {
	n := a.cfg.Data.N
	var next *G.Node
	switch {
	case a.cfg.Symmetric:
		if next, err = G.ApplyOpWithName(pairwise.NewMirror(a.full, n, batch), "matrix", blk, index); err != nil {
			return nil, nil, fmt.Errorf("affinity: build graph: %w", err)
		}
		return in, []*G.Node{next}, nil
	case a.cfg.TopK > 0:
		next, err = G.ApplyOpWithName(pairwise.NewTopK(a.cfg.TopK, n, batch), "topk", blk, index)
	default:
		next, err = G.ApplyOpWithName(ops.NewBatchStats(batch, 2), "stats", blk)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("affinity: build graph: %w", err)
	}
	return in, []*G.Node{blk, next}, nil
}

// StagingBytes counts the output writer's buffers and the top-k results.
func (a *Job) StagingBytes(batch int) int64 {
	b := int64(len(a.Indices))*8 + int64(len(a.Values))*8
	if a.cfg.Rows != nil {
		b += npy.WriterBytes
	}
	return b
}

// Feed sets the block's index to images [Lo+off, Lo+off+n); the op reads
// the images themselves.
func (a *Job) Feed(in []*tensor.Dense, off, n int) error {
	idx := in[0].Data().([]float64)
	for r := range n {
		idx[r] = float64(a.cfg.Lo + off + r)
	}
	return nil
}

// Consume takes the block's results: in symmetric mode nothing (the graph
// wrote them into the matrix); with top-k the columns and values of each
// row; else the block's Σ and its rows, written to Rows.
func (a *Job) Consume(out []*tensor.Dense, off, n int) error {
	if err := a.checkFinite(); err != nil {
		return err
	}
	if err := a.cfg.Data.Err(); err != nil { // images checked as packed: a NaN or ±Inf in this block or an earlier one
		return err
	}
	switch {
	case a.cfg.Symmetric:
		if a.sink == nil {
			a.sink = a.startSink()
		}
		if err := a.sink.failed(); err != nil {
			return err
		}
		a.sink.rows <- [2]int{off, off + n}
		return nil
	case a.cfg.TopK > 0 && len(out) == 1: // PairwiseTopK: (2, batch, K)
		t := out[0].Data().([]float64)
		bk := len(t) / 2
		a.keep(t[:bk], t[bk:], off, n)
		return nil
	}
	switch blk := out[0].Data().(type) {
	case []float32:
		return consumeBlock(a, blk, out, off, n)
	case []float64:
		return consumeBlock(a, blk, out, off, n)
	}
	return fmt.Errorf("affinity: block dtype %v", out[0].Dtype())
}

// checkFinite is the error of a formula that gave NaN or ±Inf in this
// run, with FailOnNonFinite.
func (a *Job) checkFinite() error {
	if f := a.cfg.Formula; f != nil && a.cfg.FailOnNonFinite && f.NonFinite() > a.bad0 {
		return option.ErrNonFinite("--formula", f.NonFinite()-a.bad0)
	}
	return nil
}

// keep stores the top-k columns and values of rows [off, off+n) and adds
// the values to Checksum, in order.
func (a *Job) keep(cols, vals []float64, off, n int) {
	k := a.cfg.TopK
	for i := range n * k {
		a.Indices[off*k+i] = int64(cols[i])
		a.Values[off*k+i] = vals[i]
		a.Checksum += vals[i]
	}
}

func consumeBlock[T float32 | float64](a *Job, blk []T, out []*tensor.Dense, off, n int) error {
	nn := a.cfg.Data.N
	if k := a.cfg.TopK; k > 0 {
		top := out[1].Data().([]float64)
		for r := range n {
			for c := range k {
				j := int(top[r*k+c])
				v := float64(blk[r*nn+j])
				a.Indices[(off+r)*k+c] = int64(j)
				a.Values[(off+r)*k+c] = v
				a.Checksum += v
			}
		}
		return nil
	}
	a.Checksum += out[1].Data().([]float64)[0] // BatchStats: Σ of the valid rows
	if a.cfg.Rows == nil {
		return nil
	}
	switch v := any(blk[:n*nn]).(type) {
	case []float32:
		return a.cfg.Rows.Write32(v)
	case []float64:
		return a.cfg.Rows.Write64(v)
	}
	return nil
}

// Finish completes a symmetric run: it adds up the matrix and writes it to
// Rows. It does nothing in the other modes.
func (a *Job) Finish() error {
	a.finishing = time.Now()
	if err := a.cfg.Data.Err(); err != nil {
		return err
	}
	if a.sink == nil && a.full != nil {
		a.sink = a.startSink() // no block consumed: nothing to write
	}
	if a.sink == nil {
		return nil
	}
	s := a.sink
	a.sink = nil
	sum, err := s.close()
	a.Checksum = sum
	if !a.sumsRows() {
		// 8-bit images, dot, l1 or l2: the kernel's exact sum of the
		// values it wrote, correctly rounded.
		a.Checksum = a.u8.TakeSum().Float64()
	}
	return err
}

// PackChecked reports whether the images are checked for NaN and ±Inf
// as the matrix product packs them (pairwise.NewPairDataPacked), not by
// a pass of their own.
func (a *Job) PackChecked() bool { return a.cfg.Data.PackChecked() }

// Finishing is when Finish was called (after the last block), or the
// zero time before.
func (a *Job) Finishing() time.Time { return a.finishing }

// Result is the result block of an affinity report.
type Result struct {
	Metric    string  `json:"metric"`
	N         int     `json:"n"`
	D         int     `json:"d"`
	Rows      [2]int  `json:"rows"`
	TopK      int     `json:"topk,omitempty"`
	Symmetric bool    `json:"symmetric"`
	Dtype     string  `json:"dtype"`
	Checksum  float64 `json:"checksum"`
	// Formula is the user's formula with its parameters (Metric is then
	// "formula"), and NonFinite the number of NaN or infinite values it
	// gave.
	Formula   string `json:"formula,omitempty"`
	NonFinite int64  `json:"nonfinite,omitempty"`
	// Phases is where the wall time of a run from files went (package
	// graphs times it); nil for a job run on arrays in memory.
	Phases *Phases `json:"phases,omitempty"`
}

// Phases is where the wall time of an affinity run went, in seconds, as
// consecutive phases that together make up Wall:
//
//   - Startup: from the process's start (the Go runtime, the packages'
//     initialisation, the command line) to the images being opened; 0
//     when the run is not a process of its own or its start is unknown;
//   - Read: opening the images (their header checked, the data mapped or
//     read) and creating the output;
//   - Check: the scan of the images for NaN and ±Inf (and the norms that
//     cosine and l2 keep); 0 with CheckFused, where the matrix product
//     checks each image as it packs it;
//   - Compute: planning, compiling the graph and computing every block, to
//     the end of the last (rows written meanwhile, as blocks finish them,
//     are part of it);
//   - Write: the rows not yet written when the last block ended, then the
//     output flushed, synced and renamed into place.
type Phases struct {
	Startup    float64 `json:"startup_seconds"`
	Read       float64 `json:"read_seconds"`
	Check      float64 `json:"check_seconds"`
	CheckFused bool    `json:"check_fused"`
	Compute    float64 `json:"compute_seconds"`
	Write      float64 `json:"write_seconds"`
	Wall       float64 `json:"wall_seconds"`
}

// String is the phases as one line: "start-up 0.021 s, read 0.001 s, …".
func (p Phases) String() string {
	check := fmt.Sprintf("%.3f s", p.Check)
	if p.CheckFused {
		check = "fused into the product"
	}
	return fmt.Sprintf("start-up %.3f s, read %.3f s, check %s, compute %.3f s, write %.3f s; wall %.3f s",
		p.Startup, p.Read, check, p.Compute, p.Write, p.Wall)
}

// Result summarises the run.
func (a *Job) Result() Result {
	r := Result{Metric: a.cfg.Metric.String(), N: a.cfg.Data.N, D: a.cfg.Data.D,
		Rows: [2]int{a.cfg.Lo, a.cfg.Hi}, TopK: a.cfg.TopK, Symmetric: a.cfg.Symmetric, Dtype: a.Dtype().String(), Checksum: a.Checksum}
	if f := a.cfg.Formula; f != nil {
		r.Metric, r.Formula, r.NonFinite = "formula", f.String(), f.NonFinite()
	}
	return r
}

// SetDevice places the op of the next Compile on dev (nil: the CPU).
func (a *Job) SetDevice(dev ops.Device) { a.cfg.Device = dev }
