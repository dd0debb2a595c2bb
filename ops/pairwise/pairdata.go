package pairwise

import (
	"errors"
	"fmt"
	"sync/atomic"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/ops"
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
	// packChecked: the images were not scanned for NaN and ±Inf up front
	// (NewPairDataPacked); the packed matrix product checks each block's
	// rows as it packs them, and bad holds the first block's error.
	packChecked bool
	bad         atomic.Pointer[error]
}

// NewPairDataU8 wraps 8-bit images x (length n·d) for the built-in
// metrics, computed exactly in integers, the results in dtype. For
// cosine it rejects an all-zero image.
func NewPairDataU8(x []uint8, n, d int, metric Metric, dtype tensor.Dtype) (*PairData, error) {
	if n < 1 || d < 1 || len(x) != n*d {
		return nil, fmt.Errorf("%w: need N ≥ 1 images of D ≥ 1 values, got N = %d, D = %d, %d values", ErrPairInput, n, d, len(x))
	}
	p := &PairData{N: n, D: d, Dtype: dtype, U8: cpukern.NewU8Rows(x, n, d), id: ops.NewTableID()}
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
	p := &PairData{N: n, D: d, id: ops.NewTableID()}
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

// NewPairDataPacked wraps float32 images x (length n·d) for dot products
// without scanning them for NaN and ±Inf first: where the packed matrix
// product runs (cpukern.GEMM), it checks the values of each block's rows
// as it packs them, one pass over the images fewer, and Err then names the
// first image holding one, as NewPairData would. This needs every image
// to be a row of some block of the run (all N rows computed by Pairwise's
// dot products on the CPU); ok is false, and nothing is returned, where
// the packed matrix product does not run.
func NewPairDataPacked(x []float32, n, d int) (p *PairData, ok bool, err error) {
	if !cpukern.GEMM() {
		return nil, false, nil
	}
	if n < 1 || d < 1 || len(x) != n*d {
		return nil, false, fmt.Errorf("%w: need N ≥ 1 images of D ≥ 1 values, got N = %d, D = %d, %d values", ErrPairInput, n, d, len(x))
	}
	return &PairData{N: n, D: d, X32: x, Dtype: tensor.Float32, id: ops.NewTableID(), packChecked: true}, true, nil
}

// PackChecked reports whether the images are checked for NaN and ±Inf as
// blocks pack them (NewPairDataPacked) rather than up front.
func (p *PairData) PackChecked() bool { return p.packChecked }

// Err is, for images checked as they are packed, the error naming the
// first NaN or ±Inf of the first block whose rows held one; nil while none
// was found, and always for images checked up front.
func (p *PairData) Err() error {
	if e := p.bad.Load(); e != nil {
		return *e
	}
	return nil
}

// packedNonFinite records that rows [lo, lo+m), packed, hold a NaN or
// ±Inf: the first one's error, found by scanning them, becomes Err unless
// an earlier block's is there.
func (p *PairData) packedNonFinite(lo, m int) {
	err := scan(p, p.X32[lo*p.D:(lo+m)*p.D], lo)
	if err == nil {
		err = fmt.Errorf("%w: images %d to %d hold a value that is not finite", ErrPairInput, lo, lo+m-1)
	}
	p.bad.CompareAndSwap(nil, &err)
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
