package cpukern

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/tapeloop/tapeloop/internal/volume"
)

// gradRays returns rays of every kind the gradient must handle: through
// the volume at arbitrary angles, starting inside it, ending inside it,
// both ends inside, parallel to an axis (off the voxel planes), and
// missing it.
func gradRays(rng *rand.Rand, v *volume.Volume) (src, dst []float64) {
	ext := [3]float64{float64(v.N[0]), float64(v.N[1]), float64(v.N[2])}
	add := func(s, d [3]float64) { src = append(src, s[:]...); dst = append(dst, d[:]...) }
	inside := func() [3]float64 {
		return corner(v, (0.05+0.9*rng.Float64())*ext[0], (0.05+0.9*rng.Float64())*ext[1], (0.05+0.9*rng.Float64())*ext[2])
	}
	c := corner(v, ext[0]/2, ext[1]/2, ext[2]/2)
	far := func() [3]float64 {
		p := c
		for a := range 3 {
			p[a] += (rng.Float64() - 0.5) * 300
		}
		return p
	}
	for range 60 { // through the volume
		p, s := inside(), far()
		add(s, [3]float64{2*p[0] - s[0], 2*p[1] - s[1], 2*p[2] - s[2]})
	}
	for range 15 { // starting inside
		add(inside(), far())
	}
	for range 15 { // ending inside
		add(far(), inside())
	}
	for range 10 { // both ends inside
		add(inside(), inside())
	}
	for ax := range 3 { // along an axis, between voxel planes
		for range 4 {
			s := inside()
			d := s
			s[ax] -= 200
			d[ax] += 200
			add(s, d)
		}
	}
	for range 10 { // missing: a line beside the box
		s, d := far(), far()
		for a := range 3 {
			s[a] += 500
			d[a] += 500
		}
		add(s, d)
	}
	return src, dst
}

// eachISA runs f at every instruction set level this build and CPU have:
// on x86-64 DRRGrad's AVX-512 path (8 rays at once, padded volumes), its
// AVX2 and its SSE2 scalar paths.
func eachISA(t *testing.T, f func(t *testing.T)) {
	for isa := isaBase; isa <= isaAVX512; isa++ {
		name := levelName(isa)
		if limitISA(isa) < isa {
			limitISA(isaAVX512)
			t.Logf("%s: not on this CPU", name)
			continue
		}
		t.Run(name, f)
		limitISA(isaAVX512)
	}
}

func TestDRRGradMatchesDRR(t *testing.T) { eachISA(t, testDRRGradMatchesDRR) }

func testDRRGradMatchesDRR(t *testing.T) {
	rng := rand.New(rand.NewPCG(101, 102))
	for _, shape := range [][3]int64{{13, 9, 17}, {7, 21, 5}} {
		v := randomVolume(rng, shape[0], shape[1], shape[2])
		p := volume.Pad(v)
		src, dst := gradRays(rng, v)
		n := len(src) / 3
		for _, c := range []struct {
			step, lref float64
			vol        *volume.Volume
		}{{0, 0, v}, {0, 0, p}, {0.37, 0, v}, {0.37, 0, p}, {1.1, 350, p}, {0.8, 410, v}} {
			f32 := make([]float32, n)
			DRR(gridOf(c.vol), src, dst, f32, c.step, c.lref)
			out, bare := make([]float64, n), make([]float64, n)
			gs, gd := make([]float64, 3*n), make([]float64, 3*n)
			DRRGrad(gridOf(c.vol), src, dst, out, gs, gd, c.step, c.lref)
			DRRGrad(gridOf(c.vol), src, dst, bare, nil, nil, c.step, c.lref)
			hit, worst := 0, 0.0
			for r := range n {
				s, d := [3]float64(src[3*r:]), [3]float64(dst[3*r:])
				var ref float64
				if c.step > 0 {
					ref = refTrilinear(c.vol, s, d, c.step, c.lref)
				} else {
					ref = refSiddon(c.vol, s, d)
				}
				if ref != 0 {
					hit++
				}
				if bare[r] != out[r] {
					t.Fatalf("%v step %v ray %d: %v without gradients, %v with", shape, c.step, r, bare[r], out[r])
				}
				// DRR positions its trilinear samples and sums them in
				// float32; Siddon's sum is double, rounded to float32.
				tol := 1e-6 * (1 + math.Abs(out[r]))
				if c.step > 0 {
					tol = 1e-5 * (1 + math.Abs(out[r]))
				}
				worst = max(worst, math.Abs(out[r]-float64(f32[r]))/(1+math.Abs(out[r])))
				if e := math.Abs(out[r] - float64(f32[r])); e > tol {
					t.Errorf("%v step %v padded %v ray %d: %v, DRR %v", shape, c.step, c.vol.Padded, r, out[r], f32[r])
				}
				// The definition, in float64: agreement to rounding (a ray
				// lying on a voxel plane is not among these rays).
				if e := math.Abs(out[r] - ref); e > 1e-11*(1+math.Abs(ref)) {
					t.Errorf("%v step %v padded %v ray %d: %v, by definition %v", shape, c.step, c.vol.Padded, r, out[r], ref)
				}
			}
			if hit < n/2 {
				t.Fatalf("only %d of %d rays hit the volume", hit, n)
			}
			t.Logf("%v step %v padded %v: |out − DRR|/(1 + |out|) ≤ %.3g", shape, c.step, c.vol.Padded, worst)
		}
	}
}

// rotate turns p by the angle |w| about the axis w through c (Rodrigues).
func rotate(p, c, w [3]float64) [3]float64 {
	th := math.Sqrt(w[0]*w[0] + w[1]*w[1] + w[2]*w[2])
	x := [3]float64{p[0] - c[0], p[1] - c[1], p[2] - c[2]}
	if th == 0 {
		return p
	}
	k := [3]float64{w[0] / th, w[1] / th, w[2] / th}
	kx := [3]float64{k[1]*x[2] - k[2]*x[1], k[2]*x[0] - k[0]*x[2], k[0]*x[1] - k[1]*x[0]}
	kd := k[0]*x[0] + k[1]*x[1] + k[2]*x[2]
	cs, sn := math.Cos(th), math.Sin(th)
	var out [3]float64
	for a := range 3 {
		out[a] = c[a] + x[a]*cs + kx[a]*sn + k[a]*kd*(1-cs)
	}
	return out
}

func cross(a, b [3]float64) [3]float64 {
	return [3]float64{a[1]*b[2] - a[2]*b[1], a[2]*b[0] - a[0]*b[2], a[0]*b[1] - a[1]*b[0]}
}

func dot3(a, b []float64) float64 { return a[0]*b[0] + a[1]*b[1] + a[2]*b[2] }

func norm3(a []float64) float64 { return math.Sqrt(dot3(a, a)) }

// TestDRRGradFiniteDifferences moves both ends of each ray rigidly, by a
// rotation of angle t·|ω| about a random centre c plus a translation t·τ,
// and checks d out/dt by central differences in float64 against
// gsrc·(ω × (src − c) + τ) + gdst·(ω × (dst − c) + τ).
//
// out(t) is smooth but for kinks where a sample crosses a cell's face
// (trilinear) or two plane crossings change order (Siddon). Where it is
// smooth on [−h, h], the mean of the analytic derivatives at ±h is the
// derivative at 0 to O(h²); a jump J of the derivative inside the interval
// moves that mean by up to J/2 (and the difference quotient by as much), so
// a ray where the two differ by more than a quarter of the tolerance has a
// kink inside the interval and is left out (a handful at most, counted).
func TestDRRGradFiniteDifferences(t *testing.T) { eachISA(t, testDRRGradFiniteDifferences) }

func testDRRGradFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(103, 104))
	for _, shape := range [][3]int64{{11, 15, 9}, {19, 6, 13}} {
		v := randomVolume(rng, shape[0], shape[1], shape[2])
		p := volume.Pad(v)
		src, dst := gradRays(rng, v)
		n := len(src) / 3
		for _, c := range []struct {
			step, lref float64
			vol        *volume.Volume
		}{{0, 0, v}, {0, 0, p}, {0.37, 0, v}, {0.37, 0, p}, {1.1, 350, p}} {
			const h = 1e-5
			var num, den float64
			skipped, checked := 0, 0
			for r := range n {
				s, d := [3]float64(src[3*r:]), [3]float64(dst[3*r:])
				// ω of about 1/300 rad per unit t and τ of about 1 mm: the
				// ends move about 1 mm per unit t.
				ctr := corner(c.vol, rng.Float64()*float64(c.vol.N[0]), rng.Float64()*float64(c.vol.N[1]), rng.Float64()*float64(c.vol.N[2]))
				var w, tau [3]float64
				for a := range 3 {
					w[a] = rng.NormFloat64() / 300
					tau[a] = rng.NormFloat64()
				}
				move := func(t float64) (ms, md []float64) {
					wt := [3]float64{w[0] * t, w[1] * t, w[2] * t}
					a, b := rotate(s, ctr, wt), rotate(d, ctr, wt)
					for i := range 3 {
						a[i] += t * tau[i]
						b[i] += t * tau[i]
					}
					return a[:], b[:]
				}
				deriv := func(t float64) (out, an, scale float64) {
					ms, md := move(t)
					o := make([]float64, 1)
					gs, gd := make([]float64, 3), make([]float64, 3)
					DRRGrad(gridOf(c.vol), ms, md, o, gs, gd, c.step, c.lref)
					// velocity at t: ω × (x − c) + τ (x the moved point)
					vs := cross(w, [3]float64{ms[0] - ctr[0], ms[1] - ctr[1], ms[2] - ctr[2]})
					vd := cross(w, [3]float64{md[0] - ctr[0], md[1] - ctr[1], md[2] - ctr[2]})
					for i := range 3 {
						vs[i] += tau[i]
						vd[i] += tau[i]
					}
					return o[0], dot3(gs, vs[:]) + dot3(gd, vd[:]), norm3(gs)*norm3(vs[:]) + norm3(gd)*norm3(vd[:])
				}
				_, an, scale := deriv(0)
				op, anp, _ := deriv(h)
				om, anm, _ := deriv(-h)
				fd := (op - om) / (2 * h)
				tol := 1e-6 * scale
				if math.Abs((anp+anm)/2-an) > tol/4 {
					skipped++
					continue
				}
				checked++
				num += (fd - an) * (fd - an)
				den += an * an
				if math.Abs(fd-an) > tol {
					t.Errorf("%v step %v padded %v ray %d: d out/dt %.12g analytic, %.12g by differences (scale %.3g)",
						shape, c.step, c.vol.Padded, r, an, fd, scale)
				}
			}
			e := math.Sqrt(num / den)
			t.Logf("%v step %v padded %v: norm-wise relative error %.3g over %d rays, %d left out with a kink",
				shape, c.step, c.vol.Padded, e, checked, skipped)
			if skipped > n/20 || den == 0 || !(e <= 1e-7) {
				t.Errorf("%v step %v padded %v: %d of %d rays with kinks, norm-wise error %.3g", shape, c.step, c.vol.Padded, skipped, n, e)
			}
		}
	}
}

// TestDRRBackProjectIsAdjoint checks ⟨A x, y⟩ = ⟨x, Aᵀ y⟩ for the map A from
// the volume's values to the line integrals, x random (float32 values, the
// padded volumes' border included) and y random.
func TestDRRBackProjectIsAdjoint(t *testing.T) {
	rng := rand.New(rand.NewPCG(105, 106))
	for _, shape := range [][3]int64{{9, 14, 11}, {17, 5, 8}} {
		v := randomVolume(rng, shape[0], shape[1], shape[2])
		p := volume.Pad(v)
		for i := range p.V {
			p.V[i] = rng.Float32()*2 - 1
		}
		src, dst := gradRays(rng, v)
		n := len(src) / 3
		y := make([]float64, n)
		for i := range y {
			y[i] = rng.NormFloat64()
		}
		for _, c := range []struct {
			step, lref float64
			vol        *volume.Volume
		}{{0, 0, v}, {0, 0, p}, {0.37, 0, v}, {0.37, 0, p}, {1.1, 350, p}, {0.8, 410, v}} {
			out := make([]float64, n)
			DRRGrad(gridOf(c.vol), src, dst, out, nil, nil, c.step, c.lref)
			grad := make([]float64, len(c.vol.V))
			DRRBackProject(gridOf(c.vol), src, dst, y, grad, c.step, c.lref)
			var ax, aty, mag float64
			for r := range n {
				ax += out[r] * y[r]
				mag += math.Abs(out[r] * y[r])
			}
			for i := range grad {
				aty += float64(c.vol.V[i]) * grad[i]
			}
			if e := math.Abs(ax-aty) / mag; !(e <= 1e-9) || mag == 0 {
				t.Errorf("%v step %v padded %v: ⟨Ax, y⟩ = %.15g, ⟨x, Aᵀy⟩ = %.15g (relative %.3g)", shape, c.step, c.vol.Padded, ax, aty, e)
			}
		}
	}
}

// samplesOf counts the trilinear samples DRRGrad takes on a ray (those
// in the box where the interpolant may be non-zero), as drrgrad.c's
// gprepare clips them.
func samplesOf(v *volume.Volume, src, dst [3]float64, step, lref float64) int64 {
	var d [3]float64
	for a := range 3 {
		d[a] = dst[a] - src[a]
	}
	l := math.Sqrt(d[0]*d[0] + d[1]*d[1] + d[2]*d[2])
	if lref <= 0 {
		lref = l
	}
	da := step / lref
	lo := v.Corner()
	t0, t1 := 0.0, 1.0
	for a := range 3 {
		b0, b1 := lo[a]+0.5*v.Spacing[a], lo[a]+(float64(v.N[a])-0.5)*v.Spacing[a]
		if !v.Padded {
			b0, b1 = lo[a]-0.5*v.Spacing[a], lo[a]+(float64(v.N[a])+0.5)*v.Spacing[a]
		}
		if d[a] == 0 {
			if src[a] < b0 || src[a] >= b1 {
				return 0
			}
			continue
		}
		u0, u1 := (b0-src[a])/d[a], (b1-src[a])/d[a]
		t0, t1 = math.Max(t0, math.Min(u0, u1)), math.Min(t1, math.Max(u0, u1))
	}
	if t1 <= t0 {
		return 0
	}
	return max(0, int64(math.Floor(t1/da-0.5)-math.Ceil(t0/da-0.5))+1)
}

// BenchmarkDRRGradVsDRR renders the registration loop's workload, two
// views of 128×128 rays through a padded 256×256×108 CT-sized volume (about
// 250 samples a ray), single-threaded: DRRGrad with gradients, DRRGrad
// without, and the float32 DRR forward, interleaved round by round. It
// reports ns per sample, the minimum and the median over the rounds.
func BenchmarkDRRGradVsDRR(b *testing.B) {
	benchmarkDRRGrad(b, [3]int64{256, 256, 108}, [3]float64{0.957, 0.957, 1.5})
}

// BenchmarkDRRGradVsDRRCached is the same through a 64×64×27 volume of
// the same size in mm, which the caches hold: the arithmetic alone.
func BenchmarkDRRGradVsDRRCached(b *testing.B) {
	benchmarkDRRGrad(b, [3]int64{64, 64, 27}, [3]float64{4 * 0.957, 4 * 0.957, 4 * 1.5})
}

func benchmarkDRRGrad(b *testing.B, shape [3]int64, spacing [3]float64) {
	rng := rand.New(rand.NewPCG(109, 110))
	v := &volume.Volume{N: shape, Spacing: spacing}
	v.V = make([]float32, shape[0]*shape[1]*shape[2])
	// The values do not matter to the speed: no branch depends on them.
	for i := range v.V {
		v.V[i] = 0.02 * rng.Float32()
	}
	p := volume.Pad(v)
	c := v.Centre()
	var src, dst []float64
	for view := range 2 {
		th := float64(view) * math.Pi / 2
		u := [3]float64{math.Cos(th), math.Sin(th), 0}
		w := [3]float64{-math.Sin(th), math.Cos(th), 0}
		s := [3]float64{c[0] - 600*u[0], c[1] - 600*u[1], c[2]}
		for r := range 128 {
			for q := range 128 {
				x, z := (float64(q)-63.5)*2.6, (float64(r)-63.5)*2.6
				d := [3]float64{c[0] + 400*u[0] + x*w[0], c[1] + 400*u[1] + x*w[1], c[2] + z}
				src = append(src, s[:]...)
				dst = append(dst, d[:]...)
			}
		}
	}
	n := len(src) / 3
	lref := 0.0
	for r := range n {
		lref = max(lref, math.Sqrt(math.Pow(dst[3*r]-src[3*r], 2)+math.Pow(dst[3*r+1]-src[3*r+1], 2)+math.Pow(dst[3*r+2]-src[3*r+2], 2)))
	}
	const step = 1.0
	var samples, hits int64
	for r := range n {
		k := samplesOf(p, [3]float64(src[3*r:]), [3]float64(dst[3*r:]), step, lref)
		samples += k
		if k > 0 {
			hits++
		}
	}
	b.Logf("%d rays, %d samples (%.0f a ray that hits)", n, samples, float64(samples)/float64(hits))
	out, gs, gd := make([]float64, n), make([]float64, 3*n), make([]float64, 3*n)
	f32 := make([]float32, n)
	runs := []struct {
		name string
		f    func()
		ns   []float64
	}{
		{"grad", func() { DRRGrad(gridOf(p), src, dst, out, gs, gd, step, lref) }, nil},
		{"value", func() { DRRGrad(gridOf(p), src, dst, out, nil, nil, step, lref) }, nil},
		{"drr32", func() { DRR(gridOf(p), src, dst, f32, step, lref) }, nil},
	}
	for b.Loop() {
		for i := range runs {
			t0 := time.Now()
			runs[i].f()
			runs[i].ns = append(runs[i].ns, float64(time.Since(t0).Nanoseconds())/float64(samples))
		}
	}
	for _, r := range runs {
		sort.Float64s(r.ns)
		b.ReportMetric(r.ns[0], r.name+"-min-ns/sample")
		b.ReportMetric(r.ns[len(r.ns)/2], r.name+"-median-ns/sample")
	}
}
