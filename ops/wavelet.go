package ops

import (
	"fmt"
	"hash"
	"math"
	"runtime"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/fft3"
	"github.com/tapeloop/tapeloop/internal/parallel"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// WaveletParams is the width of a WaveletResponse input row: θ, φ, ξ and
// the padding (three half-widths) the volume is extended by in reflect mode.
const WaveletParams = 6

// WaveletSums is the width of a WaveletResponse output row: Σ G, Σ G² and
// max G over the response G (the size of the volume), and Σ ψ² over the
// kernel.
const WaveletSums = 4

// WaveletResponse is the Gorgonia op that convolves the volume with one
// kernel per row of its input, (Batch, WaveletParams) float64, and reduces
// each response: (Batch, WaveletSums) float64. Per kernel it multiplies
// the volume's spectrum by the kernel's (the hat's in closed form; a
// formula's sampled and transformed), transforms back only the output
// block and sums it (float64 sums, per piece, added in order). Rows whose
// parameters are not a kernel (CheckHat: the padding rows of a short
// batch) get NaN.
type WaveletResponse struct {
	owned
	stoppable

	Src   *WaveletSource
	Batch int

	out     *tensor.Dense
	scratch *waveletScratch
}

// NewWaveletResponse returns the op for batches of batch kernels.
func NewWaveletResponse(src *WaveletSource, batch int) *WaveletResponse {
	if batch < 1 {
		panic("ops: WaveletResponse batch < 1")
	}
	return &WaveletResponse{Src: src, Batch: batch}
}

// Arity is 1: the kernel parameters.
func (op *WaveletResponse) Arity() int { return 1 }

// Type is Matrix float64 → Matrix float64.
func (op *WaveletResponse) Type() hm.Type {
	return hm.NewFnType(G.TensorType{Dims: 2, Of: tensor.Float64}, G.TensorType{Dims: 2, Of: tensor.Float64})
}

// Width is the width of an output row: WaveletSums, then the values of
// the source's statistics formulas.
func (op *WaveletResponse) Width() int { return WaveletSums + op.Src.Formulas.extra() }

// InferShape is (Batch, Width).
func (op *WaveletResponse) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("wavelet: want 1 input, got %d", len(in))
	}
	return tensor.Shape{op.Batch, op.Width()}, nil
}

// Do convolves with every kernel of the batch and reduces the responses.
func (op *WaveletResponse) Do(in ...G.Value) (G.Value, error) {
	return op.eachRow(in, func() error {
		op.scratch = op.Src.newScratch()
		return nil
	}, func(r []float64, pad [3]int, dst []float64) error {
		op.Src.Volume(pad).sums(dst, r[0], r[1], r[2], op.scratch, op.Src.Formulas)
		return nil
	})
}

// eachRow checks the input, calls setup before the first batch, and calls
// sums for every row with valid parameters (θ, φ, ξ, and the padding);
// rows that are not (padding rows) get NaN.
func (op *WaveletResponse) eachRow(in []G.Value, setup func() error, sums func(r []float64, pad [3]int, dst []float64) error) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("wavelet: want 1 input, got %d", len(in))
	}
	params, ok := in[0].(*tensor.Dense)
	if !ok || params.Dtype() != tensor.Float64 || params.Shape().TotalSize() != WaveletParams*op.Batch {
		return nil, fmt.Errorf("wavelet: parameters %v, want float64 (%d, %d)", in[0].Shape(), op.Batch, WaveletParams)
	}
	width := op.Width()
	if op.out == nil {
		if err := setup(); err != nil {
			return nil, err
		}
		op.out = tensor.New(tensor.WithShape(op.Batch, width), tensor.Of(tensor.Float64))
	}
	p, o := params.Float64s(), op.out.Float64s() // Data() would box a slice header per call
	for b := range op.Batch {
		if op.Stopped() {
			return nil, ErrStopped
		}
		r := p[WaveletParams*b : WaveletParams*(b+1)]
		dst := o[width*b : width*(b+1)]
		if CheckHat(op.Src.A, r[0], r[1], r[2]) != nil {
			for i := range dst {
				dst[i] = math.NaN()
			}
			continue
		}
		if err := sums(r, [3]int{int(r[3]), int(r[4]), int(r[5])}, dst); err != nil {
			return nil, err
		}
	}
	return op.out, nil
}

// waveletScratch is one op's per-combination work arrays.
type waveletScratch struct {
	n        int                        // the length of the largest transform
	kernel   []float32                  // the kernel, wrapped around the origin, zero elsewhere (made when first sampled)
	resp     []float32                  // the response (made when statistics formulas read it)
	half     []complex64                // the product of spectra, then the inverse transform's first pass
	dims     [3]int                     // the transform size the kernel array was last laid out for
	taps     []int                      // where the last kernel was written, to clear just those
	parts    [][3]float64               // sums of the response, per piece of the inverse transform
	energies []float64                  // per-row parts of the kernel's Σ ψ̂²
	rows     *parallel.Buffers[float64] // HatMul's row buffers, one per worker
	capture  []float32                  // where sums copies the response (Response), nil: nowhere
}

func (s *WaveletSource) newScratch() *waveletScratch {
	if s.Cache != nil {
		return s.Cache.scratchFor(s.maxLen(), s.maxHalf())
	}
	return newWaveletScratch(s.maxLen(), s.maxHalf())
}

func (w *WaveletVolume) newScratch() *waveletScratch {
	return newWaveletScratch(w.plan.Len(), w.plan.HalfLen())
}

func newWaveletScratch(n, half int) *waveletScratch {
	s := &waveletScratch{n: n, half: make([]complex64, half)}
	sysmem.AdviseHugePagesOf(s.half)
	s.rows = parallel.NewBuffers[float64](runtime.GOMAXPROCS(0))
	return s
}

// part returns per-piece partial sums, reused.
func (s *waveletScratch) part(n int) [][3]float64 {
	if cap(s.parts) < n {
		s.parts = make([][3]float64, n)
	}
	return s.parts[:n]
}

// energy returns per-row partial sums, reused.
func (s *waveletScratch) energy(n int) []float64 {
	if cap(s.energies) < n {
		s.energies = make([]float64, n)
	}
	return s.energies[:n]
}

// kernelArray returns the kernel array laid out for w's transform size,
// zero everywhere: it clears only what the previous kernel wrote, unless
// the size changed.
func (s *waveletScratch) kernelArray(w *WaveletVolume) []float32 {
	if s.kernel == nil {
		s.kernel = make([]float32, s.n)
		sysmem.AdviseHugePagesOf(s.kernel)
	}
	k := s.kernel[:w.plan.Len()]
	if s.dims != w.plan.Dims {
		clear(s.kernel)
		s.dims = w.plan.Dims
	} else {
		for _, i := range s.taps {
			k[i] = 0
		}
	}
	s.taps = s.taps[:0]
	return k
}

// sums convolves with the kernel of valid parameters (CheckHat) and writes
// to dst the response's Σ G, Σ G² and max G and the kernel's Σ ψ², then
// the statistics of f.
//
// The built-in hat's transform is computed in closed form (cpukern.HatMul:
// the hat sampled on the whole grid, where the sampled kernel stops at the
// box of q ≤ 36, whose edge values are 5·10⁻⁷ of its peak), unless the box
// is wider than the transform, where the kernel would overlap itself and Σ ψ²
// would count the overlap. A user's kernel is sampled and transformed.
func (w *WaveletVolume) sums(dst []float64, theta, phi, xi float64, s *waveletScratch, f *WaveletFormulas) {
	p := w.plan.Dims
	half := s.half[:w.plan.HalfLen()]
	var resp []float32 // only the user's statistics and Response read the response after the sums
	if f != nil && len(f.Stats) > 0 || s.capture != nil {
		if s.resp == nil {
			s.resp = make([]float32, s.n)
			sysmem.AdviseHugePagesOf(s.resp)
		}
		resp = s.resp[:w.plan.Len()]
	}
	h := HatSupport(w.A, theta, phi, xi)
	if f != nil && f.Kernel != nil {
		h = f.Kernel.box(w.A, theta, phi, xi)
	}
	if w.Boundary == Reflect && (h[0] > w.Pad[0] || h[1] > w.Pad[1] || h[2] > w.Pad[2]) {
		panic("ops: wavelet kernel wider than the volume's reflect padding")
	}
	n := w.N
	// The response's sums, per piece of the output block as the inverse
	// transform writes it, added in order.
	part := s.part(fft3.CropPieces(n))
	done := func(t, i, j0 int, rows []float32, m int) {
		cpukern.BlockSums(part[t][:], rows[w.Pad[2]:], p[2], m, n[2])
	}
	var kernelEnergy float64
	if (f == nil || f.Kernel == nil) && 2*h[0] < p[0] && 2*h[1] < p[1] && 2*h[2] < p[2] {
		// The product is made row by row just before the inverse
		// transform reads it.
		fill, energy := w.hatFill(half, theta, phi, xi, s)
		w.plan.InverseRealCropWith(resp, half, w.Pad, n, fill, done)
		for _, e := range energy {
			kernelEnergy += e
		}
		kernelEnergy /= float64(w.plan.Len())
	} else {
		kernelEnergy = w.sampledKernel(half, theta, phi, xi, s, f)
		w.plan.InverseRealCropWith(resp, half, w.Pad, n, w.mulFill(half), done)
	}
	var sum, sum2 float64
	mx := math.Inf(-1)
	for _, q := range part {
		sum, sum2 = sum+q[0], sum2+q[1]
		if q[2] > mx || math.IsNaN(q[2]) {
			mx = q[2]
		}
	}
	dst[0], dst[1], dst[2], dst[3] = sum, sum2, mx, kernelEnergy
	if s.capture != nil {
		for i := range n[0] {
			for j := range n[1] {
				lo := ((i+w.Pad[0])*p[1]+j+w.Pad[1])*p[2] + w.Pad[2]
				copy(s.capture[(i*n[1]+j)*n[2]:][:n[2]], resp[lo:lo+n[2]])
			}
		}
	}
	if f == nil {
		return
	}
	// The user's statistics, over the output block row by row.
	rows := func(piece func(lo, hi int)) {
		for i := range n[0] {
			for j := range n[1] {
				lo := ((i+w.Pad[0])*p[1]+j+w.Pad[1])*p[2] + w.Pad[2]
				piece(lo, lo+n[2])
			}
		}
	}
	for k, st := range f.Stats {
		dst[WaveletSums+k] = st.eval(resp, rows, w.A, theta, phi, xi)
	}
}

// Response writes the response G of the combination θ, φ, ξ, computed on
// the volume extended by pad (its padding in the sweep), to dst: the
// volume's shape, C order. It runs on the CPU, with the source's kernel
// formula; the source's statistics formulas are not evaluated.
func (s *WaveletSource) Response(dst []float32, theta, phi, xi float64, pad [3]int) error {
	if err := CheckHat(s.A, theta, phi, xi); err != nil {
		return err
	}
	if len(dst) != s.N[0]*s.N[1]*s.N[2] {
		return fmt.Errorf("wavelet: response buffer of %d values, want %v", len(dst), s.N)
	}
	w := s.Volume(pad)
	sc := w.newScratch()
	sc.capture = dst
	var f *WaveletFormulas
	if k := s.Formulas.KernelFormula(); k != nil {
		f = &WaveletFormulas{Kernel: k}
	}
	var sums [WaveletSums]float64
	w.sums(sums[:], theta, phi, xi, sc, f)
	return nil
}

// hatFill returns the fill hook of InverseRealCropWith that sets rows of
// half to the volume's spectrum times the hat's, computed in closed form,
// and the per-row sums of ψ̂² it fills in (Parseval: their total over the
// transform's size is Σ ψ²).
func (w *WaveletVolume) hatFill(half []complex64, theta, phi, xi float64, s *waveletScratch) (func(j0, j1 int), []float64) {
	p := w.plan.Dims
	b := hatB(w.A, theta, phi, xi)
	bb := [6]float64{b[0][0], b[0][1], b[0][2], b[1][1], b[1][2], b[2][2]}
	energy := s.energy(p[1])
	return func(j0, j1 int) {
		rows := s.rows.Get(p[2]/2 + 16)
		defer s.rows.Put(rows)
		cpukern.HatMul(half, w.spec, p, 0, p[0], j0, j1, bb, rows, energy[j0:j1])
	}, energy
}

// sampledKernel samples the kernel (the user's, or the hat), transforms
// it into half and returns Σ ψ² over the samples.
func (w *WaveletVolume) sampledKernel(half []complex64, theta, phi, xi float64, s *waveletScratch, f *WaveletFormulas) float64 {
	p := w.plan.Dims
	k := s.kernelArray(w)
	var kernelEnergy float64
	sample := Hat
	if f != nil && f.Kernel != nil {
		sample = f.Kernel.Sample
	}
	sample(w.A, theta, phi, xi, func(x, y, z int, psi float64) {
		kernelEnergy += psi * psi
		i, j, l := mod(x, p[0]), mod(y, p[1]), mod(z, p[2])
		t := (i*p[1]+j)*p[2] + l
		k[t] += float32(psi)
		s.taps = append(s.taps, t)
	})
	w.plan.ForwardReal(half, k)
	return kernelEnergy
}

// mulFill returns the fill hook of InverseRealCropWith that multiplies
// rows of half by the volume's spectrum.
func (w *WaveletVolume) mulFill(half []complex64) func(j0, j1 int) {
	p := w.plan.Dims
	h := p[2]/2 + 1
	return func(j0, j1 int) {
		for i := range p[0] {
			lo, hi := (i*p[1]+j0)*h, (i*p[1]+j1)*h
			for t, v := range w.spec[lo:hi] {
				half[lo+t] *= v
			}
		}
	}
}

// ResidentBytes counts the source, its transform and the scratch.
func (op *WaveletResponse) ResidentBytes() int64 { return op.Src.Bytes() }

// WriteHash writes every parameter of the op.
func (op *WaveletResponse) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "wavelet(src=%p,N=%v,a=%g,%v,maxpad=%v,batch=%d)", op.Src, op.Src.N, op.Src.A, op.Src.Boundary, op.Src.MaxPad, op.Batch)
	if f := op.Src.Formulas; f != nil {
		if f.Kernel != nil {
			fmt.Fprintf(h, "kernel=%q", f.Kernel.F.Canonical())
		}
		for _, s := range f.Stats {
			fmt.Fprintf(h, "stat=%q:%q", s.Name, s.F.Canonical())
		}
	}
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *WaveletResponse) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *WaveletResponse) String() string {
	kernel, stats := "", ""
	if f := op.Src.Formulas; f != nil {
		if f.Kernel != nil {
			kernel = ", ψ = " + f.Kernel.F.Canonical()
		}
		for _, s := range f.Stats {
			stats += fmt.Sprintf(", %s = %s", s.Name, s.F.Canonical())
		}
	}
	return fmt.Sprintf("WaveletResponse{%v volume, a=%g, %v%s: Σ G, Σ G², max G, Σ ψ²%s}", op.Src.N, op.Src.A, op.Src.Boundary, kernel, stats)
}
