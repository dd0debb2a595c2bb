package engine_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/engine"
)

// TestTapeOnCallerMatchesRunAll runs each kind of graph the engine
// compiles (gorgonia's own ops; an op that owns its output, as the
// workloads' ops do, beside one of gorgonia's) on the calling goroutine
// and with gorgonia's RunAll, on the same fresh random inputs batch after
// batch, and wants the same outputs bit for bit.
func TestTapeOnCallerMatchesRunAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	owning := newFakeJob(1000, 9)
	owning.square = true
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
		{"an op that owns its output", owning, 7, func(x []float64, _ int) {
			for i := range x {
				x[i] = rng.NormFloat64()
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
