package ops

// Conformance: one suite per op, each a table of cases with a reference of
// its own (a slow loop written out in these test files, or an analytic
// result), run unchanged on every backend the build has: the CPU always,
// and the GPU twins (OnDevice) in builds with tapeloop_cuda or
// tapeloop_cudaemu (see backends, in backends_cpu_test.go and
// backends_cuda_test.go). "The same results on every backend" is these
// twelve tests: TestConformanceInterp1D, TestConformanceInterp1DGrad (its
// backwards), TestConformanceDRR, TestConformanceWavelet
// (WaveletResponse then WaveletMoments), TestConformanceFilter2D,
// TestConformanceMapImages (formula_conformance_test.go),
// TestConformanceRigidDRR and TestConformanceProject
// (raydrr_conformance_test.go), and in ops/pairwise
// TestConformancePairwise (with top-k included: the fused PairwiseTopK
// where the device offers it, else TopK, as graphs/affinity selects),
// TestConformancePairwiseU8, TestConformancePairFormula and
// TestConformanceL2CommonOffset.
//
// Every case runs twice: the second time with the host output filled with
// a mark and, on a GPU, the device output with NaN, so an element the op
// owes and does not write shows, and so does one it must leave alone and
// writes. Tolerances are the ones each path has been held to: on the CPU
// against the references as before, on a GPU (float32 sums in another
// order, TF32 where asked, cuFFT) as the twins were against the CPU ops.
//
// What is not a per-case comparison of results stays in its own test: a
// GPU stream's order, WriteFull and the fused PairwiseMatrix, each kernel
// alone under the emulator (emu_test.go), the CLI on the emulator
// (cmd/tapeloop); so do the ops with no GPU twin (Mirror, BatchStats,
// ImageStats, WaveletMoments alone).

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

// backend is one place the ops run (see opstest.Backend).
type backend = opstest.Backend[Device]

// cpuBackend runs the ops as they are.
var cpuBackend = backend{Name: "cpu", OnDevice: OnDevice}

// ---- Interp1D ----

type interpCase struct {
	name  string
	f     []float64 // m interpolants of g values
	m, g  int
	a, dx float64
	r     Reduce
	me    Method
	x     []float64 // the queries, float32 values: both dtypes see the same points
	want  []float64
	local bool // the op takes x − a (Interp1D.Local): x holds those
}

// interpConformanceCases: random interpolants on random grids, from the
// smallest (G = 4) up, queried inside, below a, above the last node, on
// nodes and on the bounds, in batches of odd lengths (no multiple of a GPU
// block) and of one; every reduction and method against refInterp. Grids
// far from zero whose op takes its queries as x − a (Interp1D.Local). And
// f = x², which the cubic scheme reproduces away from the zero padding:
// the values are x² itself.
func interpConformanceCases() []interpCase {
	rng := rand.New(rand.NewPCG(1, 2))
	var cases []interpCase
	for _, s := range []struct{ m, g, n int }{{1, 4, 997}, {7, 5, 997}, {13, 64, 997}, {300, 257, 997}, {37, 300, 1000}, {5, 33, 1}} {
		a, dx := rng.NormFloat64()*3, 0.01+rng.Float64()
		f := opstest.Normals64(rng, s.m*s.g)
		for i := range f {
			f[i] += 0.5
		}
		x := opstest.Widen(opstest.Narrow(testQueries(rng, s.n, a, dx, s.g)))
		for _, r := range []Reduce{ReduceSumSq, ReduceSum, ReduceNone} {
			var want []float64
			for _, xv := range x {
				want = append(want, refReduce(refInterp(f, s.m, s.g, a, dx, xv), r)...)
			}
			for _, me := range []Method{MethodAuto, MethodDirect} {
				cases = append(cases, interpCase{fmt.Sprintf("M%d_G%d_N%d/%v/%v", s.m, s.g, s.n, r, me), f, s.m, s.g, a, dx, r, me, x, want, false})
			}
		}
	}
	// A grid far from zero, its queries given as x − a (Local): the grid
	// placed at 0, whatever a the table holds.
	for _, a := range []float64{1.7e9, -1e3} {
		const m, g, n = 6, 41, 997
		dx := 0.37
		f := opstest.Normals64(rng, m*g)
		x := opstest.Widen(opstest.Narrow(testQueries(rng, n, 0, dx, g)))
		for _, r := range []Reduce{ReduceSumSq, ReduceSum, ReduceNone} {
			var want []float64
			for _, xv := range x {
				want = append(want, refReduce(refInterp(f, m, g, 0, dx, xv), r)...)
			}
			for _, me := range []Method{MethodAuto, MethodDirect} {
				cases = append(cases, interpCase{fmt.Sprintf("local_a%g/%v/%v", a, r, me), f, m, g, a, dx, r, me, x, want, true})
			}
		}
	}
	const g = 101
	dx := 1.0 / (g - 1)
	f := make([]float64, g)
	for i := range f {
		f[i] = float64(i) * dx * float64(i) * dx
	}
	x := opstest.Widen(opstest.Narrow([]float64{0.1, 0.2345, 0.5, 0.777, 0.9}))
	for _, r := range []Reduce{ReduceSumSq, ReduceSum, ReduceNone} {
		want := make([]float64, len(x))
		for i, xv := range x {
			want[i] = xv * xv
			if r == ReduceSumSq {
				want[i] *= want[i]
			}
		}
		for _, me := range []Method{MethodAuto, MethodDirect} {
			cases = append(cases, interpCase{fmt.Sprintf("quadratic/%v/%v", r, me), f, 1, g, 0, dx, r, me, x, want, false})
		}
	}
	return cases
}

func TestConformanceInterp1D(t *testing.T) {
	cases := interpConformanceCases()
	opstest.OnEveryBackend(t, backends(t), func(t *testing.T, b backend) { runInterpConformance(t, b, cases) })
}

func runInterpConformance(t *testing.T, b backend, cases []interpCase) {
	b.RefusesFloat64(t, func(t *testing.T) G.Op {
		c := cases[0]
		tab, err := NewInterpTable(c.f, c.m, c.g, c.a, c.dx, c.r, c.me, tensor.Float64)
		if err != nil {
			t.Fatal(err)
		}
		return NewInterp1D(tab, c.r, c.me, tensor.Float64, len(c.x))
	})
	for _, c := range cases {
		for _, dt := range b.Dtypes() {
			t.Run(c.name+"/"+dt.String(), func(t *testing.T) {
				tab, err := NewInterpTable(c.f, c.m, c.g, c.a, c.dx, c.r, c.me, dt)
				if err != nil {
					t.Fatal(err)
				}
				i1 := NewInterp1D(tab, c.r, c.me, dt, len(c.x))
				i1.Local = c.local
				op := b.Place(t, i1)
				tol := 1e-12
				if dt == tensor.Float32 {
					tol = 1e-5
				}
				opstest.RunTwice(t, b, op, math.NaN(), func(run string, out *tensor.Dense) {
					if e := opstest.RelErr(opstest.ValuesOf(out), c.want); !(e <= tol) {
						t.Errorf("%s: relative error %.3g > %g", run, e, tol)
					}
				}, opstest.DenseOf(dt, c.x))
			})
		}
	}
}

// ---- Interp1DGrad ----

// TestConformanceInterp1DGrad: both backwards of Interp1D (queries and
// values), for every reduction and method, constant values and values as
// an input, a grid in the local coordinate, against refGrad, on queries
// below, above, on and near nodes, in batches of odd lengths.
func TestConformanceInterp1DGrad(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 82))
	opstest.OnEveryBackend(t, backends(t), func(t *testing.T, b backend) {
		for _, c := range append(gradCases(), gradCase{300, 257, 997, ReduceSumSq, MethodAuto, true, false}) {
			a, dx := rng.NormFloat64()*3, 0.05+rng.Float64()
			qa := a
			if c.local {
				a, qa = 1e3, 0
			}
			f := opstest.Widen(opstest.Narrow(opstest.Normals64(rng, c.m*c.g)))
			x := opstest.Widen(opstest.Narrow(gradQueries(rng, c.n, qa, dx, c.g)))
			nup := c.n
			if c.r == ReduceNone {
				nup *= c.m
			}
			up := opstest.Widen(opstest.Narrow(opstest.Normals64(rng, nup)))
			wantX, wantF := refGrad(f, c.m, c.g, qa, dx, c.r, x, up)
			for _, dt := range b.Dtypes() {
				name := fmt.Sprintf("M%d_G%d_N%d/%v/%v/values=%t/local=%t/%v", c.m, c.g, c.n, c.r, c.me, c.values, c.local, dt)
				t.Run(name, func(t *testing.T) {
					fwd, gx, gf := gradOps(t, c, f, a, dx, dt)
					in := gradInputs(fwd, dt, x, f, up)
					tol := 1e-12
					if dt == tensor.Float32 {
						tol = 1e-5
					}
					for k, g := range []*Interp1DGrad{gx, gf} {
						if g == nil {
							continue
						}
						want := [2][]float64{wantX, wantF}[k]
						opstest.RunTwice(t, b, b.Place(t, g), math.NaN(), func(run string, out *tensor.Dense) {
							checkClose(t, fmt.Sprintf("%s: d/d%v", run, g.WRT), opstest.ValuesOf(out), want, tol)
						}, in...)
					}
				})
			}
		}
	})
}

// ---- DRR ----

type drrCase struct {
	name              string
	vol               *volume.Volume
	rows, cols, batch int
	step              float64
	poses             *tensor.Dense
	want              []float32 // ray by ray: cpukern.DRR
}

// drrLayouts is the three kinds of pose, one per fan layout of the CPU op,
// about a volume centred on the origin: columns along z (the orbit), rows
// along z (the orbit's detector turned a quarter), and neither (a
// detector tilted about its centre).
func drrLayouts(rows, cols, batch int) *tensor.Dense {
	var poses []float64
	for k := range batch {
		p := orbitPose([3]float64{0, 0, 0}, float64(k)*0.9, 100, 50, rows, cols, 3)
		switch k % 3 {
		case 1: // u along z, v across: pixel (r, c) at centre + (c − …)·u + (r − …)·v
			ca, sa := math.Cos(float64(k)*0.9), math.Sin(float64(k)*0.9)
			centre := [3]float64{-50 * ca, -50 * sa, 0}
			u, v := [3]float64{0, 0, 3}, [3]float64{-3 * sa, 3 * ca, 0}
			for a := range 3 {
				p[3+a] = centre[a] - float64(cols-1)/2*u[a] - float64(rows-1)/2*v[a]
				p[6+a], p[9+a] = u[a], v[a]
			}
		case 2: // tilt the detector: its steps get components along every axis
			for a := range 3 {
				p[6+a] += 0.4 * p[9+a]
				p[9+a] += 0.3 * p[6+a]
			}
		}
		poses = append(poses, p...)
	}
	return tensor.New(tensor.WithShape(batch, PoseWidth), tensor.WithBacking(poses))
}

// drrConformanceCases: Siddon and trilinear, each pose's every ray cast
// alone by cpukern.DRR (the per-ray definition, no fans): the three
// layouts about an odd-sized volume; oblique poses about an anisotropic
// one off the origin; the same kind of poses about a volume stored along
// turned axes (its Direction a turn about y, flipped: the op maps the
// poses into the volume's own frame, and so does the reference, with the
// volume package's ToLocal, before casting each ray through the
// axis-aligned box; drr_direction_test.go checks that mapping against
// rearranged voxels and a box's chords); and a step so fine that rays take
// more than 2^24 samples (the GPU kernel's general loop: 64-bit counts and
// offsets, q converted, not the one for ordinary sizes).
func drrConformanceCases(t *testing.T) []drrCase {
	rng := rand.New(rand.NewPCG(51, 52))
	n := [3]int64{21, 24, 15}
	vol := &volume.Volume{N: n, Origin: [3]float64{-10.5, -12, -7.5}, Spacing: [3]float64{1, 1, 1}, V: opstest.Uniform32(rng, int(n[0]*n[1]*n[2]))}
	layouts := drrLayouts(5, 7, 3)
	oblique, obliquePoses := drrFixture(rand.New(rand.NewPCG(33, 34)), [3]int64{41, 32, 23}, 400, 150, 1.3, 47, 39, 3)
	turned, turnedPoses := drrFixture(rand.New(rand.NewPCG(83, 84)), [3]int64{30, 24, 18}, 400, 150, 1.3, 24, 20, 3)
	centre := turned.Centre()
	ct, st := math.Cos(0.6), math.Sin(0.6)
	turned.Direction = [3][3]float64{{ct, 0, st}, {0, -1, 0}, {st, 0, -ct}}
	moved := turned.Centre()
	for a := range 3 { // about the same centre, in the poses' view
		turned.Origin[a] += centre[a] - moved[a]
	}
	fine, finePoses := drrFixture(rand.New(rand.NewPCG(35, 36)), [3]int64{40, 32, 24}, 400, 150, 40, 2, 1, 1)
	var cases []drrCase
	for _, step := range []float64{0, 0.5} {
		cases = append(cases, drrCase{fmt.Sprintf("layouts/step=%g", step), vol, 5, 7, 3, step, layouts, nil},
			drrCase{fmt.Sprintf("oblique/step=%g", step), oblique, 47, 39, 3, step, obliquePoses, nil},
			drrCase{fmt.Sprintf("direction/step=%g", step), turned, 24, 20, 3, step, turnedPoses, nil})
	}
	cases = append(cases, drrCase{"fine/step=2e-06", fine, 2, 1, 1, 2e-6, finePoses, nil})
	if c := cases[len(cases)-1]; maxSamples(c.vol, c.poses.Data().([]float64), c.rows, c.cols, c.step) <= 1<<24 {
		t.Fatalf("%s: no ray takes more than 2^24 samples: the test geometry is off", c.name)
	}
	for i := range cases {
		c := &cases[i]
		poses, vol := c.poses.Data().([]float64), c.vol
		if !vol.Aligned() {
			poses, vol = localPoses(vol, poses), vol.Local()
		}
		c.want = make([]float32, c.batch*c.rows*c.cols)
		hits := 0
		for k := range c.batch {
			p := poses[k*PoseWidth:][:PoseWidth]
			for r := range c.rows {
				for col := range c.cols {
					dst := make([]float64, 3)
					for a := range 3 {
						dst[a] = p[3+a] + float64(col)*p[6+a] + float64(r)*p[9+a]
					}
					w := c.want[(k*c.rows+r)*c.cols+col:][:1]
					cpukern.DRR(kernelGrid(vol), p[:3], dst, w, c.step, LongestRay(p, c.rows, c.cols))
					if w[0] != 0 {
						hits++
					}
				}
			}
		}
		if hits < len(c.want)/2 {
			t.Fatalf("%s: only %d of %d rays hit the volume: the test geometry is off", c.name, hits, len(c.want))
		}
	}
	return cases
}

// localPoses is poses (world mm) in vol's own frame: source and pixel
// (0, 0) by ToLocal, the pixel steps by VecToLocal.
func localPoses(vol *volume.Volume, poses []float64) []float64 {
	l := make([]float64, len(poses))
	for b := 0; b+PoseWidth <= len(poses); b += PoseWidth {
		p, q := poses[b:b+PoseWidth], l[b:b+PoseWidth]
		for i, f := range []func([3]float64) [3]float64{vol.ToLocal, vol.ToLocal, vol.VecToLocal, vol.VecToLocal} {
			x := f([3]float64(p[3*i : 3*i+3]))
			copy(q[3*i:], x[:])
		}
	}
	return l
}

// maxSamples is a lower bound on the trilinear samples inside the volume
// of a pose's rays, the most of any: its chord (the Siddon integral of
// ones) less a voxel's diagonal (samples lie between voxel centres), over
// the step along it.
func maxSamples(vol *volume.Volume, p []float64, rows, cols int, step float64) float64 {
	ones := &volume.Volume{N: vol.N, Origin: vol.Origin, Spacing: vol.Spacing, V: make([]float32, len(vol.V))}
	for i := range ones.V {
		ones.V[i] = 1
	}
	diag := math.Sqrt(vol.Spacing[0]*vol.Spacing[0] + vol.Spacing[1]*vol.Spacing[1] + vol.Spacing[2]*vol.Spacing[2])
	most := 0.0
	for r := range rows {
		for c := range cols {
			dst, l := make([]float64, 3), 0.0
			for a := range 3 {
				dst[a] = p[3+a] + float64(c)*p[6+a] + float64(r)*p[9+a]
				l += (dst[a] - p[a]) * (dst[a] - p[a])
			}
			chord := make([]float32, 1)
			cpukern.DRR(kernelGrid(ones), p[:3], dst, chord, 0, 0)
			most = max(most, (float64(chord[0])-diag)/(step*math.Sqrt(l)/LongestRay(p, rows, cols)))
		}
	}
	return most
}

func TestConformanceDRR(t *testing.T) {
	cases := drrConformanceCases(t)
	opstest.OnEveryBackend(t, backends(t), func(t *testing.T, b backend) { runDRRConformance(t, b, cases) })
}

// runDRRConformance: norm-wise within 1e-5 of the definition on every
// backend; on the CPU, which casts with the reference's own arithmetic,
// each ray too: Siddon to the bit, trilinear (summed in groups, in float32
// within a group) within 1e-5 of it.
func runDRRConformance(t *testing.T, b backend, cases []drrCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			op := b.Place(t, NewDRR(c.vol, c.rows, c.cols, c.step, c.batch))
			opstest.RunTwice(t, b, op, math.NaN(), func(run string, out *tensor.Dense) {
				got := out.Data().([]float32)
				if e := opstest.RelErr(got, c.want); !(e <= 1e-5) {
					t.Errorf("%s: relative error %.3g > 1e-5", run, e)
				}
				if b.GPU {
					return
				}
				for i, w := range c.want {
					if g := got[i]; g != w && (c.step <= 0 || !(math.Abs(float64(g-w)) <= 1e-5*math.Abs(float64(w)))) {
						t.Fatalf("%s: pose %d pixel (%d, %d): %v, want %v", run, i/(c.rows*c.cols), i/c.cols%c.rows, i%c.cols, g, w)
					}
				}
			}, c.poses)
		})
	}
}

// ---- WaveletResponse and WaveletMoments ----

type waveletCase struct {
	name   string
	v      []float32
	n      [3]int
	b      Boundary
	pad    [3]int    // the largest half-widths: the source's
	params []float64 // rows of WaveletParams
	want   []float64 // 4 per row: energy, std, max, kernel energy; NaN for padding rows
}

// waveletConformanceCases: odd, non-cubic volumes (one smaller than most
// kernels: the reflection repeats, taps wrap), both boundaries, each
// combination extended by the largest half-widths and, in the larger
// volume (not with -short), then by its own (the padding, the transform
// size and the volume's spectrum change from row to row), and a short
// batch: two padding rows (ξ = 0), whose statistics are NaN. Against
// refConvolve, the direct convolution in float64.
func waveletConformanceCases() []waveletCase {
	const a = 1.0
	var cases []waveletCase
	for _, fx := range []struct {
		n      [3]int
		seed   uint64
		combos [][3]float64
		own    bool // the combinations again, each extended by its own half-widths
	}{
		{[3]int{7, 9, 5}, 73, [][3]float64{{0, 0, 1}, {0.3, 1.1, 2}, {2.5, 0.4, 4}, {math.Pi / 4, math.Pi / 3, 0.5}}, false},
		{[3]int{17, 20, 23}, 41, [][3]float64{{0, 0, 1}, {0.3, 1.1, 2}, {2.5, 0.4, 4}, {0.8, 2.9, 0.5}}, true},
	} {
		if fx.own && testing.Short() {
			continue // its reference takes minutes under the race detector
		}
		v := opstest.Normals32(rand.New(rand.NewPCG(fx.seed, fx.seed+1)), fx.n[0]*fx.n[1]*fx.n[2])
		var pad [3]int
		for _, c := range fx.combos {
			h := HatSupport(a, c[0], c[1], c[2])
			for i := range 3 {
				pad[i] = max(pad[i], h[i])
			}
		}
		for _, bnd := range []Boundary{Reflect, Wrap} {
			var stats [][4]float64
			for _, c := range fx.combos {
				g := refConvolve(v, fx.n, a, c[0], c[1], c[2], bnd)
				var sum, sum2 float64
				mx := math.Inf(-1)
				for _, x := range g {
					sum, sum2, mx = sum+x, sum2+x*x, max(mx, x)
				}
				cnt := float64(len(g))
				var ke float64
				Hat(a, c[0], c[1], c[2], func(_, _, _ int, psi float64) { ke += psi * psi })
				stats = append(stats, [4]float64{sum2, math.Sqrt(sum2/cnt - (sum/cnt)*(sum/cnt)), mx, ke})
			}
			wc := waveletCase{name: fmt.Sprintf("%dx%dx%d/%v", fx.n[0], fx.n[1], fx.n[2], bnd), v: v, n: fx.n, b: bnd, pad: pad}
			for _, own := range []bool{false, true} {
				if own && !fx.own {
					continue
				}
				for i, c := range fx.combos {
					p := pad
					if own {
						p = HatSupport(a, c[0], c[1], c[2])
					}
					wc.params = append(wc.params, c[0], c[1], c[2], float64(p[0]), float64(p[1]), float64(p[2]))
					wc.want = append(wc.want, stats[i][:]...)
				}
			}
			for range 2 {
				wc.params = append(wc.params, make([]float64, WaveletParams)...)
				wc.want = append(wc.want, math.NaN(), math.NaN(), math.NaN(), math.NaN())
			}
			cases = append(cases, wc)
		}
	}
	return cases
}

func TestConformanceWavelet(t *testing.T) {
	cases := waveletConformanceCases()
	opstest.OnEveryBackend(t, backends(t), func(t *testing.T, b backend) { runWaveletConformance(t, b, cases) })
}

// runWaveletConformance: each case through WaveletResponse with
// WaveletMoments after it on the host, as a sweep's graph runs them
// (graphs/wavelet). opstest.RunTwice marks the sums and, on a GPU, poisons them;
// the statistics' buffer is marked before the second run too, so a
// statistic either op owes and does not write shows. Every statistic
// within 1e-5·(1 + |want|) on the CPU (float32 transforms, ~1e-7
// measured), 1e-4·|want| on a GPU (as its twin against the CPU); padding
// rows NaN.
func runWaveletConformance(t *testing.T, b backend, cases []waveletCase) {
	for _, c := range cases {
		rows := len(c.params) / WaveletParams
		in := tensor.New(tensor.WithShape(rows, WaveletParams), tensor.WithBacking(c.params))
		t.Run(c.name, func(t *testing.T) {
			src, err := NewWaveletSource(c.v, c.n, 1, c.b, c.pad)
			if err != nil {
				t.Fatal(err)
			}
			op := b.Place(t, NewWaveletResponse(src, rows))
			mom := NewWaveletMoments(c.n, rows)
			var stats *tensor.Dense
			opstest.RunTwice(t, b, op, 777, func(run string, sums *tensor.Dense) {
				if stats != nil {
					opstest.Fill(stats, 778)
				}
				v, err := mom.Do(sums)
				if err != nil {
					t.Fatal(err)
				}
				if stats != nil && v != stats {
					t.Fatalf("%s: the statistics came in another buffer", run)
				}
				stats = v.(*tensor.Dense)
				got := stats.Data().([]float64)
				for i, w := range c.want {
					tol := 1e-5 * (1 + math.Abs(w))
					if b.GPU {
						tol = 1e-4 * math.Abs(w)
					}
					if g := got[i]; math.IsNaN(w) && !math.IsNaN(g) || !math.IsNaN(w) && !(math.Abs(g-w) <= tol) {
						t.Errorf("%s: row %d (θ, φ, ξ = %v) statistic %d: %v, want %v", run, i/4, c.params[i/4*WaveletParams:][:3], i%4, g, w)
					}
				}
			}, in)
		})
	}
}

// ---- Filter2D ----

type filterCase struct {
	name           string
	k              *SepKernel
	p, r, c, valid int
	imgs           []float32
	want           []float64 // the valid images; the others keep the mark
}

// refFilter2D is the separable filter as its definition reads: each output
// pixel the double sum over both kernels' taps of the extended image, in
// float64, the boundary's index found by walking the mirrored image.
func refFilter2D(k *SepKernel, imgs []float32, p, r, c int) []float64 {
	ext := func(i, n int) int {
		if k.Mode == FilterNearest {
			return min(max(i, 0), n-1)
		}
		for i < 0 || i >= n {
			if i < 0 {
				i = -1 - i
			} else {
				i = 2*n - 1 - i
			}
		}
		return i
	}
	hr, hc := len(k.Col)/2, len(k.Row)/2
	out := make([]float64, p*r*c)
	for q := range p {
		for y := range r {
			for x := range c {
				var s float64
				for i, wi := range k.Col {
					for j, wj := range k.Row {
						s += float64(wi) * float64(wj) * float64(imgs[(q*r+ext(y+i-hr, r))*c+ext(x+j-hc, c)])
					}
				}
				out[(q*r+y)*c+x] = s
			}
		}
	}
	return out
}

// filterConformanceCases: random images of odd sizes (no multiple of a
// GPU block), a Gaussian of different widths along each axis, a box of
// even size, a kernel longer than the image (the reflection repeats), a
// derivative with nearest-pixel edges, and a short batch (its last image
// left alone); taps set again after the op was placed, as a DRR does
// when its poses come.
func filterConformanceCases(t *testing.T) []filterCase {
	rng := rand.New(rand.NewPCG(61, 62))
	tp := mustTaps(t)
	g1, g2 := tp(GaussianTaps(2.1, 4)), tp(GaussianTaps(1.3, 4))
	long := tp(GaussianTaps(12, 4))
	box := tp(BoxTaps(4))
	dx := tp(DerivativeTaps(0.8))
	var cases []filterCase
	for _, s := range []struct {
		name           string
		k              *SepKernel
		p, r, c, valid int
	}{
		{"gauss", mustKernel(t, "gauss", g1, g2, FilterReflect), 3, 37, 53, 3},
		{"box4", mustKernel(t, "box4", box, box, FilterReflect), 2, 17, 9, 2},
		{"long", mustKernel(t, "long", long, g2, FilterReflect), 2, 11, 19, 2},
		{"deriv/nearest", mustKernel(t, "deriv", dx, SmoothTaps(), FilterNearest), 3, 37, 53, 3},
		{"short batch", mustKernel(t, "gauss", g2, g1, FilterNearest), 3, 21, 23, 2},
	} {
		imgs := opstest.Normals32(rng, s.p*s.r*s.c)
		cases = append(cases, filterCase{s.name, s.k, s.p, s.r, s.c, s.valid, imgs, refFilter2D(s.k, imgs[:s.valid*s.r*s.c], s.valid, s.r, s.c)})
	}
	return cases
}

func TestConformanceFilter2D(t *testing.T) {
	cases := filterConformanceCases(t)
	opstest.OnEveryBackend(t, backends(t), func(t *testing.T, b backend) { runFilterConformance(t, b, cases) })
}

// runFilterConformance: every valid pixel within 1e-5 of the largest
// |want| (float32 sums of the taps in order, fused or not), the images
// past the valid ones left as they were; and the taps replaced between
// runs (the kernel mirrored) are the ones the second run uses.
func runFilterConformance(t *testing.T, b backend, cases []filterCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := NewFilter2D(c.k, c.p, c.r, c.c)
			f.SetValidRows(c.valid)
			op := b.Place(t, f)
			in := tensor.New(tensor.WithShape(c.p, c.r, c.c), tensor.WithBacking(c.imgs))
			per := c.r * c.c
			check := func(want []float64) func(string, *tensor.Dense) {
				return func(run string, out *tensor.Dense) {
					got := out.Data().([]float32)
					scale := 0.0
					for _, w := range want {
						scale = max(scale, math.Abs(w))
					}
					for i, w := range want {
						if g := float64(got[i]); !(math.Abs(g-w) <= 1e-5*scale) {
							t.Fatalf("%s: image %d pixel (%d, %d): %v, want %v", run, i/per, i/c.c%c.r, i%c.c, g, w)
						}
					}
					if run != opstest.SecondRun {
						return
					}
					for i, g := range got[len(want):] {
						if g != 777 {
							t.Fatalf("%s: image %d, past the valid ones, was written: %v", run, c.valid+i/per, g)
						}
					}
				}
			}
			opstest.RunTwice(t, b, op, 777, check(c.want), in)
			// Mirrored taps (the same only for symmetric kernels): set
			// after the op ran, used by the next run.
			row, col := slices.Clone(c.k.Row), slices.Clone(c.k.Col)
			slices.Reverse(row)
			slices.Reverse(col)
			old := *c.k
			t.Cleanup(func() { *c.k = old })
			if err := c.k.Set(row, col); err != nil {
				t.Fatal(err)
			}
			opstest.RunTwice(t, b, op, 777, check(refFilter2D(c.k, c.imgs[:c.valid*per], c.valid, c.r, c.c)), in)
		})
	}
}
