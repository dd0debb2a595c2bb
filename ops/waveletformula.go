package ops

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/formula"
)

// KernelVars are the variables of a wavelet kernel formula: the offset
// from the kernel's centre in voxels, the offset rotated into the
// kernel's frame (u along the stretched axis: the seed's rT, rp, rp2), and
// the combination's parameters.
var KernelVars = []formula.Var{
	{Name: "x", Vector: true, About: "offset from the kernel centre along the volume's first axis, voxels"},
	{Name: "y", Vector: true, About: "offset along the second axis"},
	{Name: "z", Vector: true, About: "offset along the third axis"},
	{Name: "u", Vector: true, About: "the offset along the kernel's stretched axis (rT)"},
	{Name: "v", Vector: true, About: "the offset along the kernel's second axis (rp)"},
	{Name: "w", Vector: true, About: "the offset along the kernel's third axis (rp2)"},
	{Name: "q", Vector: true, About: "the hat's quadratic form, (v/a)^2 + (u/(a*xi))^2 + (w/a)^2"},
	{Name: "theta", About: "the combination's θ"},
	{Name: "phi", About: "the combination's φ"},
	{Name: "xi", About: "the combination's stretch ξ"},
	{Name: "a", About: "the kernel scale a"},
}

// StatVars are the variables of a wavelet statistic: the response and
// the combination's parameters, so that a statistic may weigh a response
// by its kernel, as max(g)/sqrt(xi^2 + 2*a^2).
var StatVars = []formula.Var{
	{Name: "g", Vector: true, About: "the response at every voxel"},
	{Name: "theta", About: "the combination's θ"},
	{Name: "phi", About: "the combination's φ"},
	{Name: "xi", About: "the combination's stretch ξ"},
	{Name: "a", About: "the kernel scale a"},
}

// WaveletFormulas are a sweep's formulas: the kernel (nil: the Mexican
// hat) and statistics of each response beside the built-in ones.
type WaveletFormulas struct {
	Kernel *KernelFormula
	Stats  []*WaveletStat
}

// KernelFormula is f's kernel formula, nil for the built-in hat (or a
// nil f).
func (f *WaveletFormulas) KernelFormula() *KernelFormula {
	if f == nil {
		return nil
	}
	return f.Kernel
}

// extra is the number of statistics beyond the built-in ones.
func (f *WaveletFormulas) extra() int {
	if f == nil {
		return 0
	}
	return len(f.Stats)
}

// KernelTolerance is where a kernel formula's reach ends: the kernel is
// sampled over the box outside which |ψ| stays below KernelTolerance times
// its largest |ψ|. The built-in hat's box, q ≤ 36, ends at 1.7·10⁻⁷ of
// its peak.
const KernelTolerance = 1e-7

// KernelFormula is a user's wavelet kernel, sampled over its own reach
// (Support) around the kernel's centre.
type KernelFormula struct {
	F    *formula.Formula
	Prog *cpukern.FxProgram
	// Reach, when positive, is the half-width of the box the kernel is
	// sampled over along every axis, the user's choice; zero: the
	// kernel's own reach.
	Reach int
	// Limit is the largest half-width the kernel's own reach may have
	// along each axis: the volume's size less one.
	Limit [3]int
	// OnGrid samples the kernel over a grid the size of the volume
	// instead, centred as scipy.ndimage centres a kernel: along an axis
	// of n voxels, the offsets −⌊n/2⌋ … n − 1 − ⌊n/2⌋.
	OnGrid bool
	// AxisNames name the axes in errors (nil: first (x), second (y),
	// third (z)).
	AxisNames [3]string

	states   sync.Pool
	supports sync.Map // [4]float64{a, θ, φ, ξ} → supportOf
}

// supportOf is a memoised Support.
type supportOf struct {
	h   [3]int
	err error
}

// NewKernelFormula compiles f, checked against KernelVars, for a volume
// of n voxels along each axis: sampled over reach voxels from its centre
// along every axis, or with reach zero over its own reach.
func NewKernelFormula(f *formula.Formula, reach int, n [3]int) (*KernelFormula, error) {
	g, err := f.Graph(1)
	if err != nil {
		return nil, err
	}
	p, err := formula.Lower(g, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, true)
	if err != nil {
		return nil, err
	}
	k := &KernelFormula{F: f, Prog: p, Reach: reach}
	for i := range 3 {
		k.Limit[i] = max(n[i]-1, 0)
	}
	return k, nil
}

type kernelRows struct {
	st                  *cpukern.FxState[float64]
	x, y, z, u, v, w, q []float64 // one chunk of offsets
	plane               []float64 // the kernel over a plane of constant x
}

var axisNames = [3]string{"first (x)", "second (y)", "third (z)"}

// gridHalf is the half-widths of the box around the volume's grid, ⌊n/2⌋
// along an axis of n voxels.
func (k *KernelFormula) gridHalf() [3]int {
	var h [3]int
	for i := range 3 {
		h[i] = (k.Limit[i] + 1) / 2
	}
	return h
}

// Support returns the half-widths of the box the kernel of a, θ, φ and ξ
// is sampled over. With Reach set, Reach along every axis. Otherwise the
// kernel's own reach: it is evaluated on boxes that double along each
// axis where it has not yet fallen below KernelTolerance of its largest
// |ψ| at the box's faces, and along each axis the reach is the largest
// offset where it has not. A kernel that has not fallen below that at
// Limit, the volume's edge, is refused. The answer is kept per
// combination.
func (k *KernelFormula) Support(a, theta, phi, xi float64) ([3]int, error) {
	if k.OnGrid {
		return k.gridHalf(), nil
	}
	if k.Reach > 0 {
		return [3]int{k.Reach, k.Reach, k.Reach}, nil
	}
	key := [4]float64{a, theta, phi, xi}
	if s, ok := k.supports.Load(key); ok {
		return s.(supportOf).h, s.(supportOf).err
	}
	h, err := k.reach(a, theta, phi, xi)
	k.supports.Store(key, supportOf{h, err})
	return h, err
}

// reach finds the kernel's own reach (Support).
func (k *KernelFormula) reach(a, theta, phi, xi float64) ([3]int, error) {
	var h [3]int
	for i := range 3 {
		h[i] = min(4, k.Limit[i])
	}
	for {
		// slab[i][o+h[i]]: the largest |ψ| where the offset along axis i
		// is o.
		var slab [3][]float64
		for i := range 3 {
			slab[i] = make([]float64, 2*h[i]+1)
		}
		k.sample(a, theta, phi, xi, h, func(x, y, z int, psi float64) {
			m := math.Abs(psi)
			for i, o := range [3]int{x + h[0], y + h[1], z + h[2]} {
				if m > slab[i][o] {
					slab[i][o] = m
				}
			}
		})
		var peak float64
		for _, m := range slab[0] {
			peak = max(peak, m)
		}
		var reach [3]int
		grow := false
		for i := range 3 {
			for o, m := range slab[i] {
				if m > KernelTolerance*peak {
					reach[i] = max(reach[i], abs(o-h[i]))
				}
			}
			if reach[i] < h[i] {
				continue
			}
			if h[i] == k.Limit[i] {
				edge := max(slab[i][0], slab[i][2*h[i]])
				names := axisNames
				if k.AxisNames[0] != "" {
					names = k.AxisNames
				}
				return reach, fmt.Errorf("--kernel: θ = %g, φ = %g, ξ = %g: it does not decay within the volume: along its %s axis, %d voxels from its centre, at the volume's edge, it is still %.2g of its largest value; give --reach to sample it over a box of your choice (--reach volume: the volume's grid)",
					theta, phi, xi, names[i], h[i], edge/peak)
			}
			h[i], grow = min(2*h[i], k.Limit[i]), true
		}
		if !grow {
			return reach, nil
		}
	}
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}

// Sample evaluates the kernel at every integer offset of its Support, in
// Hat's order, calls fn for each, and returns the support. A kernel whose
// Support is refused is sampled over Limit.
func (k *KernelFormula) Sample(a, theta, phi, xi float64, fn func(x, y, z int, psi float64)) [3]int {
	h := k.box(a, theta, phi, xi)
	k.sample(a, theta, phi, xi, h, fn)
	return h
}

// box is the box Sample samples: Support, or Limit where it is refused.
func (k *KernelFormula) box(a, theta, phi, xi float64) [3]int {
	h, err := k.Support(a, theta, phi, xi)
	if err != nil {
		return k.Limit
	}
	return h
}

// sample evaluates the kernel at every integer offset of the box of
// half-widths h, in Hat's order, and calls fn for each. The planes of
// constant x are evaluated in parallel, a group of them at a time, each in
// as few calls of the evaluator as its length allows, and handed to fn in
// order.
func (k *KernelFormula) sample(a, theta, phi, xi float64, h [3]int, fn func(x, y, z int, psi float64)) {
	r := hatRotation(theta, phi)
	ny, nz := 2*h[1]+1, 2*h[2]+1
	plane := ny * nz
	// On the volume's grid, an axis of even length stops one short of h
	// on its positive side: those samples are zero.
	top := h
	if k.OnGrid {
		for i := range 3 {
			top[i] = k.Limit[i] - h[i]
		}
	}
	workers := max(1, min(runtime.GOMAXPROCS(0), 2*h[0]+1))
	rows := make([]*kernelRows, workers)
	for i := range rows {
		s, ok := k.states.Get().(*kernelRows)
		if !ok {
			s = &kernelRows{st: cpukern.NewFxState[float64](k.Prog)}
		}
		s.grow(min(plane, maxKernelChunk), plane)
		rows[i] = s
		defer k.states.Put(s)
	}
	eval := func(s *kernelRows, x int) {
		psi := s.plane[:plane]
		if x > top[0] {
			clear(psi)
			return
		}
		fx := float64(x)
		s.st.Reset()
		s.st.Regs[0], s.st.Regs[1], s.st.Regs[2], s.st.Regs[3] = theta, phi, xi, a
		for lo := 0; lo < plane; lo += len(s.x) {
			m := min(len(s.x), plane-lo)
			for i := range m {
				y, z := (lo+i)/nz-h[1], (lo+i)%nz-h[2]
				fy, fz := float64(y), float64(z)
				s.x[i], s.y[i], s.z[i] = fx, fy, fz
				s.u[i] = r[0][0]*fx + r[0][1]*fy + r[0][2]*fz
				s.v[i] = r[1][0]*fx + r[1][1]*fy + r[1][2]*fz
				s.w[i] = r[2][0]*fx + r[2][1]*fy + r[2][2]*fz
				rT, rp, rp2 := s.u[i], s.v[i], s.w[i]
				s.q[i] = (rp/a)*(rp/a) + (rT/(a*xi))*(rT/(a*xi)) + (rp2/a)*(rp2/a)
			}
			in := [][]float64{s.x[:m], s.y[:m], s.z[:m], s.u[:m], s.v[:m], s.w[:m], s.q[:m]}
			s.st.Run(m, in, [][]float64{psi[lo : lo+m]})
		}
		if k.OnGrid {
			for y := -h[1]; y <= h[1]; y++ {
				for z := -h[2]; z <= h[2]; z++ {
					if y > top[1] || z > top[2] {
						psi[(y+h[1])*nz+z+h[2]] = 0
					}
				}
			}
		}
	}
	var wg sync.WaitGroup
	for x0 := -h[0]; x0 <= h[0]; x0 += workers {
		n := min(workers, h[0]-x0+1)
		if n == 1 {
			eval(rows[0], x0)
		} else {
			for w := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					eval(rows[w], x0+w)
				}()
			}
			wg.Wait()
		}
		for w := range n {
			psi := rows[w].plane[:plane]
			for i, v := range psi {
				fn(x0+w, i/nz-h[1], i%nz-h[2], v)
			}
		}
	}
}

// maxKernelChunk is the most offsets a kernel formula is evaluated over
// in one call.
const maxKernelChunk = 1 << 14

// grow makes s's arrays hold chunk offsets and a plane of plane.
func (s *kernelRows) grow(chunk, plane int) {
	if len(s.x) < chunk {
		for _, p := range []*[]float64{&s.x, &s.y, &s.z, &s.u, &s.v, &s.w, &s.q} {
			*p = make([]float64, chunk)
		}
	}
	if len(s.plane) < plane {
		s.plane = make([]float64, plane)
	}
}

// WaveletStat is a named statistic of each response: a formula over g
// reducing to one number.
type WaveletStat struct {
	Name string
	F    *formula.Formula
	Prog *cpukern.FxProgram

	states sync.Pool
}

// NewWaveletStat compiles f, checked against StatVars, for responses of
// n voxels.
func NewWaveletStat(name string, f *formula.Formula, n int) (*WaveletStat, error) {
	g, err := f.Graph(n)
	if err != nil {
		return nil, err
	}
	p, err := formula.Lower(g, []int{0, 1, 2, 3, 4}, false)
	if err != nil {
		return nil, err
	}
	return &WaveletStat{Name: name, F: f, Prog: p}, nil
}

// ReadsOrientation reports whether the statistic reads θ or φ: then two
// combinations with the same kernel may still differ in it.
func (s *WaveletStat) ReadsOrientation() bool { return s.F.Uses("theta") || s.F.Uses("phi") }

// eval evaluates the statistic over resp, given as pieces by each, for
// the combination θ, φ, ξ of kernel scale a.
func (s *WaveletStat) eval(resp []float32, each func(piece func(lo, hi int)), a, theta, phi, xi float64) float64 {
	st, ok := s.states.Get().(*cpukern.FxState[float32])
	if !ok {
		st = cpukern.NewFxState[float32](s.Prog)
	}
	defer s.states.Put(st)
	st.Reset()
	st.Regs[0], st.Regs[1], st.Regs[2], st.Regs[3] = theta, phi, xi, a
	return st.Stream(resp, each)
}
