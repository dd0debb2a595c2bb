package ops

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/parallel"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// InterpWRT names the input of an Interp1D that a gradient is taken with
// respect to.
type InterpWRT int

// The differentiable inputs of an Interp1D.
const (
	WRTQueries InterpWRT = iota // the query vector x
	WRTValues                   // the (M, G) values (NewInterp1DValues)
)

func (w InterpWRT) String() string {
	if w == WRTValues {
		return "values"
	}
	return "queries"
}

// Interp1DGrad is the backward of an Interp1D with respect to one of its
// inputs: it takes the forward's inputs and the upstream gradient (the
// gradient of a cost with respect to the forward's output, of the output's
// shape) and returns the gradient of the cost with respect to the queries,
// (Batch,), or to the values, (M, G).
//
// With respect to query i it is Σ_j c_ij·v_j'(x_i), v_j' the derivative of
// interpolant j (the derivative of the cubic of the query's cell, Σ_k
// w_k'(t)/dx times the padded values at s+k; zero where the forward clamps
// the query, below a and from ub = a + (G+1)·dx up: the derivative from
// the right, as the forward takes the cell on the right of a node, and is
// constant from ub on), with c_ij = up[i, j] for
// ReduceNone, 2·up[i]·v_ij for ReduceSumSq and up[i] for ReduceSum. With
// respect to the values, which the output is linear in, it is the
// transpose of the interpolation weights applied to c: value i of
// interpolant j receives Σ over the queries q with s_q ≤ i+1 ≤ s_q+3 of
// w_{q,i+1−s_q}·c_qj (the padding zeros receive nothing). Its sums run
// over the queries in order for each value, the interpolants split among
// the cores: the result does not depend on the number of threads.
//
// A formula reduction has no gradient. Everything is computed in float64
// and rounded to the op's dtype once.
type Interp1DGrad struct {
	owned

	Fwd *Interp1D
	WRT InterpWRT

	out   *tensor.Dense
	acc   []float64 // (G+2, M): the values' gradient, padded and transposed
	fpT32 []float32 // (G+2, M): the values input, padded and transposed
	fpT64 []float64
}

// NewInterp1DGrad returns the backward of fwd with respect to wrt. It
// panics on a formula reduction, and on WRTValues when fwd's values are
// constants of its table (they are an input only with NewInterp1DValues).
func NewInterp1DGrad(fwd *Interp1D, wrt InterpWRT) *Interp1DGrad {
	if fwd.Reduce == ReduceFormula {
		panic("ops: Interp1DGrad of a formula reduction")
	}
	if wrt == WRTValues && !fwd.valuesIn {
		panic("ops: Interp1DGrad with respect to constant values")
	}
	return &Interp1DGrad{Fwd: fwd, WRT: wrt}
}

// DiffWRT: the queries, and the values when they are an input; nothing
// for a formula reduction.
func (op *Interp1D) DiffWRT(inputs int) []bool {
	d := make([]bool, inputs)
	if op.Reduce == ReduceFormula || inputs == 0 {
		return d
	}
	d[0] = true
	if op.valuesIn && inputs > 1 {
		d[1] = true
	}
	return d
}

// SymDiff returns the gradients of the queries (and of the values when
// they are an input) as Interp1DGrad nodes of the inputs and grad.
func (op *Interp1D) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if op.Reduce == ReduceFormula {
		return nil, fmt.Errorf("interp1d: a formula reduction has no gradient")
	}
	if len(inputs) != op.Arity() {
		return nil, fmt.Errorf("interp1d: want %d inputs, got %d", op.Arity(), len(inputs))
	}
	args := append(append(G.Nodes{}, inputs...), grad)
	dx, err := G.ApplyOp(NewInterp1DGrad(op, WRTQueries), args...)
	if err != nil {
		return nil, fmt.Errorf("interp1d: gradient of the queries: %w", err)
	}
	if !op.valuesIn {
		return G.Nodes{dx}, nil
	}
	df, err := G.ApplyOp(NewInterp1DGrad(op, WRTValues), args...)
	if err != nil {
		return nil, fmt.Errorf("interp1d: gradient of the values: %w", err)
	}
	return G.Nodes{dx, df}, nil
}

// Arity is the forward's inputs and the upstream gradient.
func (op *Interp1DGrad) Arity() int { return op.Fwd.Arity() + 1 }

// Type is the forward's inputs, then its output's type, to a vector (the
// queries' gradient) or a matrix (the values').
func (op *Interp1DGrad) Type() hm.Type {
	a := hm.TypeVariable('a')
	outDims := 1
	if op.WRT == WRTValues {
		outDims = 2
	}
	ts := []hm.Type{G.TensorType{Dims: 1, Of: a}}
	if op.Fwd.valuesIn {
		ts = append(ts, G.TensorType{Dims: 2, Of: a})
	}
	ts = append(ts, G.TensorType{Dims: op.Fwd.outDims(), Of: a}, G.TensorType{Dims: outDims, Of: a})
	return hm.NewFnType(ts...)
}

func (op *Interp1DGrad) outShape() tensor.Shape {
	if op.WRT == WRTValues {
		return tensor.Shape{op.Fwd.Table.M, op.Fwd.Table.G}
	}
	return tensor.Shape{op.Fwd.Batch}
}

// InferShape checks the forward's inputs and the upstream gradient's
// shape.
func (op *Interp1DGrad) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("interp1d grad: want %d inputs, got %d", op.Arity(), len(in))
	}
	if _, err := op.Fwd.InferShape(in[:len(in)-1]...); err != nil {
		return nil, err
	}
	if s, ok := in[len(in)-1].(tensor.Shape); ok && !s.Eq(op.Fwd.outShape()) {
		return nil, fmt.Errorf("interp1d grad: upstream shape %v, want %v", s, op.Fwd.outShape())
	}
	return op.outShape(), nil
}

// Do computes the gradient into the op's own output buffer.
func (op *Interp1DGrad) Do(in ...G.Value) (G.Value, error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("interp1d grad: want %d inputs, got %d", op.Arity(), len(in))
	}
	fwd := op.Fwd
	x, ok := in[0].(*tensor.Dense)
	if !ok || x.Dtype() != fwd.Dtype || x.Shape().TotalSize() != fwd.Batch {
		return nil, fmt.Errorf("interp1d grad: queries are %T %v, want %v (%d)", in[0], in[0].Shape(), fwd.Dtype, fwd.Batch)
	}
	up, ok := in[len(in)-1].(*tensor.Dense)
	if !ok || up.Dtype() != fwd.Dtype || !up.Shape().Eq(fwd.outShape()) {
		return nil, fmt.Errorf("interp1d grad: upstream is %T %v, want %v %v", in[len(in)-1], in[len(in)-1].Shape(), fwd.Dtype, fwd.outShape())
	}
	var f *tensor.Dense
	if fwd.valuesIn {
		var err error
		if f, err = fwd.values(in[1]); err != nil {
			return nil, err
		}
	}
	if op.out == nil {
		op.out = opkit.NewOwned(fwd.Dtype, op.outShape()...)
	}
	switch fwd.Dtype {
	case tensor.Float32:
		gradBatch(op, x.Data().([]float32), up.Data().([]float32), op.out.Data().([]float32), f, &op.fpT32, fwd.Table.fpT32)
	case tensor.Float64:
		gradBatch(op, x.Data().([]float64), up.Data().([]float64), op.out.Data().([]float64), f, &op.fpT64, fwd.Table.fpT64)
	}
	return op.out, nil
}

// gradMode is what the forward's reduction makes the upstream gradient.
func (op *Interp1DGrad) gradMode() cpukern.GradMode {
	switch op.Fwd.Reduce {
	case ReduceNone:
		return cpukern.GradValues
	case ReduceSum:
		return cpukern.GradSum
	}
	return cpukern.GradSumSq
}

// gradBatch computes op's gradient into out: from f, the values input
// (transposed and padded into *own), or else from the forward's table
// (tabT, its values, or its Gram or column-sum tables).
func gradBatch[T float32 | float64](op *Interp1DGrad, x, up, out []T, f *tensor.Dense, own *[]T, tabT []T) {
	fwd := op.Fwd
	t, g, mode := fwd.Table, fwd.grid(), op.gradMode()
	m := t.M
	fpT := tabT
	if f != nil {
		if *own == nil {
			*own = make([]T, (t.G+2)*m)
		}
		fpT = *own
		fillPadded(fpT, f.Data().([]T), m, t.G)
	}
	if op.WRT == WRTQueries {
		parallel.For(len(x), grain/16, func(lo, hi int) {
			switch {
			case fpT == nil && mode == cpukern.GradSumSq:
				cpukern.InterpGradXGram(out[lo:hi], x[lo:hi], up[lo:hi], g, t.gram)
			case fpT == nil && mode == cpukern.GradSum:
				cpukern.InterpGradXColSum(out[lo:hi], x[lo:hi], up[lo:hi], g, t.colsum)
			case mode == cpukern.GradValues:
				cpukern.InterpGradX(out[lo:hi], x[lo:hi], up[lo*m:hi*m], g, fpT, m, mode)
			default:
				cpukern.InterpGradX(out[lo:hi], x[lo:hi], up[lo:hi], g, fpT, m, mode)
			}
		})
		return
	}
	if op.acc == nil {
		op.acc = make([]float64, (t.G+2)*m)
	}
	clear(op.acc)
	// Blocks of 8 interpolants: a cache line of acc per row is one core's.
	const jb = 8
	parallel.For((m+jb-1)/jb, 1, func(lo, hi int) {
		cpukern.InterpGradF(op.acc, x, up, g, fpT, m, mode, lo*jb, min(hi*jb, m))
	})
	gn := t.G
	parallel.For(m, 16, func(lo, hi int) {
		for j := lo; j < hi; j++ {
			row := out[j*gn : (j+1)*gn]
			for i := range row {
				row[i] = T(op.acc[(i+1)*m+j])
			}
		}
	})
}

// fillPadded writes f, (m, g) row-major, into dst, the (g+2, m) padded
// transpose (its first and last rows stay zero).
func fillPadded[T float32 | float64](dst, f []T, m, g int) {
	for j := range m {
		for i, v := range f[j*g : (j+1)*g] {
			dst[(i+1)*m+j] = v
		}
	}
}

// WriteHash writes the forward's parameters and the input differentiated.
func (op *Interp1DGrad) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "interp1dgrad(wrt=%v,", op.WRT)
	op.Fwd.WriteHash(h)
	fmt.Fprint(h, ")")
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *Interp1DGrad) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *Interp1DGrad) String() string {
	return fmt.Sprintf("Interp1DGrad{wrt=%v, M=%d, G=%d, reduce=%v}", op.WRT, op.Fwd.Table.M, op.Fwd.Table.G, op.Fwd.Reduce)
}
