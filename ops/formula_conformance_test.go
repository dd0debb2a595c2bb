package ops

// Conformance of the ops that run users' formulas, on every backend (see
// conformance_test.go): MapImages (Pairwise with a Formula is in ops/pairwise),
// against opstest.RefFormula, the formula's graph evaluated node by node in
// float64 with formula.Apply.

import (
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/formula"
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

// mapFormulaCases are formulas per pixel: elementwise (on a GPU, a
// kernel), and one reducing over the whole image (the CPU op, whatever
// the backend).
var mapFormulaCases = []string{
	"exp(-p)",
	"1-exp(-p)",
	"where(p < 0.5, 0, 0.02*(1+p/1000))",
	"clamp(p, 0.5, 2) + (p > 1) + !(p <= 0.3)",
	"pow(p, 1.5) + log1p(p)",
	"p/max(p)",
}

func TestConformanceMapImages(t *testing.T) {
	const batch, rows, cols, valid = 3, 7, 9, 2
	rng := rand.New(rand.NewPCG(41, 42))
	x := make([]float64, batch*rows*cols)
	for i := range x {
		x[i] = float64(float32(rng.Float64() * 3))
	}
	opstest.OnEveryBackend(t, backends(t), func(t *testing.T, b backend) {
		for _, src := range mapFormulaCases {
			t.Run(src, func(t *testing.T) {
				f, err := formula.Parse(src, formula.Env{Flag: "--post", Vars: PostVars})
				if err != nil {
					t.Fatal(err)
				}
				mf, err := NewMapFormula(f, rows*cols)
				if err != nil {
					t.Fatal(err)
				}
				g, err := f.Graph(rows * cols)
				if err != nil {
					t.Fatal(err)
				}
				per := rows * cols
				var want []float64
				for i := range valid {
					want = append(want, opstest.RefFormula(g, per, [][]float64{x[i*per : (i+1)*per]})...)
				}
				mi := NewMapImages(mf, batch, rows, cols)
				mi.SetValidRows(valid)
				op := b.Place(t, mi)
				if rc, ok := op.(RowCounter); !ok {
					t.Fatalf("%v does not take the valid row count", op)
				} else {
					rc.SetValidRows(valid)
				}
				opstest.RunTwice(t, b, op, 777, func(run string, out *tensor.Dense) {
					got := opstest.ValuesOf(out)
					if e := opstest.RelErr(got[:valid*per], want); !(e <= 1e-6) {
						t.Errorf("%s: relative error %.3g > 1e-6", run, e)
					}
					if run != opstest.SecondRun {
						return
					}
					for k, v := range got[valid*per:] {
						if v != 777 {
							t.Fatalf("element %d of an invalid image = %v: written", valid*per+k, v)
						}
					}
				}, opstest.DenseOf(tensor.Float32, x, batch, rows, cols))
			})
		}
	})
}
