package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tapeloop/tapeloop/internal/formula"
)

// refWrap is the periodic convolution written out in float64:
// out[x] = Σ_s ψ(s)·V[(x − s) mod n], over the taps the sampler gives.
func refWrap(v []float32, n [3]int, sample func(fn func(x, y, z int, psi float64))) []float64 {
	type tap struct {
		x, y, z int
		w       float64
	}
	var taps []tap
	sample(func(x, y, z int, psi float64) {
		if psi != 0 {
			taps = append(taps, tap{x, y, z, psi})
		}
	})
	out := make([]float64, len(v))
	for i := range n[0] {
		for j := range n[1] {
			for k := range n[2] {
				var s float64
				for _, t := range taps {
					s += t.w * float64(v[(mod(i-t.x, n[0])*n[1]+mod(j-t.y, n[1]))*n[2]+mod(k-t.z, n[2])])
				}
				out[(i*n[1]+j)*n[2]+k] = s
			}
		}
	}
	return out
}

// moments are Σ G, Σ G² and the standard deviation √(E[G²] − E[G]²)
// (WaveletMoments' formula) of g.
func moments(sum, sum2 float64, cnt int) [3]float64 {
	m, m2 := sum/float64(cnt), sum2/float64(cnt)
	return [3]float64{sum, sum2, math.Sqrt(max(0, m2-m*m))}
}

// TestWaveletSpectrumSums: in wrap mode Σ G and Σ G² come from the
// product of the spectra (Parseval's theorem). On random volumes of odd
// sizes, for the hat in closed form, a hat wider than the volume (sampled
// and wrapped) and a Gaussian formula with a large mean (sampled, so that
// Σ G is far from zero), they agree within 10⁻⁶ relative (Σ G: relative to
// the response's scale √(N·Σ G²) where the kernel's mean is zero) with
//   - the direct periodic convolution in float64 (the hat sampled far
//     past its own box, q ≤ 64, standing for the hat on the whole grid
//     that the closed form transforms), and
//   - the sums of the response the inverse transform writes (Response);
//
// the energy and std alone (no inverse transform, no maximum) give the
// same numbers, bit for bit, as every statistic at once, and the maximum
// alone leaves the sums NaN.
func TestWaveletSpectrumSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 82))
	hat, err := formula.Parse("(3 - q)*exp(-q/2)", formula.Env{Flag: "--kernel", Vars: KernelVars})
	if err != nil {
		t.Fatal(err)
	}
	gauss, err := formula.Parse("exp(-q/2)", formula.Env{Flag: "--kernel", Vars: KernelVars})
	if err != nil {
		t.Fatal(err)
	}
	odd := []int{9, 11, 13, 15}
	sizes := [][3]int{{odd[rng.IntN(4)], odd[rng.IntN(4)], odd[rng.IntN(4)]}, {odd[rng.IntN(4)], 7, odd[rng.IntN(4)]}}
	worst := 0.0
	for _, n := range sizes {
		v := make([]float32, n[0]*n[1]*n[2])
		for i := range v {
			v[i] = float32(rng.NormFloat64() + 0.4)
		}
		w, err := newWaveletVolume(v, n, 1, Wrap, [3]int{})
		if err != nil {
			t.Fatal(err)
		}
		s := w.newScratch()
		for _, c := range []struct {
			name      string
			th, ph, x float64
			f         *formula.Formula // nil: the built-in hat
			meanZero  bool
		}{
			{"hat", rng.Float64() * math.Pi, rng.Float64() * math.Pi, 1 + rng.Float64(), nil, true},
			{"hat wider than the volume", rng.Float64() * math.Pi, rng.Float64() * math.Pi, 2.5, nil, true},
			{"gaussian", rng.Float64() * math.Pi, rng.Float64() * math.Pi, 1.5, gauss, false},
		} {
			t.Run(fmt.Sprintf("%v/%s", n, c.name), func(t *testing.T) {
				var f *WaveletFormulas
				var ref func(fn func(x, y, z int, psi float64))
				if c.f == nil {
					// The hat far past its own box: q ≤ 64 (where it is
					// below 10⁻¹² of its peak) lies within 8·ξ voxels of
					// its centre.
					kf, err := NewKernelFormula(hat, int(math.Ceil(8*c.x))+1, [3]int{1 << 10, 1 << 10, 1 << 10})
					if err != nil {
						t.Fatal(err)
					}
					ref = func(fn func(x, y, z int, psi float64)) { kf.Sample(1, c.th, c.ph, c.x, fn) }
				} else {
					kf, err := NewKernelFormula(c.f, 0, n)
					if err != nil {
						t.Fatal(err)
					}
					f = &WaveletFormulas{Kernel: kf}
					ref = func(fn func(x, y, z int, psi float64)) { kf.Sample(1, c.th, c.ph, c.x, fn) }
				}
				g := refWrap(v, n, ref)
				var rs, rs2 float64
				for _, x := range g {
					rs, rs2 = rs+x, rs2+x*x
				}
				want := moments(rs, rs2, len(g))

				full := make([]float64, WaveletSums)
				w.sums(full, c.th, c.ph, c.x, s, f, WaveletSkip{})
				alone := make([]float64, WaveletSums)
				w.sums(alone, c.th, c.ph, c.x, s, f, WaveletSkip{Max: true})
				if alone[0] != full[0] || alone[1] != full[1] || alone[3] != full[3] || !math.IsNaN(alone[2]) {
					t.Errorf("energy and std alone %v, with every statistic %v: want the same sums and Σ ψ², max NaN", alone, full)
				}
				mx := make([]float64, WaveletSums)
				w.sums(mx, c.th, c.ph, c.x, s, f, WaveletSkip{Sums: true})
				if !math.IsNaN(mx[0]) || !math.IsNaN(mx[1]) || mx[2] != full[2] || mx[3] != full[3] {
					t.Errorf("max alone %v, with every statistic %v: want NaN sums, the same max and Σ ψ²", mx, full)
				}

				// The response the inverse transform writes, summed.
				resp := make([]float32, len(v))
				sc := w.newScratch()
				sc.capture = resp
				w.sums(make([]float64, WaveletSums), c.th, c.ph, c.x, sc, f, WaveletSkip{Sums: true, Max: true})
				var ss, ss2 float64
				for _, x := range resp {
					ss, ss2 = ss+float64(x), ss2+float64(x)*float64(x)
				}
				spatial := moments(ss, ss2, len(resp))

				got := moments(alone[0], alone[1], len(v))
				scale := [3]float64{math.Abs(want[0]), want[1], want[2]}
				if c.meanZero {
					scale[0] = math.Sqrt(float64(len(v)) * want[1])
				}
				for k, name := range []string{"Σ G", "Σ G²", "std"} {
					for _, o := range []struct {
						what string
						v    float64
					}{{"the direct convolution", want[k]}, {"the response's sums", spatial[k]}} {
						d := math.Abs(got[k]-o.v) / scale[k]
						worst = max(worst, d)
						if !(d <= 1e-6) {
							t.Errorf("%s from the spectrum %.10g, %s %.10g: %.2g relative", name, got[k], o.what, o.v, d)
						}
					}
				}
			})
		}
	}
	t.Logf("largest relative difference %.2g", worst)
}

// TestWaveletPasses: which passes a WaveletResponse runs for what its
// sweep leaves out, in both boundary modes.
func TestWaveletPasses(t *testing.T) {
	f := &WaveletFormulas{Stats: []*WaveletStat{{Name: "l1"}, {Name: "energy"}}}
	for _, c := range []struct {
		b    Boundary
		f    *WaveletFormulas
		skip WaveletSkip
		want WaveletPasses
	}{
		{Wrap, nil, WaveletSkip{}, WaveletPasses{Sums: SumsFromSpectrum, InverseTransform: true, Max: true}},
		{Wrap, nil, WaveletSkip{Max: true}, WaveletPasses{Sums: SumsFromSpectrum}},
		{Wrap, nil, WaveletSkip{Sums: true, Max: true}, WaveletPasses{Sums: SumsNone}},
		{Wrap, f, WaveletSkip{Max: true, Stats: []bool{false, true}}, WaveletPasses{Sums: SumsFromSpectrum, InverseTransform: true, Formulas: []string{"l1"}}},
		{Reflect, nil, WaveletSkip{}, WaveletPasses{Sums: SumsFromResponse, InverseTransform: true, Max: true}},
		{Reflect, nil, WaveletSkip{Max: true}, WaveletPasses{Sums: SumsFromResponse, InverseTransform: true}},
		{Reflect, nil, WaveletSkip{Sums: true, Max: true}, WaveletPasses{Sums: SumsNone}},
		{Reflect, f, WaveletSkip{Sums: true, Max: true, Stats: []bool{true, false}}, WaveletPasses{Sums: SumsNone, InverseTransform: true, Formulas: []string{"energy"}}},
	} {
		got := wavePasses(c.b, c.f, c.skip)
		if c.want.Formulas == nil {
			c.want.Formulas = []string{}
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%v, skip %q: %v, want %v", c.b, c.skip, got, c.want)
		}
	}
}
