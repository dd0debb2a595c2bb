package ops

import (
	"errors"
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/fft3"
	"github.com/tapeloop/tapeloop/internal/parallel"
)

// Boundary is how a convolution extends the volume past its edges, as in
// scipy.ndimage.convolve.
type Boundary int

// The boundaries.
const (
	Reflect Boundary = iota // half-sample symmetric: d c b a | a b c d | d c b a
	Wrap                    // periodic
)

func (b Boundary) String() string {
	if b == Wrap {
		return "wrap"
	}
	return "reflect"
}

// ParseBoundary parses "reflect" or "wrap".
func ParseBoundary(s string) (Boundary, error) {
	switch s {
	case "reflect":
		return Reflect, nil
	case "wrap":
		return Wrap, nil
	}
	return 0, fmt.Errorf("unknown boundary %q (want reflect or wrap)", s)
}

// ErrWavelet is wrapped by errors about wavelet parameters.
var ErrWavelet = errors.New("wavelet")

// HatSupport returns the half-widths of the stretched, rotated Mexican hat
// of scale a, angles theta, phi and stretch xi: along axis i,
// ⌈√(36·(M⁻¹)ᵢᵢ)⌉ where q = uᵀMu, the bounding box of the ellipsoid q ≤ 36.
func HatSupport(a, theta, phi, xi float64) [3]int {
	r := hatRotation(theta, phi)
	d := [3]float64{(a * xi) * (a * xi), a * a, a * a} // M⁻¹ = Rᵀ·diag(d)·R
	var h [3]int
	for i := range 3 {
		var m float64
		for k := range 3 {
			m += r[k][i] * r[k][i] * d[k]
		}
		h[i] = int(math.Ceil(math.Sqrt(36*m) - 1e-9))
	}
	return h
}

// hatRotation's rows map a voxel offset (x, y, z) to (rT, rp, rp2).
func hatRotation(theta, phi float64) [3][3]float64 {
	ct, st, cp, sp := math.Cos(theta), math.Sin(theta), math.Cos(phi), math.Sin(phi)
	return [3][3]float64{
		{cp * ct, -st, sp * ct},
		{cp * st, ct, sp * st},
		{-sp, 0, cp},
	}
}

// Hat evaluates the kernel at integer offsets (x, y, z) in [−h, h] along
// each axis and calls fn for each: ψ = (3 − q)·exp(−q/2) with
// q = (rp/a)² + (rT/(a·ξ))² + (rp2/a)².
func Hat(a, theta, phi, xi float64, fn func(x, y, z int, psi float64)) [3]int {
	h := HatSupport(a, theta, phi, xi)
	r := hatRotation(theta, phi)
	for x := -h[0]; x <= h[0]; x++ {
		for y := -h[1]; y <= h[1]; y++ {
			for z := -h[2]; z <= h[2]; z++ {
				fx, fy, fz := float64(x), float64(y), float64(z)
				rT := r[0][0]*fx + r[0][1]*fy + r[0][2]*fz
				rp := r[1][0]*fx + r[1][1]*fy + r[1][2]*fz
				rp2 := r[2][0]*fx + r[2][1]*fy + r[2][2]*fz
				q := (rp/a)*(rp/a) + (rT/(a*xi))*(rT/(a*xi)) + (rp2/a)*(rp2/a)
				fn(x, y, z, (3-q)*math.Exp(-q/2))
			}
		}
	}
	return h
}

// CheckHat validates a kernel's parameters.
func CheckHat(a, theta, phi, xi float64) error {
	switch {
	case !(a > 0) || math.IsInf(a, 0):
		return fmt.Errorf("%w: scale a = %g must be positive", ErrWavelet, a)
	case !(xi > 0) || math.IsInf(xi, 0):
		return fmt.Errorf("%w: stretch ξ = %g must be positive", ErrWavelet, xi)
	case math.IsNaN(theta) || math.IsInf(theta, 0) || math.IsNaN(phi) || math.IsInf(phi, 0):
		return fmt.Errorf("%w: angles θ = %g, φ = %g must be finite", ErrWavelet, theta, phi)
	}
	return nil
}

// WaveletVolume is the volume a sweep convolves, transformed once.
type WaveletVolume struct {
	N        [3]int
	A        float64
	Boundary Boundary
	Pad      [3]int // reflect: the largest half-widths of the sweep
	plan     *fft3.Plan
	spec     []complex64 // real-to-complex transform of the (extended) volume, float32
	id       uint64
}

// waveletScratch is one op's per-combination work arrays.
type waveletScratch struct {
	kernel []float32    // the kernel, wrapped around the origin; zero elsewhere
	resp   []float32    // the response
	half   []complex64  // the kernel's transform, then the response's
	dims   [3]int       // the transform size the kernel array was last laid out for
	taps   []int        // where the last kernel was written, to clear just those
	parts  [][3]float64 // per-plane sums of the response
}

// NewWaveletVolume prepares v (n0·n1·n2 values, C order) for kernels of
// scale a whose half-widths are at most pad (reflect mode extends the
// volume by pad on every side; wrap needs no extension).
func NewWaveletVolume(v []float64, n [3]int, a float64, b Boundary, pad [3]int) (*WaveletVolume, error) {
	if err := checkVolume(v, n); err != nil {
		return nil, err
	}
	w, _ := transformVolume(v, n, a, b, pad, nil, nil)
	return w, nil
}

func checkVolume(v []float64, n [3]int) error {
	if n[0] < 1 || n[1] < 1 || n[2] < 1 || len(v) != n[0]*n[1]*n[2] {
		return fmt.Errorf("%w: volume of %d values for shape %v", ErrWavelet, len(v), n)
	}
	for i, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("%w: voxel (%d, %d, %d) is %g", ErrWavelet, i/(n[1]*n[2]), i/n[2]%n[1], i%n[2], x)
		}
	}
	return nil
}

// transformVolume extends and transforms v, into the buffers ext and spec
// when they are large enough; it returns the volume and the extension
// buffer, for reuse.
func transformVolume(v []float64, n [3]int, a float64, b Boundary, pad [3]int, ext []float32, spec []complex64) (*WaveletVolume, []float32) {
	w := &WaveletVolume{N: n, A: a, Boundary: b, id: tableIDs.Add(1)}
	p := n
	if b == Reflect {
		w.Pad = pad
		p = reflectDims(n, pad)
	}
	w.plan = fft3.New(p[0], p[1], p[2])
	if cap(ext) < w.plan.Len() {
		ext = make([]float32, w.plan.Len())
	}
	ext = ext[:w.plan.Len()]
	for i := range p[0] {
		si := reflectIndex(i-w.Pad[0], n[0])
		for j := range p[1] {
			sj := reflectIndex(j-w.Pad[1], n[1])
			for k := range p[2] {
				sk := reflectIndex(k-w.Pad[2], n[2])
				ext[(i*p[1]+j)*p[2]+k] = float32(v[(si*n[1]+sj)*n[2]+sk])
			}
		}
	}
	if cap(spec) < w.plan.HalfLen() {
		spec = make([]complex64, w.plan.HalfLen())
	}
	w.spec = spec[:w.plan.HalfLen()]
	w.plan.ForwardReal(w.spec, ext)
	return w, ext
}

// WaveletSource is a volume to sweep. In reflect mode each combination
// needs the volume extended by its own kernel's half-widths: the source
// transforms the volume for the padding asked for and keeps the last one,
// so a sweep ordered by padding transforms it once per distinct padding,
// into buffers sized once for the largest.
type WaveletSource struct {
	V        []float64
	N        [3]int
	A        float64
	Boundary Boundary
	MaxPad   [3]int

	cur  *WaveletVolume
	ext  []float32
	spec []complex64
}

// NewWaveletSource checks v and returns the source for paddings up to
// maxPad (ignored in wrap mode).
func NewWaveletSource(v []float64, n [3]int, a float64, b Boundary, maxPad [3]int) (*WaveletSource, error) {
	if err := checkVolume(v, n); err != nil {
		return nil, err
	}
	if b == Wrap {
		maxPad = [3]int{}
	}
	return &WaveletSource{V: v, N: n, A: a, Boundary: b, MaxPad: maxPad}, nil
}

// Clone returns a source over the same volume with buffers of its own: a
// source transforms into its buffers, so ops running concurrently (on
// several devices) each need one.
func (s *WaveletSource) Clone() *WaveletSource {
	return &WaveletSource{V: s.V, N: s.N, A: s.A, Boundary: s.Boundary, MaxPad: s.MaxPad}
}

// Volume returns the volume transformed for pad (wrap: no padding).
func (s *WaveletSource) Volume(pad [3]int) *WaveletVolume {
	if s.Boundary == Wrap {
		pad = [3]int{}
	}
	if s.ext == nil { // buffers for the largest padding, allocated once
		s.ext = make([]float32, s.maxLen())
		s.spec = make([]complex64, s.maxHalf())
	}
	if s.cur == nil || s.cur.Pad != pad {
		s.cur, s.ext = transformVolume(s.V, s.N, s.A, s.Boundary, pad, s.ext, s.spec)
		s.spec = s.cur.spec
	}
	return s.cur
}

// maxDims are the transform dimensions for the largest padding.
func (s *WaveletSource) maxDims() [3]int {
	if s.Boundary == Wrap {
		return s.N
	}
	return reflectDims(s.N, s.MaxPad)
}

// maxLen is the element count of the largest padded volume.
func (s *WaveletSource) maxLen() int {
	d := s.maxDims()
	return d[0] * d[1] * d[2]
}

// maxHalf is the coefficient count of the largest padded volume's
// real-to-complex transform.
func (s *WaveletSource) maxHalf() int {
	d := s.maxDims()
	return d[0] * d[1] * (d[2]/2 + 1)
}

// Bytes counts the source volume and, for the largest padding, the
// extension and spectrum buffers and one op's scratch (kernel, response,
// spectrum).
func (s *WaveletSource) Bytes() int64 {
	return 8*int64(len(s.V)) + 3*4*int64(s.maxLen()) + 2*8*int64(s.maxHalf())
}

func (s *WaveletSource) newScratch() *waveletScratch {
	return &waveletScratch{kernel: make([]float32, s.maxLen()), resp: make([]float32, s.maxLen()), half: make([]complex64, s.maxHalf())}
}

// reflectDims is the transform size for a volume of n extended by at least
// pad on each side: n + 2·pad rounded up to a product of 2, 3 and 5, which
// the FFT handles fastest (the extra goes to the far side: more of the same
// reflection, which the cropped output never sees).
func reflectDims(n, pad [3]int) [3]int {
	var p [3]int
	for i := range 3 {
		p[i] = smooth(n[i] + 2*pad[i])
	}
	return p
}

// smooth is the smallest m' ≥ m whose only prime factors are 2, 3 and 5.
func smooth(m int) int {
	for ; ; m++ {
		r := m
		for _, f := range []int{2, 3, 5} {
			for r%f == 0 {
				r /= f
			}
		}
		if r == 1 {
			return m
		}
	}
}

// reflectIndex maps i onto [0, n) by half-sample symmetric reflection,
// repeated as often as needed.
func reflectIndex(i, n int) int {
	m := i % (2 * n)
	if m < 0 {
		m += 2 * n
	}
	if m >= n {
		m = 2*n - 1 - m
	}
	return m
}

// WaveletParams is the width of a WaveletStats input row: θ, φ, ξ and the
// padding (three half-widths) the volume is extended by in reflect mode.
const WaveletParams = 6

// WaveletStats is the Gorgonia op that convolves the volume with one
// kernel per row of its input, (Batch, WaveletParams) float64, and returns
// (Batch, 4) float64: the response's energy Σ G², its standard deviation,
// its maximum, and the kernel's energy Σ ψ².
type WaveletStats struct {
	owned

	Src   *WaveletSource
	Batch int

	out     *tensor.Dense
	scratch *waveletScratch
}

// NewWaveletStats returns the op for batches of batch kernels.
func NewWaveletStats(src *WaveletSource, batch int) *WaveletStats {
	if batch < 1 {
		panic("ops: WaveletStats batch < 1")
	}
	return &WaveletStats{Src: src, Batch: batch}
}

// Arity is 1: the kernel parameters.
func (op *WaveletStats) Arity() int { return 1 }

// Type is Matrix float64 → Matrix float64.
func (op *WaveletStats) Type() hm.Type {
	return hm.NewFnType(G.TensorType{Dims: 2, Of: tensor.Float64}, G.TensorType{Dims: 2, Of: tensor.Float64})
}

// InferShape is (Batch, 4).
func (op *WaveletStats) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("wavelet: want 1 input, got %d", len(in))
	}
	return tensor.Shape{op.Batch, 4}, nil
}

// Do computes the statistics of every kernel of the batch.
func (op *WaveletStats) Do(in ...G.Value) (G.Value, error) {
	return op.eachRow(in, func() error {
		op.scratch = op.Src.newScratch()
		return nil
	}, func(r []float64, pad [3]int, dst []float64) error {
		op.Src.Volume(pad).stats(dst, r[0], r[1], r[2], op.scratch)
		return nil
	})
}

// eachRow checks the input, calls setup before the first batch, and calls
// stats for every row with valid parameters (θ, φ, ξ, and the padding);
// rows that are not (padding rows) get NaN.
func (op *WaveletStats) eachRow(in []G.Value, setup func() error, stats func(r []float64, pad [3]int, dst []float64) error) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("wavelet: want 1 input, got %d", len(in))
	}
	params, ok := in[0].(*tensor.Dense)
	if !ok || params.Dtype() != tensor.Float64 || params.Shape().TotalSize() != WaveletParams*op.Batch {
		return nil, fmt.Errorf("wavelet: parameters %v, want float64 (%d, %d)", in[0].Shape(), op.Batch, WaveletParams)
	}
	if op.out == nil {
		if err := setup(); err != nil {
			return nil, err
		}
		op.out = tensor.New(tensor.WithShape(op.Batch, 4), tensor.Of(tensor.Float64))
	}
	p := params.Data().([]float64)
	o := op.out.Data().([]float64)
	for b := range op.Batch {
		r := p[WaveletParams*b : WaveletParams*(b+1)]
		if CheckHat(op.Src.A, r[0], r[1], r[2]) != nil {
			for i := range 4 {
				o[4*b+i] = math.NaN()
			}
			continue
		}
		if err := stats(r, [3]int{int(r[3]), int(r[4]), int(r[5])}, o[4*b:4*b+4]); err != nil {
			return nil, err
		}
	}
	return op.out, nil
}

func (w *WaveletVolume) newScratch() *waveletScratch {
	return &waveletScratch{kernel: make([]float32, w.plan.Len()), resp: make([]float32, w.plan.Len()), half: make([]complex64, w.plan.HalfLen())}
}

// part returns per-plane partial sums, reused.
func (s *waveletScratch) part(n int) [][3]float64 {
	if cap(s.parts) < n {
		s.parts = make([][3]float64, n)
	}
	return s.parts[:n]
}

// kernelArray returns the kernel array laid out for w's transform size,
// zero everywhere: it clears only what the previous kernel wrote, unless
// the size changed.
func (s *waveletScratch) kernelArray(w *WaveletVolume) []float32 {
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

// stats convolves with one kernel and writes to dst its energy, std, max
// and the kernel's energy (NaN for invalid parameters, as in padding rows).
func (w *WaveletVolume) stats(dst []float64, theta, phi, xi float64, s *waveletScratch) {
	if CheckHat(w.A, theta, phi, xi) != nil {
		for i := range 4 {
			dst[i] = math.NaN()
		}
		return
	}
	p := w.plan.Dims
	k := s.kernelArray(w)
	half := s.half[:w.plan.HalfLen()]
	resp := s.resp[:w.plan.Len()]
	var kernelEnergy float64
	h := Hat(w.A, theta, phi, xi, func(x, y, z int, psi float64) {
		kernelEnergy += psi * psi
		i, j, l := mod(x, p[0]), mod(y, p[1]), mod(z, p[2])
		t := (i*p[1]+j)*p[2] + l
		k[t] += float32(psi)
		s.taps = append(s.taps, t)
	})
	if w.Boundary == Reflect && (h[0] > w.Pad[0] || h[1] > w.Pad[1] || h[2] > w.Pad[2]) {
		panic("ops: wavelet kernel wider than the volume's reflect padding")
	}
	w.plan.ForwardReal(half, k)
	parallel.For(len(w.spec), 1<<16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			half[i] *= w.spec[i]
		}
	})
	w.plan.InverseRealCrop(resp, half, w.Pad, w.N) // only the output block
	n := w.N
	// Sums over the output block, per plane in parallel, added in order.
	part := s.part(n[0])
	parallel.Dynamic(n[0], 4, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			var sum, sum2 float64
			mx := math.Inf(-1)
			for j := range n[1] {
				row := resp[((i+w.Pad[0])*p[1]+j+w.Pad[1])*p[2]+w.Pad[2]:][:n[2]]
				for _, v := range row {
					g := float64(v)
					sum += g
					sum2 += g * g
					mx = max(mx, g)
				}
			}
			part[i] = [3]float64{sum, sum2, mx}
		}
	})
	var sum, sum2 float64
	mx := math.Inf(-1)
	for _, q := range part {
		sum, sum2, mx = sum+q[0], sum2+q[1], max(mx, q[2])
	}
	cnt := float64(n[0] * n[1] * n[2])
	mean, mean2 := sum/cnt, sum2/cnt
	dst[0], dst[1], dst[2], dst[3] = sum2, math.Sqrt(max(0, mean2-mean*mean)), mx, kernelEnergy
}

func mod(i, n int) int {
	m := i % n
	if m < 0 {
		m += n
	}
	return m
}

// ResidentBytes counts the source, its transform and the scratch.
func (op *WaveletStats) ResidentBytes() int64 { return op.Src.Bytes() }

// WriteHash writes every parameter of the op.
func (op *WaveletStats) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "wavelet(src=%p,N=%v,a=%g,%v,maxpad=%v,batch=%d)", op.Src, op.Src.N, op.Src.A, op.Src.Boundary, op.Src.MaxPad, op.Batch)
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *WaveletStats) Hashcode() uint32 { return hashcode(op) }

func (op *WaveletStats) String() string {
	return fmt.Sprintf("WaveletStats{%v volume, a=%g, %v}", op.Src.N, op.Src.A, op.Src.Boundary)
}
