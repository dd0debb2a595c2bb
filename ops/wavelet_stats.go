package ops

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// WaveletMoments is the Gorgonia op that turns each row of WaveletResponse's
// sums, (Batch, WaveletSums) float64, into the statistics of a sweep,
// (Batch, 4) float64: the response's energy Σ G², its standard deviation
// √max(0, E[G²] − E[G]²) over the volume's voxels, its maximum, and the
// kernel's energy Σ ψ². NaN rows (padding) stay NaN. It runs on the host
// whichever device made the sums.
type WaveletMoments struct {
	owned

	N     [3]int // the volume's shape: the response has N[0]·N[1]·N[2] voxels
	Batch int
	// Extra is the number of the user's statistics after the sums in each
	// input row, passed through after the four.
	Extra int

	out *tensor.Dense
}

// NewWaveletMoments returns the op for batches of batch rows of sums over
// responses of shape n.
func NewWaveletMoments(n [3]int, batch int) *WaveletMoments {
	if batch < 1 {
		panic("ops: WaveletMoments batch < 1")
	}
	return &WaveletMoments{N: n, Batch: batch}
}

// Arity is 1: the sums.
func (op *WaveletMoments) Arity() int { return 1 }

// Type is Matrix float64 → Matrix float64.
func (op *WaveletMoments) Type() hm.Type {
	return hm.NewFnType(G.TensorType{Dims: 2, Of: tensor.Float64}, G.TensorType{Dims: 2, Of: tensor.Float64})
}

// InferShape is (Batch, 4).
func (op *WaveletMoments) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("wavelet: want 1 input, got %d", len(in))
	}
	return tensor.Shape{op.Batch, 4 + op.Extra}, nil
}

// Do computes every row's statistics into the op's own buffer.
func (op *WaveletMoments) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("wavelet: want 1 input, got %d", len(in))
	}
	s, ok := in[0].(*tensor.Dense)
	wi, wo := WaveletSums+op.Extra, 4+op.Extra
	if !ok || s.Dtype() != tensor.Float64 || s.Shape().TotalSize() != wi*op.Batch {
		return nil, fmt.Errorf("wavelet: sums %v, want float64 (%d, %d)", in[0].Shape(), op.Batch, wi)
	}
	if op.out == nil {
		op.out = tensor.New(tensor.WithShape(op.Batch, wo), tensor.Of(tensor.Float64))
	}
	x, o := s.Float64s(), op.out.Float64s() // Data() would box a slice header per call
	cnt := float64(op.N[0] * op.N[1] * op.N[2])
	for b := range op.Batch {
		sum, sum2, mx, kernelEnergy := x[wi*b], x[wi*b+1], x[wi*b+2], x[wi*b+3]
		mean, mean2 := sum/cnt, sum2/cnt
		o[wo*b], o[wo*b+1], o[wo*b+2], o[wo*b+3] = sum2, math.Sqrt(max(0, mean2-mean*mean)), mx, kernelEnergy
		copy(o[wo*b+4:wo*(b+1)], x[wi*b+WaveletSums:wi*(b+1)])
	}
	return op.out, nil
}

// WriteHash writes every parameter of the op.
func (op *WaveletMoments) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "waveletmoments(N=%v,batch=%d,extra=%d)", op.N, op.Batch, op.Extra)
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *WaveletMoments) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *WaveletMoments) String() string {
	return fmt.Sprintf("WaveletMoments{%v voxels: energy, std, max, kernel energy}", op.N)
}
