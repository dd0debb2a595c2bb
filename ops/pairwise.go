package ops

import (
	"errors"
	"fmt"
	"hash"
	"math"
	"runtime"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/parallel"
	"github.com/tapeloop/tapeloop/internal/sysmem"
)

// Metric is a pairwise affinity between two flattened images x_i, x_j.
type Metric int

// The affinities of the pairwise-affinity workload.
const (
	MetricDot    Metric = iota // Σ x_i·x_j
	MetricCosine               // dot / (‖x_i‖·‖x_j‖)
	MetricL1                   // −Σ |x_i − x_j|
	MetricL2                   // −Σ (x_i − x_j)²
)

var metricNames = []string{"dot", "cosine", "l1", "l2"}

func (m Metric) String() string {
	if m >= 0 && int(m) < len(metricNames) {
		return metricNames[m]
	}
	return fmt.Sprintf("Metric(%d)", int(m))
}

// ParseMetric parses "dot", "cosine", "l1" or "l2".
func ParseMetric(s string) (Metric, error) {
	for i, n := range metricNames {
		if s == n {
			return Metric(i), nil
		}
	}
	return 0, fmt.Errorf("unknown metric %q (want dot, cosine, l1 or l2)", s)
}

// ErrPairInput is wrapped by errors about the images.
var ErrPairInput = errors.New("affinity")

// PairData is the (N, D) matrix of flattened images every row block is
// compared against, held once, in the computation's dtype.
type PairData struct {
	// version counts the Reloads, so that a copy on a device knows to
	// refresh itself.
	version uint64
	N, D    int
	Dtype   tensor.Dtype
	X32     []float32 // row-major (N, D) when Dtype is Float32
	X64     []float64 // when Float64
	// Mapped says the images are a read-only file mapping (page cache),
	// not process memory: Bytes leaves them out.
	Mapped bool
	// U8 holds 8-bit images computed on exactly, in integers (the built-in
	// metrics on the CPU; X32 and X64 are then nil and Dtype is the
	// output's).
	U8   *cpukern.U8Rows
	norm []float64 // ‖x_j‖, for cosine
	sq   []float64 // ‖x_j‖², for l2
	id   uint64
}

// NewPairDataU8 wraps 8-bit images x (length n·d) for the built-in
// metrics, computed exactly in integers, the results in dtype. For
// cosine it rejects an all-zero image.
func NewPairDataU8(x []uint8, n, d int, metric Metric, dtype tensor.Dtype) (*PairData, error) {
	if n < 1 || d < 1 || len(x) != n*d {
		return nil, fmt.Errorf("%w: need N ≥ 1 images of D ≥ 1 values, got N = %d, D = %d, %d values", ErrPairInput, n, d, len(x))
	}
	p := &PairData{N: n, D: d, Dtype: dtype, U8: cpukern.NewU8Rows(x, n, d), id: tableIDs.Add(1)}
	if metric == MetricCosine {
		for i, q := range p.U8.SumSq {
			if q == 0 {
				return nil, fmt.Errorf("%w: image %d is all zeros: its cosine affinity is undefined", ErrPairInput, i)
			}
		}
	}
	return p, nil
}

// NewPairData wraps x (float32 or float64, length n·d) for metric. It
// rejects NaN and Inf, and for cosine an all-zero image, naming the image.
func NewPairData[T float32 | float64](x []T, n, d int, metric Metric) (*PairData, error) {
	if n < 1 || d < 1 || len(x) != n*d {
		return nil, fmt.Errorf("%w: need N ≥ 1 images of D ≥ 1 values, got N = %d, D = %d, %d values", ErrPairInput, n, d, len(x))
	}
	p := &PairData{N: n, D: d, id: tableIDs.Add(1)}
	switch v := any(x).(type) {
	case []float32:
		p.X32, p.Dtype = v, tensor.Float32
	case []float64:
		p.X64, p.Dtype = v, tensor.Float64
	}
	switch metric {
	case MetricL2:
		p.sq = make([]float64, n)
	case MetricCosine:
		p.norm = make([]float64, n)
	}
	if err := scan(p, x, 0); err != nil {
		return nil, err
	}
	return p, nil
}

// Bytes is the process memory the images take (none for mapped images).
func (p *PairData) Bytes() int64 {
	b := int64(8*len(p.norm) + 8*len(p.sq))
	if !p.Mapped {
		b += int64(4*len(p.X32) + 8*len(p.X64))
	}
	if p.U8 != nil {
		b += int64(len(p.U8.X)) + 16*int64(p.N)
	}
	return b
}

// Pairwise is the Gorgonia op that computes the affinities of a block of
// Batch images, given as rows (Batch, D) with their row indices (Batch,)
// float64, against all N images: output (Batch, N). With Upper set it
// computes only the columns from the block's first row index on (the upper
// triangle and the diagonal block), leaving the others as they were: the
// caller mirrors them from earlier blocks, computing each pair once. Every
// metric runs on the blocked kernels of package cpukern (dot products for
// dot and cosine, distances for l1 and l2; no BLAS is linked). The working
// set is the block, its (Batch, N) output and the shared (N, D) images;
// no (Batch, N, D) difference array exists.
type Pairwise struct {
	owned
	stoppable

	Data   *PairData
	Metric Metric
	Batch  int
	Upper  bool
	// TF32 lets the GPU twin's dot products use TF32 tensor cores (about
	// 1e-3 relative); the CPU ignores it.
	TF32 bool
	// RowsFromData: the block is images index[0], index[0]+1, … of Data,
	// which the op reads itself (no copy into a rows input; on a GPU,
	// nothing to upload): its only input is the index. It computes the
	// rows while the index runs on by one and stays below N; the output's
	// other rows (a short block's padding) keep what they held.
	RowsFromData bool
	// Formula, when set, computes a user's formula over both images of
	// every pair instead of Metric (a formula rewritten over dot products
	// runs as Metric dot followed by PairMap instead).
	Formula *PairFormula

	out *tensor.Dense
}

// NewPairwise returns the op for blocks of batch rows.
func NewPairwise(data *PairData, metric Metric, batch int) *Pairwise {
	if batch < 1 {
		panic("ops: Pairwise batch < 1")
	}
	if metric == MetricCosine && data.norm == nil && data.U8 == nil {
		panic("ops: Pairwise cosine over data prepared without norms")
	}
	return &Pairwise{Data: data, Metric: metric, Batch: batch}
}

// Arity is 2: the block of rows and their indices; 1, the indices, with
// RowsFromData.
func (op *Pairwise) Arity() int {
	if op.RowsFromData {
		return 1
	}
	return 2
}

// Type is (Matrix a, Vector c) → Matrix a, or Vector c → Matrix a with
// RowsFromData.
func (op *Pairwise) Type() hm.Type {
	a, c := hm.TypeVariable('a'), hm.TypeVariable('c')
	if op.RowsFromData { // the output's dtype is the images'
		return hm.NewFnType(G.TensorType{Dims: 1, Of: tensor.Float64}, G.TensorType{Dims: 2, Of: op.Data.Dtype})
	}
	return hm.NewFnType(G.TensorType{Dims: 2, Of: a}, G.TensorType{Dims: 1, Of: c}, G.TensorType{Dims: 2, Of: a})
}

// InferShape checks the block is (Batch, D) and the index (Batch).
func (op *Pairwise) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("pairwise: want %d inputs, got %d", op.Arity(), len(in))
	}
	if s, ok := in[0].(tensor.Shape); ok && !op.RowsFromData && (len(s) != 2 || s[0] != op.Batch || s[1] != op.Data.D) {
		return nil, fmt.Errorf("pairwise: input shape %v, want (%d, %d)", s, op.Batch, op.Data.D)
	}
	if s, ok := in[len(in)-1].(tensor.Shape); ok && s.TotalSize() != op.Batch {
		return nil, fmt.Errorf("pairwise: index shape %v, want (%d)", s, op.Batch)
	}
	return tensor.Shape{op.Batch, op.Data.N}, nil
}

// block checks the op's inputs and returns the block: its rows (nil with
// RowsFromData), its first row index lo, the number m of rows to compute,
// and the first column c0 to compute.
func (op *Pairwise) block(in []G.Value) (rows *tensor.Dense, lo, m, c0 int, err error) {
	d := op.Data
	if len(in) != op.Arity() {
		return nil, 0, 0, 0, fmt.Errorf("pairwise: want %d inputs, got %d", op.Arity(), len(in))
	}
	index, ok := in[len(in)-1].(*tensor.Dense)
	if !ok || index.Dtype() != tensor.Float64 || index.Shape().TotalSize() != op.Batch {
		return nil, 0, 0, 0, fmt.Errorf("pairwise: index %v, want float64 (%d)", in[len(in)-1].Shape(), op.Batch)
	}
	idx := index.Data().([]float64)
	if !op.RowsFromData {
		rows, ok = in[0].(*tensor.Dense)
		if !ok || rows.Dtype() != d.Dtype || rows.Shape().TotalSize() != op.Batch*d.D {
			return nil, 0, 0, 0, fmt.Errorf("pairwise: rows %v, want %v (%d, %d)", in[0].Shape(), d.Dtype, op.Batch, d.D)
		}
		m = op.Batch
		if !op.Upper {
			return rows, 0, m, 0, nil
		}
	}
	lo = int(idx[0])
	if float64(lo) != idx[0] || lo < 0 || lo >= d.N {
		return nil, 0, 0, 0, fmt.Errorf("pairwise: first row index %v outside [0, %d)", idx[0], d.N)
	}
	if op.RowsFromData { // the rows lo, lo+1, … while the index runs on
		for m = 1; m < op.Batch && lo+m < d.N && idx[m] == float64(lo+m); m++ {
		}
	}
	if op.Upper {
		c0 = lo
	}
	return rows, lo, m, c0, nil
}

// Do computes the block's affinities into the op's own buffer.
func (op *Pairwise) Do(in ...G.Value) (G.Value, error) {
	rows, lo, m, c0, err := op.block(in)
	if err != nil {
		return nil, err
	}
	d := op.Data
	if op.out == nil {
		op.out = newOwned(d.Dtype, op.Batch, d.N)
	}
	if d.U8 != nil {
		if rows != nil {
			return nil, errors.New("pairwise: 8-bit images are read from the data, not given as rows")
		}
		switch o := op.out.Data().(type) {
		case []float32:
			pairU8Block(op, lo, c0, m, o)
		case []float64:
			pairU8Block(op, lo, c0, m, o)
		}
		if op.stopped() {
			return nil, ErrStopped
		}
		return op.out, nil
	}
	if op.Formula != nil {
		idx := in[len(in)-1].Data().([]float64)
		switch d.Dtype {
		case tensor.Float32:
			formulaBlock(op, c0, m, idx, blockRows(rows, d.X32, lo, m, d.D), d.X32, op.out.Data().([]float32))
		case tensor.Float64:
			formulaBlock(op, c0, m, idx, blockRows(rows, d.X64, lo, m, d.D), d.X64, op.out.Data().([]float64))
		}
		if op.stopped() {
			return nil, ErrStopped
		}
		return op.out, nil
	}
	// With the rows read from the images, an upper block is the images
	// c0, c0+1, …: symmetric about its diagonal.
	upper := op.Upper && rows == nil
	switch d.Dtype {
	case tensor.Float32:
		pairBlock(op, c0, m, upper, blockRows(rows, d.X32, lo, m, d.D), d.X32, op.out.Data().([]float32), cpukern.PairDist32)
	case tensor.Float64:
		pairBlock(op, c0, m, upper, blockRows(rows, d.X64, lo, m, d.D), d.X64, op.out.Data().([]float64), cpukern.PairDist64)
	}
	if op.stopped() {
		return nil, ErrStopped
	}
	return op.out, nil
}

// invNorm is 1/‖row‖, summed in float64.
func invNorm[T float32 | float64](row []T) float64 {
	var ss float64
	for _, v := range row {
		ss += float64(v) * float64(v)
	}
	return 1 / math.Sqrt(ss)
}

// blockRows is the block's rows: the rows input, or with RowsFromData
// (rows nil) the m images from lo on.
func blockRows[T float32 | float64](rows *tensor.Dense, x []T, lo, m, d int) []T {
	if rows != nil {
		return rows.Data().([]T)
	}
	return x[lo*d : (lo+m)*d]
}

// rowChunk is the number of block rows one kernel call takes; dotChunk
// for dot products, whose packed matrix product reads all the columns'
// images once per call and so wants many rows per call.
const (
	rowChunk = 64
	dotChunk = 512
)

// minParallel is the work, in pair-dimensions, below which an upper block's
// matrix product runs on one core: about 0.1 ms there, less than what
// waking idle cores costs a caller that calls block after block from
// outside Go.
const minParallel = 1 << 22

// pairBlock fills columns [c0, N) of the block's first b rows. With
// upper, the rows are images c0, c0+1, … (the upper block of a symmetric
// matrix), and a pair below the diagonal, (c0+r, c0+j) with j < r, is
// (c0+j, c0+r) of an earlier row of the block.
func pairBlock[T float32 | float64](op *Pairwise, c0, b int, upper bool, rows, x, out []T,
	kernel func(m, n, d int, a []T, lda int, b []T, ldb int, out []T, ldo int, k cpukern.Kernel)) {
	n, dd := op.Data.N, op.Data.D
	nc := n - c0
	x = x[c0*dd:]
	k := cpukern.Dot
	switch op.Metric {
	case MetricL1:
		k = cpukern.L1
	case MetricL2:
		k = cpukern.L2
	}
	cosine := op.Metric == MetricCosine
	norm := op.Data.norm
	// Float32 l2 on the packed matrix product, as FAISS and BLAS-based
	// tools do: −(‖x_i‖² + ‖x_j‖² − 2·x_i·x_j), the norms in float64.
	var zero T
	_, f32 := any(zero).(float32)
	l2 := k == cpukern.L2 && f32 && cpukern.GEMM() && op.Data.sq != nil
	if l2 {
		k = cpukern.Dot
	}
	chunk := rowChunk
	if k == cpukern.Dot {
		chunk = dotChunk
	}
	gemm := k == cpukern.Dot && f32 && cpukern.GEMM()
	switch {
	case gemm && upper && !op.stopped():
		// The upper triangle only, each core a range of columns holding
		// an equal share of its pairs, then the pairs below the diagonal
		// copied from their mirror images.
		r32, x32, o32 := any(rows).([]float32), any(x).([]float32), any(out).([]float32)
		workers := runtime.GOMAXPROCS(0)
		if float64(b)*float64(nc)*float64(dd)/2 < minParallel {
			workers = 1 // waking the other cores would cost more than it saves
		}
		cut := upperSplit(nc, b, workers)
		parallel.For(len(cut)-1, 1, func(w0, w1 int) {
			for w := w0; w < w1; w++ {
				for r := 0; r < min(b, cut[w+1]) && !op.stopped(); r += dotChunk * 2 {
					clo, chi := max(cut[w], r), cut[w+1]
					m := min(dotChunk*2, b-r, chi-r)
					cpukern.DotUpper32(m, chi-clo, dd, r32[r*dd:], dd, x32[clo*dd:], dd, o32[r*n+c0+clo:], n, clo-r)
				}
			}
		})
		parallel.For(b, 64, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				o := out[r*n+c0 : r*n+c0+r]
				for j := range o {
					o[j] = out[j*n+c0+r]
				}
			}
		})
	case gemm && !op.stopped():
		// The matrix product packs the columns' images it reads: each
		// core takes a range of columns for all the rows, so that each
		// column's image is packed once, not once per core.
		parallel.For(nc, 256, func(clo, chi int) {
			for r := 0; r < b && !op.stopped(); r += dotChunk * 2 {
				m := min(dotChunk*2, b-r)
				kernel(m, chi-clo, dd, rows[r*dd:], dd, x[clo*dd:], dd, out[r*n+c0+clo:], n, k)
			}
		})
	}
	if gemm && !l2 && !cosine {
		return // the matrix product did it all
	}
	parallel.For(b, 4, func(lo, hi int) {
		// Chunks of rows small enough that their k-block stays in L2
		// beside the kernel's column block.
		for r := lo; r < hi && !gemm && !op.stopped(); r += chunk {
			m := min(chunk, hi-r)
			kernel(m, nc, dd, rows[r*dd:], dd, x, dd, out[r*n+c0:], n, k)
		}
		if l2 {
			sq := op.Data.sq[c0:]
			for i := lo; i < hi; i++ {
				var si float64
				for _, v := range rows[i*dd : (i+1)*dd] {
					si += float64(v) * float64(v)
				}
				o := out[i*n+c0 : (i+1)*n]
				for j := range o {
					o[j] = T(-(si + sq[j] - 2*float64(o[j])))
				}
			}
			return
		}
		if !cosine {
			return
		}
		for i := lo; i < hi; i++ {
			ri := invNorm(rows[i*dd : (i+1)*dd]) // padding rows are zero: Inf, discarded
			o := out[i*n+c0 : (i+1)*n]
			for j := range o {
				o[j] = T(float64(o[j]) * ri / norm[c0+j])
			}
		}
	})
}

// upperSplit cuts columns [0, nc) of an upper block of b rows (column j
// holds the pairs of rows 0…min(j, b−1)) into w ranges of about equal
// pairs, at multiples of 32 (the matrix product's panel): cut[i] to
// cut[i+1] for i < w, cut[0] = 0, cut[w] = nc; ranges may be empty.
func upperSplit(nc, b, w int) []int {
	pairs := func(c int) float64 { // Σ_{j<c} min(j+1, b)
		t := min(c, b)
		return float64(t)*float64(t+1)/2 + float64(c-t)*float64(b)
	}
	total := pairs(nc)
	cut := make([]int, w+1)
	c := 0
	for i := 1; i < w; i++ {
		for c < nc && pairs(c) < total*float64(i)/float64(w) {
			c++
		}
		cut[i] = min(c+16, nc) / 32 * 32
		cut[i] = max(cut[i], cut[i-1])
	}
	cut[w] = nc
	return cut
}

// pairU8Block fills columns [c0, N) of the block's m rows, images lo,
// lo+1, …, from 8-bit images, exactly.
func pairU8Block[T float32 | float64](op *Pairwise, lo, c0, m int, out []T) {
	d := op.Data
	n := d.N
	k := map[Metric]cpukern.U8Metric{MetricDot: cpukern.U8Dot, MetricCosine: cpukern.U8Cosine, MetricL1: cpukern.U8L1,
		MetricL2: cpukern.U8L2}[op.Metric]
	if k != cpukern.U8L1 {
		// The dot products pack the columns' images they read: each core
		// takes a range of columns for all the rows, as pairBlock does.
		parallel.For(n-c0, 256, func(clo, chi int) {
			for r := 0; r < m && !op.stopped(); r += dotChunk * 2 {
				mr := min(dotChunk*2, m-r)
				cpukern.PairU8(d.U8, lo+r, mr, c0+clo, chi-clo, k, out[r*n+c0+clo:], n)
			}
		})
		return
	}
	parallel.For(m, 4, func(r0, r1 int) {
		for r := r0; r < r1 && !op.stopped(); r += rowChunk {
			mr := min(rowChunk, r1-r)
			cpukern.PairU8(d.U8, lo+r, mr, c0, n-c0, k, out[r*n+c0:], n)
		}
	})
}

// newOwned allocates an op's output buffer, backed by huge pages where the
// kernel allows, so that its first fill does not fault 4 KiB at a time.
func newOwned(dt tensor.Dtype, shape ...int) *tensor.Dense {
	n := tensor.Shape(shape).TotalSize()
	if dt == tensor.Float64 {
		b := make([]float64, n)
		sysmem.AdviseHugePagesOf(b)
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(b))
	}
	b := make([]float32, n)
	sysmem.AdviseHugePagesOf(b)
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(b))
}

// ResidentBytes is the size of the images the op compares against (and
// a formula's values of each image).
func (op *Pairwise) ResidentBytes() int64 {
	if op.Formula != nil {
		return op.Data.Bytes() + op.Formula.Bytes()
	}
	return op.Data.Bytes()
}

// WriteHash writes every parameter of the op.
func (op *Pairwise) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "pairwise(data=%d,N=%d,D=%d,metric=%v,dtype=%v,batch=%d,upper=%v,tf32=%v,fromdata=%v,u8=%v)", op.Data.id, op.Data.N,
		op.Data.D, op.Metric, op.Data.Dtype, op.Batch, op.Upper, op.TF32, op.RowsFromData, op.Data.U8 != nil)
	if op.Formula != nil {
		fmt.Fprintf(h, "formula=%q", op.Formula.Formula.Canonical())
	}
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *Pairwise) Hashcode() uint32 { return hashcode(op) }

func (op *Pairwise) String() string {
	if op.Formula != nil {
		return fmt.Sprintf("f(a, b) = %s, N=%d, D=%d", op.Formula.Formula.Canonical(), op.Data.N, op.Data.D)
	}
	exact := ""
	if op.Data.U8 != nil {
		exact = ", 8-bit, exact"
	}
	if op.Upper {
		return fmt.Sprintf("Pairwise{%v, N=%d, D=%d%s, upper}", op.Metric, op.Data.N, op.Data.D, exact)
	}
	return fmt.Sprintf("Pairwise{%v, N=%d, D=%d%s}", op.Metric, op.Data.N, op.Data.D, exact)
}
