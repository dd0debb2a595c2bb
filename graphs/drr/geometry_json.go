package drr

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/tapeloop/tapeloop/ops"
)

// GeometryPose is one pose of geometry.json (see Geometry).
type GeometryPose struct {
	ops.Pose
	// Matrix is the pose's projection P, 3×4, row by row: for a world
	// point X in mm, (u, v, w) = P·(X, 1) and the point lands at column
	// u/w, row v/w of the image (pixel centres at whole numbers, (0, 0)
	// the first pixel, row r of drr.npy[pose, r, :]); w > 0 in front of
	// the source.
	Matrix [3][4]float64 `json:"matrix"`
}

// projectionNote is geometry.json's "projection": what each pose's
// matrix does.
const projectionNote = "matrix: (u, v, w) = matrix · (x, y, z, 1) for a world point in mm; it lands at column u/w, row v/w of the pose's image, pixel centres at whole numbers, (0, 0) the first pixel (drr.npy[pose, row, column]); w > 0 in front of the source"

// Projection is pose p's 3×4 projection matrix (GeometryPose.Matrix):
// with A the 3×3 matrix of columns du, dv (the steps to the next pixel
// along a row and down a column) and c₀ − s (from the source to the
// centre of pixel (0, 0)), a point X on the ray through pixel (c, r) is
// s + λ·A·(c, r, 1), so (c, r, 1) ∝ A⁻¹·(X − s) and P = [A⁻¹ | −A⁻¹·s].
func Projection(p ops.Pose) [3][4]float64 {
	var e [ops.PoseWidth]float64
	p.Encode(e[:])
	s := [3]float64{e[0], e[1], e[2]}
	var a [3][3]float64
	for r := range 3 {
		a[r] = [3]float64{e[6+r], e[9+r], e[3+r] - s[r]}
	}
	inv := inverse3(a)
	var m [3][4]float64
	for r := range 3 {
		for c := range 3 {
			m[r][c] = inv[r][c]
			m[r][3] -= inv[r][c] * s[c]
		}
	}
	return m
}

// inverse3 is a⁻¹ by the adjugate (a is invertible: the source is off
// the detector's plane, which Pose.Validate checks).
func inverse3(a [3][3]float64) [3][3]float64 {
	var adj [3][3]float64
	for i := range 3 {
		for j := range 3 {
			i1, i2 := (i+1)%3, (i+2)%3
			j1, j2 := (j+1)%3, (j+2)%3
			adj[j][i] = a[i1][j1]*a[i2][j2] - a[i1][j2]*a[i2][j1]
		}
	}
	det := a[0][0]*adj[0][0] + a[0][1]*adj[1][0] + a[0][2]*adj[2][0]
	for i := range 3 {
		for j := range 3 {
			adj[i][j] /= det
		}
	}
	return adj
}

// Geometry is the geometry.json of poses in frame ("lps" or "ras"), what
// a run writes beside its images so that other tools (ITK, plastimatch, a
// registration in NumPy) can place them, a pose to a line: an object with
// "frame" (the world frame the coordinates are in: "lps" or "ras"),
// "projection" (what each pose's matrix does) and "poses", each a
// GeometryPose (the pose as the geometry file gives it, with its 3×4
// projection matrix).
func Geometry(poses []ops.Pose, frame string) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	field := func(name string, v any) error {
		fmt.Fprintf(&buf, " %q: ", name)
		if err := enc.Encode(v); err != nil { // a value and a newline
			return err
		}
		buf.Truncate(buf.Len() - 1)
		return nil
	}
	buf.WriteString("{\n")
	if err := field("frame", frame); err != nil {
		return nil, err
	}
	buf.WriteString(",\n")
	if err := field("projection", projectionNote); err != nil {
		return nil, err
	}
	buf.WriteString(",\n \"poses\": [\n")
	for i, p := range poses {
		buf.WriteString("  ")
		if err := enc.Encode(GeometryPose{Pose: p, Matrix: Projection(p)}); err != nil {
			return nil, err
		}
		if i < len(poses)-1 {
			buf.Truncate(buf.Len() - 1)
			buf.WriteString(",\n")
		}
	}
	buf.WriteString(" ]\n}\n")
	return buf.Bytes(), nil
}
