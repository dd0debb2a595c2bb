package drr

import (
	"math"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/volume"
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
