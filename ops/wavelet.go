package ops

import (
	"fmt"
	"hash"
	"math"
	"runtime"
	"strings"

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
		op.Src.Volume(pad).sums(dst, r[0], r[1], r[2], op.scratch, op.Src.Formulas, op.Src.Skip)
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
	gparts   []float64                  // per-row parts of the response's Σ |Ĝ|²
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

// genergy returns per-row sums of the response's spectrum, reused.
func (s *waveletScratch) genergy(n int) []float64 {
	if cap(s.gparts) < n {
		s.gparts = make([]float64, n)
	}
	return s.gparts[:n]
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

// WaveletSkip names the results of a WaveletResponse that a sweep does
// not use (its columns are left out): the passes that only they need are
// not run, and their entries of the op's output are NaN. The zero value
// skips nothing.
type WaveletSkip struct {
	Sums  bool   // Σ G and Σ G² (a sweep's energy and std)
	Max   bool   // max G
	Stats []bool // per statistics formula of the source, in order
}

// stat reports whether statistics formula k is skipped.
func (k WaveletSkip) stat(i int) bool { return i < len(k.Stats) && k.Stats[i] }

// String is what is skipped, for hashes and the op's name: "" for nothing.
func (k WaveletSkip) String() string {
	var out []string
	if k.Sums {
		out = append(out, "sums")
	}
	if k.Max {
		out = append(out, "max")
	}
	for i, v := range k.Stats {
		if v {
			out = append(out, fmt.Sprintf("stat%d", i))
		}
	}
	return strings.Join(out, ",")
}

// Where WaveletPasses.Sums come from.
const (
	SumsFromSpectrum = "spectrum" // Parseval's theorem over the product of spectra
	SumsFromResponse = "response" // summed as the inverse transform writes the response
	SumsNone         = "none"     // not computed
)

// WaveletPasses is what a WaveletResponse runs per combination on the
// CPU, beside the product of the spectra (and a sampled kernel's
// transform) and the kernel's Σ ψ², which it always computes.
type WaveletPasses struct {
	// Sums is where the response's Σ G and Σ G² (energy, std) come from:
	// SumsFromSpectrum in wrap mode, where the transform is the volume's
	// own size and the response is the whole periodic array, so
	// Σ G = Ĝ(0) and Σ G² = Σ |Ĝ|²/L exactly (Parseval); SumsFromResponse
	// in reflect mode, where the response is cut out of a larger
	// transform; SumsNone when they are skipped.
	Sums string `json:"sums"`
	// InverseTransform: the response is transformed back (reflect mode
	// only the block it keeps): for the maximum, the statistics formulas,
	// and in reflect mode the sums.
	InverseTransform bool `json:"inverse_transform"`
	// Max: the response's maximum is taken as it is written.
	Max bool `json:"max"`
	// Formulas are the statistics formulas evaluated over the response,
	// one pass each.
	Formulas []string `json:"formulas"`
}

// String is the passes in a line: "inverse transform: no; sums: from the
// spectrum; max: no; formulas: none".
func (p WaveletPasses) String() string {
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	sums := "no"
	switch p.Sums {
	case SumsFromSpectrum:
		sums = "from the spectrum (Parseval)"
	case SumsFromResponse:
		sums = "over the response"
	}
	f := "none"
	if len(p.Formulas) > 0 {
		f = strings.Join(p.Formulas, ", ")
	}
	return fmt.Sprintf("inverse transform: %s; Σ G, Σ G²: %s; max: %s; formula passes: %s", yes(p.InverseTransform), sums, yes(p.Max), f)
}

// Passes is what the source's WaveletResponse runs per combination on the
// CPU, given what its Skip leaves out.
func (s *WaveletSource) Passes() WaveletPasses { return wavePasses(s.Boundary, s.Formulas, s.Skip) }

func wavePasses(b Boundary, f *WaveletFormulas, skip WaveletSkip) WaveletPasses {
	p := WaveletPasses{Sums: SumsNone, Max: !skip.Max, Formulas: []string{}}
	if f != nil {
		for k, st := range f.Stats {
			if !skip.stat(k) {
				p.Formulas = append(p.Formulas, st.Name)
			}
		}
	}
	if !skip.Sums {
		p.Sums = SumsFromResponse
		if b == Wrap {
			p.Sums = SumsFromSpectrum
		}
	}
	p.InverseTransform = p.Max || len(p.Formulas) > 0 || p.Sums == SumsFromResponse
	return p
}

// sums convolves with the kernel of valid parameters (CheckHat) and writes
// to dst the response's Σ G, Σ G² and max G and the kernel's Σ ψ², then
// the statistics of f, leaving out (NaN) what skip names and the passes
// only they need (wavePasses).
//
// The built-in hat's transform is computed in closed form (cpukern.HatMul:
// the hat sampled on the whole grid, where the sampled kernel stops at the
// box of q ≤ 36, whose edge values are 5·10⁻⁷ of its peak), unless the box
// is wider than the transform, where the kernel would overlap itself and Σ ψ²
// would count the overlap, or the hat is too narrow (HatClosedForm). A
// user's kernel is sampled and transformed.
//
// In wrap mode the transform is the volume's own size, and the response
// the whole periodic array the inverse transform would make: Σ G and Σ G²
// are taken from the product of the spectra Ĝ (Σ G = Ĝ(0),
// Σ G² = Σ |Ĝ|²/L), whether or not the inverse transform runs for the
// other results, so that they do not depend on what else is asked.
func (w *WaveletVolume) sums(dst []float64, theta, phi, xi float64, s *waveletScratch, f *WaveletFormulas, skip WaveletSkip) {
	p := w.plan.Dims
	half := s.half[:w.plan.HalfLen()]
	pass := wavePasses(w.Boundary, f, skip)
	inverse := pass.InverseTransform || s.capture != nil
	spectral := pass.Sums == SumsFromSpectrum
	if spectral && p != w.N {
		panic("ops: wavelet: wrap mode's transform is not the volume's size")
	}
	var resp []float32 // only the user's statistics and Response read the response after the sums
	if len(pass.Formulas) > 0 || s.capture != nil {
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
	what := 0
	if pass.Sums == SumsFromResponse {
		what |= cpukern.SumsOnly
	}
	if pass.Max {
		what |= cpukern.MaxOnly
	}
	var done func(t, i, j0 int, rows []float32, m int)
	if what != 0 {
		done = func(t, i, j0 int, rows []float32, m int) {
			cpukern.BlockSums(part[t][:], rows[w.Pad[2]:], p[2], m, n[2], what)
		}
	}
	// In wrap mode, Σ |Ĝ|² per row as the product is made, and Ĝ(0).
	var gparts []float64
	var g0 float64
	if spectral {
		gparts = s.genergy(p[1])
	}
	withSums := func(fill func(j0, j1 int)) func(j0, j1 int) {
		if !spectral {
			return fill
		}
		return func(j0, j1 int) {
			fill(j0, j1)
			cpukern.HalfEnergy(gparts[j0:j1], half, p, j0, j1)
			if j0 == 0 {
				g0 = float64(real(half[0]))
			}
		}
	}
	// run makes the product row by row with fill, then transforms back
	// what is needed.
	run := func(fill func(j0, j1 int)) {
		if inverse {
			w.plan.InverseRealCropWith(resp, half, w.Pad, n, fill, done)
		} else {
			w.fillAll(fill)
		}
	}
	var kernelEnergy float64
	if (f == nil || f.Kernel == nil) && HatClosedForm(w.A, theta, phi, xi, p) {
		// The product is made row by row just before the inverse
		// transform reads it (and not at all without one), its sums as
		// it is made.
		dst := half
		if !inverse {
			dst = nil
		}
		fill, energy := w.hatFill(dst, theta, phi, xi, s, gparts, &g0)
		run(fill)
		for _, e := range energy {
			kernelEnergy += e
		}
		kernelEnergy /= float64(w.plan.Len())
	} else if !inverse && !spectral {
		kernelEnergy = w.sampledKernel(nil, theta, phi, xi, s, f) // Σ ψ² alone: no transform
	} else {
		kernelEnergy = w.sampledKernel(half, theta, phi, xi, s, f)
		run(withSums(w.mulFill(half)))
	}
	sum, sum2, mx := math.NaN(), math.NaN(), math.NaN()
	if inverse && what != 0 {
		var s0, s1 float64
		m := math.Inf(-1)
		for _, q := range part {
			s0, s1 = s0+q[0], s1+q[1]
			if q[2] > m || math.IsNaN(q[2]) {
				m = q[2]
			}
		}
		if what&cpukern.SumsOnly != 0 {
			sum, sum2 = s0, s1
		}
		if what&cpukern.MaxOnly != 0 {
			mx = m
		}
	}
	if spectral {
		var e float64
		for _, q := range gparts {
			e += q
		}
		sum, sum2 = g0, e/float64(w.plan.Len())
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
		if skip.stat(k) {
			dst[WaveletSums+k] = math.NaN()
			continue
		}
		dst[WaveletSums+k] = st.eval(resp, rows, w.A, theta, phi, xi)
	}
}

// fillAll runs the fill hook of InverseRealCropWith over every row of the
// spectrum, in parallel, without the inverse transform after it: a few
// ranges of rows along axis 1 per core, each read plane by plane in
// memory order (the sums per row do not depend on the split).
func (w *WaveletVolume) fillAll(fill func(j0, j1 int)) {
	p := w.plan.Dims
	parallel.Dynamic(p[1], max(1, p[1]/(4*runtime.GOMAXPROCS(0))), fill)
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
	w.sums(sums[:], theta, phi, xi, sc, f, WaveletSkip{Sums: true, Max: true})
	return nil
}

// hatFill returns the fill hook of InverseRealCropWith that sets rows of
// half (unless half is nil) to the volume's spectrum times the hat's,
// computed in closed form, and the per-row sums of ψ̂² it fills in
// (Parseval: their total over the transform's size is Σ ψ²). With gparts
// not nil the hook sets gparts[j] to row j's part of Σ |Ĝ|², Ĝ the
// product, and *g0 to Ĝ(0) (cpukern.HatMul), whether or not it writes
// half.
func (w *WaveletVolume) hatFill(half []complex64, theta, phi, xi float64, s *waveletScratch, gparts []float64, g0 *float64) (func(j0, j1 int), []float64) {
	p := w.plan.Dims
	b := hatB(w.A, theta, phi, xi)
	bb := [6]float64{b[0][0], b[0][1], b[0][2], b[1][1], b[1][2], b[2][2]}
	energy := s.energy(p[1])
	return func(j0, j1 int) {
		rows := s.rows.Get(p[2]/2 + 16)
		defer s.rows.Put(rows)
		var g []float64
		var dc *float64
		if gparts != nil {
			g = gparts[j0:j1]
			if j0 == 0 {
				dc = g0
			}
		}
		cpukern.HatMul(half, w.spec, p, 0, p[0], j0, j1, bb, rows, energy[j0:j1], g, dc)
	}, energy
}

// sampledKernel samples the kernel (the user's, or the hat), transforms
// it into half (unless half is nil) and returns Σ ψ² over the samples.
func (w *WaveletVolume) sampledKernel(half []complex64, theta, phi, xi float64, s *waveletScratch, f *WaveletFormulas) float64 {
	p := w.plan.Dims
	var kernelEnergy float64
	sample := Hat
	if f != nil && f.Kernel != nil {
		sample = f.Kernel.Sample
	}
	if half == nil {
		sample(w.A, theta, phi, xi, func(_, _, _ int, psi float64) { kernelEnergy += psi * psi })
		return kernelEnergy
	}
	k := s.kernelArray(w)
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
	fmt.Fprintf(h, "wavelet(src=%p,N=%v,a=%g,%v,maxpad=%v,batch=%d,skip=%v)", op.Src, op.Src.N, op.Src.A, op.Src.Boundary, op.Src.MaxPad, op.Batch, op.Src.Skip)
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
	skip := ""
	if k := op.Src.Skip.String(); k != "" {
		skip = "; skipped: " + k
	}
	return fmt.Sprintf("WaveletResponse{%v volume, a=%g, %v%s: Σ G, Σ G², max G, Σ ψ²%s%s}", op.Src.N, op.Src.A, op.Src.Boundary, kernel, stats, skip)
}
