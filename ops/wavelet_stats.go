package ops

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
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
func (op *WaveletMoments) Hashcode() uint32 { return hashcode(op) }

func (op *WaveletMoments) String() string {
	return fmt.Sprintf("WaveletMoments{%v voxels: energy, std, max, kernel energy}", op.N)
}

// WaveletStats is WaveletResponse followed by WaveletMoments in one op:
// (Batch, WaveletParams) kernel parameters in, (Batch, 4) statistics out
// (energy, std, max, kernel energy). A sweep's graph has the two as
// separate nodes; this op serves callers that want the statistics of a
// batch of kernels in one Do. On a GPU (OnDevice) the response is the
// GPU twin's.
type WaveletStats struct {
	owned

	Src   *WaveletSource
	Batch int

	resp G.Op // the WaveletResponse, or its GPU twin
	mom  *WaveletMoments
}

// NewWaveletStats returns the op for batches of batch kernels.
func NewWaveletStats(src *WaveletSource, batch int) *WaveletStats {
	if batch < 1 {
		panic("ops: WaveletStats batch < 1")
	}
	return &WaveletStats{Src: src, Batch: batch, resp: NewWaveletResponse(src, batch), mom: NewWaveletMoments(src.N, batch)}
}

// withResponse returns a copy of op whose sums come from resp.
func (op *WaveletStats) withResponse(resp G.Op) *WaveletStats {
	return &WaveletStats{Src: op.Src, Batch: op.Batch, resp: resp, mom: NewWaveletMoments(op.Src.N, op.Batch)}
}

// Arity is 1: the kernel parameters.
func (op *WaveletStats) Arity() int { return 1 }

// Type is Matrix float64 → Matrix float64.
func (op *WaveletStats) Type() hm.Type { return op.mom.Type() }

// InferShape is (Batch, 4).
func (op *WaveletStats) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return op.mom.InferShape(in...)
}

// Do computes the statistics of every kernel of the batch.
func (op *WaveletStats) Do(in ...G.Value) (G.Value, error) {
	s, err := op.resp.Do(in...)
	if err != nil {
		return nil, err
	}
	return op.mom.Do(s)
}

// ResidentBytes counts the source, its transform and the scratch.
func (op *WaveletStats) ResidentBytes() int64 { return op.Src.Bytes() }

// WriteHash writes every parameter of the op.
func (op *WaveletStats) WriteHash(h hash.Hash) {
	fmt.Fprint(h, "waveletstats:")
	op.resp.WriteHash(h)
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *WaveletStats) Hashcode() uint32 { return hashcode(op) }

func (op *WaveletStats) String() string {
	return fmt.Sprintf("WaveletStats{%v volume, a=%g, %v}", op.Src.N, op.Src.A, op.Src.Boundary)
}
