package ops

import (
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

// StatVars are the variables of a wavelet statistic: the response.
var StatVars = []formula.Var{{Name: "g", Vector: true, About: "the response at every voxel"}}

// WaveletFormulas are a sweep's formulas: the kernel (nil: the Mexican
// hat) and statistics of each response beside the built-in ones.
type WaveletFormulas struct {
	Kernel *KernelFormula
	Stats  []*WaveletStat
}

// extra is the number of statistics beyond the built-in ones.
func (f *WaveletFormulas) extra() int {
	if f == nil {
		return 0
	}
	return len(f.Stats)
}

// KernelFormula is a user's wavelet kernel, sampled at every offset of
// the Mexican hat's support box of the same parameters.
type KernelFormula struct {
	F    *formula.Formula
	Prog *cpukern.FxProgram

	states sync.Pool
}

// NewKernelFormula compiles f, checked against KernelVars.
func NewKernelFormula(f *formula.Formula) (*KernelFormula, error) {
	g, err := f.Graph(1)
	if err != nil {
		return nil, err
	}
	p, err := formula.Lower(g, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, true)
	if err != nil {
		return nil, err
	}
	return &KernelFormula{F: f, Prog: p}, nil
}

type kernelRows struct {
	st                       *cpukern.FxState[float64]
	x, y, z, u, v, w, q, psi []float64
}

// Sample evaluates the kernel at every integer offset of HatSupport, in
// Hat's order, and calls fn for each.
func (k *KernelFormula) Sample(a, theta, phi, xi float64, fn func(x, y, z int, psi float64)) [3]int {
	h := HatSupport(a, theta, phi, xi)
	r := hatRotation(theta, phi)
	s, ok := k.states.Get().(*kernelRows)
	if !ok {
		s = &kernelRows{st: cpukern.NewFxState[float64](k.Prog)}
	}
	defer k.states.Put(s)
	nz := 2*h[2] + 1
	if len(s.z) < nz {
		for _, p := range []*[]float64{&s.x, &s.y, &s.z, &s.u, &s.v, &s.w, &s.q, &s.psi} {
			*p = make([]float64, nz)
		}
	}
	s.st.Reset()
	s.st.Regs[0], s.st.Regs[1], s.st.Regs[2], s.st.Regs[3] = theta, phi, xi, a
	in := [][]float64{s.x, s.y, s.z, s.u, s.v, s.w, s.q}
	out := [][]float64{s.psi}
	for x := -h[0]; x <= h[0]; x++ {
		for y := -h[1]; y <= h[1]; y++ {
			fx, fy := float64(x), float64(y)
			for i := range nz {
				fz := float64(i - h[2])
				s.x[i], s.y[i], s.z[i] = fx, fy, fz
				s.u[i] = r[0][0]*fx + r[0][1]*fy + r[0][2]*fz
				s.v[i] = r[1][0]*fx + r[1][1]*fy + r[1][2]*fz
				s.w[i] = r[2][0]*fx + r[2][1]*fy + r[2][2]*fz
				rT, rp, rp2 := s.u[i], s.v[i], s.w[i]
				s.q[i] = (rp/a)*(rp/a) + (rT/(a*xi))*(rT/(a*xi)) + (rp2/a)*(rp2/a)
			}
			s.st.Run(nz, in, out)
			for i := range nz {
				fn(x, y, i-h[2], s.psi[i])
			}
		}
	}
	return h
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
	p, err := formula.Lower(g, []int{0}, false)
	if err != nil {
		return nil, err
	}
	return &WaveletStat{Name: name, F: f, Prog: p}, nil
}

// eval evaluates the statistic over resp, given as pieces by each.
func (s *WaveletStat) eval(resp []float32, each func(piece func(lo, hi int))) float64 {
	st, ok := s.states.Get().(*cpukern.FxState[float32])
	if !ok {
		st = cpukern.NewFxState[float32](s.Prog)
	}
	defer s.states.Put(st)
	st.Reset()
	return st.Stream(resp, each)
}
