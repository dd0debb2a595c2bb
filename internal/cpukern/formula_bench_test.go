package cpukern

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkFormulaPairs: −Σ|a−b| per pair on the evaluator (one fused
// instruction) beside the built-in L1 kernel, one thread, 64 rows against
// 256 columns of 10⁴ float32.
func BenchmarkFormulaPairs(b *testing.B) {
	const m, n, d = 64, 256, 10_000
	rng := rand.New(rand.NewPCG(1, 1))
	a, x := make([]float32, m*d), make([]float32, n*d)
	for i := range a {
		a[i] = rng.Float32()
	}
	for i := range x {
		x[i] = rng.Float32()
	}
	out := make([]float32, m*n)
	b.Run("builtin", func(b *testing.B) {
		for b.Loop() {
			PairDist32(m, n, d, a, d, x, d, out, n, L1)
		}
		b.ReportMetric(float64(m*n*d)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gpairdims/s")
	})
	p := &FxProgram{Inputs: 2, Slots: 2, Regs: []float64{0},
		Blocks: []FxBlock{{Vector: true, Prologue: []FxIns{{Op: FxInitSum, Dst: 0}},
			Body: []FxIns{{Op: FxRSumOp, Dst: 0, A: 0, B: 1, C: int32(FxAbsDiff)}}}}}
	st := NewFxState[float32](p)
	b.Run("formula", func(b *testing.B) {
		for b.Loop() {
			st.Pairs(m, n, d, a, d, x, d, out, n, nil, nil, 0)
		}
		b.ReportMetric(float64(m*n*d)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gpairdims/s")
	})
}
