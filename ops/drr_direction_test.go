package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

// drrImages renders poses (batch × PoseWidth) of vol with a fresh op.
func drrImages(t *testing.T, vol *volume.Volume, rows, cols int, step float64, poses []float64) []float32 {
	t.Helper()
	batch := len(poses) / PoseWidth
	out, err := NewDRR(vol, rows, cols, step, batch).Do(tensor.New(tensor.WithShape(batch, PoseWidth), tensor.WithBacking(append([]float64(nil), poses...))))
	if err != nil {
		t.Fatal(err)
	}
	return append([]float32(nil), out.(*tensor.Dense).Data().([]float32)...)
}

// obliquePoses are an orbit pose, one with its detector turned a quarter
// and one tilted, about c.
func obliquePoses(c [3]float64, rows, cols int) []float64 {
	var poses []float64
	for b := range 3 {
		p := orbitPose(c, 0.3+float64(b)*1.7, 200, 90, rows, cols, 0.9)
		if b == 2 {
			for a := range 3 {
				p[6+a] += 0.4 * p[9+a]
				p[9+a] += 0.3 * p[6+a]
			}
		}
		if b == 1 { // rows along z: swap the steps' roles
			for a := range 3 {
				p[6+a], p[9+a] = p[9+a]*float64(rows)/float64(cols), p[6+a]*float64(cols)/float64(rows)
			}
		}
		poses = append(poses, p...)
	}
	return poses
}

// A volume stored along other axes (a signed permutation as its
// direction) renders as the same voxels rearranged to lie along x, y and
// z with the identity: the op maps rays into the volume's frame.
func TestDRRDirectionIsTheRearrangedVolume(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 82))
	n := [3]int64{7, 9, 5}
	v := &volume.Volume{N: n, Origin: [3]float64{3, -4, 6}, Spacing: [3]float64{1.1, 0.7, 1.6},
		// Index i runs along +y, j along −z, k along −x.
		Direction: [3][3]float64{{0, 0, -1}, {1, 0, 0}, {0, -1, 0}}, V: opstest.Uniform32(rng, int(n[0]*n[1]*n[2]))}
	// The same voxels along x, y, z: x ← −k, y ← i, z ← −j.
	w := &volume.Volume{N: [3]int64{n[2], n[0], n[1]}, Spacing: [3]float64{1.6, 1.1, 0.7},
		Origin: v.World([3]float64{0, float64(n[1] - 1), float64(n[2] - 1)}), V: make([]float32, len(v.V))}
	for a := range w.N[0] {
		for b := range w.N[1] {
			for c := range w.N[2] {
				i, j, k := b, n[1]-1-c, n[2]-1-a
				w.V[(a*w.N[1]+b)*w.N[2]+c] = v.V[(i*n[1]+j)*n[2]+k]
			}
		}
	}
	if got, want := w.Centre(), v.Centre(); math.Abs(got[0]-want[0])+math.Abs(got[1]-want[1])+math.Abs(got[2]-want[2]) > 1e-12 {
		t.Fatalf("the rearranged volume's centre %v, want %v", got, want)
	}
	const rows, cols = 11, 13
	poses := obliquePoses(v.Centre(), rows, cols)
	for _, step := range []float64{0, 0.4} {
		got := drrImages(t, v, rows, cols, step, poses)
		want := drrImages(t, w, rows, cols, step, poses)
		hit := 0
		for i := range got {
			if math.Abs(float64(got[i]-want[i])) > 1e-5*(1+math.Abs(float64(want[i]))) {
				t.Fatalf("step %g pixel %d: %v, the rearranged volume gives %v", step, i, got[i], want[i])
			}
			if want[i] != 0 {
				hit++
			}
		}
		if hit < len(got)/2 {
			t.Fatalf("only %d of %d rays hit: the test geometry is off", hit, len(got))
		}
	}
}

// A rotated volume of ones: every Siddon line integral is the ray's chord
// through the rotated box, clipped here against the box's faces in world
// coordinates.
func TestDRRRotatedBoxChord(t *testing.T) {
	c, s := math.Cos(0.5), math.Sin(0.5)
	ca, sa := math.Cos(-0.9), math.Sin(-0.9)
	// A turn about z, then about x; the third column negated (a flip).
	rz := [3][3]float64{{c, -s, 0}, {s, c, 0}, {0, 0, 1}}
	rx := [3][3]float64{{1, 0, 0}, {0, ca, -sa}, {0, sa, ca}}
	var d [3][3]float64
	for i := range 3 {
		for j := range 3 {
			for k := range 3 {
				d[i][j] += rx[i][k] * rz[k][j]
			}
		}
		d[i][2] = -d[i][2]
	}
	n := [3]int64{9, 6, 11}
	v := &volume.Volume{N: n, Origin: [3]float64{-4, 7, 2}, Spacing: [3]float64{0.9, 1.7, 1.2}, Direction: d,
		V: make([]float32, n[0]*n[1]*n[2])}
	for i := range v.V {
		v.V[i] = 1
	}
	const rows, cols = 9, 10
	poses := obliquePoses(v.Centre(), rows, cols)
	got := drrImages(t, v, rows, cols, 0, poses)
	hit := 0
	for b := range len(poses) / PoseWidth {
		p := poses[b*PoseWidth:]
		for r := range rows {
			for col := range cols {
				var src, dir [3]float64
				for a := range 3 {
					src[a] = p[a]
					dir[a] = p[3+a] + float64(col)*p[6+a] + float64(r)*p[9+a] - p[a]
				}
				// Slabs: along each index axis's direction, the box spans
				// half a voxel before voxel 0's centre to half after the last.
				t0, t1 := 0.0, 1.0
				for a := range 3 {
					var nrm [3]float64
					for q := range 3 {
						nrm[q] = d[q][a]
					}
					dot := func(x [3]float64) float64 { return x[0]*nrm[0] + x[1]*nrm[1] + x[2]*nrm[2] }
					lo := dot(v.Origin) - v.Spacing[a]/2
					hi := lo + float64(n[a])*v.Spacing[a]
					u0, u1 := (lo-dot(src))/dot(dir), (hi-dot(src))/dot(dir)
					t0, t1 = max(t0, min(u0, u1)), min(t1, max(u0, u1))
				}
				want := 0.0
				if t1 > t0 {
					want = (t1 - t0) * math.Sqrt(dir[0]*dir[0]+dir[1]*dir[1]+dir[2]*dir[2])
					hit++
				}
				if g := float64(got[(b*rows+r)*cols+col]); math.Abs(g-want) > 1e-4*(1+want) {
					t.Fatalf("pose %d pixel (%d, %d): %v, the chord is %v", b, r, col, g, want)
				}
			}
		}
	}
	if hit < len(got)/2 {
		t.Fatalf("only %d of %d rays hit: the test geometry is off", hit, len(got))
	}
}
