package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tapeloop/tapeloop/internal/formula"
)

func TestHatSupportHoldsTheEllipsoid(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	for range 50 {
		a, th, ph, xi := 0.5+rng.Float64(), rng.Float64()*math.Pi, rng.Float64()*math.Pi, 0.5+rng.Float64()*3
		h := HatSupport(a, th, ph, xi)
		r := hatRotation(th, ph)
		lim := 2 * (h[0] + h[1] + h[2])
		for x := -lim; x <= lim; x++ {
			for y := -lim; y <= lim; y++ {
				for z := -lim; z <= lim; z++ {
					fx, fy, fz := float64(x), float64(y), float64(z)
					rT := r[0][0]*fx + r[0][1]*fy + r[0][2]*fz
					rp := r[1][0]*fx + r[1][1]*fy + r[1][2]*fz
					rp2 := r[2][0]*fx + r[2][1]*fy + r[2][2]*fz
					q := (rp/a)*(rp/a) + (rT/(a*xi))*(rT/(a*xi)) + (rp2/a)*(rp2/a)
					if q <= 36 && (abs(x) > h[0] || abs(y) > h[1] || abs(z) > h[2]) {
						t.Fatalf("a=%g θ=%g φ=%g ξ=%g: (%d, %d, %d) has q=%g outside half-widths %v", a, th, ph, xi, x, y, z, q, h)
					}
				}
			}
		}
	}
	// Axis-aligned (θ = φ = 0): rT runs along x, so h = (6aξ, 6a, 6a).
	if h := HatSupport(1, 0, 0, 2); h != [3]int{12, 6, 6} {
		t.Errorf("axis-aligned support %v, want [12 6 6]", h)
	}
}

// refConvolve is scipy.ndimage.convolve written out in float64:
// out[x] = Σ_s ψ(s)·V[ext(x − s)], ext(i − s) looked up per axis (e[i − s + h],
// computed once).
func refConvolve(v []float32, n [3]int, a, th, ph, xi float64, b Boundary) []float64 {
	type tap struct {
		x, y, z int
		w       float64
	}
	var taps []tap
	h := Hat(a, th, ph, xi, func(x, y, z int, psi float64) { taps = append(taps, tap{x, y, z, psi}) })
	var e [3][]int
	for ax := range 3 {
		for i := -h[ax]; i < n[ax]+h[ax]; i++ {
			if b == Wrap {
				e[ax] = append(e[ax], mod(i, n[ax]))
			} else {
				e[ax] = append(e[ax], reflectIndex(i, n[ax]))
			}
		}
	}
	out := make([]float64, len(v))
	for i := range n[0] {
		for j := range n[1] {
			for k := range n[2] {
				var s float64
				for _, tp := range taps {
					s += tp.w * float64(v[(e[0][i-tp.x+h[0]]*n[1]+e[1][j-tp.y+h[1]])*n[2]+e[2][k-tp.z+h[2]]])
				}
				out[(i*n[1]+j)*n[2]+k] = s
			}
		}
	}
	return out
}

// TestHatSpectrumMatchesSampledKernel compares the built-in hat, whose
// transform is computed in closed form, with the same hat written as a
// formula, which is sampled on its support box and transformed: Σ G,
// Σ G², max G and Σ ψ² within 10⁻⁵, on odd sizes, both boundaries and
// scales small enough (a = 0.8) that the aliases of the spectrum count.
func TestHatSpectrumMatchesSampledKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(73, 74))
	f, err := formula.Parse("(3 - q)*exp(-q/2)", formula.Env{Flag: "--kernel", Vars: KernelVars})
	if err != nil {
		t.Fatal(err)
	}
	kf, err := NewKernelFormula(f, 0, [3]int{1 << 10, 1 << 10, 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	sampled := &WaveletFormulas{Kernel: kf}
	n := [3]int{37, 30, 41}
	v := make([]float32, n[0]*n[1]*n[2])
	for i := range v {
		v[i] = float32(rng.NormFloat64() + 0.3)
	}
	compared, worst := 0, 0.0
	for _, a := range []float64{0.8, 1.7} {
		for _, b := range []Boundary{Wrap, Reflect} {
			w, err := newWaveletVolume(v, n, a, b, [3]int{6*3*int(math.Ceil(a)) + 1, 6*3*int(math.Ceil(a)) + 1, 6*3*int(math.Ceil(a)) + 1})
			if err != nil {
				t.Fatal(err)
			}
			s := w.newScratch()
			for range 4 {
				th, ph, xi := rng.Float64()*math.Pi, rng.Float64()*math.Pi, 0.5+rng.Float64()*2.5
				if h := HatSupport(a, th, ph, xi); 2*h[0] >= w.plan.Dims[0] || 2*h[1] >= w.plan.Dims[1] || 2*h[2] >= w.plan.Dims[2] {
					continue // wider than the transform: both sample
				}
				got, want := make([]float64, WaveletSums), make([]float64, WaveletSums)
				w.sums(got, th, ph, xi, s, nil, WaveletSkip{})
				w.sums(want, th, ph, xi, s, sampled, WaveletSkip{})
				// Σ G is a sum of terms of both signs: its error is
				// relative to the response's scale, √(N·Σ G²).
				scale := []float64{math.Sqrt(float64(len(v)) * want[1]), want[1], want[2], want[3]}
				compared++
				for k := range got {
					d := math.Abs(got[k] - want[k])
					worst = max(worst, d/math.Abs(scale[k]))
					if !(d <= 1e-5*math.Abs(scale[k])) {
						t.Errorf("a=%g %v θ=%.3f φ=%.3f ξ=%.3f: statistic %d is %.9g, sampled %.9g", a, b, th, ph, xi, k, got[k], want[k])
					}
				}
			}
		}
	}
	if compared < 10 {
		t.Errorf("only %d combinations compared", compared)
	}
	t.Logf("%d combinations, largest difference %.2g", compared, worst)
}

// newWaveletVolume prepares v (n0·n1·n2 values, C order) for kernels of
// scale a whose half-widths are at most pad (reflect mode extends the
// volume by pad on every side; wrap needs no extension).
func newWaveletVolume(v []float32, n [3]int, a float64, b Boundary, pad [3]int) (*WaveletVolume, error) {
	if err := checkVolume(v, n); err != nil {
		return nil, err
	}
	w, _ := transformVolume(v, n, a, b, pad, nil, nil, nil)
	return w, nil
}
