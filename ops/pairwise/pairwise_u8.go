package pairwise

import (
	"errors"
	"fmt"
	"hash"

	G "gorgonia.org/gorgonia"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/parallel"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// PairwiseU8 is Pairwise over 8-bit images (NewPairDataU8): the built-in
// metrics computed exactly, in integers, by package cpukern, the results
// in the data's dtype. The block is always read from the images
// (RowsFromData): its only input is the index. It runs on the CPU only.
type PairwiseU8 struct {
	pairBlocks

	Metric Metric
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

// Do computes the block's affinities into the op's own buffer.
func (op *PairwiseU8) Do(in ...G.Value) (G.Value, error) {
	rows, lo, m, c0, err := op.block(in)
	if err != nil {
		return nil, err
	}
	if rows != nil {
		return nil, errors.New("pairwise: 8-bit images are read from the data, not given as rows")
	}
	switch o := op.output().Data().(type) {
	case []float32:
		pairU8Block(op, lo, c0, m, o)
	case []float64:
		pairU8Block(op, lo, c0, m, o)
	}
	return op.finish()
}

// pairU8Block fills columns [c0, N) of the block's m rows, images lo,
// lo+1, …, from 8-bit images, exactly.
func pairU8Block[T float32 | float64](op *PairwiseU8, lo, c0, m int, out []T) {
	d := op.Data
	n := d.N
	k := map[Metric]cpukern.U8Metric{MetricDot: cpukern.U8Dot, MetricCosine: cpukern.U8Cosine, MetricL1: cpukern.U8L1,
		MetricL2: cpukern.U8L2}[op.Metric]
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

// ResidentBytes is the size of the images the op compares against.
func (op *PairwiseU8) ResidentBytes() int64 { return op.Data.Bytes() }

// WriteHash writes every parameter of the op.
func (op *PairwiseU8) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "pairwiseu8(%s,metric=%v)", op.params(), op.Metric)
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *PairwiseU8) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *PairwiseU8) String() string {
	if op.Upper {
		return fmt.Sprintf("Pairwise{%v, N=%d, D=%d, 8-bit, exact, upper}", op.Metric, op.Data.N, op.Data.D)
	}
	return fmt.Sprintf("Pairwise{%v, N=%d, D=%d, 8-bit, exact}", op.Metric, op.Data.N, op.Data.D)
}
