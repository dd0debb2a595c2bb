package ops

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// This file is the DRR's pose layout, in one place: the Pose a user states
// (from a geometry file or an orbit), its checks, and the PoseWidth-long
// row the DRR op reads.

// PoseWidth is the length of an encoded pose: the source (3), the centre of
// pixel (0, 0) (3), and the steps from one pixel centre to the next along a
// row (du·û, 3) and down a column (dv·v̂, 3), all in mm.
const PoseWidth = 12

// Pose is one radiograph's geometry, in mm: an X-ray source and a flat
// detector of Rows×Cols pixels of Pixel[0]×Pixel[1] centred at Center,
// its rows along U and its columns down V. The centre of pixel (r, c) is
// Center + (c − (Cols−1)/2)·du·û + (r − (Rows−1)/2)·dv·v̂.
type Pose struct {
	Source [3]float64 `json:"source"`
	Center [3]float64 `json:"center"`
	U      [3]float64 `json:"u"`
	V      [3]float64 `json:"v"`
	Rows   int        `json:"rows"`
	Cols   int        `json:"cols"`
	Pixel  [2]float64 `json:"pixel"`
}

// ErrGeometry is wrapped by every error about poses.
var ErrGeometry = errors.New("geometry")

// MaxPoses is the most poses one run renders, MaxCoordinate the largest
// magnitude, in mm, of a pose's coordinates and pixel sizes: far beyond
// any scanner, and small enough that no ray length overflows; and
// MinPixel the smallest pixel size, in mm (a nanometre), far below any
// detector's, and large enough that the projection matrix of a pose
// (geometry.json) stays finite.
const (
	MaxPoses      = 1 << 20
	MaxCoordinate = 1e9
	MinPixel      = 1e-6
)

// Validate checks the pose; i names it in the error.
func (p Pose) Validate(i int) error {
	for _, v := range [][]float64{p.Source[:], p.Center[:], p.U[:], p.V[:], p.Pixel[:]} {
		for _, x := range v {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("%w: pose %d has a NaN or infinite coordinate", ErrGeometry, i)
			}
			if math.Abs(x) > MaxCoordinate {
				return fmt.Errorf("%w: pose %d has a coordinate or pixel size of %g mm; at most %g in magnitude", ErrGeometry, i, x, MaxCoordinate)
			}
		}
	}
	nu, nv := norm3(p.U), norm3(p.V)
	switch {
	case p.Rows < 1 || p.Cols < 1:
		return fmt.Errorf("%w: pose %d has a %d×%d detector; rows and cols must be at least 1", ErrGeometry, i, p.Rows, p.Cols)
	case !(p.Pixel[0] > 0 && p.Pixel[1] > 0):
		return fmt.Errorf("%w: pose %d has pixel size %v; both must be positive", ErrGeometry, i, p.Pixel)
	case p.Pixel[0] < MinPixel || p.Pixel[1] < MinPixel:
		return fmt.Errorf("%w: pose %d has pixel size %v mm; at least %g", ErrGeometry, i, p.Pixel, MinPixel)
	case nu == 0 || nv == 0:
		return fmt.Errorf("%w: pose %d has a zero u or v vector", ErrGeometry, i)
	}
	cross := p.normal()
	if norm3(cross) < 1e-9*nu*nv {
		return fmt.Errorf("%w: pose %d has parallel u and v vectors", ErrGeometry, i)
	}
	if d := [3]float64{p.Source[0] - p.Center[0], p.Source[1] - p.Center[1], p.Source[2] - p.Center[2]}; math.Abs(d[0]*cross[0]+d[1]*cross[1]+d[2]*cross[2]) <= 1e-9*norm3(d)*norm3(cross) {
		return fmt.Errorf("%w: pose %d has its source in the detector's plane", ErrGeometry, i)
	}
	return nil
}

func norm3(v [3]float64) float64 { return math.Sqrt(v[0]*v[0] + v[1]*v[1] + v[2]*v[2]) }

// normal is u × v, normal to the detector's plane (not of unit length).
func (p Pose) normal() [3]float64 {
	return [3]float64{p.U[1]*p.V[2] - p.U[2]*p.V[1], p.U[2]*p.V[0] - p.U[0]*p.V[2], p.U[0]*p.V[1] - p.U[1]*p.V[0]}
}

// SourceDistance is the source's distance from the detector's plane, in mm:
// the length of the pose's shortest ray.
func (p Pose) SourceDistance() float64 {
	n := p.normal()
	var d float64
	for a := range 3 {
		d += (p.Source[a] - p.Center[a]) * n[a]
	}
	return math.Abs(d) / norm3(n)
}

// Encode writes the pose as the DRR op reads it (PoseWidth values):
// source, centre of pixel (0, 0), step along a row, step down a column.
func (p Pose) Encode(dst []float64) {
	nu, nv := norm3(p.U), norm3(p.V)
	for a := range 3 {
		du := p.Pixel[0] * p.U[a] / nu
		dv := p.Pixel[1] * p.V[a] / nv
		dst[a] = p.Source[a]
		dst[3+a] = p.Center[a] - float64(p.Cols-1)/2*du - float64(p.Rows-1)/2*dv
		dst[6+a] = du
		dst[9+a] = dv
	}
}

// LongestRay is the length in mm of the longest ray of an encoded pose:
// the one to one of the detector's corners, since the squared length is
// convex in the pixel position.
func LongestRay(pose []float64, rows, cols int) float64 {
	l := 0.0
	for _, r := range [2]float64{0, float64(rows - 1)} {
		for _, c := range [2]float64{0, float64(cols - 1)} {
			s := 0.0
			for a := range 3 {
				d := pose[3+a] + c*pose[6+a] + r*pose[9+a] - pose[a]
				s += d * d
			}
			l = max(l, math.Sqrt(s))
		}
	}
	return l
}

// orbitAt is pose k of n of an orbit about c (see Orbit).
func orbitAt(k, n int, c [3]float64, sdd, sid float64, rows, cols int, pixel float64) Pose {
	return orbitAbout(k, n, c, zAxis, 0, sdd, sid, rows, cols, pixel)
}

var zAxis = [3]float64{0, 0, 1}

// orbitAbout is pose k of n of an orbit about the axis through c (see
// OrbitAbout): α = start + 2πk/n, the source along cos α·e₁ + sin α·e₂
// from c, where e₁, e₂ and the unit axis a are right-handed; u = a × (the
// source's direction), v = −a.
func orbitAbout(k, n int, c, axis [3]float64, start, sdd, sid float64, rows, cols int, pixel float64) Pose {
	al := start + 2*math.Pi*float64(k)/float64(n)
	ca, sa := math.Cos(al), math.Sin(al)
	if axis == zAxis { // written out: the same numbers, signed zeros too, as orbits always had
		return Pose{
			Source: [3]float64{c[0] + sid*ca, c[1] + sid*sa, c[2]},
			Center: [3]float64{c[0] - (sdd-sid)*ca, c[1] - (sdd-sid)*sa, c[2]},
			U:      [3]float64{-sa, ca, 0},
			V:      [3]float64{0, 0, -1},
			Rows:   rows, Cols: cols, Pixel: [2]float64{pixel, pixel},
		}
	}
	a, e1, e2 := orbitFrame(axis)
	var p Pose
	for i := range 3 {
		d := ca*e1[i] + sa*e2[i]
		p.Source[i] = c[i] + sid*d
		p.Center[i] = c[i] - (sdd-sid)*d
		p.U[i] = -sa*e1[i] + ca*e2[i]
		p.V[i] = 0 - a[i] // 0, not −0, where the axis has none
	}
	p.Rows, p.Cols, p.Pixel = rows, cols, [2]float64{pixel, pixel}
	return p
}

// orbitFrame is the unit axis a and the directions e₁, e₂ of angle 0 and
// 90° about it: about z, x and y; about x, y and z; about y, z and x; about
// another axis, the first of x, y, z by the axis's largest component's
// successor, made perpendicular.
func orbitFrame(axis [3]float64) (a, e1, e2 [3]float64) {
	n := norm3(axis)
	for i := range 3 {
		a[i] = axis[i] / n
	}
	big := 0
	for i := range 3 {
		if math.Abs(a[i]) > math.Abs(a[big]) {
			big = i
		}
	}
	ref := [3]float64{}
	ref[(big+1)%3] = 1
	dot := ref[0]*a[0] + ref[1]*a[1] + ref[2]*a[2]
	for i := range 3 {
		e1[i] = ref[i] - dot*a[i]
	}
	m := norm3(e1)
	for i := range 3 {
		e1[i] /= m
	}
	e2 = [3]float64{a[1]*e1[2] - a[2]*e1[1], a[2]*e1[0] - a[0]*e1[2], a[0]*e1[1] - a[1]*e1[0]}
	return a, e1, e2
}

// CheckOrbit checks Orbit's parameters without building the poses: at
// least one pose, 0 < sid < sdd, and a valid detector (its first pose
// about the origin validated as Orbit validates each).
func CheckOrbit(n int, sdd, sid float64, rows, cols int, pixel float64) error {
	if n < 1 {
		return fmt.Errorf("%w: --orbit %d: need at least one pose", ErrGeometry, n)
	}
	if n > MaxPoses {
		return fmt.Errorf("%w: --orbit %d: at most %d (2²⁰) poses in one run", ErrGeometry, n, MaxPoses)
	}
	if !(sid > 0) || !(sdd > sid) {
		return fmt.Errorf("%w: need 0 < sid < sdd, got sid %g, sdd %g", ErrGeometry, sid, sdd)
	}
	if sdd > MaxCoordinate {
		return fmt.Errorf("%w: sdd %g mm: at most %g", ErrGeometry, sdd, MaxCoordinate)
	}
	return orbitAt(0, n, [3]float64{}, sdd, sid, rows, cols, pixel).Validate(0)
}

// Orbit returns n poses evenly spaced over 360° about the z axis through
// c: pose k at α = 2πk/n has its source at c + sid·(cos α, sin α, 0), its
// detector centre at c − (sdd − sid)·(cos α, sin α, 0), u = (−sin α, cos α, 0)
// and v = (0, 0, −1).
func Orbit(n int, c [3]float64, sdd, sid float64, rows, cols int, pixel float64) ([]Pose, error) {
	return OrbitAbout(n, c, zAxis, 0, sdd, sid, rows, cols, pixel)
}

// OrbitAbout is Orbit about the axis through c (any nonzero vector; z is
// Orbit's), from start degrees: pose k at α = start + 360°·k/n. About z,
// angle 0 puts the source on +x of c, 90° on +y; about x, 0 on +y and 90°
// on +z; about y, 0 on +z and 90° on +x. The detector's columns run
// against the axis (v = −axis) and its rows along axis × (the source's
// direction).
func OrbitAbout(n int, c, axis [3]float64, start, sdd, sid float64, rows, cols int, pixel float64) ([]Pose, error) {
	if err := CheckOrbit(n, sdd, sid, rows, cols, pixel); err != nil {
		return nil, err
	}
	if l := norm3(axis); !(l > 0) || math.IsInf(l, 0) {
		return nil, fmt.Errorf("%w: orbit axis %v: want a nonzero, finite vector", ErrGeometry, axis)
	}
	if math.IsNaN(start) || math.IsInf(start, 0) {
		return nil, fmt.Errorf("%w: orbit start %g°: want a finite angle", ErrGeometry, start)
	}
	for _, x := range c {
		if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > MaxCoordinate {
			return nil, fmt.Errorf("%w: orbit isocentre %v: want finite coordinates of at most %g mm", ErrGeometry, c, MaxCoordinate)
		}
	}
	poses := make([]Pose, n)
	for k := range poses {
		poses[k] = orbitAbout(k, n, c, axis, start*math.Pi/180, sdd, sid, rows, cols, pixel)
		if err := poses[k].Validate(k); err != nil {
			return nil, err
		}
	}
	return poses, nil
}

// ReadGeometryFrame reads {"poses": [Pose, …]} and validates every pose
// (each field present, vectors of exactly three numbers; all poses of one
// run share the detector size), and returns the world frame the document
// names ("frame": "lps" or "ras"; "" when it names none). It also reads
// the geometry.json a DRR run writes, whose projection matrices it
// ignores.
func ReadGeometryFrame(r io.Reader) ([]Pose, string, error) {
	b, err := io.ReadAll(io.LimitReader(r, 256<<20))
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrGeometry, err)
	}
	if err := checkGeometryKeys(b); err != nil {
		return nil, "", err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var doc struct {
		Frame      string `json:"frame"`
		Projection string `json:"projection"`
		Poses      []struct {
			Source, Center, U, V, Pixel []float64
			Rows, Cols                  *int
			Matrix                      json.RawMessage `json:"matrix"`
		} `json:"poses"`
	}
	if err := dec.Decode(&doc); err != nil {
		return nil, "", decodeError(err)
	}
	if doc.Frame != "" && doc.Frame != "lps" && doc.Frame != "ras" {
		return nil, "", fmt.Errorf("%w: \"frame\" is %q, want \"lps\" or \"ras\"", ErrGeometry, doc.Frame)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, "", fmt.Errorf("%w: more data after the JSON document (at byte %d)", ErrGeometry, dec.InputOffset())
	}
	if len(doc.Poses) == 0 {
		return nil, "", fmt.Errorf("%w: no poses", ErrGeometry)
	}
	if len(doc.Poses) > MaxPoses {
		return nil, "", fmt.Errorf("%w: %d poses; at most %d (2²⁰) in one run", ErrGeometry, len(doc.Poses), MaxPoses)
	}
	poses := make([]Pose, len(doc.Poses))
	for i, q := range doc.Poses {
		p := &poses[i]
		for _, f := range []struct {
			name string
			src  []float64
			dst  []float64
		}{{"source", q.Source, p.Source[:]}, {"center", q.Center, p.Center[:]}, {"u", q.U, p.U[:]}, {"v", q.V, p.V[:]}, {"pixel", q.Pixel, p.Pixel[:]}} {
			if len(f.src) != len(f.dst) {
				return nil, "", fmt.Errorf("%w: pose %d: %q must be %d numbers, got %d", ErrGeometry, i, f.name, len(f.dst), len(f.src))
			}
			copy(f.dst, f.src)
		}
		if q.Rows == nil || q.Cols == nil {
			return nil, "", fmt.Errorf("%w: pose %d lacks rows or cols", ErrGeometry, i)
		}
		p.Rows, p.Cols = *q.Rows, *q.Cols
		if err := p.Validate(i); err != nil {
			return nil, "", err
		}
		if p.Rows != poses[0].Rows || p.Cols != poses[0].Cols {
			return nil, "", fmt.Errorf("%w: pose %d has a %d×%d detector, pose 0 %d×%d; one run renders one detector size",
				ErrGeometry, i, p.Rows, p.Cols, poses[0].Rows, poses[0].Cols)
		}
	}
	return poses, doc.Frame, nil
}
