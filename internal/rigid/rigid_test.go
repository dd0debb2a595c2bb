package rigid

import (
	"math"
	"math/rand/v2"
	"testing"
)

func randVec(rng *rand.Rand, s float64) [3]float64 {
	return [3]float64{s * rng.NormFloat64(), s * rng.NormFloat64(), s * rng.NormFloat64()}
}

// The rotation matrix against the rotation of a vector about an axis by
// Rodrigues' vector form, written out.
func TestRotationRotatesAboutItsAxis(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		w := randVec(rng, 1)
		th := math.Sqrt(w[0]*w[0] + w[1]*w[1] + w[2]*w[2])
		k := [3]float64{w[0] / th, w[1] / th, w[2] / th}
		v := randVec(rng, 3)
		kv := Cross(k, v)
		kdv := k[0]*v[0] + k[1]*v[1] + k[2]*v[2]
		r := Rotation(w)
		for a := range 3 {
			want := v[a]*math.Cos(th) + kv[a]*math.Sin(th) + k[a]*kdv*(1-math.Cos(th))
			got := r[a][0]*v[0] + r[a][1]*v[1] + r[a][2]*v[2]
			if math.Abs(got-want) > 1e-12 {
				t.Fatalf("R(%v)·%v = %v in row %d, want %v", w, v, got, a, want)
			}
		}
	}
}

func TestRotationDerivsAgainstFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for n := range 60 {
		s := 0.5
		if n%3 == 0 {
			s = 1e-9 // at and about the identity
		}
		w := randVec(rng, s)
		d := RotationDerivs(w)
		for i := range 3 {
			h := 1e-6
			wp, wm := w, w
			wp[i] += h
			wm[i] -= h
			rp, rm := Rotation(wp), Rotation(wm)
			for a := range 3 {
				for b := range 3 {
					fd := (rp[a][b] - rm[a][b]) / (2 * h)
					if math.Abs(fd-d[i][a][b]) > 1e-8 {
						t.Fatalf("ω=%v: ∂R[%d][%d]/∂ω_%d = %v, finite differences %v", w, a, b, i, d[i][a][b], fd)
					}
				}
			}
		}
	}
}

func TestInverseAndPullback(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 40 {
		tr := Transform{Center: randVec(rng, 50), Rotation: randVec(rng, 0.3), Translation: randVec(rng, 10)}
		y := randVec(rng, 80)
		inv := NewInverse(tr)
		if x := inv.Apply(tr.Apply(y)); math.Abs(x[0]-y[0])+math.Abs(x[1]-y[1])+math.Abs(x[2]-y[2]) > 1e-10 {
			t.Fatalf("T⁻¹(T(y)) = %v, want %v", x, y)
		}
		// A linear function f(x) = g·x: its gradient pulled back against
		// finite differences of the parameters.
		g := randVec(rng, 1)
		p := inv.Pullback(y, g)
		base := tr.Params()
		for j := range 6 {
			h := 1e-6
			pp, pm := base, base
			pp[j] += h
			pm[j] -= h
			xp, xm := NewInverse(tr.WithParams(pp[:])).Apply(y), NewInverse(tr.WithParams(pm[:])).Apply(y)
			fd := (g[0]*(xp[0]-xm[0]) + g[1]*(xp[1]-xm[1]) + g[2]*(xp[2]-xm[2])) / (2 * h)
			if math.Abs(fd-p[j]) > 1e-6*(1+math.Abs(fd)) {
				t.Fatalf("parameter %d: pullback %v, finite differences %v", j, p[j], fd)
			}
		}
	}
}

func TestMatrixRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for n := range 40 {
		tr := Transform{Center: randVec(rng, 50), Rotation: randVec(rng, 0.8), Translation: randVec(rng, 10)}
		if n == 0 {
			tr.Rotation = [3]float64{0, math.Pi - 1e-9, 0}
		}
		m := tr.Matrix()
		x := randVec(rng, 60)
		y := tr.Apply(x)
		for a := range 3 {
			got := m[a][0]*x[0] + m[a][1]*x[1] + m[a][2]*x[2] + m[a][3]
			if math.Abs(got-y[a]) > 1e-9 {
				t.Fatalf("matrix·x = %v, T(x) = %v", got, y[a])
			}
		}
		back, err := FromMatrix(m, tr.Center)
		if err != nil {
			t.Fatal(err)
		}
		z := back.Apply(x)
		for a := range 3 {
			if math.Abs(z[a]-y[a]) > 1e-7 {
				t.Fatalf("FromMatrix(Matrix(T)) moves %v to %v, T to %v", x, z, y)
			}
		}
	}
	bad := Transform{}.Matrix()
	bad[0][0] = 2
	if _, err := FromMatrix(bad, [3]float64{}); err == nil {
		t.Fatal("a scaling was taken for a rotation")
	}
	flip := Transform{}.Matrix()
	flip[2][2] = -1
	if _, err := FromMatrix(flip, [3]float64{}); err == nil {
		t.Fatal("a reflection was taken for a rotation")
	}
}
