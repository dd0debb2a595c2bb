package pairwise

import (
	"errors"
	"fmt"
	"hash"
	"runtime"
	"sync"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/parallel"
	"github.com/tapeloop/tapeloop/ops"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// PairwiseU8 is Pairwise over 8-bit images (NewPairDataU8): the built-in
// metrics computed exactly, in integers, by package cpukern, the results
// in the data's dtype. The block is always read from the images
// (RowsFromData): its only input is the index. It runs on the CPU only.
//
// With WriteFull it writes each block (Upper, RowsFromData) straight into
// the whole (N, N) matrix of a symmetric run, in the matrix's type
// (float32, float64, int32 or int64): the block's rows from the diagonal
// on and, transposed as the kernel stores them, its columns beyond the
// block into the rows below, so that no block buffer and no Mirror are
// needed; its output is then the matrix.
type PairwiseU8 struct {
	pairBlocks

	Metric Metric

	full *tensor.Dense // WriteFull's matrix, nil: blocks into the op's buffer
	mu   sync.Mutex
	sum  cpukern.Int128 // of the integer values written into full
}

// NewPairwiseU8 returns the op for blocks of batch rows of data's 8-bit
// images.
func NewPairwiseU8(data *PairData, metric Metric, batch int) *PairwiseU8 {
	b := newPairBlocks(data, batch)
	if data.U8 == nil {
		panic("ops: PairwiseU8 over images that are not 8-bit")
	}
	return &PairwiseU8{pairBlocks: b, Metric: metric}
}

// WriteFull makes the op write its blocks into full, the (N, N) matrix
// ([]float32, []float64, []int32 or []int64; an integer type only for dot,
// l1 and l2, whose caller checks every value fits). It needs Upper and
// RowsFromData.
func (op *PairwiseU8) WriteFull(full any) {
	n := op.Data.N
	var t *tensor.Dense
	switch f := full.(type) {
	case []float32:
		t = fullTensor(f, n)
	case []float64:
		t = fullTensor(f, n)
	case []int32:
		t = fullTensor(f, n)
	case []int64:
		t = fullTensor(f, n)
	}
	_, isFloat := full.([]float32)
	if _, f64 := full.([]float64); f64 {
		isFloat = true
	}
	if t == nil || !op.Upper || !op.RowsFromData || (!isFloat && op.Metric == MetricCosine) {
		panic("ops: PairwiseU8.WriteFull needs an (N, N) matrix, Upper and RowsFromData, and a float matrix for cosine")
	}
	op.full = t
}

func fullTensor[T cpukern.U8Value](f []T, n int) *tensor.Dense {
	if len(f) != n*n {
		return nil
	}
	return tensor.New(tensor.WithShape(n, n), tensor.WithBacking(f))
}

// TakeSum is the sum of the values written into the matrix since the last
// TakeSum (each value of the matrix once), exact for dot, l1 and l2.
func (op *PairwiseU8) TakeSum() cpukern.Int128 {
	op.mu.Lock()
	defer op.mu.Unlock()
	s := op.sum
	op.sum = cpukern.Int128{}
	return s
}

// Type is Vector float64 → Matrix of the output's type.
func (op *PairwiseU8) Type() hm.Type {
	if op.full == nil {
		return op.pairBlocks.Type()
	}
	return hm.NewFnType(G.TensorType{Dims: 1, Of: tensor.Float64}, G.TensorType{Dims: 2, Of: op.full.Dtype()})
}

// InferShape is the block's, or (N, N) with WriteFull.
func (op *PairwiseU8) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := op.pairBlocks.InferShape(in...)
	if err != nil || op.full == nil {
		return s, err
	}
	return tensor.Shape{op.Data.N, op.Data.N}, nil
}

// Do computes the block's affinities into the op's own buffer, or with
// WriteFull into the matrix.
func (op *PairwiseU8) Do(in ...G.Value) (G.Value, error) {
	rows, lo, m, c0, err := op.block(in)
	if err != nil {
		return nil, err
	}
	if rows != nil {
		return nil, errors.New("pairwise: 8-bit images are read from the data, not given as rows")
	}
	if op.full != nil {
		switch f := op.full.Data().(type) {
		case []float32:
			pairU8Full(op, lo, m, f)
		case []float64:
			pairU8Full(op, lo, m, f)
		case []int32:
			pairU8Full(op, lo, m, f)
		case []int64:
			pairU8Full(op, lo, m, f)
		}
		if op.Stopped() {
			return nil, ops.ErrStopped
		}
		return op.full, nil
	}
	switch o := op.output().Data().(type) {
	case []float32:
		pairU8Block(op, lo, c0, m, o)
	case []float64:
		pairU8Block(op, lo, c0, m, o)
	}
	return op.finish()
}

var u8Metrics = map[Metric]cpukern.U8Metric{MetricDot: cpukern.U8Dot, MetricCosine: cpukern.U8Cosine,
	MetricL1: cpukern.U8L1, MetricL2: cpukern.U8L2}

// pairU8Full writes rows [lo, lo+m) of the matrix full from column lo on,
// and their transposes below the block, from 8-bit images, exactly.
func pairU8Full[T cpukern.U8Value](op *PairwiseU8, lo, m int, full []T) {
	n := op.Data.N
	k := u8Metrics[op.Metric]
	hi := lo + m // columns from hi on are stored transposed too
	add := func(s cpukern.Int128) {
		op.mu.Lock()
		op.sum = op.sum.Add(s)
		op.mu.Unlock()
	}
	if k != cpukern.U8L1 {
		byColumns(m, n-lo, op.Stopped, func(clo, chi, r, mr int) {
			b0 := lo + clo
			add(cpukern.PairU8T(op.Data.U8, lo+r, mr, b0, chi-clo, k, full[(lo+r)*n+b0:], full[b0*n+lo+r:], n, hi-b0))
		})
		return
	}
	parallel.For(m, 4, func(r0, r1 int) {
		byRows(r0, r1, rowChunk, op.Stopped, func(r, mr int) {
			add(cpukern.PairU8T(op.Data.U8, lo+r, mr, lo, n-lo, k, full[(lo+r)*n+lo:], full[lo*n+lo+r:], n, hi-lo))
		})
	})
}

// pairU8Block fills columns [c0, N) of the block's m rows, images lo,
// lo+1, …, from 8-bit images, exactly.
func pairU8Block[T float32 | float64](op *PairwiseU8, lo, c0, m int, out []T) {
	d := op.Data
	n := d.N
	k := u8Metrics[op.Metric]
	if k != cpukern.U8L1 {
		byColumns(m, n-c0, op.Stopped, func(clo, chi, r, mr int) {
			cpukern.PairU8(d.U8, lo+r, mr, c0+clo, chi-clo, k, out[r*n+c0+clo:], n)
		})
		return
	}
	parallel.For(m, 4, func(r0, r1 int) {
		byRows(r0, r1, rowChunk, op.Stopped, func(r, mr int) {
			cpukern.PairU8(d.U8, lo+r, mr, c0, n-c0, k, out[r*n+c0:], n)
		})
	})
}

// ResidentBytes is the size of the images the op compares against and of
// the kernels' packed copies of them, one set per core (with WriteFull
// the matrix is the op's output, planned as such).
func (op *PairwiseU8) ResidentBytes() int64 {
	rows := min(op.Batch, 2*dotChunk)
	return op.Data.Bytes() + int64(runtime.GOMAXPROCS(0))*cpukern.PairU8Scratch(rows, op.Data.D, u8Metrics[op.Metric])
}

// WriteHash writes every parameter of the op.
func (op *PairwiseU8) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "pairwiseu8(%s,metric=%v)", op.params(), op.Metric)
	if op.full != nil {
		fmt.Fprintf(h, "+matrix(%v,%p)", op.full.Dtype(), op.full)
	}
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *PairwiseU8) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *PairwiseU8) String() string {
	if op.full != nil {
		return fmt.Sprintf("Pairwise{%v, N=%d, D=%d, 8-bit, exact, upper, writes the (%d, %d) %v matrix}", op.Metric, op.Data.N,
			op.Data.D, op.Data.N, op.Data.N, op.full.Dtype())
	}
	if op.Upper {
		return fmt.Sprintf("Pairwise{%v, N=%d, D=%d, 8-bit, exact, upper}", op.Metric, op.Data.N, op.Data.D)
	}
	return fmt.Sprintf("Pairwise{%v, N=%d, D=%d, 8-bit, exact}", op.Metric, op.Data.N, op.Data.D)
}
