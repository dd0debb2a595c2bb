package ops

import (
	"errors"
	"fmt"
	"math"
)

// The wavelet kernel: a Mexican hat of scale a, stretched by ξ along one
// axis and rotated by θ and φ.

// ErrWavelet is wrapped by errors about wavelet parameters.
var ErrWavelet = errors.New("wavelet")

// CheckHat validates a kernel's parameters: a and ξ positive and finite,
// θ and φ finite. It is the one statement of that rule: the sweep's spec
// checks every combination with it, and the ops tell kernel rows from
// padding rows with it.
func CheckHat(a, theta, phi, xi float64) error {
	switch {
	case !(a > 0) || math.IsInf(a, 0):
		return fmt.Errorf("%w: scale a = %g must be positive", ErrWavelet, a)
	case !(xi > 0) || math.IsInf(xi, 0):
		return fmt.Errorf("%w: stretch ξ = %g must be positive", ErrWavelet, xi)
	case math.IsNaN(theta) || math.IsInf(theta, 0) || math.IsNaN(phi) || math.IsInf(phi, 0):
		return fmt.Errorf("%w: angles θ = %g, φ = %g must be finite", ErrWavelet, theta, phi)
	}
	return nil
}

// HatSupport returns the half-widths of the stretched, rotated Mexican hat
// of scale a, angles theta, phi and stretch xi: along axis i,
// ⌈√(36·(M⁻¹)ᵢᵢ)⌉ where q = uᵀMu, the bounding box of the ellipsoid q ≤ 36.
func HatSupport(a, theta, phi, xi float64) [3]int {
	r := hatRotation(theta, phi)
	d := [3]float64{(a * xi) * (a * xi), a * a, a * a} // M⁻¹ = Rᵀ·diag(d)·R
	var h [3]int
	for i := range 3 {
		var m float64
		for k := range 3 {
			if r[k][i] != 0 { // d[k] may overflow to +Inf: no 0·Inf
				m += r[k][i] * r[k][i] * d[k]
			}
		}
		h[i] = int(min(math.Ceil(math.Sqrt(36*m)-1e-9), maxHatSupport)) // +Inf: the cap
	}
	return h
}

// HatClosedForm reports whether the hat of scale a, angles theta, phi and
// stretch xi is computed in closed form (cpukern.HatMul) on a transform of
// dims p, rather than sampled and transformed: when its support box fits
// the transform (else the kernel would overlap itself), and it is not too
// narrow. The closed form sums, for each coefficient, the aliases of the
// hat's transform within s ≤ HatThreshold: about 4.3/(a³ξ) of them, the
// volume of that ellipsoid. Past hatMaxAliases (a³ξ under about 1/15,
// a < 0.41 at ξ = 1), a narrow hat's few taps, sampled and transformed,
// cost less, and a hat narrower than a voxel (a or ξ tiny) is exactly what
// they give: its samples at the voxels.
func HatClosedForm(a, theta, phi, xi float64, p [3]int) bool {
	h := HatSupport(a, theta, phi, xi)
	return 2*h[0] < p[0] && 2*h[1] < p[1] && 2*h[2] < p[2] && !HatNarrow(a, xi)
}

// HatNarrow reports whether the hat of scale a and stretch xi is too
// narrow for the closed form (HatClosedForm).
func HatNarrow(a, xi float64) bool { return !(a*a*a*xi*hatMaxAliases >= hatAliases) }

const (
	hatAliases    = 4.27 // (4/3)π·HatThreshold^{3/2}/(2π)³: the aliases per coefficient, times a³ξ
	hatMaxAliases = 64
)

// maxHatSupport bounds a half-width, far past any volume that fits in
// memory, so that sizes derived from it cannot overflow.
const maxHatSupport = 1 << 40

// hatRotation's rows map a voxel offset (x, y, z) to (rT, rp, rp2).
func hatRotation(theta, phi float64) [3][3]float64 {
	ct, st, cp, sp := math.Cos(theta), math.Sin(theta), math.Cos(phi), math.Sin(phi)
	return [3][3]float64{
		{cp * ct, -st, sp * ct},
		{cp * st, ct, sp * st},
		{-sp, 0, cp},
	}
}

// Hat evaluates the kernel at integer offsets (x, y, z) in [−h, h] along
// each axis and calls fn for each: ψ = (3 − q)·exp(−q/2) with
// q = (rp/a)² + (rT/(a·ξ))² + (rp2/a)².
func Hat(a, theta, phi, xi float64, fn func(x, y, z int, psi float64)) [3]int {
	h := HatSupport(a, theta, phi, xi)
	r := hatRotation(theta, phi)
	for x := -h[0]; x <= h[0]; x++ {
		for y := -h[1]; y <= h[1]; y++ {
			for z := -h[2]; z <= h[2]; z++ {
				fx, fy, fz := float64(x), float64(y), float64(z)
				rT := r[0][0]*fx + r[0][1]*fy + r[0][2]*fz
				rp := r[1][0]*fx + r[1][1]*fy + r[1][2]*fz
				rp2 := r[2][0]*fx + r[2][1]*fy + r[2][2]*fz
				t := rT / (a * xi)
				if rT == 0 { // 0, also where a·ξ is below the smallest double
					t = 0
				}
				q := (rp/a)*(rp/a) + t*t + (rp2/a)*(rp2/a)
				psi := 0.0 // past q = 2000 below the smallest double (q may be +Inf)
				if q < 2000 {
					psi = (3 - q) * math.Exp(-q/2)
				}
				fn(x, y, z, psi)
			}
		}
	}
	return h
}

// hatB is B = M⁻¹, the inverse of the quadratic form q = uᵀMu of the hat
// of scale a, angles theta, phi and stretch xi: Rᵀ·diag((aξ)², a², a²)·R.
func hatB(a, theta, phi, xi float64) [3][3]float64 {
	r := hatRotation(theta, phi)
	d := [3]float64{(a * xi) * (a * xi), a * a, a * a}
	var b [3][3]float64
	for i := range 3 {
		for j := range 3 {
			for k := range 3 {
				b[i][j] += r[k][i] * d[k] * r[k][j]
			}
		}
	}
	return b
}
