package pairwise

import (
	"fmt"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/parallel"
	"github.com/tapeloop/tapeloop/ops"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// pairBlocks is what the pairwise ops (Pairwise, PairwiseFormula,
// PairwiseU8) share: a block of Batch images, given as rows (Batch, D)
// with their row indices (Batch,) float64, or read from Data by their
// indices alone, compared against all N images into a (Batch, N) output
// the op owns; and the tiling of that block into chunks of rows or ranges
// of columns, one core each.
type pairBlocks struct {
	owned
	stoppable

	Data  *PairData
	Batch int
	// Upper computes only the columns from the block's first row index on
	// (the upper triangle and the diagonal block), leaving the others as
	// they were: the caller mirrors them from earlier blocks, computing
	// each pair once.
	Upper bool
	// RowsFromData: the block is images index[0], index[0]+1, … of Data,
	// which the op reads itself (no copy into a rows input; on a GPU,
	// nothing to upload): its only input is the index. It computes the
	// rows while the index runs on by one and stays below N; the output's
	// other rows (a short block's padding) keep what they held.
	RowsFromData bool

	out *tensor.Dense
}

func newPairBlocks(data *PairData, batch int) pairBlocks {
	if batch < 1 {
		panic("ops: Pairwise batch < 1")
	}
	return pairBlocks{Data: data, Batch: batch}
}

// Arity is 2: the block of rows and their indices; 1, the indices, with
// RowsFromData.
func (op *pairBlocks) Arity() int {
	if op.RowsFromData {
		return 1
	}
	return 2
}

// Type is (Matrix a, Vector c) → Matrix a, or Vector c → Matrix a with
// RowsFromData.
func (op *pairBlocks) Type() hm.Type {
	a, c := hm.TypeVariable('a'), hm.TypeVariable('c')
	if op.RowsFromData { // the output's dtype is the images'
		return hm.NewFnType(G.TensorType{Dims: 1, Of: tensor.Float64}, G.TensorType{Dims: 2, Of: op.Data.Dtype})
	}
	return hm.NewFnType(G.TensorType{Dims: 2, Of: a}, G.TensorType{Dims: 1, Of: c}, G.TensorType{Dims: 2, Of: a})
}

// InferShape checks the block is (Batch, D) and the index (Batch).
func (op *pairBlocks) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
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
func (op *pairBlocks) block(in []G.Value) (rows *tensor.Dense, lo, m, c0 int, err error) {
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

// output is the op's (Batch, N) output buffer, allocated at the first run.
func (op *pairBlocks) output() *tensor.Dense {
	if op.out == nil {
		op.out = opkit.NewOwned(op.Data.Dtype, op.Batch, op.Data.N)
	}
	return op.out
}

// finish is the op's output, or ops.ErrStopped if the op was stopped during
// the run.
func (op *pairBlocks) finish() (G.Value, error) {
	if op.Stopped() {
		return nil, ops.ErrStopped
	}
	return op.out, nil
}

// params writes the block's parameters, for the ops' WriteHash.
func (op *pairBlocks) params() string {
	return fmt.Sprintf("data=%d,N=%d,D=%d,dtype=%v,batch=%d,upper=%v,fromdata=%v", op.Data.id, op.Data.N, op.Data.D,
		op.Data.Dtype, op.Batch, op.Upper, op.RowsFromData)
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

// byColumns runs a block of b rows against nc columns with each core
// taking a range of columns for all the rows, in steps of up to
// 2·dotChunk rows: tile(clo, chi, r, m) computes rows [r, r+m) against
// columns [clo, chi). The dot products pack the columns' images they read:
// so each column's image is packed once, not once per core.
func byColumns(b, nc int, stop func() bool, tile func(clo, chi, r, m int)) {
	parallel.For(nc, 256, func(clo, chi int) {
		for r := 0; r < b && !stop(); r += dotChunk * 2 {
			tile(clo, chi, r, min(dotChunk*2, b-r))
		}
	})
}

// byRows runs rows [lo, hi) of a block (one core's share, from
// parallel.For) in chunks of up to chunk rows: tile(r, m) computes rows
// [r, r+m) against all the columns. Chunks of rows small enough that their
// part of the images stays in L2 beside the kernel's column block.
func byRows(lo, hi, chunk int, stop func() bool, tile func(r, m int)) {
	for r := lo; r < hi && !stop(); r += chunk {
		tile(r, min(chunk, hi-r))
	}
}
