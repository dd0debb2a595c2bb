package pairwise

// Conformance of the ops that run users' formulas, on every backend (see
// conformance_test.go): Pairwise with a Formula (per pair),
// against opstest.RefFormula, the formula's graph evaluated node by node in
// float64 with formula.Apply.

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/formula"
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

// pairFormulas are affinity formulas computed per pair: over both images,
// with values of each image (means, norms), with reductions nested in
// others (two and three passes), and a formula otherwise rewritten over
// dot products, here kept per pair (direct).
var pairFormulaCases = []struct {
	src    string
	direct bool
}{
	{"-sum(abs(a-b))", false},
	{"sum(min(a,b))/sum(max(a,b))", false},
	{"sum((a-mean(a))*(b-mean(b)))/(norm(a-mean(a))*norm(b-mean(b)))", true},
	{"max(abs(a-b-mean(a-b))) + min(a*b)", false},
	{"sum(where(a > b, sigmoid(a-b), tanh(b-a)))", false},
	{"exp(-sum((a-b)^2)/(2*s^2))", true},
}

func TestConformancePairFormula(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	type fixture struct {
		n, d, batch int
		x           []float64
	}
	var fixtures []fixture
	for _, s := range []struct{ n, d, batch int }{{41, 19, 8}, {75, 40, 20}} {
		x := opstest.Widen(opstest.Normals32(rng, s.n*s.d))
		fixtures = append(fixtures, fixture{s.n, s.d, s.batch, x})
	}
	opstest.OnEveryBackend(t, backends(t), func(t *testing.T, b backend) {
		for _, fx := range fixtures {
			n, d, batch := fx.n, fx.d, fx.batch
			data := pairData(t, tensor.Float32, fx.x, n, d, MetricDot)
			for _, fc := range pairFormulaCases {
				f, err := formula.Parse(fc.src, formula.Env{Flag: "--formula", Vars: formula.PairVars, Reduce: true,
					Params: map[string]float64{"s": 3}, Shared: true})
				if err != nil {
					t.Fatal(err)
				}
				g, err := f.Graph(d)
				if err != nil {
					t.Fatal(err)
				}
				x32 := opstest.Widen(opstest.Narrow(fx.x))
				ref := make([]float64, n*n)
				for i := range n {
					for j := range n {
						ref[i*n+j] = opstest.RefFormula(g, d, [][]float64{x32[i*d : (i+1)*d], x32[j*d : (j+1)*d]})[0]
					}
				}
				pf, err := NewPairFormula(f, data, fc.direct)
				if err != nil {
					t.Fatal(err)
				}
				if pf.Plan.Pair == nil {
					t.Fatalf("%s: not computed per pair", fc.src)
				}
				for _, c := range pairLayouts(n, batch) {
					if c.chunk != 0 {
						continue // chunks are the metric twin's
					}
					t.Run(fmt.Sprintf("N%d_D%d/%s/%s", n, d, fc.src, c.name), func(t *testing.T) {
						pw := NewPairwiseFormula(pf, data, batch)
						pw.Upper, pw.RowsFromData = c.upper, c.fromData
						op := b.Place(t, pw)
						in := c.input(fx.x, batch, d, tensor.Float32)
						if c.refused(t, op, in) {
							return
						}
						c0 := c.firstCol()
						opstest.RunTwice(t, b, op, 777, func(run string, out *tensor.Dense) {
							got := opstest.ValuesOf(out)
							var gs, ws []float64
							for i := range c.rows {
								gs = append(gs, got[i*n+c0:(i+1)*n]...)
								ws = append(ws, ref[(c.lo+i)*n+c0:(c.lo+i+1)*n]...)
							}
							if e := opstest.RelErr(gs, ws); !(e <= 2e-5) {
								t.Errorf("%s: relative error %.3g > 2e-5", run, e)
							}
							if run != opstest.SecondRun {
								return
							}
							for i := range batch {
								for j := range n {
									padding := i >= c.rows
									if (j < c0 || padding && c.fromData) && got[i*n+j] != 777 {
										t.Fatalf("(%d, %d) = %v: written", i, j, got[i*n+j])
									}
								}
							}
						}, in...)
					})
				}
			}
		}
	})
}
