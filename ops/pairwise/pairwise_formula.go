package pairwise

import (
	"fmt"
	"hash"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/parallel"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// PairwiseFormula is the Gorgonia op that computes a user's formula
// (PairFormula with a per-pair program, Plan.Pair) over both images of
// every pair of a block of Batch images and all N images: output
// (Batch, N), as Pairwise's (see pairBlocks for Upper and RowsFromData).
// Each image's values the formula needs (norms, means, …) are computed
// once, by NewPairFormula; NaN and infinite results are counted in the
// PairFormula. A formula rewritten over dot products runs instead as
// Pairwise with MetricDot followed by PairMap.
type PairwiseFormula struct {
	pairBlocks

	Formula *PairFormula
}

// NewPairwiseFormula returns the op for blocks of batch rows of data's
// images, f prepared over them.
func NewPairwiseFormula(f *PairFormula, data *PairData, batch int) *PairwiseFormula {
	b := newPairBlocks(data, batch)
	if f.Plan.Pair == nil {
		panic("ops: PairwiseFormula of a formula rewritten over dot products (Pairwise then PairMap computes it)")
	}
	if data.U8 != nil {
		panic("ops: PairwiseFormula over 8-bit images")
	}
	return &PairwiseFormula{pairBlocks: b, Formula: f}
}

// Do computes the block's affinities into the op's own buffer.
func (op *PairwiseFormula) Do(in ...G.Value) (G.Value, error) {
	rows, lo, m, c0, err := op.block(in)
	if err != nil {
		return nil, err
	}
	d, out := op.Data, op.output()
	idx := in[len(in)-1].Data().([]float64)
	switch d.Dtype {
	case tensor.Float32:
		formulaBlock(op, c0, m, idx, blockRows(rows, d.X32, lo, m, d.D), d.X32, out.Data().([]float32))
	case tensor.Float64:
		formulaBlock(op, c0, m, idx, blockRows(rows, d.X64, lo, m, d.D), d.X64, out.Data().([]float64))
	}
	return op.finish()
}

// formulaBlock fills columns [c0, N) of the block's b rows, images
// idx[0], idx[1], …, by the formula's per-pair program.
func formulaBlock[T float32 | float64](op *PairwiseFormula, c0, b int, idx []float64, rows, x, out []T) {
	pf := op.Formula
	n, dd := op.Data.N, op.Data.D
	nr := pf.Plan.NRow()
	nc := n - c0
	xc := x[c0*dd:]
	parallel.For(b, 4, func(lo, hi int) {
		st := getStates[T](pf)
		defer pf.states.Put(st)
		var bad int64
		byRows(lo, hi, rowChunk, op.Stopped, func(r, m int) {
			for i := range m {
				img := int(idx[r+i])
				copy(st.ra[i*nr:(i+1)*nr], pf.rowVals[img*nr:(img+1)*nr])
			}
			st.pair.Reset()
			st.pair.Pairs(m, nc, dd, rows[r*dd:], dd, xc, dd, out[r*n+c0:], n, st.ra, pf.rowVals[c0*nr:], nr)
			for i := range m {
				bad += countRow(out[(r+i)*n+c0:(r+i+1)*n], c0, int(idx[r+i]), op.Upper)
			}
		})
		pf.bad.Add(bad)
	})
}

// ResidentBytes is the size of the images the op compares against and
// the formula's values of each image.
func (op *PairwiseFormula) ResidentBytes() int64 { return op.Data.Bytes() + op.Formula.Bytes() }

// WriteHash writes every parameter of the op.
func (op *PairwiseFormula) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "pairwiseformula(%s,formula=%q)", op.params(), op.Formula.Formula.Canonical())
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *PairwiseFormula) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *PairwiseFormula) String() string {
	return fmt.Sprintf("f(a, b) = %s, N=%d, D=%d", op.Formula.Formula.Canonical(), op.Data.N, op.Data.D)
}
