package ops

// The GPU kernels (cuda/kernels/*.cu) run on the CPU under the CUDA
// emulator (internal/kernelemu: each block's threads are fibers,
// __syncthreads a barrier among them), through the same launch specifications the GPU
// twins use (kernels.go), against the CPU ops. This checks the kernels'
// arithmetic and indexing and the argument lists on machines without a
// GPU; it skips where g++ is missing.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

func TestEmuInterpKernel(t *testing.T) {
	opstest.Emulator(t)
	rng := rand.New(rand.NewPCG(51, 52))
	const m, g, batch = 13, 50, 300
	f, x := interpFixture(rng, m, g, batch)
	in := tensor.New(tensor.WithShape(batch), tensor.WithBacking(append([]float32(nil), x...)))
	for _, c := range interpCases {
		tab, want := interpReference(t, f, m, g, batch, c.r, c.me, in)
		op := NewInterp1D(tab, c.r, c.me, tensor.Float32, batch)
		outN := batch
		if c.r == ReduceNone {
			outN = batch * m
		}
		xs, out := append([]float32(nil), x...), opstest.Buf32(outN)
		gram, colsum, fpT := tab.gram, tab.colsum, tab.fpT32
		opstest.Emulate(t, interpLaunch[any](op, xs, gram, colsum, fpT, out))
		if e := opstest.RelErr(out, want.Data().([]float32)); !(e <= 1e-6) {
			t.Errorf("%v/%v: relative error %.3g", c.r, c.me, e)
		}
	}
}

func TestEmuDRRKernel(t *testing.T) {
	opstest.Emulator(t)
	const rows, cols, batch = 12, 10, 3
	vol, in := drrFixture(rand.New(rand.NewPCG(53, 54)), [3]int64{20, 16, 12}, 300, 100, 2.5, rows, cols, batch)
	poses := in.Data().([]float64)
	for _, step := range []float64{0, 0.5} {
		op := NewDRR(vol, rows, cols, step, batch)
		want, err := op.Do(in)
		if err != nil {
			t.Fatal(err)
		}
		v := vol
		if step > 0 {
			v = volume.Pad(vol)
		}
		vv, ps, img := append([]float32(nil), v.V...), append([]float64(nil), poses...), opstest.Buf32(batch*rows*cols)
		opstest.Emulate(t, drrLaunch[any](op, v.N, v.Origin, v.Spacing, vv, ps, img))
		if e := opstest.RelErr(img, want.Data().([]float32)); !(e <= 1e-5) {
			t.Errorf("step %g: relative error %.3g", step, e)
		}
	}
}

// The three kernels of the wavelet twin, each against its CPU counterpart:
// the kernel array and its energy, the spectrum product, the statistics.
func TestEmuWaveletKernels(t *testing.T) {
	opstest.Emulator(t)
	rng := rand.New(rand.NewPCG(57, 58))
	p := [3]int{14, 11, 9} // smaller than the kernel: taps wrap and add up
	// a, θ, φ, ξ; the last three hats narrower than a voxel along some
	// axis, down to a·ξ below the smallest double: the centre's 3 alone.
	for _, c := range [][4]float64{{1, 0.3, 1.1, 2}, {1, 2.5, 0.4, 0.7}, {0.2, 0.7, 1.3, 0.3}, {1e-20, 0.7, 1.3, 1},
		{1e-300, 0.7, 1.3, 1e-300}} {
		want := make([]float32, p[0]*p[1]*p[2])
		var energy float64
		Hat(c[0], c[1], c[2], c[3], func(x, y, z int, psi float64) {
			energy += psi * psi
			want[(mod(x, p[0])*p[1]+mod(y, p[1]))*p[2]+mod(z, p[2])] += float32(psi)
		})
		if c[0] < 1e-10 && energy != 9 {
			t.Errorf("%v: the CPU's kernel energy %v, want 9", c, energy)
		}
		k := make([]float32, len(want))
		part := make([]float64, wvBlocks)
		l := hatLaunch[any](c[0], c[1], c[2], c[3], p, k, part)
		l.GX = 3 // fewer blocks than taps/256: each thread strides over several
		opstest.Emulate(t, l)
		var e float64
		for _, v := range part[:l.GX] {
			e += v
		}
		if math.Abs(e-energy) > 1e-9*energy {
			t.Errorf("%v: kernel energy %v, want %v", c, e, energy)
		}
		if d := opstest.RelErr(k, want); !(d <= 1e-6) {
			t.Errorf("%v: kernel array relative error %.3g", c, d)
		}
	}
	// hat_spectrum against the CPU's closed form, on odd and even sizes and
	// a scale small enough (a = 0.8) that several aliases count.
	for _, c := range []struct {
		p         [3]int
		a         float64
		th, ph, ξ float64
	}{{[3]int{9, 10, 11}, 0.8, 0.4, 1.2, 2.5}, {[3]int{12, 7, 16}, 1.5, 2.2, 0.3, 0.7}} {
		q := c.p
		h := q[2]/2 + 1
		n := q[0] * q[1] * h
		spec := opstest.Normals32(rng, 2*n)
		got := make([]float32, 2*n)
		part := make([]float64, wvBlocks)
		l := hatSpectrumLaunch[any](c.a, c.th, c.ph, c.ξ, q, got, spec, part)
		l.GX = 2 // fewer blocks than coefficients/256: each thread strides over several
		opstest.Emulate(t, l)
		want := make([]complex64, n)
		sc := unsafe.Slice((*complex64)(unsafe.Pointer(&spec[0])), n)
		b := hatB(c.a, c.th, c.ph, c.ξ)
		energy := make([]float64, q[1])
		cpukern.HatMul(want, sc, q, 0, q[0], 0, q[1], [6]float64{b[0][0], b[0][1], b[0][2], b[1][1], b[1][2], b[2][2]},
			make([]float64, q[2]/2+16), energy, nil, nil)
		var e, we float64
		for _, v := range part[:l.GX] {
			e += v
		}
		for _, v := range energy {
			we += v
		}
		we /= float64(q[0] * q[1] * q[2])
		if math.Abs(e-we) > 1e-6*we {
			t.Errorf("hat_spectrum %v: Σψ² %v, want %v", c, e, we)
		}
		ws := unsafe.Slice((*float32)(unsafe.Pointer(&want[0])), 2*n)
		d := opstest.RelErr(got, ws)
		if !(d <= 1e-6) {
			t.Errorf("hat_spectrum %v: relative error %.3g", c, d)
		}
		t.Logf("hat_spectrum %v: relative error %.2g, Σψ² %.9g against %.9g", c.p, d, e, we)
	}
	// cmul over interleaved complex64.
	a, b := make([]float32, 2*301), make([]float32, 2*301)
	for i := range a {
		a[i], b[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	want := make([]float32, len(a))
	for i := 0; i < len(a); i += 2 {
		z := complex(a[i], a[i+1]) * complex(b[i], b[i+1])
		want[i], want[i+1] = real(z), imag(z)
	}
	opstest.Emulate(t, cmulLaunch[any](a, b, 301))
	if d := opstest.RelErr(a, want); !(d <= 1e-6) {
		t.Errorf("cmul: relative error %.3g", d)
	}
	// crop_stats over a block of a response array.
	q, lo, n := [3]int{13, 12, 11}, [3]int{2, 3, 1}, [3]int{9, 7, 8}
	g := opstest.Normals32(rng, q[0]*q[1]*q[2])
	const scale = 0.25
	var s1, s2 float64
	mx := math.Inf(-1)
	for i := lo[0]; i < lo[0]+n[0]; i++ {
		for j := lo[1]; j < lo[1]+n[1]; j++ {
			for kk := lo[2]; kk < lo[2]+n[2]; kk++ {
				v := float64(g[(i*q[1]+j)*q[2]+kk]) * scale
				s1, s2, mx = s1+v, s2+v*v, max(mx, v)
			}
		}
	}
	part := make([]float64, 3*wvBlocks)
	l := statsLaunch[any](g, q, lo, n, scale, part)
	l.GX = 1 // as at 200³ on a GPU, where each thread strides over ~30 elements
	opstest.Emulate(t, l)
	var t1, t2 float64
	tm := math.Inf(-1)
	for i := range l.GX {
		t1, t2, tm = t1+part[3*i], t2+part[3*i+1], max(tm, part[3*i+2])
	}
	if math.Abs(t1-s1) > 1e-9*(1+math.Abs(s1)) || math.Abs(t2-s2) > 1e-9*s2 || tm != mx {
		t.Errorf("crop_stats: (%v, %v, %v), want (%v, %v, %v)", t1, t2, tm, s1, s2, mx)
	}
}

// interpFixture is m random rows of g values and batch queries on [0, 1]
// widened by a tenth at each end, so that some fall below a and some above
// the grid.
func interpFixture(rng *rand.Rand, m, g, batch int) ([]float64, []float32) {
	f := opstest.Normals64(rng, m*g)
	x := make([]float32, batch)
	for i := range x {
		x[i] = float32(rng.Float64()*1.2 - 0.1)
	}
	return f, x
}

// interpReference is the table of f for r and me, and the CPU op's result
// for the queries in.
func interpReference(t *testing.T, f []float64, m, g, batch int, r Reduce, me Method, in *tensor.Dense) (*InterpTable, *tensor.Dense) {
	t.Helper()
	tab, err := NewInterpTable(f, m, g, 0, 1.0/float64(g-1), r, me, tensor.Float32)
	if err != nil {
		t.Fatal(err)
	}
	want, err := NewInterp1D(tab, r, me, tensor.Float32, batch).Do(in)
	if err != nil {
		t.Fatal(err)
	}
	return tab, want.(*tensor.Dense)
}

// interpCases are the reduction/method pairs every interp path is tested on.
var interpCases = []struct {
	r  Reduce
	me Method
}{{ReduceSumSq, MethodAuto}, {ReduceSum, MethodAuto}, {ReduceSumSq, MethodDirect}, {ReduceSum, MethodDirect}, {ReduceNone, MethodAuto}}

// The filter twin's two kernels, each alone against its CPU pass
// (internal/cpukern's FilterRows and FilterCols), for an odd batch and a
// kernel longer than the image's rows, both boundaries.
func TestEmuFilterKernels(t *testing.T) {
	opstest.Emulator(t)
	const p, r, c = 2, 9, 37
	rng := rand.New(rand.NewPCG(57, 58))
	src := opstest.Normals32(rng, p*r*c)
	w := opstest.Normals32(rng, 23)
	for _, mode := range []FilterMode{FilterReflect, FilterNearest} {
		want := make([]float32, len(src))
		cpukern.FilterRows(want, src, c, 0, p*r, w, mode)
		got := opstest.Buf32(len(src))
		opstest.Emulate(t, filterRowsLaunch[any](append([]float32(nil), src...), got, p*r, c, append([]float32(nil), w...), len(w), mode))
		if e := opstest.RelErr(got, want); !(e <= 1e-6) {
			t.Errorf("filter_rows, mode %d: relative error %.3g", mode, e)
		}
		cpukern.FilterCols(want, src, r, c, 0, p*r, w, mode)
		got = opstest.Buf32(len(src))
		opstest.Emulate(t, filterColsLaunch[any](append([]float32(nil), src...), got, p, r, c, append([]float32(nil), w...), len(w), mode))
		if e := opstest.RelErr(got, want); !(e <= 1e-6) {
			t.Errorf("filter_cols, mode %d: relative error %.3g", mode, e)
		}
	}
}

// The launch specifications of RigidDRR's and Project's twins
// (drrGradLaunch, drrBackLaunch) on host buffers against the C kernels,
// one view of rays, both methods, a padded and an unpadded volume; the
// derivative pointers null, as Project passes them.
func TestEmuDRRGradLaunches(t *testing.T) {
	opstest.Emulator(t)
	rng := rand.New(rand.NewPCG(59, 60))
	const rows, cols = 9, 13
	vol, views := projectFixture(rng, [3]int64{11, 9, 13}, false, rows, cols)
	op := mustProject(t, vol, views[:PoseWidth], rows, cols, 0)
	op.prepare()
	g, n := op.geom, rows*cols
	up := opstest.Normals64(rng, n)
	for _, c := range []struct {
		kv   *volume.Volume
		step float64
	}{{vol.Local(), 0}, {vol.Local(), 0.6}, {volume.Pad(vol.Local()), 0.6}} {
		out, gs, gd := make([]float64, n), make([]float64, 3*n), make([]float64, 3*n)
		cpukern.DRRGrad(kernelGrid(c.kv), g.src, g.dst, out, gs, gd, c.step, g.lref[0])
		back := make([]float64, len(c.kv.V))
		cpukern.DRRBackProject(kernelGrid(c.kv), g.src, g.dst, up, back, c.step, g.lref[0])
		v, src, dst := append([]float32(nil), c.kv.V...), append([]float64(nil), g.src...), append([]float64(nil), g.dst...)
		eo, egs, egd := opstest.Widen(opstest.Buf32(n)), opstest.Widen(opstest.Buf32(3*n)), opstest.Widen(opstest.Buf32(3*n))
		opstest.Emulate(t, drrGradLaunch[any](c.kv, n, c.step, g.lref[0], v, src, dst, eo, egs, egd))
		bare := opstest.Widen(opstest.Buf32(n))
		opstest.Emulate(t, drrGradLaunch[any](c.kv, n, c.step, g.lref[0], v, src, dst, bare, int64(0), int64(0)))
		eb := make([]float64, len(c.kv.V))
		opstest.Emulate(t, drrBackLaunch[any](c.kv, n, c.step, g.lref[0], src, dst, append([]float64(nil), up...), eb))
		name := fmt.Sprintf("padded=%v/step=%g", c.kv.Padded, c.step)
		for _, r := range []struct {
			what      string
			got, want []float64
		}{{"images", eo, out}, {"images without derivatives", bare, out}, {"gsrc", egs, gs}, {"gdst", egd, gd}, {"back-projection", eb, back}} {
			if e := opstest.RelErr(r.got, r.want); !(e <= 1e-12) {
				t.Errorf("%s: %s: relative error %.3g", name, r.what, e)
			}
		}
	}
}
