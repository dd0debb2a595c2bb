package drr

import (
	"fmt"
	"math"

	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops"
)

// The geometry checks a radiographer expects before a DRR is trusted: the
// source and the detector outside the volume, the volume between them, and
// rays that reach it. Each finding is one line naming how many poses it
// concerns, the first of them and a distance in mm; Config.Strict makes it
// an error.

// box is a volume's box in its own frame (volume.Local): axis-aligned from
// lo to hi, in mm.
type box struct {
	v      *volume.Volume
	lo, hi [3]float64
}

// boxOf is v's box: its voxels' outer faces, without the border of zero
// voxels a padded volume carries.
func boxOf(v *volume.Volume) box {
	b := box{v: v}
	skip := 0.5
	if v.Padded {
		skip = -0.5
	}
	for a := range 3 {
		b.lo[a] = v.Origin[a] - skip*v.Spacing[a]
		b.hi[a] = v.Origin[a] + (float64(v.N[a])-1+skip)*v.Spacing[a]
	}
	return b
}

// depth is how far inside the box the world point x lies, in mm: its
// distance to the nearest face, negative outside.
func (b box) depth(x [3]float64) float64 {
	y := b.v.ToLocal(x)
	d := math.Inf(1)
	for a := range 3 {
		d = min(d, y[a]-b.lo[a], b.hi[a]-y[a])
	}
	return d
}

// centre is the box's centre, in world mm.
func (b box) centre() [3]float64 {
	var c [3]float64
	for a := range 3 {
		c[a] = (b.lo[a] + b.hi[a]) / 2
	}
	// b.lo and b.hi are in the local frame: map the centre back.
	d := b.v.Dir()
	w := b.v.Origin
	for r := range 3 {
		for a := range 3 {
			w[r] += d[r][a] * (c[a] - b.v.Origin[a])
		}
	}
	return w
}

// finding gathers the poses of one kind of fault: how many, and the first
// with its distance.
type finding struct {
	n     int
	first int
	mm    float64
}

func (f *finding) add(i int, mm float64) {
	if f.n == 0 {
		f.first, f.mm = i, mm
	}
	f.n++
}

// poseCorners are the detector's four corners and centre.
func poseCorners(p ops.Pose) [5][3]float64 {
	nu, nv := norm(p.U), norm(p.V)
	hu, hv := float64(p.Cols)*p.Pixel[0]/2, float64(p.Rows)*p.Pixel[1]/2
	var c [5][3]float64
	for k, s := range [5][2]float64{{0, 0}, {-1, -1}, {1, -1}, {-1, 1}, {1, 1}} {
		for a := range 3 {
			c[k][a] = p.Center[a] + s[0]*hu*p.U[a]/nu + s[1]*hv*p.V[a]/nv
		}
	}
	return c
}

func norm(v [3]float64) float64 { return math.Sqrt(v[0]*v[0] + v[1]*v[1] + v[2]*v[2]) }

// CheckGeometry returns one line per kind of fault in poses about v: a
// source inside the volume's box, a detector reaching into it, a volume
// not in front of the source (on the side away from the detector). Each
// line says how many poses, the first, and the distance that shows it.
// Poses are numbered from first (a shard's place in the run).
func CheckGeometry(v *volume.Volume, poses []ops.Pose, first int) []string {
	b := boxOf(v)
	c := b.centre()
	var src, det, behind finding
	for i, p := range poses {
		if d := b.depth(p.Source); d >= 0 {
			src.add(first+i, d)
		}
		deepest := math.Inf(-1)
		for _, x := range poseCorners(p) {
			deepest = max(deepest, b.depth(x))
		}
		if deepest >= 0 {
			det.add(first+i, deepest)
		}
		// The volume's centre along the source's view of the detector:
		// negative when it lies behind the source.
		var toDet, toVol [3]float64
		for a := range 3 {
			toDet[a], toVol[a] = p.Center[a]-p.Source[a], c[a]-p.Source[a]
		}
		along := (toDet[0]*toVol[0] + toDet[1]*toVol[1] + toDet[2]*toVol[2]) / norm(toDet)
		if along < 0 {
			behind.add(first+i, -along)
		}
	}
	var out []string
	of := fmt.Sprintf(" of %d", len(poses))
	if src.n > 0 {
		out = append(out, fmt.Sprintf("%d%s poses have their source inside the volume (pose %d: %.4g mm inside its nearest face)", src.n, of, src.first, src.mm))
	}
	if det.n > 0 {
		out = append(out, fmt.Sprintf("%d%s poses have their detector reaching into the volume (pose %d: %.4g mm inside its nearest face); --sid is the source–isocentre distance, --sdd the source–detector (radiography's SID)", det.n, of, det.first, det.mm))
	}
	if behind.n > 0 {
		out = append(out, fmt.Sprintf("%d%s poses have the volume behind the source, away from the detector (pose %d: its centre %.4g mm behind)", behind.n, of, behind.first, behind.mm))
	}
	return out
}

// raysMiss reports whether every ray of pose p, from the source to the
// centre of a detector pixel, passes outside the box: whether the
// pyramid of those rays (the source and the outermost pixels' centres)
// and the box are apart. Two convex solids are apart exactly when some
// axis among the faces' normals and the cross products of their edges
// separates them.
func (b box) raysMiss(p ops.Pose) bool {
	nu, nv := norm(p.U), norm(p.V)
	hu, hv := float64(p.Cols-1)*p.Pixel[0]/2, float64(p.Rows-1)*p.Pixel[1]/2
	var pts [5][3]float64 // the source, then the corner rays' ends
	pts[0] = b.v.ToLocal(p.Source)
	for k, s := range [4][2]float64{{-1, -1}, {1, -1}, {1, 1}, {-1, 1}} {
		var w [3]float64
		for a := range 3 {
			w[a] = p.Center[a] + s[0]*hu*p.U[a]/nu + s[1]*hv*p.V[a]/nv
		}
		pts[k+1] = b.v.ToLocal(w)
	}
	var edges [6][3]float64 // the four rays at the corners, the detector's two sides
	for k := range 4 {
		edges[k] = sub(pts[k+1], pts[0])
	}
	edges[4], edges[5] = sub(pts[2], pts[1]), sub(pts[4], pts[1])
	axes := [][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, cross(edges[4], edges[5])}
	for k := range 4 {
		axes = append(axes, cross(edges[k], edges[(k+1)%4]))
	}
	for _, e := range edges {
		for a := range 3 {
			var unit [3]float64
			unit[a] = 1
			axes = append(axes, cross(e, unit))
		}
	}
	var c, h [3]float64
	for a := range 3 {
		c[a], h[a] = (b.lo[a]+b.hi[a])/2, (b.hi[a]-b.lo[a])/2
	}
	for _, n := range axes {
		l := norm(n)
		if !(l > 0) {
			continue
		}
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, x := range pts {
			d := dot(n, x) / l
			lo, hi = min(lo, d), max(hi, d)
		}
		bc := dot(n, c) / l
		br := (math.Abs(n[0])*h[0] + math.Abs(n[1])*h[1] + math.Abs(n[2])*h[2]) / l
		if hi < bc-br || lo > bc+br {
			return true
		}
	}
	return false
}

// missedPoses gathers the poses whose every ray misses v's box, numbered
// from first, with the distance from the central ray to the box's centre.
func missedPoses(v *volume.Volume, poses []ops.Pose, first int) finding {
	b := boxOf(v)
	var f finding
	for i, p := range poses {
		if b.raysMiss(p) {
			f.add(first+i, 0)
		}
	}
	return f
}

func sub(x, y [3]float64) [3]float64 { return [3]float64{x[0] - y[0], x[1] - y[1], x[2] - y[2]} }
func dot(x, y [3]float64) float64    { return x[0]*y[0] + x[1]*y[1] + x[2]*y[2] }
func cross(x, y [3]float64) [3]float64 {
	return [3]float64{x[1]*y[2] - x[2]*y[1], x[2]*y[0] - x[0]*y[2], x[0]*y[1] - x[1]*y[0]}
}

// missedLine is the line for poses whose every ray missed the volume:
// f.n of total, the first, p, and how far its central ray passes from the
// volume's centre.
func missedLine(v *volume.Volume, p ops.Pose, f finding, total int) string {
	c := boxOf(v).centre()
	var dir, w [3]float64
	for a := range 3 {
		dir[a], w[a] = p.Center[a]-p.Source[a], c[a]-p.Source[a]
	}
	l := norm(dir)
	t := (dir[0]*w[0] + dir[1]*w[1] + dir[2]*w[2]) / l
	miss := math.Sqrt(max(0, w[0]*w[0]+w[1]*w[1]+w[2]*w[2]-t*t))
	return fmt.Sprintf("%d of %d poses: every ray missed the volume (pose %d: its central ray passes %.4g mm from the volume's centre); check the geometry against the volume's origin, spacing and direction, and --frame", f.n, total, f.first, miss)
}
