package finite

import (
	"math"
	"math/rand/v2"
	"testing"
)

// slow is the first NaN or ±Inf by a loop over every value.
func slow[T float32 | float64](v []T) int {
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return i
		}
	}
	return -1
}

// TestFirst sets First against a loop over every value, on random lengths
// (odd, and across block edges) with values of every magnitude, the
// largest finite ones, subnormals and −0 included, and zero to two NaN or
// ±Inf planted at random places.
func TestFirst(t *testing.T) {
	t.Run("float32", func(t *testing.T) {
		testFirst(t, []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
			math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, float32(math.Copysign(0, -1))}, 38)
	})
	t.Run("float64", func(t *testing.T) {
		testFirst(t, []float64{math.NaN(), math.Inf(1), math.Inf(-1),
			math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, math.Copysign(0, -1)}, 300)
	})
}

func testFirst[T float32 | float64](t *testing.T, special []T, exp int) {
	rng := rand.New(rand.NewPCG(3, 4))
	bad := 0
	for trial := range 400 {
		v := make([]T, 1+rng.IntN(5000))
		for i := range v {
			v[i] = T(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(2*exp)-exp)))
		}
		for k := rng.IntN(3); k > 0; k-- {
			v[rng.IntN(len(v))] = special[rng.IntN(len(special))]
		}
		got, want := First(v), slow(v)
		if got != want {
			t.Fatalf("trial %d (%d values): %d, want %d", trial, len(v), got, want)
		}
		if want >= 0 {
			bad++
		}
	}
	if bad < 100 {
		t.Fatalf("only %d of 400 trials held a NaN or ±Inf", bad)
	}
}

// BenchmarkFirst scans 8,000,000 finite float32 values.
func BenchmarkFirst(b *testing.B) {
	v := make([]float32, 8_000_000)
	for i := range v {
		v[i] = float32(i%1000) - 500
	}
	b.SetBytes(int64(4 * len(v)))
	for b.Loop() {
		if First(v) >= 0 {
			b.Fatal("a finite value was found not finite")
		}
	}
}
