package rigid

// Inverse is T⁻¹ prepared for many points, with what its derivatives with
// respect to T's parameters need: T⁻¹(y) = Rᵀ(y − c − t) + c, so
// ∂T⁻¹(y)/∂t = −Rᵀ and ∂T⁻¹(y)/∂ω_i = (∂R/∂ω_i)ᵀ(y − c − t).
type Inverse struct {
	R  Mat3    // R(ω)
	DR [3]Mat3 // ∂R/∂ω_i
	ct [3]float64
	c  [3]float64
}

// NewInverse prepares T⁻¹.
func NewInverse(t Transform) *Inverse {
	inv := &Inverse{R: Rotation(t.Rotation), DR: RotationDerivs(t.Rotation), c: t.Center}
	for a := range 3 {
		inv.ct[a] = t.Center[a] + t.Translation[a]
	}
	return inv
}

// Apply returns T⁻¹(y).
func (inv *Inverse) Apply(y [3]float64) [3]float64 {
	var x [3]float64
	for a := range 3 {
		x[a] = inv.c[a]
		for b := range 3 {
			x[a] += inv.R[b][a] * (y[b] - inv.ct[b])
		}
	}
	return x
}

// Pullback returns the gradient with respect to T's six parameters
// (ω, t) of a function of x = T⁻¹(y), given its gradient g at x:
// ∂/∂ω_i = (y − c − t)·(∂R/∂ω_i)·g and ∂/∂t = −R·g.
func (inv *Inverse) Pullback(y, g [3]float64) [6]float64 {
	var p [6]float64
	var yc [3]float64
	for a := range 3 {
		yc[a] = y[a] - inv.ct[a]
	}
	for i := range 3 {
		d := &inv.DR[i]
		s := 0.0
		for a := range 3 {
			s += yc[a] * (d[a][0]*g[0] + d[a][1]*g[1] + d[a][2]*g[2])
		}
		p[i] = s
	}
	for a := range 3 {
		p[3+a] = -(inv.R[a][0]*g[0] + inv.R[a][1]*g[1] + inv.R[a][2]*g[2])
	}
	return p
}
