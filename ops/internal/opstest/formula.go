package opstest

import (
	"errors"
	"math"
	"testing"

	"github.com/tapeloop/tapeloop/internal/formula"
	"github.com/tapeloop/tapeloop/internal/kernelemu"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// RefFormula evaluates g over vectors of n elements, node by node in
// float64 with formula.Apply: the reference of the formula ops. vars gives
// each variable's values (n for a vector, 1 for a number). The result has
// n values, or one.
func RefFormula(g *formula.Graph, n int, vars [][]float64) []float64 {
	val := map[*formula.Node][]float64{}
	var eval func(x *formula.Node) []float64
	eval = func(x *formula.Node) []float64 {
		if v, ok := val[x]; ok {
			return v
		}
		var v []float64
		switch {
		case x.Op == formula.OpConst:
			v = []float64{x.Val}
		case x.Op == formula.OpVar:
			v = vars[x.Var]
		case x.Op.IsReduction():
			a := eval(x.Args[0])
			r := map[formula.Op]float64{formula.OpSum: 0, formula.OpRMax: math.Inf(-1), formula.OpRMin: math.Inf(1)}[x.Op]
			for _, e := range a {
				switch {
				case x.Op == formula.OpSum:
					r += e
				case x.Op == formula.OpRMax && e > r, x.Op == formula.OpRMin && e < r:
					r = e
				}
			}
			v = []float64{r}
		default:
			args := make([][]float64, len(x.Args))
			for i, a := range x.Args {
				args[i] = eval(a)
			}
			v = make([]float64, 1)
			if x.Vec {
				v = make([]float64, n)
			}
			at := make([]float64, len(args))
			for k := range v {
				for i, a := range args {
					at[i] = a[min(k, len(a)-1)] // a number broadcasts
				}
				v[k] = formula.Apply(x.Op, at...)
			}
		}
		val[x] = v
		return v
	}
	return eval(g.Root)
}

// CompileKernels compiles the kernels a formula op compiles at run time
// (formula.CUDAMap's, formula.CUDAPair's) under the emulator; it skips t
// where g++ is missing.
func CompileKernels(t testing.TB, ks ...*formula.CUDAKernel) *kernelemu.Program {
	t.Helper()
	var srcs []string
	for _, k := range ks {
		srcs = append(srcs, k.Src)
	}
	p, err := kernelemu.Compile(srcs...)
	if errors.Is(err, kernelemu.ErrNoCompiler) {
		t.Skip(err.Error() + ": the CUDA emulator tests need it")
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// EmulateKernel runs l, a launch of the run-time kernel k, on p (from
// CompileKernels); l must launch as many threads per block as k was
// written for.
func EmulateKernel(t testing.TB, p *kernelemu.Program, k *formula.CUDAKernel, l opkit.Launch) {
	t.Helper()
	if l.Block != k.Block {
		t.Fatalf("%s: launched with %d threads per block, written for %d", k.Name, l.Block, k.Block)
	}
	if err := p.Run(l.Kernel, l.GX, l.GY, l.Block, l.Args...); err != nil {
		t.Fatal(err)
	}
}
