package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tapeloop/tapeloop/internal/formula"
)

// BenchmarkWaveletCombination times one combination's convolution and
// sums at 200³ (a = 1, and a = 2 in wrap mode; ξ ∈ {1, 2, 4}, random
// orientations; the volume's transform made once, outside the loop), with
// the built-in hat, whose spectrum is computed in closed form, and with the
// same hat written as a formula, which is sampled and transformed; every
// statistic, and the energy and std alone (in wrap mode from the spectrum,
// without the inverse transform).
func BenchmarkWaveletCombination(b *testing.B) {
	n := [3]int{200, 200, 200}
	rng := rand.New(rand.NewPCG(1, 2))
	v := make([]float32, n[0]*n[1]*n[2])
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	f, err := formula.Parse("(3 - q)*exp(-q/2)", formula.Env{Flag: "--kernel", Vars: KernelVars})
	if err != nil {
		b.Fatal(err)
	}
	kf, err := NewKernelFormula(f, 0, [3]int{1 << 10, 1 << 10, 1 << 10})
	if err != nil {
		b.Fatal(err)
	}
	type combo struct{ th, ph, xi float64 }
	var cs []combo
	var pad [3]int
	for k := range 6 {
		c := combo{rng.Float64() * math.Pi, rng.Float64() * math.Pi, []float64{1, 2, 4}[k%3]}
		cs = append(cs, c)
		h := HatSupport(1, c.th, c.ph, c.xi)
		for i := range 3 {
			pad[i] = max(pad[i], h[i])
		}
	}
	for _, a := range []float64{1, 2} {
		for _, bnd := range []Boundary{Wrap, Reflect} {
			if bnd == Reflect && a != 1 {
				continue // the padding above is a = 1's
			}
			w, err := newWaveletVolume(v, n, a, bnd, pad)
			if err != nil {
				b.Fatal(err)
			}
			s := w.newScratch()
			dst := make([]float64, WaveletSums)
			for _, k := range []struct {
				name string
				f    *WaveletFormulas
			}{{"hat", nil}, {"formula", &WaveletFormulas{Kernel: kf}}} {
				for _, st := range []struct {
					name string
					skip WaveletSkip
				}{{"all", WaveletSkip{}}, {"energy+std", WaveletSkip{Max: true}}} {
					b.Run(fmt.Sprintf("%v/a=%g/%s/%s", bnd, a, k.name, st.name), func(b *testing.B) {
						i := 0
						for b.Loop() {
							c := cs[i%len(cs)]
							w.sums(dst, c.th, c.ph, c.xi, s, k.f, st.skip)
							i++
						}
					})
				}
			}
		}
	}
}

// BenchmarkCheckVolume times the finite check of a 200³ volume.
func BenchmarkCheckVolume(b *testing.B) {
	n := [3]int{200, 200, 200}
	v := make([]float32, n[0]*n[1]*n[2])
	for i := range v {
		v[i] = float32(i%1000) - 500
	}
	b.SetBytes(int64(4 * len(v)))
	for b.Loop() {
		if err := checkVolume(v, n); err != nil {
			b.Fatal(err)
		}
	}
}
