package drr

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/internal/workloadtest"
	"github.com/tapeloop/tapeloop/ops"
)

// TestCheckGeometry places sources and detectors about a rotated,
// anisotropic volume whose box is known in its own frame, and checks each
// finding's count, first pose and distance against that box worked out by
// hand.
func TestCheckGeometry(t *testing.T) {
	// Voxels 2×3×4 mm, 11×7×5 of them: the box is 22×21×20 mm. The index
	// axes point along world y, −x and z: a quarter turn about z.
	v := &volume.Volume{V: make([]float32, 11*7*5), N: [3]int64{11, 7, 5}, Spacing: [3]float64{2, 3, 4}, Origin: [3]float64{10, -20, 30},
		Direction: [3][3]float64{{0, -1, 0}, {1, 0, 0}, {0, 0, 1}}}
	c := v.Centre()
	// The box's half sizes along world x, y, z: index axis 1 (21 mm) lies
	// along −x, axis 0 (22 mm) along y.
	half := [3]float64{10.5, 11, 10}
	pose := func(src, det [3]float64) ops.Pose {
		return ops.Pose{Source: src, Center: det, U: [3]float64{0, 1, 0}, V: [3]float64{0, 0, 1}, Rows: 2, Cols: 2, Pixel: [2]float64{0.5, 0.5}}
	}
	at := func(dx, dy, dz float64) [3]float64 { return [3]float64{c[0] + dx, c[1] + dy, c[2] + dz} }
	poses := []ops.Pose{
		pose(at(-500, 0, 0), at(500, 0, 0)),  // sound
		pose(at(-7, 0, 0), at(500, 0, 0)),    // source 10.5 − 7 = 3.5 mm inside
		pose(at(-500, 0, 0), at(4, 0, 0)),    // detector 6.5 mm inside (its corners 0.5 mm off the axis, still 6.5 from the x faces)
		pose(at(300, 0, 0), at(800, 0, 0)),   // the volume 300 mm behind the source
		pose(at(-500, 0, 0), at(-2, 0, 9.8)), // detector corner at z = 9.8 + 0.5: outside; centre 0.2 mm inside the z face
	}
	got := CheckGeometry(v, poses, 40)
	want := []string{
		"1 of 5 poses have their source inside the volume (pose 41: 3.5 mm inside its nearest face)",
		"2 of 5 poses have their detector reaching into the volume (pose 42: 6.5 mm inside its nearest face)",
		"1 of 5 poses have the volume behind the source, away from the detector (pose 43: its centre 300 mm behind)",
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines %q, want %d", len(got), got, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("line %d:\n got %q\nwant %q…", i, got[i], want[i])
		}
	}
	// The box itself, in world mm, through depth: the centre is as deep
	// as the smallest half size, a face point at depth 0.
	b := boxOf(v)
	if d := b.depth(c); math.Abs(d-10) > 1e-9 {
		t.Errorf("the centre is %g mm deep, want 10", d)
	}
	for a := range 3 {
		p := c
		p[a] += half[a]
		if d := b.depth(p); math.Abs(d) > 1e-9 {
			t.Errorf("a point on the face along world axis %d is %g mm deep, want 0", a, d)
		}
	}
	// A padded volume has the same box.
	if pb := boxOf(volume.Pad(v)); math.Abs(pb.depth(c)-10) > 1e-9 {
		t.Errorf("padded: the centre is %g mm deep, want 10", pb.depth(c))
	}
}

// TestProjection: a pose's projection matrix takes every point of the ray
// through pixel (c, r), in front of the source, to column c, row r, with
// w > 0; a point behind the source gets w < 0. Oblique, tilted poses with
// rectangular pixels and odd detector sizes.
func TestProjection(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 28))
	for k := range 20 {
		p := ops.Pose{Rows: 3 + rng.IntN(40), Cols: 3 + rng.IntN(40), Pixel: [2]float64{0.3 + rng.Float64()*2, 0.3 + rng.Float64()*2}}
		for a := range 3 {
			p.Source[a], p.Center[a] = rng.NormFloat64()*300, rng.NormFloat64()*300
			p.U[a], p.V[a] = rng.NormFloat64(), rng.NormFloat64()
		}
		if p.Validate(k) != nil {
			continue
		}
		m := Projection(p)
		var e [ops.PoseWidth]float64
		p.Encode(e[:])
		for range 10 {
			c, r, lambda := rng.Float64()*float64(p.Cols-1), rng.Float64()*float64(p.Rows-1), 0.05+rng.Float64()*3
			var x [4]float64
			for a := range 3 {
				pix := e[3+a] + c*e[6+a] + r*e[9+a]
				x[a] = e[a] + lambda*(pix-e[a])
			}
			x[3] = 1
			var uvw [3]float64
			for i := range 3 {
				for j := range 4 {
					uvw[i] += m[i][j] * x[j]
				}
			}
			if !(uvw[2] > 0) || math.Abs(uvw[0]/uvw[2]-c) > 1e-7 || math.Abs(uvw[1]/uvw[2]-r) > 1e-7 {
				t.Fatalf("pose %d: the point at λ = %.3g on the ray of (c, r) = (%.4f, %.4f) projects to (%.6f, %.6f), w = %g", k, lambda, c, r, uvw[0]/uvw[2], uvw[1]/uvw[2], uvw[2])
			}
			var back float64
			for j := range 3 {
				back += m[2][j] * (2*e[j] - x[j]) // the point mirrored through the source
			}
			if back+m[2][3] >= 0 {
				t.Fatalf("pose %d: a point behind the source has w = %g, want < 0", k, back+m[2][3])
			}
		}
	}
}

// TestProjectionMatchesTheImage renders a volume that is zero but for one
// voxel and checks that each pose's image of it is centred where the
// projection matrix puts that voxel's centre (to 0.1 pixel: perspective
// moves a box's image centroid a little off its centre's image).
func TestProjectionMatchesTheImage(t *testing.T) {
	n := [3]int64{15, 13, 11}
	v := &volume.Volume{V: make([]float32, n[0]*n[1]*n[2]), N: n, Spacing: [3]float64{0.6, 0.5, 0.7}, Origin: [3]float64{-9, 4, 2}}
	i, j, k := 9, 4, 6
	v.V[(int64(i)*n[1]+int64(j))*n[2]+int64(k)] = 100
	x := v.World([3]float64{float64(i), float64(j), float64(k)})
	prog, err := Compile(DefaultConfig(), v, 61, 57, workloadtest.CPU(t, 2, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	x14, err := prog.Orbit(5, 900, 400, 0.15)
	if err != nil {
		t.Fatal(err)
	}
	images := make([]float32, 5*61*57)
	if err := prog.Run(x14, images); err != nil {
		t.Fatal(err)
	}
	poses := make([]ops.Pose, 5)
	for pi := range poses {
		q := x14[pi*PoseValues:]
		p := &poses[pi]
		copy(p.Source[:], q[0:3])
		copy(p.Center[:], q[3:6])
		copy(p.U[:], q[6:9])
		copy(p.V[:], q[9:12])
		copy(p.Pixel[:], q[12:14])
		p.Rows, p.Cols = 61, 57
	}
	for pi, p := range poses {
		img := images[pi*61*57 : (pi+1)*61*57]
		// The image's centroid: the voxel's footprint is several pixels
		// wide, its brightest pixel anywhere in it.
		var sum, sc, sr float64
		for q, val := range img {
			sum += float64(val)
			sc += float64(val) * float64(q%57)
			sr += float64(val) * float64(q/57)
		}
		m := Projection(p)
		var uvw [3]float64
		for a := range 3 {
			uvw[a] = m[a][0]*x[0] + m[a][1]*x[1] + m[a][2]*x[2] + m[a][3]
		}
		c, r := uvw[0]/uvw[2], uvw[1]/uvw[2]
		if gc, gr := sc/sum, sr/sum; !(sum > 0) || math.Abs(gc-c) > 0.1 || math.Abs(gr-r) > 0.1 {
			t.Errorf("pose %d: the voxel's image is centred at (column %.3f, row %.3f), the matrix puts its centre at (%.3f, %.3f)", pi, gc, gr, c, r)
		}
	}
}
