package pairwise

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/ops"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// A pairwise op can do in one pass what otherwise takes two ops: select
// each row's top k (Pairwise then TopK) on a GPU, or write a symmetric
// run's blocks straight into the whole matrix (Pairwise with Upper then
// Mirror) on a GPU or, for float32 dot products on the packed matrix
// product, the CPU. PairwiseTopK and PairwiseMatrix are those fused passes
// as ops of their own, so that a graph shows which path it takes;
// FuseTopK and FuseMatrix build them where the op offers the pass
// (TopKSelector, FullWriter), and report false elsewhere, where the two
// ops stay.

// FullWriter is implemented by the pairwise op and its GPU twin: given the
// whole (N, N) float32 matrix of a symmetric run, WriteFull reports
// whether its blocks (with Upper) will be written straight into it, each
// block's rows from the diagonal on and their transposes in the rows
// below, so that the caller need not mirror them; its output tensor is
// then not written.
// FuseMatrix turns such an op into PairwiseMatrix.
type FullWriter interface {
	WriteFull(full []float32) bool
}

// TopKSelector is implemented by the pairwise op's GPU twin: SelectTopK
// reports whether it will select the top k of each of its blocks' rows on
// the device, as TopK does (self skipped, ties to the smaller column). Its
// block output then holds, in each row, only those k values at their
// columns, and TopIndices is the (Batch, k) columns, as TopK's output.
// FuseTopK turns such an op into PairwiseTopK.
type TopKSelector interface {
	SelectTopK(k int) bool
	TopIndices() *tensor.Dense
}

// pairwiser is implemented by Pairwise and its GPU twins: the op's
// parameters.
type pairwiser interface {
	G.Op
	pairwise() *Pairwise
}

func (op *Pairwise) pairwise() *Pairwise { return op }

// PairwiseTopK is a pairwise op whose device selects the top k of each row
// of its blocks itself (self skipped, ties to the smaller column, as
// TopK). Its input is the block's row indices (RowsFromData); its output
// is (2, Batch, K) float64: [0] the selected columns of each row, best
// first, and [1] their affinities, as the device computed them in the
// images' dtype.
type PairwiseTopK struct {
	owned

	K     int
	inner pairwiser
	sel   TopKSelector
	out   *tensor.Dense
}

// FuseTopK returns op (OnDevice's result for a Pairwise) fused with the
// selection of each row's top k, when its device selects them itself;
// else nil and false, and op is unchanged.
func FuseTopK(op G.Op, k int) (*PairwiseTopK, bool) {
	p, ok1 := op.(pairwiser)
	sel, ok2 := op.(TopKSelector)
	if !ok1 || !ok2 || !sel.SelectTopK(k) {
		return nil, false
	}
	return &PairwiseTopK{K: k, inner: p, sel: sel}, true
}

// Arity is 1: the block's row indices.
func (op *PairwiseTopK) Arity() int { return 1 }

// Type is Vector float64 → Tensor3 float64.
func (op *PairwiseTopK) Type() hm.Type {
	return hm.NewFnType(G.TensorType{Dims: 1, Of: tensor.Float64}, G.TensorType{Dims: 3, Of: tensor.Float64})
}

// InferShape checks the index and returns (2, Batch, K).
func (op *PairwiseTopK) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if _, err := op.inner.InferShape(in...); err != nil {
		return nil, err
	}
	return tensor.Shape{2, op.inner.pairwise().Batch, op.K}, nil
}

// Do computes the block and its selection on the device and gathers the
// selected columns and values into the op's own buffer.
func (op *PairwiseTopK) Do(in ...G.Value) (G.Value, error) {
	v, err := op.inner.Do(in...)
	if err != nil {
		return nil, err
	}
	p := op.inner.pairwise()
	b, n, k := p.Batch, p.Data.N, op.K
	if op.out == nil {
		op.out = tensor.New(tensor.WithShape(2, b, k), tensor.Of(tensor.Float64))
	}
	dst := op.out.Data().([]float64)
	cols, vals := dst[:b*k], dst[b*k:]
	copy(cols, op.sel.TopIndices().Data().([]float64))
	// The block holds each row's k values at their columns.
	switch blk := v.(*tensor.Dense).Data().(type) {
	case []float32:
		gather(blk, cols, vals, n, k)
	case []float64:
		gather(blk, cols, vals, n, k)
	}
	return op.out, nil
}

func gather[T float32 | float64](blk []T, cols, vals []float64, n, k int) {
	for i, j := range cols {
		vals[i] = float64(blk[i/k*n+int(j)])
	}
}

// ResidentBytes is the inner op's, with its host block.
func (op *PairwiseTopK) ResidentBytes() int64 {
	p := op.inner.pairwise()
	return residentBytes(op.inner) + int64(p.Batch)*int64(p.Data.N)*int64(p.Data.Dtype.Size())
}

// DeviceBytes is the inner op's device memory.
func (op *PairwiseTopK) DeviceBytes() int64 { return deviceBytes(op.inner) }

// CallsExtern is the inner op's.
func (op *PairwiseTopK) CallsExtern() bool { return op.inner.CallsExtern() }

// WriteHash writes the inner op's parameters and K.
func (op *PairwiseTopK) WriteHash(h hash.Hash) {
	op.inner.WriteHash(h)
	fmt.Fprintf(h, "+topk(K=%d)", op.K)
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *PairwiseTopK) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *PairwiseTopK) String() string {
	return fmt.Sprintf("GPU fused pairwise+top-k: %v, K=%d", op.inner, op.K)
}

// PairwiseMatrix is a pairwise op with Upper that writes each block
// straight into the whole (N, N) matrix of a symmetric run: the block's
// rows from the diagonal on and, transposed, its columns beyond the block
// into the rows below it, as Mirror does. Its input is the block's row
// indices (RowsFromData); its output is the matrix.
type PairwiseMatrix struct {
	owned

	inner pairwiser
	full  *tensor.Dense
}

// FuseMatrix returns op (OnDevice's result for a Pairwise with Upper)
// fused with the assembly of full, the (N, N) float32 matrix, when it
// writes the blocks into it itself; else nil and false.
func FuseMatrix(op G.Op, full []float32) (*PairwiseMatrix, bool) {
	p, ok1 := op.(pairwiser)
	fw, ok2 := op.(FullWriter)
	if !ok1 || !ok2 || !fw.WriteFull(full) {
		return nil, false
	}
	n := p.pairwise().Data.N
	return &PairwiseMatrix{inner: p, full: tensor.New(tensor.WithShape(n, n), tensor.WithBacking(full))}, true
}

// Arity is 1: the block's row indices.
func (op *PairwiseMatrix) Arity() int { return 1 }

// Type is Vector float64 → Matrix float32.
func (op *PairwiseMatrix) Type() hm.Type {
	return hm.NewFnType(G.TensorType{Dims: 1, Of: tensor.Float64}, G.TensorType{Dims: 2, Of: tensor.Float32})
}

// InferShape checks the index and returns (N, N).
func (op *PairwiseMatrix) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if _, err := op.inner.InferShape(in...); err != nil {
		return nil, err
	}
	n := op.inner.pairwise().Data.N
	return tensor.Shape{n, n}, nil
}

// Do computes the block into the matrix.
func (op *PairwiseMatrix) Do(in ...G.Value) (G.Value, error) {
	if _, err := op.inner.Do(in...); err != nil {
		return nil, err
	}
	return op.full, nil
}

// ResidentBytes is the inner op's, with a GPU twin's host block (the CPU
// op writes straight into the matrix).
func (op *PairwiseMatrix) ResidentBytes() int64 {
	p := op.inner.pairwise()
	if _, cpu := op.inner.(*Pairwise); cpu {
		return residentBytes(op.inner)
	}
	return residentBytes(op.inner) + int64(p.Batch)*int64(p.Data.N)*int64(p.Data.Dtype.Size())
}

// DeviceBytes is the inner op's device memory.
func (op *PairwiseMatrix) DeviceBytes() int64 { return deviceBytes(op.inner) }

// CallsExtern is the inner op's.
func (op *PairwiseMatrix) CallsExtern() bool { return op.inner.CallsExtern() }

// WriteHash writes the inner op's parameters and the matrix by address.
func (op *PairwiseMatrix) WriteHash(h hash.Hash) {
	op.inner.WriteHash(h)
	fmt.Fprintf(h, "+matrix(%p)", op.full)
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *PairwiseMatrix) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *PairwiseMatrix) String() string {
	n := op.inner.pairwise().Data.N
	if _, cpu := op.inner.(*Pairwise); cpu {
		return fmt.Sprintf("fused pairwise+mirror: %v, writes the (%d, %d) matrix", op.inner, n, n)
	}
	return fmt.Sprintf("GPU fused pairwise+mirror: %v, writes the (%d, %d) matrix", op.inner, n, n)
}

func residentBytes(op G.Op) int64 {
	if r, ok := op.(ops.Resident); ok {
		return r.ResidentBytes()
	}
	return 0
}

func deviceBytes(op G.Op) int64 {
	if r, ok := op.(ops.DeviceResident); ok {
		return r.DeviceBytes()
	}
	return 0
}
