package rigid

import (
	"errors"
	"fmt"
	"math"
)

// Mat3 is a 3×3 matrix, rows first.
type Mat3 = [3][3]float64

// Transform is T(x) = R(Rotation)·(x − Center) + Center + Translation.
type Transform struct {
	Center      [3]float64
	Rotation    [3]float64 // rotation vector: axis × angle, radians
	Translation [3]float64 // mm
}

// Params are the six parameters the optimiser moves: the rotation vector,
// then the translation.
func (t Transform) Params() [6]float64 {
	return [6]float64{t.Rotation[0], t.Rotation[1], t.Rotation[2], t.Translation[0], t.Translation[1], t.Translation[2]}
}

// WithParams returns t with its six parameters set to p.
func (t Transform) WithParams(p []float64) Transform {
	copy(t.Rotation[:], p[0:3])
	copy(t.Translation[:], p[3:6])
	return t
}

// Rotation returns R(ω) by Rodrigues' formula,
// R = I + (sin θ/θ)[ω]× + ((1 − cos θ)/θ²)[ω]×², θ = |ω|, with the series
// for small angles.
func Rotation(w [3]float64) Mat3 {
	th2 := w[0]*w[0] + w[1]*w[1] + w[2]*w[2]
	var a, b float64
	if th2 < 1e-8 {
		a, b = 1-th2/6, 0.5-th2/24
	} else {
		th := math.Sqrt(th2)
		a, b = math.Sin(th)/th, (1-math.Cos(th))/th2
	}
	k := Skew(w)
	k2 := Mul(k, k)
	var r Mat3
	for i := range 3 {
		for j := range 3 {
			r[i][j] = a*k[i][j] + b*k2[i][j]
		}
		r[i][i]++
	}
	return r
}

// RotationDerivs returns ∂R/∂ω_i for i = 0, 1, 2 (Gallego and Yezzi, "A
// compact formula for the derivative of a 3-D rotation in exponential
// coordinates", 2015): ∂R/∂ω_i = (ω_i[ω]× + [ω × ((I − R)e_i)]×)·R/|ω|²,
// and [e_i]× at ω = 0.
func RotationDerivs(w [3]float64) [3]Mat3 {
	th2 := w[0]*w[0] + w[1]*w[1] + w[2]*w[2]
	var d [3]Mat3
	if th2 < 1e-24 {
		for i := range 3 {
			var e [3]float64
			e[i] = 1
			d[i] = Skew(e)
		}
		return d
	}
	r := Rotation(w)
	k := Skew(w)
	for i := range 3 {
		// (I − R)e_i is column i of I − R.
		var c [3]float64
		for a := range 3 {
			c[a] = -r[a][i]
		}
		c[i]++
		m := Skew(Cross(w, c))
		for a := range 3 {
			for b := range 3 {
				m[a][b] += w[i] * k[a][b]
			}
		}
		m = Mul(m, r)
		for a := range 3 {
			for b := range 3 {
				m[a][b] /= th2
			}
		}
		d[i] = m
	}
	return d
}

// Apply returns T(x).
func (t Transform) Apply(x [3]float64) [3]float64 {
	r := Rotation(t.Rotation)
	var y [3]float64
	for a := range 3 {
		y[a] = t.Center[a] + t.Translation[a]
		for b := range 3 {
			y[a] += r[a][b] * (x[b] - t.Center[b])
		}
	}
	return y
}

// Matrix returns T as a 4×4 homogeneous matrix, rows first.
func (t Transform) Matrix() [4][4]float64 {
	r := Rotation(t.Rotation)
	var m [4][4]float64
	for a := range 3 {
		m[a][3] = t.Center[a] + t.Translation[a]
		for b := range 3 {
			m[a][b] = r[a][b]
			m[a][3] -= r[a][b] * t.Center[b]
		}
	}
	m[3][3] = 1
	return m
}

// FromMatrix returns the transform about center whose matrix is m: m's
// upper 3×3 must be a rotation (orthonormal to 1e-6, determinant +1) and
// its last row (0, 0, 0, 1).
func FromMatrix(m [4][4]float64, center [3]float64) (Transform, error) {
	var r Mat3
	for a := range 3 {
		for b := range 3 {
			r[a][b] = m[a][b]
		}
	}
	if m[3][0] != 0 || m[3][1] != 0 || m[3][2] != 0 || m[3][3] != 1 {
		return Transform{}, errors.New("the matrix's last row is not (0, 0, 0, 1)")
	}
	for a := range 4 {
		for b := range 4 {
			if math.IsNaN(m[a][b]) || math.IsInf(m[a][b], 0) {
				return Transform{}, errors.New("the matrix holds a value that is not finite")
			}
		}
	}
	rtr := Mul(Transpose(r), r)
	for a := range 3 {
		for b := range 3 {
			want := 0.0
			if a == b {
				want = 1
			}
			if math.Abs(rtr[a][b]-want) > 1e-6 {
				return Transform{}, fmt.Errorf("the matrix's 3×3 part is not a rotation (RᵀR differs from I by %.3g)", math.Abs(rtr[a][b]-want))
			}
		}
	}
	if Det(r) < 0 {
		return Transform{}, errors.New("the matrix's 3×3 part is a reflection (determinant −1), not a rotation")
	}
	t := Transform{Center: center, Rotation: Log(r)}
	// m·x = R x + m[:,3] = R(x − c) + c + t  ⇒  t = m[:,3] + R c − c.
	for a := range 3 {
		t.Translation[a] = m[a][3] - center[a]
		for b := range 3 {
			t.Translation[a] += r[a][b] * center[b]
		}
	}
	return t, nil
}

// Log returns the rotation vector of the rotation r (angle in [0, π]).
func Log(r Mat3) [3]float64 {
	v := [3]float64{r[2][1] - r[1][2], r[0][2] - r[2][0], r[1][0] - r[0][1]} // 2 sin θ · axis
	s := math.Sqrt(v[0]*v[0]+v[1]*v[1]+v[2]*v[2]) / 2
	c := (r[0][0] + r[1][1] + r[2][2] - 1) / 2
	th := math.Atan2(s, c)
	if th < 1e-6 {
		return [3]float64{v[0] / 2, v[1] / 2, v[2] / 2}
	}
	if th < 3 {
		f := th / (2 * s)
		return [3]float64{v[0] * f, v[1] * f, v[2] * f}
	}
	// Near π sin θ is small: the axis from (R + Rᵀ)/2 = cos θ I + (1 − cos θ) n nᵀ,
	// its sign from the antisymmetric part.
	i := 0
	for a := 1; a < 3; a++ {
		if r[a][a] > r[i][i] {
			i = a
		}
	}
	var n [3]float64
	n[i] = math.Sqrt(math.Max(0, (r[i][i]-c)/(1-c)))
	for a := range 3 {
		if a != i {
			n[a] = (r[a][i] + r[i][a]) / (2 * (1 - c) * n[i])
		}
	}
	if n[0]*v[0]+n[1]*v[1]+n[2]*v[2] < 0 {
		n = [3]float64{-n[0], -n[1], -n[2]}
	}
	return [3]float64{n[0] * th, n[1] * th, n[2] * th}
}

// Skew returns [w]×, the matrix of x ↦ w × x.
func Skew(w [3]float64) Mat3 {
	return Mat3{{0, -w[2], w[1]}, {w[2], 0, -w[0]}, {-w[1], w[0], 0}}
}

// Cross returns a × b.
func Cross(a, b [3]float64) [3]float64 {
	return [3]float64{a[1]*b[2] - a[2]*b[1], a[2]*b[0] - a[0]*b[2], a[0]*b[1] - a[1]*b[0]}
}

// Mul returns a·b.
func Mul(a, b Mat3) Mat3 {
	var m Mat3
	for i := range 3 {
		for j := range 3 {
			for k := range 3 {
				m[i][j] += a[i][k] * b[k][j]
			}
		}
	}
	return m
}

// Transpose returns aᵀ.
func Transpose(a Mat3) Mat3 {
	var m Mat3
	for i := range 3 {
		for j := range 3 {
			m[i][j] = a[j][i]
		}
	}
	return m
}

// Det returns the determinant of a.
func Det(a Mat3) float64 {
	return a[0][0]*(a[1][1]*a[2][2]-a[1][2]*a[2][1]) - a[0][1]*(a[1][0]*a[2][2]-a[1][2]*a[2][0]) + a[0][2]*(a[1][0]*a[2][1]-a[1][1]*a[2][0])
}
