package cpukern

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/tapeloop/tapeloop/internal/volume"
)

// refSiddon is the line integral by brute force: every plane crossing of
// the segment, from every plane of every axis, sorted; each piece between
// consecutive crossings adds its length times the voxel holding its
// midpoint. The entry and exit are found by testing each piece's midpoint
// against the box, not by a slab computation.
func refSiddon(vol *volume.Volume, src, dst [3]float64) float64 {
	var d [3]float64
	for a := range 3 {
		d[a] = dst[a] - src[a]
	}
	lo := vol.Corner() // voxel (i, j, k) spans [lo + (i, j, k)⊙s, lo + (i+1, j+1, k+1)⊙s)
	alphas := []float64{0, 1}
	for a := range 3 {
		if d[a] == 0 {
			continue
		}
		for k := int64(0); k <= vol.N[a]; k++ {
			al := (lo[a] + float64(k)*vol.Spacing[a] - src[a]) / d[a]
			if al > 0 && al < 1 {
				alphas = append(alphas, al)
			}
		}
	}
	sort.Float64s(alphas)
	length := math.Sqrt(d[0]*d[0] + d[1]*d[1] + d[2]*d[2])
	sum := 0.0
	for q := 0; q+1 < len(alphas); q++ {
		a, b := alphas[q], alphas[q+1]
		if b <= a {
			continue
		}
		m := (a + b) / 2
		var idx [3]int64
		inside := true
		for ax := range 3 {
			p := src[ax] + m*d[ax]
			// By the reciprocal, as the kernel rounds: a ray lying on a
			// voxel plane falls on the side its rounding puts it.
			f := math.Floor((p - lo[ax]) * (1 / vol.Spacing[ax]))
			if f < 0 || f >= float64(vol.N[ax]) {
				inside = false
			}
			idx[ax] = int64(f)
		}
		if inside {
			sum += (b - a) * length * float64(vol.V[(idx[0]*vol.N[1]+idx[1])*vol.N[2]+idx[2]])
		}
	}
	return sum
}

// gridOf is v as the kernels take it; v must be axis-aligned.
func gridOf(v *volume.Volume) *Grid {
	if !v.Aligned() {
		panic("gridOf: an oblique volume")
	}
	return &Grid{V: v.V, N: v.N, Corner: v.Corner(), Spacing: v.Spacing, Padded: v.Padded}
}

func randomVolume(rng *rand.Rand, nx, ny, nz int64) *volume.Volume {
	v := &volume.Volume{N: [3]int64{nx, ny, nz}, Origin: [3]float64{-13.5, 4.25, 101}, Spacing: [3]float64{0.7, 1.3, 2.1}}
	v.V = make([]float32, nx*ny*nz)
	for i := range v.V {
		v.V[i] = rng.Float32()
	}
	return v
}

// corner is the point (i, j, k) of the voxel lattice: the corner of voxel
// (i, j, k), half a voxel below its centre.
func corner(v *volume.Volume, i, j, k float64) [3]float64 {
	lo := v.Corner()
	return [3]float64{lo[0] + i*v.Spacing[0], lo[1] + j*v.Spacing[1], lo[2] + k*v.Spacing[2]}
}

// testRays returns rays of every kind the issue names, in groups.
func testRays(rng *rand.Rand, v *volume.Volume) (src, dst [][3]float64) {
	ext := [3]float64{float64(v.N[0]), float64(v.N[1]), float64(v.N[2])}
	add := func(s, d [3]float64) { src = append(src, s); dst = append(dst, d) }
	far := func() [3]float64 { // a point well outside the box
		p := corner(v, ext[0]/2, ext[1]/2, ext[2]/2)
		for a := range 3 {
			p[a] += (rng.Float64() - 0.5) * 400
		}
		return p
	}
	inside := func() [3]float64 { return corner(v, rng.Float64()*ext[0], rng.Float64()*ext[1], rng.Float64()*ext[2]) }
	for range 200 { // arbitrary angles through the volume
		c := inside()
		s := far()
		add(s, [3]float64{2*c[0] - s[0], 2*c[1] - s[1], 2*c[2] - s[2]})
	}
	for ax := range 3 { // parallel to each axis, also along voxel planes
		for q := range 20 {
			s := inside()
			if q%2 == 0 { // exactly on lattice planes of the other axes
				s = corner(v, float64(rng.IntN(int(ext[0]))), float64(rng.IntN(int(ext[1]))), float64(rng.IntN(int(ext[2]))))
			}
			d := s
			s[ax] = corner(v, 0, 0, 0)[ax] - 50
			d[ax] = corner(v, ext[0], ext[1], ext[2])[ax] + 50
			if q%3 == 0 {
				s, d = d, s
			}
			add(s, d)
		}
	}
	for range 40 { // through voxel corners: both ends on lattice points
		a := corner(v, float64(rng.IntN(int(ext[0])+1)), float64(rng.IntN(int(ext[1])+1)), float64(rng.IntN(int(ext[2])+1)))
		b := corner(v, float64(rng.IntN(int(ext[0])+1)), float64(rng.IntN(int(ext[1])+1)), float64(rng.IntN(int(ext[2])+1)))
		add(a, b)
	}
	for range 30 { // sources inside the volume
		add(inside(), far())
	}
	return src, dst
}

func flat(p [][3]float64) []float64 {
	out := make([]float64, 0, 3*len(p))
	for _, q := range p {
		out = append(out, q[:]...)
	}
	return out
}

func TestSiddonMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	v := randomVolume(rng, 13, 9, 17)
	src, dst := testRays(rng, v)
	out := make([]float32, len(src))
	DRR(gridOf(v), flat(src), flat(dst), out, 0, 0)
	var num, den float64
	for r := range src {
		want := refSiddon(v, src[r], dst[r])
		num += math.Pow(float64(out[r])-want, 2)
		den += want * want
		if math.Abs(float64(out[r])-want) > 1e-4*(1+math.Abs(want)) {
			t.Errorf("ray %d %v→%v: %v, want %v", r, src[r], dst[r], out[r], want)
		}
	}
	if e := math.Sqrt(num / den); e > 1e-5 {
		t.Errorf("norm-wise relative error %.3g", e)
	}
}

func TestSiddonUniformGivesChordLength(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	v := randomVolume(rng, 8, 11, 6)
	for i := range v.V {
		v.V[i] = 0.25
	}
	lo := corner(v, 0, 0, 0)
	hi := corner(v, 8, 11, 6)
	for range 300 {
		var s, d [3]float64
		for a := range 3 {
			s[a] = lo[a] + (rng.Float64()*3-1)*(hi[a]-lo[a])
			d[a] = lo[a] + (rng.Float64()*3-1)*(hi[a]-lo[a])
		}
		// The chord: clip the segment to the box (slabs, in float64).
		t0, t1 := 0.0, 1.0
		for a := range 3 {
			dd := d[a] - s[a]
			if dd == 0 {
				if s[a] < lo[a] || s[a] >= hi[a] {
					t0, t1 = 1, 0
				}
				continue
			}
			u0, u1 := (lo[a]-s[a])/dd, (hi[a]-s[a])/dd
			t0, t1 = math.Max(t0, math.Min(u0, u1)), math.Min(t1, math.Max(u0, u1))
		}
		chord := 0.0
		if t1 > t0 {
			chord = (t1 - t0) * math.Sqrt((d[0]-s[0])*(d[0]-s[0])+(d[1]-s[1])*(d[1]-s[1])+(d[2]-s[2])*(d[2]-s[2]))
		}
		out := make([]float32, 1)
		DRR(gridOf(v), s[:], d[:], out, 0, 0)
		if math.Abs(float64(out[0])-0.25*chord) > 1e-5*(1+chord) {
			t.Fatalf("%v→%v: %v, want 0.25 × %v", s, d, out[0], chord)
		}
	}
}

func TestMissingRaysGiveZero(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	v := randomVolume(rng, 5, 5, 5)
	lo, hi := corner(v, 0, 0, 0), corner(v, 5, 5, 5)
	src := []float64{hi[0] + 10, hi[1] + 10, hi[2] + 10, lo[0] - 1, lo[1] + 1, lo[2] + 1}
	dst := []float64{hi[0] + 50, hi[1] - 300, hi[2] + 10, lo[0] - 1, lo[1] + 3, lo[2] + 3}
	out := []float32{-1, -1}
	for _, step := range []float64{0, 0.5} {
		DRR(gridOf(v), src, dst, out, step, 0)
		if out[0] != 0 || out[1] != 0 {
			t.Errorf("step %v: missing rays gave %v", step, out)
		}
	}
}

func TestTrilinearNearSiddonOnSmoothVolume(t *testing.T) {
	const n = 48
	v := &volume.Volume{N: [3]int64{n, n, n}, Origin: [3]float64{-24, -30, -18}, Spacing: [3]float64{1, 1.25, 0.75}}
	v.V = make([]float32, n*n*n)
	for i := range int64(n) {
		for j := range int64(n) {
			for k := range int64(n) {
				x, y, z := (float64(i)-24)/10, (float64(j)-24)/10, (float64(k)-24)/10
				v.V[(i*n+j)*n+k] = float32(math.Exp(-(x*x + y*y + z*z)))
			}
		}
	}
	rng := rand.New(rand.NewPCG(47, 48))
	var src, dst []float64
	for range 100 {
		th, ph := rng.Float64()*2*math.Pi, (rng.Float64()-0.5)*math.Pi
		dir := [3]float64{math.Cos(th) * math.Cos(ph), math.Sin(th) * math.Cos(ph), math.Sin(ph)}
		off := [3]float64{rng.NormFloat64() * 5, rng.NormFloat64() * 5, rng.NormFloat64() * 5}
		for a := range 3 {
			c := v.Centre()[a] + off[a]
			src = append(src, c-100*dir[a])
			dst = append(dst, c+100*dir[a])
		}
	}
	exact := make([]float32, 100)
	tri := make([]float32, 100)
	DRR(gridOf(v), src, dst, exact, 0, 0)
	DRR(gridOf(v), src, dst, tri, 0.375, 0)
	var num, den float64
	for r := range exact {
		num += math.Pow(float64(tri[r]-exact[r]), 2)
		den += float64(exact[r]) * float64(exact[r])
	}
	if e := math.Sqrt(num / den); e > 0.01 {
		t.Errorf("trilinear differs from siddon by %.3g (norm-wise), want ≤ 1%%", e)
	}
	// The same on the fan paths, with samples at fractions shared by the
	// fan: 40 fans of 64 rays stepping along z, from sources around and
	// above the volume. (Rays nearly level in z differ by more: within one
	// z slab of voxels Siddon sees the slab's value where trilinear
	// interpolates between slabs, a first-order difference of 1.3 % here.)
	p := volume.Pad(v)
	num, den = 0, 0
	for range 40 {
		th := rng.Float64() * 2 * math.Pi
		c := corner(v, 24, 24, 24)
		f := &Fan{N: 64, Stride: 1, DD: [3]float64{0, 0, -0.5}}
		f.Src = [3]float64{c[0] + 200*math.Cos(th), c[1] + 200*math.Sin(th), c[2] + 100}
		f.Dst0 = [3]float64{c[0] - 200*math.Cos(th) + rng.NormFloat64()*5, c[1] - 200*math.Sin(th), c[2] - 100 + 16}
		f.LRef = 450
		exact := make([]float32, 64)
		tri := make([]float32, 64)
		DRRFans(gridOf(v), []Fan{*f}, exact, 0)
		DRRFans(gridOf(p), []Fan{*f}, tri, 0.375)
		for r := range exact {
			num += math.Pow(float64(tri[r]-exact[r]), 2)
			den += float64(exact[r]) * float64(exact[r])
		}
	}
	if e := math.Sqrt(num / den); e > 0.01 || den == 0 {
		t.Errorf("fans: trilinear differs from siddon by %.3g (norm-wise), want ≤ 1%%", e)
	}
}

func TestPaddedVolumeGivesSameIntegrals(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	v := randomVolume(rng, 11, 7, 13)
	p := volume.Pad(v)
	if volume.Pad(p) != p || p.N != [3]int64{13, 9, 15} {
		t.Fatalf("padded shape %v", p.N)
	}
	src, dst := testRays(rng, v)
	// Trilinear only: for Siddon, a ray lying exactly on a voxel plane
	// belongs to one side or the other by the rounding of its position
	// relative to the origin, which padding moves.
	for _, step := range []float64{0.3, 0.77} {
		a := make([]float32, len(src))
		b := make([]float32, len(src))
		DRR(gridOf(v), flat(src), flat(dst), a, step, 0)
		DRR(gridOf(p), flat(src), flat(dst), b, step, 0)
		for r := range a {
			if math.Abs(float64(a[r]-b[r])) > 1e-5*(1+math.Abs(float64(a[r]))) {
				t.Fatalf("step %v ray %d: %v unpadded, %v padded", step, r, a[r], b[r])
			}
		}
	}
}

// refTrilinear is the trilinear sum by definition, in float64: every
// fraction a_k = (k + ½)·step/lref in [0, 1], the volume interpolated at
// that point of the segment (voxel centres on the integer lattice of
// (x − Origin)/Spacing, zero outside),
// each sample weighing step·len/lref.
func refTrilinear(v *volume.Volume, src, dst [3]float64, step, lref float64) float64 {
	var d [3]float64
	for a := range 3 {
		d[a] = dst[a] - src[a]
	}
	length := math.Sqrt(d[0]*d[0] + d[1]*d[1] + d[2]*d[2])
	if length == 0 {
		return 0
	}
	if lref <= 0 {
		lref = length
	}
	da := step / lref
	at := func(i, j, k int64) float64 {
		if i < 0 || j < 0 || k < 0 || i >= v.N[0] || j >= v.N[1] || k >= v.N[2] {
			return 0
		}
		return float64(v.V[(i*v.N[1]+j)*v.N[2]+k])
	}
	sum := 0.0
	for k := 0; (float64(k)+0.5)*da <= 1; k++ {
		a := (float64(k) + 0.5) * da
		var c [3]float64
		var f [3]float64
		var i [3]int64
		for ax := range 3 {
			c[ax] = (src[ax] + a*d[ax] - v.Origin[ax]) / v.Spacing[ax]
			fl := math.Floor(c[ax])
			i[ax], f[ax] = int64(fl), c[ax]-fl
		}
		for di := range int64(2) {
			for dj := range int64(2) {
				for dk := range int64(2) {
					w := 1.0
					for ax, o := range [3]int64{di, dj, dk} {
						if o == 1 {
							w *= f[ax]
						} else {
							w *= 1 - f[ax]
						}
					}
					sum += w * at(i[0]+di, i[1]+dj, i[2]+dk)
				}
			}
		}
	}
	return sum * da * length
}

// fanCase is a fan of rays from src to dst0 + r·dd.
type fanCase struct {
	name          string
	src, dst0, dd [3]float64
	n             int
}

// TestFanMatchesDefinition checks DRRFan, on its fast paths (pixels
// stepping along z; for trilinear, a padded volume) and on its general
// one, and DRR ray by ray, against refTrilinear and refSiddon, for fans of
// every shape the fast paths treat apart, at every level this build has:
// on x86-64 the AVX-512 and AVX2 fan paths (SSE2 goes ray by ray), in the
// portable build (arm64, or -DTL_PORTABLE) its trilinear fan path.
func TestFanMatchesDefinition(t *testing.T) {
	for isa := isaBase; isa <= isaAVX512; isa++ {
		name := levelName(isa)
		if limitISA(isa) < isa {
			limitISA(isaAVX512)
			t.Logf("%s: not on this CPU", name)
			continue
		}
		t.Run(name, testFanMatchesDefinition)
		limitISA(isaAVX512)
	}
}

func testFanMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	for _, shape := range [][3]int64{{19, 14, 23}, {6, 5, 2200}} {
		v := randomVolume(rng, shape[0], shape[1], shape[2])
		p := volume.Pad(v)
		lo, hi := corner(v, 0, 0, 0), corner(v, float64(shape[0]), float64(shape[1]), float64(shape[2]))
		mid := func(a int) float64 { return (lo[a] + hi[a]) / 2 }
		ext := func(a int) float64 { return hi[a] - lo[a] }
		zlow := lo[2] + min(ext(2)/2, 40*v.Spacing[2])
		cases := []fanCase{
			// As an orbit: rays from the side, pixels a fraction of a voxel apart in z.
			{"orbit", [3]float64{mid(0) + 3*ext(0), mid(1) + 0.3*ext(1), mid(2)}, [3]float64{mid(0) - 2*ext(0), mid(1) - 0.2*ext(1), mid(2) + 0.6*ext(2)}, [3]float64{0, 0, -ext(2) / 150}, 300},
			// Pixels about two voxels apart in z where the rays cross the
			// volume (a from 0.5 to 0.7): the rays of a vector of 4, 8 or 16
			// span about 5 to 7, 12 to 16 or 25 to 35 voxels in z, so some
			// fit the window of 2W−1 voxels the permutes read and some do
			// not. (Low
			// in the tall volume, where float32 heights are exact enough for
			// its short rays.)
			{"window", [3]float64{mid(0) + 3*ext(0), mid(1) - 0.1*ext(1), zlow}, [3]float64{mid(0) - 2*ext(0), mid(1) + 0.1*ext(1), zlow - 12*v.Spacing[2]*2/0.6}, [3]float64{0, 0, v.Spacing[2] * 2 / 0.6}, 24},
			// Pixels many voxels apart in z: the gathered path.
			{"wide", [3]float64{mid(0) - 2*ext(0), mid(1), mid(2)}, [3]float64{mid(0) + 2*ext(0), mid(1) + 0.1*ext(1), lo[2] - ext(2)}, [3]float64{0, 0, 3 * ext(2) / 37}, 37},
			// Half the fan above the volume, pixels stepping up.
			{"above", [3]float64{mid(0), mid(1) - 3*ext(1), mid(2)}, [3]float64{mid(0) + 0.2*ext(0), mid(1) + 3*ext(1), mid(2)}, [3]float64{0, 0, ext(2) / 40}, 61},
			// The source inside the volume.
			{"inside", [3]float64{mid(0) + 0.1*ext(0), mid(1), mid(2) - 0.2*ext(2)}, [3]float64{lo[0] - ext(0), hi[1] + ext(1), lo[2]}, [3]float64{0, 0, ext(2) / 90}, 90},
			// Every ray in one x-y column: the shared x and y never move.
			{"vertical", [3]float64{mid(0) + 0.13, mid(1) - 0.31, hi[2] + 40}, [3]float64{mid(0) + 0.13, mid(1) - 0.31, lo[2] - 40}, [3]float64{0, 0, 0.5}, 17},
			// The shared line on voxel planes in x and y.
			{"planes", [3]float64{lo[0] + 3*v.Spacing[0], lo[1] - 50, mid(2)}, [3]float64{lo[0] + 3*v.Spacing[0], hi[1] + 50, lo[2]}, [3]float64{0, 0, ext(2) / 20}, 21},
			// Not along z: the general path.
			{"tilted", [3]float64{mid(0) + 3*ext(0), mid(1), mid(2)}, [3]float64{mid(0) - 3*ext(0), mid(1) - 0.3*ext(1), mid(2) - 0.4*ext(2)}, [3]float64{0, ext(1) / 200, ext(2) / 100}, 70},
		}
		for _, c := range cases {
			for _, step := range []float64{0, 0.3, 1.1} { // 0: Siddon
				lref := 0.0
				for _, r := range []int{0, c.n - 1} {
					l := 0.0
					for a := range 3 {
						l += math.Pow(c.dst0[a]+float64(r)*c.dd[a]-c.src[a], 2)
					}
					lref = max(lref, math.Sqrt(l))
				}
				const stride = 3
				fast := make([]float32, stride*c.n)
				general := make([]float32, stride*c.n)
				// Siddon's fan path needs no padding, and padding moves which side
				// of a voxel plane a ray lying on it falls (TestPaddedVolume…).
				fv := p
				if step == 0 {
					fv = v
				}
				// Two fans in one call, writing the interleaved outputs from
				// offsets 0 and 1 (the second a copy of the first but for its
				// offset), so both the offsets and the strides are checked.
				f := Fan{Src: c.src, Dst0: c.dst0, DD: c.dd, N: c.n, Stride: stride, LRef: lref}
				g := f
				g.Off = 1
				DRRFans(gridOf(fv), []Fan{f, g}, fast, step)
				DRRFans(gridOf(v), []Fan{f}, general, step)
				var dsts []float64
				for r := range c.n {
					for a := range 3 {
						dsts = append(dsts, c.dst0[a]+float64(r)*c.dd[a])
					}
				}
				srcs := make([]float64, 0, 3*c.n)
				for range c.n {
					srcs = append(srcs, c.src[:]...)
				}
				each := make([]float32, c.n)
				DRR(gridOf(v), srcs, dsts, each, step, lref)
				var num, den float64
				hit := 0
				for r := range c.n {
					want := refSiddon(v, c.src, [3]float64(dsts[3*r:]))
					if step > 0 {
						want = refTrilinear(v, c.src, [3]float64(dsts[3*r:]), step, lref)
					}
					if want != 0 {
						hit++
					}
					den += want * want
					for _, got := range []struct {
						name string
						v    float32
					}{{"fast", fast[stride*r]}, {"general", general[stride*r]}, {"per ray", each[r]}} {
						e := math.Abs(float64(got.v) - want)
						num = max(num, e)
						if e > 1e-4*(1+math.Abs(want)) {
							t.Fatalf("%v %s step %v ray %d (%s): %v, want %v", shape, c.name, step, r, got.name, got.v, want)
						}
					}
					if fast[stride*r+1] != fast[stride*r] || fast[stride*r+2] != 0 || general[stride*r+1] != 0 || general[stride*r+2] != 0 {
						t.Fatalf("%s: the outputs at offsets 0 and 1 differ, or a fan wrote between its strided outputs", c.name)
					}
				}
				if hit < c.n/3 {
					t.Fatalf("%v %s: only %d of %d rays hit the volume", shape, c.name, hit, c.n)
				}
				t.Logf("%v %s step %v: largest error %.3g of the rms value", shape, c.name, step, num/math.Sqrt(den/float64(c.n)))
				if e := num / math.Sqrt(den/float64(c.n)); e > 1e-5 {
					t.Errorf("%v %s step %v: largest error %.3g of the rms value", shape, c.name, step, e)
				}
			}
		}
	}
}
