package cpukern

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestPCGUniform checks the kernel bit for bit against math/rand/v2 run
// one number at a time, from random states, at lengths around the vector
// width and odd ones, over grids of either sign, in float32 and float64;
// and that below AVX-512 it reports false and leaves dst alone.
func TestPCGUniform(t *testing.T) {
	top := limitISA(isaAVX512)
	if top < isaAVX512 {
		t.Skip("this CPU has no AVX-512: the kernel is not used")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	grids := [][2]float64{{0, 1}, {-3.25, 20.75}, {1e-3, 4095 * 7.3e-4}, {-7e5, 1e-9}}
	for _, n := range []int{1, 7, 8, 9, 15, 16, 17, 1001, 4099} {
		for _, gr := range grids {
			hi, lo := rng.Uint64(), rng.Uint64()
			ref := rand.New(rand.NewPCG(hi, lo))
			want64 := make([]float64, n)
			for i := range want64 {
				want64[i] = gr[0] + gr[1]*ref.Float64()
			}
			got64 := make([]float64, n+1)
			got32 := make([]float32, n+1)
			got64[n], got32[n] = -1, -1 // a guard past the end
			if !PCGUniform(got64[:n], hi, lo, gr[0], gr[1]) || !PCGUniform(got32[:n], hi, lo, gr[0], gr[1]) {
				t.Fatal("PCGUniform reports no AVX-512 on a CPU that has it")
			}
			for i, w := range want64 {
				if math.Float64bits(got64[i]) != math.Float64bits(w) {
					t.Fatalf("n %d, state %x %x, grid %v: float64 %d is %g, want %g", n, hi, lo, gr, i, got64[i], w)
				}
				if math.Float32bits(got32[i]) != math.Float32bits(float32(w)) {
					t.Fatalf("n %d, state %x %x, grid %v: float32 %d is %g, want %g", n, hi, lo, gr, i, got32[i], float32(w))
				}
			}
			if got64[n] != -1 || got32[n] != -1 {
				t.Fatalf("n %d: written past the end", n)
			}
		}
	}
	for isa := isaBase; isa < isaAVX512; isa++ {
		limitISA(isa)
		dst := []float32{-1, -1, -1}
		if PCGUniform(dst, 1, 2, 0, 1) || dst[0] != -1 {
			t.Errorf("limited to level %d: PCGUniform reports AVX-512 or wrote dst", isa)
		}
		limitISA(isaAVX512)
	}
}

// BenchmarkPCGUniform times the kernel on one thread, 65,536 float32
// numbers a call (the interpolation's batch).
func BenchmarkPCGUniform(b *testing.B) {
	dst := make([]float32, 1<<16)
	for b.Loop() {
		if !PCGUniform(dst, 1, 2, 0, 1) {
			b.Skip("no AVX-512")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(dst)), "ns/number")
}
