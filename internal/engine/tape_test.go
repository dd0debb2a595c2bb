package engine_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs/affinity"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/ops"
	"github.com/tapeloop/tapeloop/ops/pairwise"
)

// TestTapeOnCallerMatchesRunAll runs each kind of graph the engine
// compiles (gorgonia's own ops, the interpolation op with and without its
// reduction, an affinity block) on the calling goroutine and with
// gorgonia's RunAll, on the same fresh random inputs batch after batch,
// and wants the same outputs bit for bit.
func TestTapeOnCallerMatchesRunAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	const n, d = 37, 11
	imgs := make([]float32, n*d)
	for i := range imgs {
		imgs[i] = rng.Float32()*4 - 2
	}
	data, err := pairwise.NewPairData(imgs, n, d, pairwise.MetricL2)
	if err != nil {
		t.Fatal(err)
	}
	aff, err := affinity.New(affinity.Setup{Data: data, Metric: pairwise.MetricL2, Symmetric: true})
	if err != nil {
		t.Fatal(err)
	}
	tab32, _ := randomTable(t, rng, 13, 29, ops.ReduceSumSq, tensor.Float32)
	tab64, _ := randomTable(t, rng, 7, 41, ops.ReduceNone, tensor.Float64)
	cases := []struct {
		name  string
		job   engine.Workload
		batch int
		fill  func(x []float64, k int) // input values for batch k
	}{
		{"gorgonia ops", chain{items: 1000, width: 9}, 23, func(x []float64, _ int) {
			for i := range x {
				x[i] = rng.NormFloat64()
			}
		}},
		{"interp sumsq float32", newTestInterp(t, tab32, ops.ReduceSumSq, tensor.Float32, make([]float64, 3001)), 3001, func(x []float64, _ int) {
			for i := range x {
				x[i] = -0.5 + rng.Float64()*0.37*28
			}
		}},
		{"interp none float64", newTestInterp(t, tab64, ops.ReduceNone, tensor.Float64, make([]float64, 517)), 517, func(x []float64, _ int) {
			for i := range x {
				x[i] = -0.5 + rng.Float64()*0.37*40
			}
		}},
		{"affinity block", aff, 5, func(x []float64, k int) {
			for i := range x {
				x[i] = float64((5*k + i) % n)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			direct, err := engine.Compile(c.job, c.batch)
			if err != nil {
				t.Fatal(err)
			}
			defer direct.Close()
			runAll, err := engine.Compile(c.job, c.batch)
			if err != nil {
				t.Fatal(err)
			}
			defer runAll.Close()
			if !direct.RunsOnCaller() {
				t.Fatal("the tape is not run on the caller: gorgonia's machine is not as the engine expects")
			}
			runAll.UseRunAll(true)
			for k := range 4 {
				for i, in := range direct.Inputs() {
					x := make([]float64, in.Shape().TotalSize())
					c.fill(x, k)
					for _, p := range []*engine.Program{direct, runAll} {
						src := tensor.New(tensor.WithShape(in.Shape()...), tensor.Of(in.Dtype()))
						switch s := src.Data().(type) {
						case []float32:
							for j := range s {
								s[j] = float32(x[j])
							}
						case []float64:
							copy(s, x)
						}
						if err := p.Feed(i, src); err != nil {
							t.Fatal(err)
						}
					}
				}
				for _, p := range []*engine.Program{direct, runAll} {
					if _, err := p.Run(); err != nil {
						t.Fatal(err)
					}
				}
				for i := range direct.Outputs() {
					a, b := direct.Outputs()[i], runAll.Outputs()[i]
					if !slices.Equal(bits(a), bits(b)) {
						t.Fatalf("batch %d, output %d: on the caller %v, with RunAll %v", k, i, a.Data(), b.Data())
					}
				}
			}
		})
	}
}

// bits is t's values as their bit patterns, so that NaNs compare equal.
func bits(t *tensor.Dense) []uint64 {
	var b []uint64
	switch d := t.Data().(type) {
	case []float32:
		for _, v := range d {
			b = append(b, uint64(math.Float32bits(v)))
		}
	case []float64:
		for _, v := range d {
			b = append(b, math.Float64bits(v))
		}
	}
	return b
}
