package ops

import (
	"errors"
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/parallel"
	"github.com/tapeloop/tapeloop/internal/sysmem"
)

// Metric is a pairwise affinity between two flattened images x_i, x_j.
type Metric int

// The affinities of seed 003.
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
	N, D  int
	Dtype tensor.Dtype
	X32   []float32 // row-major (N, D) when Dtype is Float32
	X64   []float64 // when Float64
	// Mapped says the images are a read-only file mapping (page cache),
	// not process memory: Bytes leaves them out.
	Mapped bool
	norm   []float64 // ‖x_j‖, for cosine
	id     uint64
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
	for i := range n {
		row := x[i*d : (i+1)*d]
		var ss float64
		for k, v := range row {
			f := float64(v)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, fmt.Errorf("%w: image %d, value %d is %g", ErrPairInput, i, k, f)
			}
			ss += f * f
		}
		if metric == MetricCosine {
			if ss == 0 {
				return nil, fmt.Errorf("%w: image %d is all zeros: its cosine affinity is undefined", ErrPairInput, i)
			}
			p.norm = append(p.norm, math.Sqrt(ss))
		}
	}
	return p, nil
}

// Bytes is the process memory the images take (none for mapped images).
func (p *PairData) Bytes() int64 {
	b := int64(8 * len(p.norm))
	if !p.Mapped {
		b += int64(4*len(p.X32) + 8*len(p.X64))
	}
	return b
}

// Pairwise is the Gorgonia op that computes the affinities of a block of
// Batch images, given as rows (Batch, D) with their row indices (Batch,)
// float64, against all N images: output (Batch, N). With Upper set it
// computes only the columns from the block's first row index on (the upper
// triangle and the diagonal block), leaving the others as they were: the
// caller mirrors them from earlier blocks, computing each pair once. dot and cosine are one matrix product (BLAS gemm) per block,
// l1 and l2 the blocked distance kernels of package cpukern. The working
// set is the block, its (Batch, N) output and the shared (N, D) images;
// no (Batch, N, D) difference array exists.
type Pairwise struct {
	owned

	Data   *PairData
	Metric Metric
	Batch  int
	Upper  bool
	// TF32 lets the GPU twin's dot products use TF32 tensor cores (about
	// 1e-3 relative); the CPU ignores it.
	TF32 bool

	out *tensor.Dense
}

// NewPairwise returns the op for blocks of batch rows.
func NewPairwise(data *PairData, metric Metric, batch int) *Pairwise {
	if batch < 1 {
		panic("ops: Pairwise batch < 1")
	}
	if metric == MetricCosine && data.norm == nil {
		panic("ops: Pairwise cosine over data prepared without norms")
	}
	return &Pairwise{Data: data, Metric: metric, Batch: batch}
}

// Arity is 2: the block of rows and their indices.
func (op *Pairwise) Arity() int { return 2 }

// Type is (Matrix a, Vector c) → Matrix a.
func (op *Pairwise) Type() hm.Type {
	a, c := hm.TypeVariable('a'), hm.TypeVariable('c')
	return hm.NewFnType(G.TensorType{Dims: 2, Of: a}, G.TensorType{Dims: 1, Of: c}, G.TensorType{Dims: 2, Of: a})
}

// InferShape checks the block is (Batch, D).
func (op *Pairwise) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("pairwise: want 2 inputs, got %d", len(in))
	}
	if s, ok := in[0].(tensor.Shape); ok && (len(s) != 2 || s[0] != op.Batch || s[1] != op.Data.D) {
		return nil, fmt.Errorf("pairwise: input shape %v, want (%d, %d)", s, op.Batch, op.Data.D)
	}
	return tensor.Shape{op.Batch, op.Data.N}, nil
}

// Do computes the block's affinities into the op's own buffer.
func (op *Pairwise) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("pairwise: want 2 inputs, got %d", len(in))
	}
	rows, ok := in[0].(*tensor.Dense)
	index, ok2 := in[1].(*tensor.Dense)
	d := op.Data
	if !ok || !ok2 || rows.Dtype() != d.Dtype || rows.Shape().TotalSize() != op.Batch*d.D ||
		index.Dtype() != tensor.Float64 || index.Shape().TotalSize() != op.Batch {
		return nil, fmt.Errorf("pairwise: inputs %v, %v; want %v (%d, %d) and float64 (%d)", in[0].Shape(), in[1].Shape(), d.Dtype, op.Batch, d.D, op.Batch)
	}
	c0 := 0
	if op.Upper {
		c0 = int(index.Data().([]float64)[0])
		if c0 < 0 || c0 >= d.N {
			return nil, fmt.Errorf("pairwise: first row index %d outside [0, %d)", c0, d.N)
		}
	}
	if op.out == nil {
		op.out = newOwned(d.Dtype, op.Batch, d.N)
	}
	switch d.Dtype {
	case tensor.Float32:
		pairBlock(op, c0, rows.Data().([]float32), d.X32, op.out.Data().([]float32), cpukern.PairDist32)
	case tensor.Float64:
		pairBlock(op, c0, rows.Data().([]float64), d.X64, op.out.Data().([]float64), cpukern.PairDist64)
	}
	return op.out, nil
}

// rowChunk is the number of block rows one kernel call takes.
const rowChunk = 64

// pairBlock fills columns [c0, N) of the block's rows.
func pairBlock[T float32 | float64](op *Pairwise, c0 int, rows, x, out []T,
	kernel func(m, n, d int, a []T, lda int, b []T, ldb int, out []T, ldo int, k cpukern.Kernel)) {
	b, n, dd := op.Batch, op.Data.N, op.Data.D
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
	parallel.For(b, 4, func(lo, hi int) {
		// Chunks of rows small enough that their k-block stays in L2
		// beside the kernel's column block.
		for r := lo; r < hi; r += rowChunk {
			m := min(rowChunk, hi-r)
			kernel(m, nc, dd, rows[r*dd:], dd, x, dd, out[r*n+c0:], n, k)
		}
		if !cosine {
			return
		}
		for i := lo; i < hi; i++ {
			var ss float64
			for _, v := range rows[i*dd : (i+1)*dd] {
				ss += float64(v) * float64(v)
			}
			ri := 1 / math.Sqrt(ss) // padding rows are zero: Inf, discarded
			o := out[i*n+c0 : (i+1)*n]
			for j := range o {
				o[j] = T(float64(o[j]) * ri / norm[c0+j])
			}
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

// ResidentBytes is the size of the images the op compares against.
func (op *Pairwise) ResidentBytes() int64 { return op.Data.Bytes() }

// WriteHash writes every parameter of the op.
func (op *Pairwise) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "pairwise(data=%d,N=%d,D=%d,metric=%v,dtype=%v,batch=%d,upper=%v)", op.Data.id, op.Data.N, op.Data.D, op.Metric, op.Data.Dtype, op.Batch, op.Upper)
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *Pairwise) Hashcode() uint32 { return hashcode(op) }

func (op *Pairwise) String() string {
	if op.Upper {
		return fmt.Sprintf("Pairwise{%v, N=%d, D=%d, upper}", op.Metric, op.Data.N, op.Data.D)
	}
	return fmt.Sprintf("Pairwise{%v, N=%d, D=%d}", op.Metric, op.Data.N, op.Data.D)
}
