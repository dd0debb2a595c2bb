package drr

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops"
)

// segmentHitsBox is the slab test: whether the segment from p to q meets
// the axis-aligned box [lo, hi].
func segmentHitsBox(p, q, lo, hi [3]float64) bool {
	t0, t1 := 0.0, 1.0
	for a := range 3 {
		d := q[a] - p[a]
		if d == 0 {
			if p[a] < lo[a] || p[a] > hi[a] {
				return false
			}
			continue
		}
		u, v := (lo[a]-p[a])/d, (hi[a]-p[a])/d
		t0, t1 = max(t0, min(u, v)), min(t1, max(u, v))
	}
	return t0 <= t1
}

// A pose's rays miss the volume exactly when they do: against a slow
// test of every pixel's ray (source to pixel centre) on random poses
// about random, rotated volumes, and a dense fan of rays between them.
func TestRaysMissTheBoxAsTheRaysDo(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	var missed, hit, witnessed int
	for range 3000 {
		// A random orthonormal direction (Gram–Schmidt) and a box.
		var d [3][3]float64
		for c := range 3 {
			var col [3]float64
			for r := range 3 {
				col[r] = rng.NormFloat64()
			}
			for k := range c {
				var p float64
				for r := range 3 {
					p += col[r] * d[r][k]
				}
				for r := range 3 {
					col[r] -= p * d[r][k]
				}
			}
			n := math.Sqrt(col[0]*col[0] + col[1]*col[1] + col[2]*col[2])
			for r := range 3 {
				d[r][c] = col[r] / n
			}
		}
		v := &volume.Volume{N: [3]int64{int64(3 + rng.IntN(9)), int64(3 + rng.IntN(9)), int64(3 + rng.IntN(9))}, Direction: d}
		for a := range 3 {
			v.Origin[a], v.Spacing[a] = 40*rng.NormFloat64(), 0.5+3*rng.Float64()
		}
		lo, hi := boxOf(v).lo, boxOf(v).hi
		local := func(x [3]float64) [3]float64 { // Directionᵀ·(x − origin) + origin, written out again
			var y [3]float64
			for a := range 3 {
				y[a] = v.Origin[a]
				for r := range 3 {
					y[a] += d[r][a] * (x[r] - v.Origin[r])
				}
			}
			return y
		}
		// A pose: source and detector about the box, an odd detector.
		var p ops.Pose
		c, dir := boxOf(v).centre(), [3]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
		for a := range 3 {
			p.Source[a] = c[a] + 100*dir[a]/norm(dir) + 10*rng.NormFloat64()
			p.Center[a] = c[a] - 100*dir[a]/norm(dir) + 40*rng.NormFloat64()
			p.U[a], p.V[a] = rng.NormFloat64(), rng.NormFloat64()
		}
		p.Rows, p.Cols = 1+rng.IntN(7), 1+rng.IntN(9)
		p.Pixel = [2]float64{1 + 15*rng.Float64(), 1 + 15*rng.Float64()}
		ray := func(s, t float64) bool { // the ray to the detector point at (s, t) in pixels from its centre
			nu, nv := norm(p.U), norm(p.V)
			var x [3]float64
			for a := range 3 {
				x[a] = p.Center[a] + s*p.Pixel[0]*p.U[a]/nu + t*p.Pixel[1]*p.V[a]/nv
			}
			return segmentHitsBox(local(p.Source), local(x), lo, hi)
		}
		anyPixel := false
		for r := range p.Rows {
			for c := range p.Cols {
				anyPixel = anyPixel || ray(float64(c)-float64(p.Cols-1)/2, float64(r)-float64(p.Rows-1)/2)
			}
		}
		anyDense := false
		const k = 40
		for i := 0; i <= k; i++ {
			for j := 0; j <= k; j++ {
				anyDense = anyDense || ray((float64(i)/k-0.5)*float64(p.Cols-1), (float64(j)/k-0.5)*float64(p.Rows-1))
			}
		}
		miss := boxOf(v).raysMiss(p)
		switch {
		case miss && (anyPixel || anyDense):
			t.Fatalf("a ray meets the box, yet every ray is said to miss it: volume %+v, pose %+v", v, p)
		case !miss && anyPixel:
			hit++
			witnessed++
		case !miss:
			hit++
			if anyDense {
				witnessed++
			}
		default:
			missed++
		}
	}
	// Both answers are common, and where the rays' pyramid meets the box
	// a ray of the dense fan almost always shows it.
	if missed < 300 || hit < 300 || float64(witnessed) < 0.97*float64(hit) {
		t.Errorf("%d poses missed, %d met the box, %d of those shown by a ray", missed, hit, witnessed)
	}
	t.Logf("%d poses missed, %d met the box, %d of those shown by a ray", missed, hit, witnessed)
}
