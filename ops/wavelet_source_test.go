package ops

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestFirstNonFinite32 sets the block scan against a loop over every value,
// on random lengths (odd, and across block edges) with values of every
// magnitude, the largest finite ones and subnormals included, and zero to
// two NaN or ±Inf planted at random places.
func TestFirstNonFinite32(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	slow := func(v []float32) int {
		for i, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return i
			}
		}
		return -1
	}
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
		math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, -0}
	bad := 0
	for trial := range 400 {
		v := make([]float32, 1+rng.IntN(20000))
		for i := range v {
			v[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(76)-38)))
		}
		for k := rng.IntN(3); k > 0; k-- {
			v[rng.IntN(len(v))] = special[rng.IntN(len(special))]
		}
		got, want := firstNonFinite32(v), slow(v)
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

// TestCheckVolumeNamesTheVoxel: the error names the first bad voxel by
// its (i, j, k).
func TestCheckVolumeNamesTheVoxel(t *testing.T) {
	n := [3]int{7, 5, 3}
	v := make([]float32, n[0]*n[1]*n[2])
	for i := range v {
		v[i] = float32(i) - 50
	}
	if err := checkVolume(v, n); err != nil {
		t.Fatal(err)
	}
	v[(4*n[1]+2)*n[2]+1] = float32(math.Inf(-1))
	v[(6*n[1]+0)*n[2]+2] = float32(math.NaN())
	err := checkVolume(v, n)
	if !errors.Is(err, ErrWavelet) || !strings.Contains(err.Error(), "voxel (4, 2, 1) is -Inf") {
		t.Fatalf("got %v", err)
	}
}
