package cpukern

import (
	"math"
	"math/rand/v2"
	"testing"
)

// refSumMax is SumMax written out: eight partial sums in float64, element
// i into sum i mod 8, added as ((s0+s1)+(s2+s3))+((s4+s5)+(s6+s7)), and
// the largest element that is not NaN.
func refSumMax[T float32 | float64](x []T) (sum, mx float64) {
	var s [8]float64
	mx = math.Inf(-1)
	for i, v := range x {
		s[i%8] += float64(v)
		if !math.IsNaN(float64(v)) {
			mx = math.Max(mx, float64(v))
		}
	}
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])), mx
}

// TestSumMax checks SumMax bit for bit against the loop above on random
// values of mixed magnitude (where the order of additions shows in the
// last bits), every length up to 40 and a few long odd ones, float32 and
// float64, with NaNs (passed over by the maximum) and without, at every
// instruction set level the CPU has.
func TestSumMax(t *testing.T) {
	top := limitISA(isaTop)
	defer limitISA(top)
	for isa := isaBase; isa <= top; isa++ {
		limitISA(isa)
		testSumMax(t)
	}
}

func testSumMax(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	lengths := []int{2047, 2048, 4099}
	for n := 0; n <= 40; n++ {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		for _, nan := range []bool{false, true} {
			x64 := make([]float64, n)
			for i := range x64 {
				x64[i] = (rng.Float64() - 0.3) * math.Pow(10, float64(rng.IntN(12)-6))
				if nan && rng.IntN(5) == 0 {
					x64[i] = math.NaN()
				}
			}
			x32 := make([]float32, n)
			for i, v := range x64 {
				x32[i] = float32(v)
			}
			check := func(name string, gs, gm, ws, wm float64) {
				t.Helper()
				sameSum := math.Float64bits(gs) == math.Float64bits(ws) || (math.IsNaN(gs) && math.IsNaN(ws))
				if !sameSum || gm != wm {
					t.Errorf("%s on %s, n=%d nan=%v: sum %v max %v, want %v and %v", name, PairDistISA(), n, nan, gs, gm, ws, wm)
				}
			}
			gs, gm := SumMax(x32)
			ws, wm := refSumMax(x32)
			check("float32", gs, gm, ws, wm)
			gs, gm = SumMax(x64)
			ws, wm = refSumMax(x64)
			check("float64", gs, gm, ws, wm)
		}
	}
}
