package volume

import (
	"fmt"
	"math"
)

// Frame names the world frame a volume's Origin and Direction are stated in.
type Frame string

const (
	// LPS is patient LPS mm (x to the patient's left, y to posterior, z to
	// superior): DICOM's, ITK's and plastimatch's frame, and the default.
	LPS Frame = "lps"
	// RAS is nibabel's patient RAS mm (x to the right, y to anterior, z to
	// superior): LPS with x and y negated.
	RAS Frame = "ras"
)

// ParseFrame reads "lps" or "ras" ("" is LPS).
func ParseFrame(s string) (Frame, error) {
	switch Frame(s) {
	case "", LPS:
		return LPS, nil
	case RAS:
		return RAS, nil
	}
	return "", fmt.Errorf("--frame %q: want lps or ras", s)
}

// identity is the 3×3 identity matrix.
var identity = [3][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}

// Dir is v's direction matrix, the identity for the zero value.
func (v *Volume) Dir() [3][3]float64 {
	if v.Direction == ([3][3]float64{}) {
		return identity
	}
	return v.Direction
}

// Aligned reports whether v's index axes run along the world axes
// (Direction is the identity or the zero value).
func (v *Volume) Aligned() bool { return v.Dir() == identity }

// World is the world position of the continuous index idx: the centre of
// voxel idx for whole numbers, Origin + Direction·(idx⊙Spacing).
func (v *Volume) World(idx [3]float64) [3]float64 {
	d := v.Dir()
	p := v.Origin
	for r := range 3 {
		for a := range 3 {
			p[r] += d[r][a] * idx[a] * v.Spacing[a]
		}
	}
	return p
}

// Centre is the world position of the centre of the volume's box, the
// centre of voxel (N − 1)/2.
func (v *Volume) Centre() [3]float64 {
	return v.World([3]float64{float64(v.N[0]-1) / 2, float64(v.N[1]-1) / 2, float64(v.N[2]-1) / 2})
}

// Corner is the low corner of the volume's box in its own frame (the world
// turned by Directionᵀ about Origin, where the box is axis-aligned): the
// corner of voxel (0, 0, 0), Origin − Spacing/2. The ray casting kernels
// take the box by this corner.
func (v *Volume) Corner() [3]float64 { return CornerOf(v.Origin, v.Spacing) }

// CornerOf is Corner for a volume of origin o (the centre of voxel 0) and
// spacing s.
func CornerOf(o, s [3]float64) [3]float64 {
	return [3]float64{o[0] - s[0]/2, o[1] - s[1]/2, o[2] - s[2]/2}
}

// Local returns v in its own frame: the same voxels, origin and spacing
// with Direction the identity. A point x of the world lies at
// ToLocal(x) in it.
func (v *Volume) Local() *Volume {
	l := *v
	l.Direction = [3][3]float64{}
	return &l
}

// ToLocal maps a world point into v's own frame (see Local): Origin +
// Directionᵀ·(x − Origin).
func (v *Volume) ToLocal(x [3]float64) [3]float64 {
	d := v.Dir()
	y := v.Origin
	for a := range 3 {
		for r := range 3 {
			y[a] += d[r][a] * (x[r] - v.Origin[r])
		}
	}
	return y
}

// VecToLocal maps a world vector into v's own frame: Directionᵀ·x.
func (v *Volume) VecToLocal(x [3]float64) [3]float64 {
	d := v.Dir()
	var y [3]float64
	for a := range 3 {
		for r := range 3 {
			y[a] += d[r][a] * x[r]
		}
	}
	return y
}

// ToFrame expresses v, read in LPS, in frame f: for RAS, Origin and the
// rows of Direction have x and y negated.
func (v *Volume) ToFrame(f Frame) {
	if f != RAS {
		return
	}
	d := v.Dir()
	for r := range 2 {
		v.Origin[r] = -v.Origin[r]
		for a := range 3 {
			d[r][a] = -d[r][a]
		}
	}
	v.Direction = d
}

// orthoTol bounds how far a header's direction cosines may be from
// orthonormal (what single-precision storage and printing leave) before
// the grid counts as sheared.
const orthoTol = 1e-4

// fromAffine splits the linear part m of an index → world affine (columns:
// the steps along the index axes) into spacing (the column lengths) and
// orthonormal direction cosines. A zero column, or columns further from
// orthogonal than orthoTol (a shear), is an error naming src.
func fromAffine(m [3][3]float64, src string) (spacing [3]float64, dir [3][3]float64, err error) {
	for a := range 3 {
		spacing[a] = math.Sqrt(m[0][a]*m[0][a] + m[1][a]*m[1][a] + m[2][a]*m[2][a])
		if !(spacing[a] > 0) || math.IsInf(spacing[a], 0) {
			return spacing, dir, fmt.Errorf("%w: %s: index axis %d has a zero or infinite step", ErrVolume, src, a)
		}
		for r := range 3 {
			dir[r][a] = m[r][a] / spacing[a]
		}
	}
	dir, err = orthonormal(dir, src)
	return spacing, dir, err
}

// orthonormal checks that d's columns are unit vectors at right angles to
// within orthoTol, and returns the nearest orthonormal matrix (its polar
// factor) so that mapping into the volume's frame keeps lengths exactly.
func orthonormal(d [3][3]float64, src string) ([3][3]float64, error) {
	for a := range 3 {
		for b := a; b < 3; b++ {
			dot := d[0][a]*d[0][b] + d[1][a]*d[1][b] + d[2][a]*d[2][b]
			want := 0.0
			if a == b {
				want = 1
			}
			if !(math.Abs(dot-want) <= orthoTol) {
				if a == b {
					return d, fmt.Errorf("%w: %s: direction of index axis %d is not a unit vector (length %.6g)", ErrVolume, src, a, math.Sqrt(dot))
				}
				return d, fmt.Errorf("%w: %s: index axes %d and %d are not at right angles (%.4g°): a sheared grid is not supported", ErrVolume, src, a, b,
					math.Acos(max(-1, min(1, dot)))*180/math.Pi)
			}
		}
	}
	// Newton–Schulz steps towards the polar factor, X ← X(3I − XᵀX)/2;
	// quadratic from this close.
	for range 4 {
		var xtx [3][3]float64
		for i := range 3 {
			for j := range 3 {
				for r := range 3 {
					xtx[i][j] += d[r][i] * d[r][j]
				}
			}
		}
		var n [3][3]float64
		for r := range 3 {
			for j := range 3 {
				for i := range 3 {
					c := -xtx[i][j]
					if i == j {
						c += 3
					}
					n[r][j] += d[r][i] * c / 2
				}
			}
		}
		d = n
	}
	return d, nil
}

// checkDirection reports a Direction that is neither the zero value nor
// orthonormal.
func checkDirection(v *Volume) error {
	if v.Direction == ([3][3]float64{}) {
		return nil
	}
	for r := range 3 {
		for a := range 3 {
			if x := v.Direction[r][a]; math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("%w: direction %v is not finite", ErrVolume, v.Direction)
			}
		}
	}
	if _, err := orthonormal(v.Direction, "direction"); err != nil {
		return err
	}
	return nil
}
