package ops

import (
	"errors"
	"fmt"
	"hash"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/parallel"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// Reduce selects what Interp1D returns for each query.
type Reduce int

// The reductions over the M interpolants of one query.
const (
	ReduceSumSq Reduce = iota // Σ_j value_j²
	ReduceSum                 // Σ_j value_j
	ReduceNone                // all M values
	// ReduceFormula is a user's formula over the M values (Interp1D's
	// Formula).
	ReduceFormula
)

func (r Reduce) String() string {
	switch r {
	case ReduceSumSq:
		return "sumsq"
	case ReduceSum:
		return "sum"
	case ReduceNone:
		return "none"
	case ReduceFormula:
		return "formula"
	}
	return fmt.Sprintf("Reduce(%d)", int(r))
}

// ParseReduce parses "sumsq", "sum" or "none".
func ParseReduce(s string) (Reduce, error) {
	for _, r := range []Reduce{ReduceSumSq, ReduceSum, ReduceNone} {
		if s == r.String() {
			return r, nil
		}
	}
	return 0, fmt.Errorf("unknown reduction %q (want sumsq, sum or none)", s)
}

// Method selects how Interp1D evaluates a reduction.
type Method int

const (
	// MethodAuto reduces without visiting the M interpolants per query where
	// the algebra allows: sumsq as wᵀ·Gram_start·w with a 4×4 Gram matrix
	// per grid cell, sum as w·colsum. ReduceNone is always direct.
	MethodAuto Method = iota
	// MethodDirect evaluates all M values of every query and reduces them.
	MethodDirect
)

func (m Method) String() string {
	if m == MethodDirect {
		return "direct"
	}
	return "auto"
}

// ParseMethod parses "auto" or "direct".
func ParseMethod(s string) (Method, error) {
	switch s {
	case "auto":
		return MethodAuto, nil
	case "direct":
		return MethodDirect, nil
	}
	return 0, fmt.Errorf("unknown method %q (want auto or direct)", s)
}

// The cubic weight polynomials of the seed: w(t) = A + t·(B + t·(C + t·D)).
var (
	cubA = [4]float64{-1.0 / 16, 9.0 / 16, 9.0 / 16, -1.0 / 16}
	cubB = [4]float64{1.0 / 24, -9.0 / 8, 9.0 / 8, -1.0 / 24}
	cubC = [4]float64{1.0 / 4, -1.0 / 4, -1.0 / 4, 1.0 / 4}
	cubD = [4]float64{-1.0 / 6, 1.0 / 2, -1.0 / 2, 1.0 / 6}
)

// InterpTable is M interpolants on the shared uniform grid a + i·dx,
// i = 0…G−1, prepared once for the evaluation paths a reduction needs.
//
// For a query x, with fp = f padded by one zero at each end,
// xc = clamp(x, a, a+(G+1)·dx) − a, ix = ⌊xc/dx⌋, t = xc/dx − (ix + ½),
// start = clamp(ix, 0, G−2) and w_k = A_k + t·(B_k + t·(C_k + t·D_k)), the
// value of interpolant j is Σ_k fp[j, start+k]·w_k.
type InterpTable struct {
	M, G   int
	A, Dx  float64
	ub     float64
	fpT32  []float32 // (G+2, M): fp transposed, for the direct path
	fpT64  []float64
	gram   []float64 // (G−1, 10): upper triangle of Σ_j fp[j,s:s+4]ᵀ·fp[j,s:s+4]
	colsum []float64 // (G+2): Σ_j fp[j, p]
	id     uint64

	scratch []float64 // refill's, for the Gram tables
}

var tableIDs atomic.Uint64

// NewTableID numbers a table of data an op holds (InterpTable,
// WaveletVolume, pairwise.PairData) for the op's hash and name: one
// sequence across all of them, so no two tables share a number.
func NewTableID() uint64 { return tableIDs.Add(1) }

// ErrInterpInput is wrapped by every error about the interpolants' data.
var ErrInterpInput = errors.New("interp")

// NewInterpTable validates f, an (m, g) row-major table of values, and
// prepares it for reduce and method at dtype (tensor.Float32 or Float64).
func NewInterpTable(f []float64, m, g int, a, dx float64, reduce Reduce, method Method, dtype tensor.Dtype) (*InterpTable, error) {
	switch {
	case m < 1:
		return nil, fmt.Errorf("%w: need at least one interpolant, got M = %d", ErrInterpInput, m)
	case g < 4:
		return nil, fmt.Errorf("%w: the grid needs at least 4 points, got G = %d", ErrInterpInput, g)
	case len(f) != m*g:
		return nil, fmt.Errorf("%w: table has %d values, want M·G = %d", ErrInterpInput, len(f), m*g)
	case !(dx > 0) || math.IsInf(dx, 0):
		return nil, fmt.Errorf("%w: grid spacing dx must be positive and finite, got %g", ErrInterpInput, dx)
	case math.IsNaN(a) || math.IsInf(a, 0):
		return nil, fmt.Errorf("%w: grid origin a must be finite, got %g", ErrInterpInput, a)
	}
	if dtype != tensor.Float32 && dtype != tensor.Float64 {
		return nil, fmt.Errorf("%w: dtype %v not supported (want float32 or float64)", ErrInterpInput, dtype)
	}
	for i, v := range f {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: f[%d, %d] is %g", ErrInterpInput, i/g, i%g, v)
		}
	}
	t := &InterpTable{M: m, G: g, A: a, Dx: dx, ub: a + float64(g+1)*dx, id: tableIDs.Add(1)}
	p := g + 2
	switch {
	case reduce == ReduceNone || reduce == ReduceFormula || method == MethodDirect:
		if dtype == tensor.Float32 {
			t.fpT32 = make([]float32, p*m)
			transposePadded(t.fpT32, f, m, g)
		} else {
			t.fpT64 = make([]float64, p*m)
			transposePadded(t.fpT64, f, m, g)
		}
	case reduce == ReduceSumSq:
		t.gram = cellGrams(f, m, g)
	case reduce == ReduceSum:
		t.colsum = make([]float64, p)
		for j := range m {
			row := f[j*g : (j+1)*g]
			for i, v := range row {
				t.colsum[i+1] += v
			}
		}
	}
	return t, nil
}

func transposePadded[T float32 | float64](dst []T, f []float64, m, g int) {
	for j := range m {
		row := f[j*g : (j+1)*g]
		for i, v := range row {
			dst[(i+1)*m+j] = T(v)
		}
	}
}

// cellGrams returns, for every start s in [0, G−2], the 10 distinct entries
// of the 4×4 Gram matrix Σ_j fp[j, s+k]·fp[j, s+l], in the order
// g00 g01 g02 g03 g11 g12 g13 g22 g23 g33.
func cellGrams(f []float64, m, g int) []float64 {
	gr := make([]float64, 10*(g-1))
	cellGramsInto(gr, make([]float64, 4*(g+2)), make([]float64, g+5), f, m, g)
	return gr
}

// cellGramsInto is cellGrams into gr, with the scratch c (4·(G+2)) and
// fp (G+5).
func cellGramsInto[T float32 | float64](gr, c, fp []float64, f []T, m, g int) {
	p := g + 2
	// c[4q+d] = Σ_j fp[j,q]·fp[j,q+d], d = 0…3.
	clear(c)
	clear(fp)
	for j := range m {
		for i, v := range f[j*g : (j+1)*g] {
			fp[i+1] = float64(v)
		}
		for q := range p {
			v := fp[q]
			c[4*q] += v * v
			c[4*q+1] += v * fp[q+1]
			c[4*q+2] += v * fp[q+2]
			c[4*q+3] += v * fp[q+3]
		}
	}
	for s := range g - 1 {
		e := gr[10*s : 10*s+10]
		e[0], e[1], e[2], e[3] = c[4*s], c[4*s+1], c[4*s+2], c[4*s+3]
		e[4], e[5], e[6] = c[4*(s+1)], c[4*(s+1)+1], c[4*(s+1)+2]
		e[7], e[8] = c[4*(s+2)], c[4*(s+2)+1]
		e[9] = c[4*(s+3)]
	}
}

// refill prepares the table again from new values f, an (M, G) row-major
// table of the op's element type, into the buffers it already holds (the
// scratch of the Gram tables is allocated at the first call).
func refill[T float32 | float64](t *InterpTable, f []T) {
	m, g := t.M, t.G
	switch {
	case t.fpT32 != nil:
		for j := range m {
			for i, v := range f[j*g : (j+1)*g] {
				t.fpT32[(i+1)*m+j] = float32(v)
			}
		}
	case t.fpT64 != nil:
		for j := range m {
			for i, v := range f[j*g : (j+1)*g] {
				t.fpT64[(i+1)*m+j] = float64(v)
			}
		}
	case t.gram != nil:
		if t.scratch == nil {
			t.scratch = make([]float64, 5*(g+2)+3)
		}
		cellGramsInto(t.gram, t.scratch[:4*(g+2)], t.scratch[4*(g+2):], f, m, g)
	case t.colsum != nil:
		clear(t.colsum)
		for j := range m {
			for i, v := range f[j*g : (j+1)*g] {
				t.colsum[i+1] += float64(v)
			}
		}
	}
}

// Bytes is the memory the prepared table holds.
func (t *InterpTable) Bytes() int64 {
	return int64(4*len(t.fpT32) + 8*len(t.fpT64) + 8*len(t.gram) + 8*len(t.colsum))
}

// weights returns the slice start and the four cubic weights for query x.
func (t *InterpTable) weights(x float64) (int, [4]float64) { return t.weightsOn(x, t.A, t.ub) }

// weightsOn is weights for the grid placed at a, its queries clamped to
// [a, ub]: the table's own grid, or (Interp1D.Local) the grid in the
// local coordinate, a = 0 and ub = (G+1)·dx.
func (t *InterpTable) weightsOn(x, a, ub float64) (int, [4]float64) {
	// Plain comparisons, not min/max: those order NaN and ±0, which the
	// queries (checked finite when read) do not need, and cost twice as much.
	if x < a {
		x = a
	} else if x > ub {
		x = ub
	}
	u := (x - a) / t.Dx
	fi := math.Floor(u)
	r := u - (fi + 0.5)
	s := int(fi)
	if s < 0 || fi != fi {
		s = 0
	} else if s > t.G-2 {
		s = t.G - 2
	}
	return s, [4]float64{
		cubA[0] + r*(cubB[0]+r*(cubC[0]+r*cubD[0])),
		cubA[1] + r*(cubB[1]+r*(cubC[1]+r*cubD[1])),
		cubA[2] + r*(cubB[2]+r*(cubC[2]+r*cubD[2])),
		cubA[3] + r*(cubB[3]+r*(cubC[3]+r*cubD[3])),
	}
}

// Interp1D is the Gorgonia op that evaluates a batch of queries, a vector
// of length Batch, against every interpolant of a table and reduces per
// query: the output is (Batch,) for sumsq and sum, (Batch, M) for none.
// No (Batch, M) array exists for the reductions.
type Interp1D struct {
	owned

	Table  *InterpTable
	Reduce Reduce
	Method Method
	Dtype  tensor.Dtype
	Batch  int
	// Formula is the user's reduction, for ReduceFormula.
	Formula *InterpFormula
	// Local makes the op take each query as x − a, its distance from the
	// grid's origin (the local coordinate), rather than as x: the grid is
	// placed at 0 and its queries clamped to [0, (G+1)·dx]. A float32
	// query near a grid far from zero keeps its digits only that way,
	// with x − a formed in float64 before it is rounded to float32
	// (graphs/interp does so). A formula's x is still the point,
	// a + (x − a).
	Local bool

	// valuesIn: the interpolants' values are the op's second input, an
	// (M, G) matrix read at every run (NewInterp1DValues), not constants
	// of its table.
	valuesIn bool

	valid int // the real queries of the next batch; 0: all of it
	out   *tensor.Dense

	keep  bool                    // compute the stats of each run (KeepStats)
	fill  func(x any, lo, hi int) // makes the input's queries chunk by chunk (FillInput)
	stats batchFigures            // the last run's
	done  []atomic.Bool           // per chunk of grain queries: evaluated (evalSummed)
	runs  []runFigures            // per chunk: the figures of its valid outputs
}

// runFigures are runSumMax's figures of one chunk.
type runFigures struct{ sum, mx float64 }

// batchFigures are BatchStats' figures of a run's first n outputs.
type batchFigures struct {
	n       int
	sum, mx float64
	ok      bool
}

// KeepStats makes the sumsq and sum reductions on per-cell tables (the
// default method) compute BatchStats' figures of their output as they
// compute it: the batch is evaluated in chunks handed out in order, the
// goroutine that evaluated a chunk adds it up while it is in cache, and
// the calling goroutine adds the chunks' sums in order: BatchStats'
// additions, in its order, spread over the cores.
func (op *Interp1D) KeepStats() { op.keep = true }

// FillInput has the op make its input's queries itself: fill writes
// queries [lo, hi) of the batch into x[lo:hi] (x the input's []float32 or
// []float64), called for each chunk just before the chunk is evaluated,
// on the goroutine that evaluates it, so a generated stream is made in
// cache, on every core, with no pass of its own. It reports whether this
// op's evaluation does so: the sumsq and sum reductions on per-cell
// tables with KeepStats (the CLI's default); otherwise fill is not kept
// and the input must hold the queries before the run.
func (op *Interp1D) FillInput(fill func(x any, lo, hi int)) bool {
	t := op.Table
	if !op.keep || !((op.Reduce == ReduceSumSq && t.gram != nil) || (op.Reduce == ReduceSum && t.colsum != nil)) {
		return false
	}
	op.fill = fill
	return true
}

// TakeStats returns the figures of the last run, once, when it computed
// them for n outputs.
func (op *Interp1D) TakeStats(n int) (sum, max float64, ok bool) {
	f := op.stats
	op.stats.ok = false
	if !f.ok || f.n != n {
		return 0, 0, false
	}
	return f.sum, f.mx, true
}

// SetValidRows sets how many leading queries of the next batch are real:
// a formula is evaluated, and its NaN and infinite results counted, on
// those only, not on the zeros padding a short last batch.
func (op *Interp1D) SetValidRows(n int) { op.valid = min(max(n, 0), op.Batch) }

// NewInterp1D returns the op for batches of batch queries.
func NewInterp1D(t *InterpTable, reduce Reduce, method Method, dtype tensor.Dtype, batch int) *Interp1D {
	if batch < 1 {
		panic("ops: Interp1D batch < 1")
	}
	if (dtype == tensor.Float32 && t.fpT64 != nil) || (dtype == tensor.Float64 && t.fpT32 != nil) {
		panic("ops: Interp1D dtype differs from its table's")
	}
	return &Interp1D{Table: t, Reduce: reduce, Method: method, Dtype: dtype, Batch: batch}
}

// NewInterp1DValues returns the op for batches of batch queries whose
// interpolants' values are not constants but its second input, an (M, G)
// matrix of dtype read at every run: the op that Gorgonia can
// differentiate with respect to the values as well as the queries
// (SymDiff). The table of the grid a + i·dx is prepared again from the
// values at each run, into buffers allocated here. A formula reduction is
// refused.
func NewInterp1DValues(m, g int, a, dx float64, reduce Reduce, method Method, dtype tensor.Dtype, batch int) (*Interp1D, error) {
	if reduce == ReduceFormula {
		return nil, fmt.Errorf("%w: values as an input: a formula reduction is not supported", ErrInterpInput)
	}
	f := make([]float64, max(m, 0)*max(g, 0)) // the values arrive with each run
	t, err := NewInterpTable(f, m, g, a, dx, reduce, method, dtype)
	if err != nil {
		return nil, err
	}
	op := NewInterp1D(t, reduce, method, dtype, batch)
	op.valuesIn = true
	return op, nil
}

// ValuesInput reports whether the values are the op's second input
// (NewInterp1DValues).
func (op *Interp1D) ValuesInput() bool { return op.valuesIn }

// Arity is 1, the query vector, or 2 with the values as an input.
func (op *Interp1D) Arity() int {
	if op.valuesIn {
		return 2
	}
	return 1
}

// Type is Vector a → Tensor a, or Vector a → Matrix a → Tensor a with the
// values as an input.
func (op *Interp1D) Type() hm.Type {
	a := hm.TypeVariable('a')
	if op.valuesIn {
		return hm.NewFnType(G.TensorType{Dims: 1, Of: a}, G.TensorType{Dims: 2, Of: a}, G.TensorType{Dims: op.outDims(), Of: a})
	}
	return hm.NewFnType(G.TensorType{Dims: 1, Of: a}, G.TensorType{Dims: op.outDims(), Of: a})
}

func (op *Interp1D) outDims() int {
	if op.Reduce == ReduceNone {
		return 2
	}
	return 1
}

func (op *Interp1D) outShape() tensor.Shape {
	if op.Reduce == ReduceNone {
		return tensor.Shape{op.Batch, op.Table.M}
	}
	return tensor.Shape{op.Batch}
}

// InferShape checks the input is a vector of Batch queries (and the
// values an (M, G) matrix).
func (op *Interp1D) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("interp1d: want %d inputs, got %d", op.Arity(), len(in))
	}
	if s, ok := in[0].(tensor.Shape); ok && (len(s) != 1 || s[0] != op.Batch) {
		return nil, fmt.Errorf("interp1d: input shape %v, want (%d)", s, op.Batch)
	}
	if op.valuesIn {
		if s, ok := in[1].(tensor.Shape); ok && !s.Eq(tensor.Shape{op.Table.M, op.Table.G}) {
			return nil, fmt.Errorf("interp1d: values shape %v, want (%d, %d)", s, op.Table.M, op.Table.G)
		}
	}
	return op.outShape(), nil
}

// values checks v is the (M, G) values input of the op's dtype.
func (op *Interp1D) values(v G.Value) (*tensor.Dense, error) {
	f, ok := v.(*tensor.Dense)
	if !ok || f.Dtype() != op.Dtype || !f.Shape().Eq(tensor.Shape{op.Table.M, op.Table.G}) {
		return nil, fmt.Errorf("interp1d: values are %T %v, want %v (%d, %d)", v, v.Shape(), op.Dtype, op.Table.M, op.Table.G)
	}
	return f, nil
}

// Do evaluates the batch into the op's own output buffer and returns it.
func (op *Interp1D) Do(in ...G.Value) (G.Value, error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("interp1d: want %d inputs, got %d", op.Arity(), len(in))
	}
	x, ok := in[0].(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("interp1d: input is %T, want *tensor.Dense", in[0])
	}
	if x.Dtype() != op.Dtype || x.Shape().TotalSize() != op.Batch {
		return nil, fmt.Errorf("interp1d: input is %v %v, want %v (%d)", x.Dtype(), x.Shape(), op.Dtype, op.Batch)
	}
	if op.valuesIn {
		f, err := op.values(in[1])
		if err != nil {
			return nil, err
		}
		switch fd := f.Data().(type) {
		case []float32:
			refill(op.Table, fd)
		case []float64:
			refill(op.Table, fd)
		}
	}
	if op.out == nil {
		op.out = tensor.New(tensor.WithShape(op.outShape()...), tensor.Of(op.Dtype))
	}
	op.stats.ok = false
	switch xd := x.Data(); op.Dtype {
	case tensor.Float32:
		evalBatch(op, xd, xd.([]float32), op.out.Data().([]float32), op.Table.fpT32)
	case tensor.Float64:
		evalBatch(op, xd, xd.([]float64), op.out.Data().([]float64), op.Table.fpT64)
	}
	return op.out, nil
}

// grain is the smallest number of queries worth a goroutine.
const grain = 2048

// streamBytes: a ReduceNone batch whose output is at least this large
// (twice the L2 caches of the machine measured) is written with
// non-temporal stores (cpukern.InterpValues): bypassing the caches halves
// its memory traffic, and the next op reading it back from memory costs
// less than that saves (the CLI's --reduce none, 78 MB batches: 0.57-0.76 s
// streamed, 0.88-0.95 s not).
const streamBytes = 8 << 20

// grid is the table's grid for the cpukern kernels, in the coordinate of
// the op's queries (Local).
func (op *Interp1D) grid() cpukern.CubicGrid {
	t := op.Table
	if op.Local {
		return cpukern.CubicGrid{G: t.G, A: 0, Dx: t.Dx, Ub: float64(t.G+1) * t.Dx}
	}
	return cpukern.CubicGrid{G: t.G, A: t.A, Dx: t.Dx, Ub: t.ub}
}

// evalBatch evaluates x into out with the cpukern kernels, each on a
// contiguous share of the queries per core; xd is x as the input tensor
// holds it, for FillInput's fill.
func evalBatch[T float32 | float64](op *Interp1D, xd any, x, out, fpT []T) {
	t := op.Table
	g := op.grid()
	switch {
	case op.Reduce == ReduceFormula:
		n := len(x)
		if op.valid > 0 {
			n = op.valid
		}
		formulaReduce(op.Formula, t, g, fpT, x[:n], out[:n])
	case op.Reduce == ReduceSumSq && t.gram != nil && op.keep:
		evalSummed(op, out, func(lo, hi int) {
			op.fillChunk(xd, lo, hi)
			cpukern.InterpGram(out[lo:hi], x[lo:hi], g, t.gram)
		})
	case op.Reduce == ReduceSumSq && t.gram != nil:
		parallel.For(len(x), grain, func(lo, hi int) { cpukern.InterpGram(out[lo:hi], x[lo:hi], g, t.gram) })
	case op.Reduce == ReduceSum && t.colsum != nil && op.keep:
		evalSummed(op, out, func(lo, hi int) {
			op.fillChunk(xd, lo, hi)
			cpukern.InterpColSum(out[lo:hi], x[lo:hi], g, t.colsum)
		})
	case op.Reduce == ReduceSum && t.colsum != nil:
		parallel.For(len(x), grain, func(lo, hi int) { cpukern.InterpColSum(out[lo:hi], x[lo:hi], g, t.colsum) })
	case op.Reduce == ReduceNone:
		m := t.M
		stream := int64(len(out))*int64(unsafe.Sizeof(out[0])) >= streamBytes
		parallel.For(len(x), grain/16, func(lo, hi int) {
			cpukern.InterpValues(out[lo*m:hi*m], x[lo:hi], g, fpT, m, stream)
		})
	default:
		sumsq := op.Reduce == ReduceSumSq
		parallel.For(len(x), grain/16, func(lo, hi int) {
			cpukern.InterpReduce(out[lo:hi], x[lo:hi], g, fpT, t.M, sumsq)
		})
	}
}

// fillChunk makes queries [lo, hi) of x when the op makes its input
// (FillInput).
func (op *Interp1D) fillChunk(x any, lo, hi int) {
	if op.fill != nil {
		op.fill(x, lo, hi)
	}
}

// evalSummed evaluates out in chunks of grain queries, eval(lo, hi) each,
// handed out in order to up to GOMAXPROCS goroutines, and keeps the
// figures of the valid outputs in op.stats: the goroutine that evaluated
// a chunk adds up its valid outputs (runSumMax, as BatchStats' sumMax
// does the same run), and the calling goroutine adds the chunks' sums in
// order as they are done, evaluating the next chunk whenever the one it
// is to add is not done yet.
func evalSummed[T float32 | float64](op *Interp1D, out []T, eval func(lo, hi int)) {
	n := len(out)
	nv := n
	if op.valid > 0 {
		nv = op.valid
	}
	nc := (n + grain - 1) / grain
	if len(op.done) != nc {
		op.done = make([]atomic.Bool, nc)
		op.runs = make([]runFigures, nc)
	}
	for i := range op.done {
		op.done[i].Store(false)
	}
	var next atomic.Int64
	// claim evaluates and adds up the next chunk not yet handed out;
	// false: none left.
	claim := func() bool {
		c := int(next.Add(1)) - 1
		if c >= nc {
			return false
		}
		lo, hi := c*grain, min((c+1)*grain, n)
		eval(lo, hi)
		f := runFigures{mx: math.Inf(-1)}
		if vhi := min(hi, nv); lo < vhi {
			f.sum, f.mx = runSumMax(out[lo:vhi])
		}
		op.runs[c] = f
		op.done[c].Store(true)
		return true
	}
	helpers := min(runtime.GOMAXPROCS(0), nc) - 1
	var wg sync.WaitGroup
	wg.Add(helpers)
	for range helpers {
		go func() {
			defer wg.Done()
			for claim() {
			}
		}()
	}
	sum, mx := 0.0, math.Inf(-1)
	for c := 0; c < nc; {
		switch {
		case op.done[c].Load():
			if f := op.runs[c]; c*grain < nv {
				sum += f.sum
				if f.mx > mx {
					mx = f.mx
				}
			}
			c++
		case claim():
		default: // chunk c is being evaluated by a helper
			runtime.Gosched()
		}
	}
	wg.Wait()
	op.stats = batchFigures{n: nv, sum: sum, mx: mx, ok: true}
}

// ResidentBytes is the size of the prepared table.
func (op *Interp1D) ResidentBytes() int64 { return op.Table.Bytes() }

// WriteHash writes every parameter of the op, so two different ops never
// merge into one graph node.
func (op *Interp1D) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "interp1d(table=%d,M=%d,G=%d,reduce=%v,method=%v,dtype=%v,batch=%d,local=%t,values=%t)",
		op.Table.id, op.Table.M, op.Table.G, op.Reduce, op.Method, op.Dtype, op.Batch, op.Local, op.valuesIn)
	if op.Formula != nil {
		fmt.Fprintf(h, "formula=%q", op.Formula.F.Canonical())
	}
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *Interp1D) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *Interp1D) String() string {
	if op.Formula != nil {
		return fmt.Sprintf("Interp1D{M=%d, G=%d, reduce=%s}", op.Table.M, op.Table.G, op.Formula.F.Canonical())
	}
	return fmt.Sprintf("Interp1D{M=%d, G=%d, reduce=%v, method=%v}", op.Table.M, op.Table.G, op.Reduce, op.Method)
}
