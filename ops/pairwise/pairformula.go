package pairwise

import (
	"fmt"
	"hash"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/formula"
	"github.com/tapeloop/tapeloop/internal/parallel"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// PairFormula is a user's affinity formula prepared over the images: its
// compiled plan and the values it needs of each image (norms, means, …),
// computed once, not once per pair.
type PairFormula struct {
	Formula *formula.Formula
	Plan    *formula.PairPlan
	// Symmetric: f(a, b) = f(b, a) for every pair, so each pair may be
	// computed once and mirrored.
	Symmetric bool

	rowVals []float64 // (N, nr): image i's values
	cols32  [][]float32
	cols64  [][]float64 // per row value, its N values, for the dot-product path
	states  sync.Pool
	bad     atomic.Int64
}

// NewPairFormula compiles f for data's images (direct: no rewrite into
// dot products) and computes each image's values.
func NewPairFormula(f *formula.Formula, data *PairData, direct bool) (*PairFormula, error) {
	plan, err := formula.CompilePair(f, data.D, direct)
	if err != nil {
		return nil, err
	}
	sym, err := formula.Symmetric(f)
	if err != nil {
		return nil, err
	}
	pf := &PairFormula{Formula: f, Plan: plan, Symmetric: sym}
	nr := plan.NRow()
	pf.rowVals = make([]float64, data.N*nr)
	switch data.Dtype.Name() {
	case "float32":
		rowValues(pf, data.X32, data.N, data.D)
		pf.cols32 = columns[float32](pf.rowVals, data.N, nr)
	default:
		rowValues(pf, data.X64, data.N, data.D)
		pf.cols64 = columns[float64](pf.rowVals, data.N, nr)
	}
	return pf, nil
}

func rowValues[T float32 | float64](pf *PairFormula, x []T, n, d int) {
	nr := pf.Plan.NRow()
	if nr == 0 {
		return
	}
	parallel.Dynamic(n, 16, func(lo, hi int) {
		for k, p := range pf.Plan.Rows {
			st := cpukern.NewFxState[T](p)
			for i := lo; i < hi; i++ {
				st.Reset()
				st.Run(d, [][]T{x[i*d : (i+1)*d]}, nil)
				pf.rowVals[i*nr+k] = st.Regs[p.Result]
			}
		}
	})
}

func columns[T float32 | float64](vals []float64, n, nr int) [][]T {
	cols := make([][]T, nr)
	for k := range cols {
		cols[k] = make([]T, n)
		for i := range n {
			cols[k][i] = T(vals[i*nr+k])
		}
	}
	return cols
}

// Bytes is the memory of the images' values.
func (pf *PairFormula) Bytes() int64 {
	b := int64(8 * len(pf.rowVals))
	for _, c := range pf.cols32 {
		b += int64(4 * len(c))
	}
	for _, c := range pf.cols64 {
		b += int64(8 * len(c))
	}
	return b
}

// NonFinite is the number of NaN or infinite affinities computed so far.
func (pf *PairFormula) NonFinite() int64 { return pf.bad.Load() }

// String names the formula and how it runs.
func (pf *PairFormula) String() string {
	how := "per pair"
	if pf.Plan.Product != nil {
		how = "from dot products"
	}
	return fmt.Sprintf("%s (%s)", pf.Formula.Canonical(), how)
}

type pairStates[T float32 | float64] struct {
	pair, product *cpukern.FxState[T]
	ra            []float64
	own           [][]T // Product's: per row value, the row's own (one value, broadcast)
	in, outs      [][]T
}

func getStates[T float32 | float64](pf *PairFormula) *pairStates[T] {
	if s, ok := pf.states.Get().(*pairStates[T]); ok {
		return s
	}
	nr := pf.Plan.NRow()
	s := &pairStates[T]{ra: make([]float64, rowChunk*nr)}
	if pf.Plan.Pair != nil {
		s.pair = cpukern.NewFxState[T](pf.Plan.Pair)
	} else {
		s.product = cpukern.NewFxState[T](pf.Plan.Product)
		s.own, s.in, s.outs = make([][]T, nr), make([][]T, 1+2*nr), make([][]T, 1)
		for k := range s.own {
			s.own[k] = make([]T, 1)
		}
	}
	return s
}

// productRows turns rows [0, b) of a block of dot products (columns
// [c0, N)) into the formula's values in out, the rows images idx[0], ….
//
// Product computes each element alike from its own inputs (the dot
// product, the column's row values, the row's own, each a vector: the
// row's given as one value, broadcast by the evaluator), so a
// pair's value does not depend on where it sits. With a symmetric formula
// the image of smaller index is always given the row's part: the columns
// left of the row's own image, computed in another block's rows or in a
// shard's whole rows, get the column's values as the row's and the row's
// as theirs. Pair (i, j) is then computed as (min, max) wherever it is,
// the same bits as its mirror image (j, i).
func productRows[T float32 | float64](pf *PairFormula, c0, b, n int, idx []float64, blk, out []T, cols [][]T, upper bool) {
	nr := pf.Plan.NRow()
	parallel.For(b, 16, func(lo, hi int) {
		st := getStates[T](pf)
		defer pf.states.Put(st)
		own := st.own
		var bad int64
		for i := lo; i < hi; i++ {
			img := int(idx[i])
			split := c0 // columns [c0, split) swap roles
			if pf.Symmetric {
				split = min(max(img, c0), n)
			}
			for k := range nr {
				own[k][0] = T(pf.rowVals[img*nr+k])
			}
			st.product.Reset()
			st.run(nr, c0, split, true, blk[i*n:(i+1)*n], out[i*n:(i+1)*n], cols)
			st.run(nr, split, n, false, blk[i*n:(i+1)*n], out[i*n:(i+1)*n], cols)
			bad += countRow(out[i*n+c0:(i+1)*n], c0, img, upper)
		}
		pf.bad.Add(bad)
	})
}

// run evaluates Product over columns [from, to) of a row of dot products
// blk into the row out, the columns' row values from cols and the row's
// own from st.own; with swap, the two exchange their parts.
func (st *pairStates[T]) run(nr, from, to int, swap bool, blk, out []T, cols [][]T) {
	if from == to {
		return
	}
	st.in[0] = blk[from:to]
	for k := range nr {
		col, mine := cols[k][from:to], st.own[k] // one value: the same for every column
		if swap {
			col, mine = mine, col
		}
		st.in[1+k], st.in[1+nr+k] = col, mine
	}
	st.outs[0] = out[from:to]
	st.product.Run(to-from, st.in, st.outs)
}

// countRow counts the non-finite entries of the matrix that a computed
// row o, columns [c0, N) of image img's row, makes: with upper, the
// values right of the diagonal stand for two entries each (they are
// mirrored), the diagonal for one, and those left of it (below the
// diagonal, computed only because the block's columns start at its
// first row) for none, the mirror overwriting them.
func countRow[T float32 | float64](o []T, c0, img int, upper bool) int64 {
	d := img - c0
	if !upper || d < 0 || d >= len(o) {
		return opkit.CountBad(o)
	}
	return 2*opkit.CountBad(o[d+1:]) + opkit.CountBad(o[d:d+1])
}

// PairMap is the Gorgonia op that turns a block of dot products (Batch,
// N), with its row indices (Batch,), into the affinities of a formula
// rewritten over dot products (PairPlan.Product): output (Batch, N). Like
// Pairwise with RowsFromData it computes the rows while the index runs on
// by one and stays below N, and with Upper only the columns from the
// block's first row index on.
type PairMap struct {
	owned

	F     *PairFormula
	Data  *PairData
	Batch int
	Upper bool

	out *tensor.Dense
}

// NewPairMap returns the op for blocks of batch rows of data's images.
func NewPairMap(f *PairFormula, data *PairData, batch int) *PairMap {
	if f.Plan.Product == nil {
		panic("ops: PairMap of a formula not rewritten over dot products")
	}
	return &PairMap{F: f, Data: data, Batch: batch}
}

// Arity is 2: the block of dot products and the row indices.
func (op *PairMap) Arity() int { return 2 }

// Type is (Matrix a, Vector c) → Matrix a.
func (op *PairMap) Type() hm.Type {
	a, c := hm.TypeVariable('a'), hm.TypeVariable('c')
	return hm.NewFnType(G.TensorType{Dims: 2, Of: a}, G.TensorType{Dims: 1, Of: c}, G.TensorType{Dims: 2, Of: a})
}

// InferShape checks the block is (Batch, N) and the index (Batch).
func (op *PairMap) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("pairmap: want 2 inputs, got %d", len(in))
	}
	if s, ok := in[0].(tensor.Shape); ok && (len(s) != 2 || s[0] != op.Batch || s[1] != op.Data.N) {
		return nil, fmt.Errorf("pairmap: input shape %v, want (%d, %d)", s, op.Batch, op.Data.N)
	}
	return tensor.Shape{op.Batch, op.Data.N}, nil
}

// Do computes the block's affinities into the op's own buffer.
func (op *PairMap) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("pairmap: want 2 inputs, got %d", len(in))
	}
	blk, ok1 := in[0].(*tensor.Dense)
	index, ok2 := in[1].(*tensor.Dense)
	n := op.Data.N
	if !ok1 || !ok2 || blk.Dtype() != op.Data.Dtype || blk.Shape().TotalSize() != op.Batch*n ||
		index.Dtype() != tensor.Float64 || index.Shape().TotalSize() != op.Batch {
		return nil, fmt.Errorf("pairmap: inputs %v and %v, want %v (%d, %d) and float64 (%d)", in[0].Shape(), in[1].Shape(),
			op.Data.Dtype, op.Batch, n, op.Batch)
	}
	idx := index.Data().([]float64)
	lo := int(idx[0])
	if float64(lo) != idx[0] || lo < 0 || lo >= n {
		return nil, fmt.Errorf("pairmap: first row index %v outside [0, %d)", idx[0], n)
	}
	m := 1
	for m < op.Batch && lo+m < n && idx[m] == float64(lo+m) {
		m++
	}
	c0 := 0
	if op.Upper {
		c0 = lo
	}
	if op.out == nil {
		op.out = opkit.NewOwned(op.Data.Dtype, op.Batch, n)
	}
	switch b := blk.Data().(type) {
	case []float32:
		productRows(op.F, c0, m, n, idx, b, op.out.Data().([]float32), op.F.cols32, op.Upper)
	case []float64:
		productRows(op.F, c0, m, n, idx, b, op.out.Data().([]float64), op.F.cols64, op.Upper)
	}
	return op.out, nil
}

// ResidentBytes is the size of the formula's per-image values.
func (op *PairMap) ResidentBytes() int64 { return op.F.Bytes() }

// WriteHash writes every parameter of the op.
func (op *PairMap) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "pairmap(formula=%q,data=%d,batch=%d,upper=%v)", op.F.Formula.Canonical(), op.Data.id, op.Batch, op.Upper)
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *PairMap) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *PairMap) String() string {
	return fmt.Sprintf("f(a, b) = %s, from %s", op.F.Formula.Canonical(), strings.Join(op.F.Plan.Terms, ", "))
}
