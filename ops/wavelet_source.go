package ops

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/tapeloop/tapeloop/internal/fft3"
	"github.com/tapeloop/tapeloop/internal/finite"
	"github.com/tapeloop/tapeloop/internal/parallel"
	"github.com/tapeloop/tapeloop/internal/sysmem"
)

// The volume a wavelet sweep convolves: its boundary extension and its
// transform, made once per padding.

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

// WaveletVolume is the volume a sweep convolves, transformed once.
type WaveletVolume struct {
	N        [3]int
	A        float64
	Boundary Boundary
	Pad      [3]int // reflect: the largest half-widths of the sweep
	plan     *fft3.Plan
	spec     []complex64 // real-to-complex transform of the (extended) volume
	id       uint64
}

func checkVolume(v []float32, n [3]int) error {
	if n[0] < 1 || n[1] < 1 || n[2] < 1 || len(v) != n[0]*n[1]*n[2] {
		return fmt.Errorf("%w: volume of %d values for shape %v", ErrWavelet, len(v), n)
	}
	if i := finite.First(v); i >= 0 {
		return fmt.Errorf("%w: voxel (%d, %d, %d) is %g", ErrWavelet, i/(n[1]*n[2]), i/n[2]%n[1], i%n[2], v[i])
	}
	return nil
}

// transformVolume extends and transforms v, into the buffers ext and spec
// when they are large enough, with the plan of plans for its size when
// there is one (plans, when not nil, keeps the one it makes); it returns
// the volume and the extension buffer, for reuse.
func transformVolume(v []float32, n [3]int, a float64, b Boundary, pad [3]int, ext []float32, spec []complex64, plans map[[3]int]*fft3.Plan) (*WaveletVolume, []float32) {
	w := &WaveletVolume{N: n, A: a, Boundary: b, id: tableIDs.Add(1)}
	p := n
	if b == Reflect {
		w.Pad = pad
		p = reflectDims(n, pad)
	}
	w.plan = plans[p]
	if w.plan == nil {
		w.plan = fft3.New(p[0], p[1], p[2])
		if plans != nil {
			if len(plans) >= 8 { // a sweep runs its sizes in turn: keep a few
				clear(plans)
			}
			plans[p] = w.plan
		}
	}
	if cap(spec) < w.plan.HalfLen() {
		spec = make([]complex64, w.plan.HalfLen())
		sysmem.AdviseHugePagesOf(spec)
	}
	w.spec = spec[:w.plan.HalfLen()]
	if b == Wrap { // the volume as it is: no copy
		w.plan.ForwardReal(w.spec, v)
		return w, ext
	}
	if cap(ext) < w.plan.Len() {
		ext = make([]float32, w.plan.Len())
		sysmem.AdviseHugePagesOf(ext)
	}
	ext = ext[:w.plan.Len()]
	sk := make([]int, p[2]) // the source of each position along the last axis
	for k := range sk {
		sk[k] = reflectIndex(k-w.Pad[2], n[2])
	}
	parallel.For(p[0], 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			si := reflectIndex(i-w.Pad[0], n[0])
			for j := range p[1] {
				src := v[(si*n[1]+reflectIndex(j-w.Pad[1], n[1]))*n[2]:][:n[2]]
				row := ext[(i*p[1]+j)*p[2]:][:p[2]]
				// The volume's own run, then the reflected ends.
				lo, hi := w.Pad[2], w.Pad[2]+n[2]
				copy(row[lo:hi], src)
				for k := range lo {
					row[k] = src[sk[k]]
				}
				for k := hi; k < p[2]; k++ {
					row[k] = src[sk[k]]
				}
			}
		}
	})
	w.plan.ForwardReal(w.spec, ext)
	return w, ext
}

// WaveletSource is a volume to sweep, float32 as read. In reflect mode each
// combination needs the volume extended by its own kernel's half-widths:
// the source transforms the volume for the padding asked for and keeps the
// last one, so a sweep ordered by padding transforms it once per distinct
// padding, into buffers sized once for the largest.
type WaveletSource struct {
	V        []float32
	N        [3]int
	A        float64
	Boundary Boundary
	MaxPad   [3]int
	// MaxSupport is the largest kernel half-widths of the sweep
	// (HatSupport), for the memory count; zero: unknown. Narrow is
	// whether some hat of the sweep is too narrow for the closed form
	// (HatNarrow), known with MaxSupport.
	MaxSupport [3]int
	Narrow     bool
	// Formulas are the user's kernel and statistics (nil: the Mexican
	// hat and the built-in statistics only).
	Formulas *WaveletFormulas
	// Skip leaves out the results a sweep does not use, and the passes
	// only they need (WaveletSkip; the zero value: none).
	Skip WaveletSkip

	// largest is the largest transform the sweep runs (SetPaddings):
	// its elements, its half-spectrum's coefficients and one worker's
	// plane and row buffers, in float64s; zero: that of MaxPad.
	largest struct{ n, half, plane int }

	// Cache, when set, keeps the volume's transforms for several
	// paddings (VolumeCache), shared with the sources made after this one
	// for the same volume; nil: the last one only, in buffers sized once
	// for MaxPad (a sweep ordered by padding needs no more).
	Cache *VolumeCache

	cur   *WaveletVolume
	ext   []float32
	spec  []complex64
	plans map[[3]int]*fft3.Plan // by transform size
}

// VolumeCache keeps a volume's transforms for the paddings used last, the
// most recent first, each in an array of its own size, as many as fit in
// Budget bytes (the most recent always). It serves calls that each sweep a
// few combinations of different paddings (one combination per call, as a
// NumPy loop runs them): a padding used again is not transformed again,
// and what is held is what the recent calls used, not the widest padding
// ever asked for.
type VolumeCache struct {
	Budget int64
	mu     sync.Mutex // ops of several devices may share the cache
	vols   []*WaveletVolume
	plans  map[[3]int]*fft3.Plan
	ext    []float32   // the extended volume, scratch of every transform
	spare  []complex64 // the spectrum array of the last one dropped, for reuse
	// scratch is the per-combination work arrays, kept for the ops of
	// the sources that share the cache, one at a time (a program compiled
	// again for a wider padding), so that each does not make its own.
	scratch *waveletScratch
	// built, builtElems and builtSecs count the transforms made (Built).
	built                 int
	builtElems, builtSecs float64
}

// scratchFor returns the cache's scratch, made anew when smaller than n
// elements and half coefficients.
func (c *VolumeCache) scratchFor(n, half int) *waveletScratch {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.scratch == nil || c.scratch.n < n || len(c.scratch.half) < half {
		c.scratch = newWaveletScratch(n, half)
	}
	return c.scratch
}

// Bytes is what the cache holds.
func (c *VolumeCache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes()
}

func (c *VolumeCache) bytes() int64 {
	var b int64
	for _, w := range c.vols {
		b += 8 * int64(len(w.spec))
	}
	return b
}

// Paddings lists the paddings of the transforms the cache holds for a
// volume of n, the most recently used first.
func (c *VolumeCache) Paddings(n [3]int) [][3]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out [][3]int
	for _, w := range c.vols {
		if w.N == n {
			out = append(out, w.Pad)
		}
	}
	return out
}

// Built is what the cache's transforms of the volume took so far: how
// many it made, their elements, and the seconds making them took, the
// arrays' allocation and first touch included.
func (c *VolumeCache) Built() (count int, elems, seconds float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.built, c.builtElems, c.builtSecs
}

// volume returns src's volume transformed for pad, from the cache or
// transformed now and kept, dropping the least recently used beyond the
// budget.
func (c *VolumeCache) volume(src *WaveletSource, pad [3]int) *WaveletVolume {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, w := range c.vols {
		if w.Pad == pad && w.N == src.N && w.A == src.A && w.Boundary == src.Boundary {
			copy(c.vols[1:i+1], c.vols[:i])
			c.vols[0] = w
			return w
		}
	}
	if c.plans == nil {
		c.plans = map[[3]int]*fft3.Plan{}
	}
	var w *WaveletVolume
	began := time.Now()
	w, c.ext = transformVolume(src.V, src.N, src.A, src.Boundary, pad, c.ext, c.spare, c.plans)
	c.built++
	c.builtElems += float64(w.plan.Len())
	c.builtSecs += time.Since(began).Seconds()
	c.spare = nil
	c.vols = append([]*WaveletVolume{w}, c.vols...)
	for b := c.bytes(); b > c.Budget && len(c.vols) > 1; b = c.bytes() {
		last := c.vols[len(c.vols)-1]
		if cap(last.spec) > cap(c.spare) {
			c.spare = last.spec[:cap(last.spec)]
		}
		c.vols[len(c.vols)-1] = nil
		c.vols = c.vols[:len(c.vols)-1]
	}
	return w
}

// Release drops the cache's transforms and scratch.
func (c *VolumeCache) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.vols, c.ext, c.spare, c.scratch = nil, nil, nil, nil
}

// NewWaveletSource checks v (n0·n1·n2 values, C order, kept, not copied)
// and returns the source for paddings up to maxPad (ignored in wrap mode).
func NewWaveletSource(v []float32, n [3]int, a float64, b Boundary, maxPad [3]int) (*WaveletSource, error) {
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
	return &WaveletSource{V: s.V, N: s.N, A: s.A, Boundary: s.Boundary, MaxPad: s.MaxPad, MaxSupport: s.MaxSupport, Narrow: s.Narrow, Formulas: s.Formulas, Skip: s.Skip, Cache: s.Cache,
		largest: s.largest}
}

// SetPaddings sizes the source's buffers, and its memory count, for the
// paddings its combinations run with (each at most MaxPad along every
// axis), instead of for MaxPad itself: MaxPad is the largest along each
// axis separately, and a sweep whose kernels are long along different
// axes (a stretched hat turned about) never runs a transform that large.
// The largest transform among pads is what the sweep allocates and
// touches. It does nothing in wrap mode, which pads nothing.
func (s *WaveletSource) SetPaddings(pads [][3]int) {
	if s.Boundary != Reflect || len(pads) == 0 {
		return
	}
	seen := map[[3]int]bool{}
	s.largest.n, s.largest.half, s.largest.plane = 0, 0, 0
	for _, pad := range pads {
		d := reflectDims(s.N, pad)
		if seen[d] {
			continue
		}
		seen[d] = true
		s.largest.n = max(s.largest.n, d[0]*d[1]*d[2])
		s.largest.half = max(s.largest.half, d[0]*d[1]*(d[2]/2+1))
		s.largest.plane = max(s.largest.plane, planeFloats(d))
	}
}

// planeFloats is one worker's plane and row buffers of the inverse
// transform of dims d, in float64s (8 bytes).
func planeFloats(d [3]int) int {
	h := d[2]/2 + 1
	return d[1]*h + planeRows*(d[2]+1)/2
}

// Reset drops the source's transform and buffers (not its Cache's): a
// source held between calls holds nothing until its next Volume.
func (s *WaveletSource) Reset() { s.cur, s.ext, s.spec = nil, nil, nil }

// Volume returns the volume transformed for pad (wrap: no padding).
func (s *WaveletSource) Volume(pad [3]int) *WaveletVolume {
	if s.Boundary == Wrap {
		pad = [3]int{}
	}
	if s.Cache != nil {
		s.cur = s.Cache.volume(s, pad)
		return s.cur
	}
	if s.spec == nil { // buffers for the largest padding, allocated once
		if s.Boundary == Reflect {
			s.ext = make([]float32, s.maxLen())
			sysmem.AdviseHugePagesOf(s.ext)
		}
		s.spec = make([]complex64, s.maxHalf())
		sysmem.AdviseHugePagesOf(s.spec)
	}
	if s.cur == nil || s.cur.Pad != pad {
		if s.plans == nil {
			s.plans = map[[3]int]*fft3.Plan{}
		}
		s.cur, s.ext = transformVolume(s.V, s.N, s.A, s.Boundary, pad, s.ext, s.spec, s.plans)
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
	if s.largest.n > 0 {
		return s.largest.n
	}
	d := s.maxDims()
	return d[0] * d[1] * d[2]
}

// maxHalf is the coefficient count of the largest padded volume's
// real-to-complex transform.
func (s *WaveletSource) maxHalf() int {
	if s.largest.half > 0 {
		return s.largest.half
	}
	d := s.maxDims()
	return d[0] * d[1] * (d[2]/2 + 1)
}

// Bytes counts what a sweep of the source holds, for the largest padding:
// the volume, its extension (reflect mode), its spectrum, and one op's
// scratch (ScratchBytes).
func (s *WaveletSource) Bytes() int64 {
	b := 4*int64(len(s.V)) + 8*int64(s.maxHalf()) + s.ScratchBytes()
	if s.Boundary == Reflect {
		b += 4 * int64(s.maxLen())
	}
	return b
}

// ScratchBytes counts one op's scratch for the largest padding: the
// product of spectra, the inverse transform's plane and row buffers (one
// per core), and where they are needed the sampled kernel's array and the
// whole response (statistics formulas).
func (s *WaveletSource) ScratchBytes() int64 {
	plane := s.largest.plane
	if plane == 0 {
		plane = planeFloats(s.maxDims())
	}
	b := 8*int64(s.maxHalf()) + int64(runtime.GOMAXPROCS(0))*8*int64(plane)
	if s.sampled() {
		b += 4 * int64(s.maxLen())
	}
	if s.Formulas != nil && len(s.Formulas.Stats) > 0 {
		b += 4 * int64(s.maxLen())
	}
	return b
}

// sampled reports whether some kernel of the sweep may be sampled rather
// than computed in closed form: a --kernel formula, a hat too narrow for
// it, or in wrap mode a hat whose support box is wider than the volume
// (MaxSupport unset: maybe).
func (s *WaveletSource) sampled() bool {
	if s.Formulas != nil && s.Formulas.Kernel != nil || s.MaxSupport == [3]int{} || s.Narrow {
		return true
	}
	d := s.maxDims()
	return 2*s.MaxSupport[0] >= d[0] || 2*s.MaxSupport[1] >= d[1] || 2*s.MaxSupport[2] >= d[2]
}

// planeRows is the inverse transform's rows per piece (fft3's chunkLines).
const planeRows = 64

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

// FFTSize is the transform length used for at least m values: the
// smallest m' ≥ m whose only prime factors are 2, 3 and 5.
func FFTSize(m int) int { return smooth(m) }

// smooth is the smallest m' ≥ m whose only prime factors are 2, 3 and 5,
// found among the products 2ⁱ·3ʲ·5ᵏ (a few hundred up to 2⁶³), not by
// trying every number from m; math.MaxInt when there is none.
func smooth(m int) int {
	if m <= 1 {
		return 1
	}
	best := math.MaxInt
	for p5 := 1; ; p5 *= 5 {
		for p3 := p5; ; p3 *= 3 {
			v := p3
			for v < m && v <= math.MaxInt/2 {
				v *= 2
			}
			if v >= m {
				best = min(best, v)
			}
			if p3 >= m || p3 > math.MaxInt/3 {
				break
			}
		}
		if p5 >= m || p5 > math.MaxInt/5 {
			break
		}
	}
	return best
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

func mod(i, n int) int {
	m := i % n
	if m < 0 {
		m += n
	}
	return m
}
