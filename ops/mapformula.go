package ops

import (
	"fmt"
	"hash"
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

// MuVars and PostVars are the variables of the DRR's formulas: a voxel's
// value, and a pixel's line integral.
var (
	MuVars   = []formula.Var{{Name: "h", Vector: true, About: "a voxel's value (e.g. HU)"}}
	PostVars = []formula.Var{{Name: "p", Vector: true, About: "a pixel's line integral"}}
)

// MapFormula is a user's formula applied element by element to an array
// of n values: each element's value is the formula's variable, and a
// reduction in it (max(p), mean(h)) reduces over the whole array.
type MapFormula struct {
	F      *formula.Formula
	Prog   *cpukern.FxProgram
	N      int
	passes int

	states sync.Pool
	bad    atomic.Int64
}

// NewMapFormula compiles f, over one vector variable, for arrays of n
// values.
func NewMapFormula(f *formula.Formula, n int) (*MapFormula, error) {
	g, err := f.Graph(n)
	if err != nil {
		return nil, err
	}
	p, err := formula.Lower(g, []int{0}, true)
	if err != nil {
		return nil, err
	}
	m := &MapFormula{F: f, Prog: p, N: n}
	for _, b := range p.Blocks {
		if b.Vector {
			m.passes++
		}
	}
	return m, nil
}

// NonFinite is the number of NaN or infinite values made so far.
func (m *MapFormula) NonFinite() int64 { return m.bad.Load() }

// ResetNonFinite sets the count of non-finite values back to zero.
func (m *MapFormula) ResetNonFinite() { m.bad.Store(0) }

// Apply32 sets out to the formula of x (both N long; they may be the
// same slice), on every core when the formula has no reduction.
func (m *MapFormula) Apply32(x, out []float32) {
	if len(x) != m.N || len(out) != m.N {
		panic(fmt.Sprintf("ops: MapFormula over %d values applied to %d and %d", m.N, len(x), len(out)))
	}
	if m.passes > 1 { // a reduction over the whole array first: one run
		m.run(x, out)
		return
	}
	parallel.For(len(x), 1<<16, func(lo, hi int) { m.run(x[lo:hi], out[lo:hi]) })
}

func (m *MapFormula) run(x, out []float32) {
	st, ok := m.states.Get().(*cpukern.FxState[float32])
	if !ok {
		st = cpukern.NewFxState[float32](m.Prog)
	}
	st.Reset()
	st.Run(len(x), [][]float32{x}, [][]float32{out})
	m.states.Put(st)
	m.bad.Add(opkit.CountBad(out))
}

// MapImages is the Gorgonia op that applies a MapFormula to each image of
// a batch (batch, rows, cols) float32: output the same shape, its own
// buffer. Only the batch's valid images are computed (RowCounter).
type MapImages struct {
	owned

	F                 *MapFormula
	Batch, Rows, Cols int
	valid             int
	out               *tensor.Dense
}

// NewMapImages returns the op for batches of batch images of rows×cols.
func NewMapImages(f *MapFormula, batch, rows, cols int) *MapImages {
	if f.N != rows*cols {
		panic("ops: MapImages formula compiled for another image size")
	}
	return &MapImages{F: f, Batch: batch, Rows: rows, Cols: cols, valid: batch}
}

// SetValidRows sets how many images of the next batch are real.
func (op *MapImages) SetValidRows(n int) { op.valid = n }

// Arity is 1: the images.
func (op *MapImages) Arity() int { return 1 }

// Type is Tensor3 a → Tensor3 a.
func (op *MapImages) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(G.TensorType{Dims: 3, Of: a}, G.TensorType{Dims: 3, Of: a})
}

// InferShape checks the input is (Batch, Rows, Cols).
func (op *MapImages) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("mapimages: want 1 input, got %d", len(in))
	}
	want := tensor.Shape{op.Batch, op.Rows, op.Cols}
	if s, ok := in[0].(tensor.Shape); ok && !s.Eq(want) {
		return nil, fmt.Errorf("mapimages: input shape %v, want %v", s, want)
	}
	return want, nil
}

// Do applies the formula to each valid image.
func (op *MapImages) Do(in ...G.Value) (G.Value, error) {
	per := op.Rows * op.Cols
	x, ok := in[0].(*tensor.Dense)
	if len(in) != 1 || !ok || x.Dtype() != tensor.Float32 || x.Shape().TotalSize() != op.Batch*per {
		return nil, fmt.Errorf("mapimages: want float32 (%d, %d, %d)", op.Batch, op.Rows, op.Cols)
	}
	if op.out == nil {
		op.out = opkit.NewOwned(tensor.Float32, op.Batch, op.Rows, op.Cols)
	}
	src, dst := x.Data().([]float32), op.out.Data().([]float32)
	for i := range min(op.valid, op.Batch) {
		op.F.Apply32(src[i*per:(i+1)*per], dst[i*per:(i+1)*per])
	}
	return op.out, nil
}

// WriteHash writes every parameter of the op.
func (op *MapImages) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "mapimages(formula=%q,batch=%d,rows=%d,cols=%d)", op.F.F.Canonical(), op.Batch, op.Rows, op.Cols)
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *MapImages) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *MapImages) String() string { return fmt.Sprintf("per pixel: %s", op.F.F.Canonical()) }
