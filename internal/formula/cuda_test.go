package formula

// The CUDA C the emitter writes is checked three ways, none needing a GPU:
//   - compiled to PTX by NVRTC (the library the GPU flavour compiles
//     with at run time), with the options it uses, and the PTX assembled
//     for sm_80 by ptxas where it is installed; skipped where libnvrtc
//     cannot be loaded;
//   - run on the CPU under the CUDA emulator, internal/kernelemu (each
//     block's threads are fibers, __syncthreads a barrier among them) and
//     compared with the evaluator of package cpukern on the same inputs;
//     skipped where g++ is missing;
//   - the refusals: what the emitter cannot write comes back as an error.

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/kernelemu"
	"github.com/tapeloop/tapeloop/internal/nvrtc"
	"github.com/tapeloop/tapeloop/internal/testutil"
)

var (
	mapVars = []Var{{Name: "p", Vector: true}}
	muVars  = []Var{{Name: "h", Vector: true}}
	qVars   = []Var{{Name: "q", Vector: true}}
	xyzVars = []Var{{Name: "x", Vector: true}, {Name: "y", Vector: true}, {Name: "z", Vector: true}, {Name: "a"}}
)

// The formulas of the tests: the examples of the documentation, and each
// operation of the language, nested reductions included.
var (
	pairFormulas = []string{
		"-sum(abs(a-b))",
		"exp(-sum((a-b)^2)/(2*s^2))",
		"sum(min(a,b))/sum(max(a,b))",
		"sum((a-mean(a))*(b-mean(b)))/(norm(a-mean(a))*norm(b-mean(b)))",
		"dot(a,b)/(norm(a)*norm(b))",
		"max(a) - max(b)*sum(a*b)",
		"sum(abs(a-b-mean(a-b)))",          // a reduction over both images inside another: two passes
		"max(abs(a-b-mean(a*b-max(a-b))))", // three passes
		"max(abs(a-b)) + min(a*b)",
		"sum(where(a > b, a-b, 0.5*(b-a)))",
		"sum((a < b) + (a <= b) + 2*(a >= b) + (a == b) + (a != b) + (a > 0.5 && b < 0.5) + (a > 0.7 || b < 0.1) + !(a > 0.3))",
		"sum(clamp(a-b, -0.2, 0.3))",
		"sum(sigmoid(4*(a-b)))",
		"sum(pow(a+1, b)) - sum((a+b)^3)",
		"sum(log1p(abs(a-b)))",
		"sum(tanh(a-b))",
		"sum(exp(-(a-b)^2)) + sum(sqrt(a*b)) + sum(sin(a)*cos(b)) + log(sum(a*b))",
		"sum(where(a > 2, 1/0, a)) + sum(min(a, 0*log(-1)) + max(0*log(-1), b))", // ±Inf and NaN constants
		"pi",
	}
	mapFormulas = []struct {
		vars []Var
		src  string
	}{
		{muVars, "where(h < -900, 0, 0.02*(1+h/1000))"},
		{mapVars, "exp(-p)"},
		{mapVars, "1-exp(-p)"},
		{qVars, "(3 - q)*exp(-q/2)"},
		{mapVars, "(p > 1) + 2*(p <= 0.5) + (p == 1) + (p != 0) + (p > 0 && p < 2) + (p < 0 || p > 3) + !(p > 1)"},
		{mapVars, "clamp(p, 0.5, 2)"},
		{mapVars, "sigmoid(p - 1)"},
		{mapVars, "pow(p, 1.5) + p^3 + p^0.5"},
		{mapVars, "log1p(p) + log(p - 1)"}, // NaN below 1
		{mapVars, "tanh(p - 1)"},
		{mapVars, "min(log(p - 1), 1) + max(1, log(p - 1))"}, // NaN as either argument
		{mapVars, "exp(-p/s)"},
		{mapVars, "2.5"},
		{xyzVars, "(3 - (x^2 + y^2 + z^2)/a^2)*exp(-(x^2 + y^2 + z^2)/(2*a^2))"},
	}
)

// parseFor parses src over vars with the parameter s = 4 offered (as a
// run's shared parameters: a formula need not use it).
func parseFor(t *testing.T, src string, vars []Var, reduce bool) *Formula {
	t.Helper()
	f, err := Parse(src, Env{Flag: "--test", Vars: vars, Params: map[string]float64{"s": 4}, Reduce: reduce, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// kernelCase is one emitted kernel and how to run it and its reference.
type kernelCase struct {
	name string
	k    *CUDAKernel
	run  func(t *testing.T, emu *emulator) // nil: compiled only
}

const (
	pairM, pairN, pairD = 11, 37, 45 // two blocks each way, the last partial, and two element steps
	mapN                = 1000
)

func kernelCases(t *testing.T) []kernelCase {
	var cases []kernelCase
	for _, src := range pairFormulas {
		f := parseFor(t, src, PairVars, true)
		plan, err := CompilePair(f, pairD, true)
		if err != nil {
			t.Fatal(err)
		}
		k, err := plan.CUDAPair()
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		cases = append(cases, kernelCase{name: "pair " + src, k: k, run: func(t *testing.T, emu *emulator) { checkPair(t, emu, plan, k) }})
	}
	for _, mf := range mapFormulas {
		f := parseFor(t, mf.src, mf.vars, false)
		g, err := f.Graph(mapN)
		if err != nil {
			t.Fatal(err)
		}
		ins := make([]int, len(mf.vars))
		for i := range ins {
			ins[i] = i
		}
		k, err := CUDAMap(g, ins)
		if err != nil {
			t.Fatalf("%s: %v", mf.src, err)
		}
		cases = append(cases, kernelCase{name: "map " + mf.src, k: k, run: func(t *testing.T, emu *emulator) { checkMap(t, emu, g, ins, k) }})
	}
	return cases
}

// TestCUDACompile compiles every kernel with NVRTC, as the GPU flavour
// does at run time, and assembles the PTX with ptxas where it is
// installed.
func TestCUDACompile(t *testing.T) {
	if testutil.Race {
		t.Skip("NVRTC runs no Go code to race; the plain run compiles every kernel")
	}
	if err := nvrtc.Load(); err != nil {
		t.Skipf("no libnvrtc: %v", err)
	}
	arch, err := nvrtc.ArchFor(80)
	if err != nil {
		t.Fatal(err)
	}
	ptxas, _ := exec.LookPath("ptxas")
	dir := t.TempDir()
	for _, c := range kernelCases(t) {
		ptx, err := nvrtc.Compile(c.k.Src, c.k.Name+".cu", append([]string{arch}, CUDAOptions...))
		if err != nil {
			t.Errorf("%s: %v\nsource:\n%s", c.name, err, c.k.Src)
			continue
		}
		if !strings.Contains(ptx, ".visible .entry "+c.k.Name+"(") {
			t.Errorf("%s: the PTX has no entry %s", c.name, c.k.Name)
			continue
		}
		if ptxas == "" {
			continue
		}
		f := filepath.Join(dir, c.k.Name+".ptx")
		if err := os.WriteFile(f, []byte(ptx), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(ptxas, "-arch=sm_80", "-v", "-o", os.DevNull, f).CombinedOutput()
		if err != nil {
			t.Errorf("%s: ptxas: %v\n%s", c.name, err, out)
			continue
		}
		if strings.Contains(string(out), "spill stores") && !strings.Contains(string(out), "0 bytes spill stores") {
			t.Logf("%s: %s", c.name, out)
		}
	}
	if ptxas == "" {
		t.Log("ptxas not installed: the PTX was not assembled")
	}
}

// TestCUDAEmulated runs every kernel under the emulator against the
// evaluator.
func TestCUDAEmulated(t *testing.T) {
	cases := kernelCases(t)
	emu := newEmulator(t, cases)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, emu) })
	}
}

func randomRows(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.Float64())
	}
	return x
}

func checkPair(t *testing.T, emu *emulator, plan *PairPlan, k *CUDAKernel) {
	rng := rand.New(rand.NewPCG(1, 2))
	a, b := randomRows(rng, pairM*pairD), randomRows(rng, pairN*pairD)
	a[3] = b[3] // a few equal elements, for ==
	nr := plan.NRow()
	rowVals := func(x []float32, n int) []float64 {
		v := make([]float64, max(1, n*nr))
		for r, p := range plan.Rows {
			st := cpukern.NewFxState[float32](p)
			for i := range n {
				st.Reset()
				st.Run(pairD, [][]float32{x[i*pairD : (i+1)*pairD]}, nil)
				v[i*nr+r] = st.Regs[p.Result]
			}
		}
		return v
	}
	ra, rb := rowVals(a, pairM), rowVals(b, pairN)
	want := make([]float32, pairM*pairN)
	st := cpukern.NewFxState[float32](plan.Pair)
	st.Pairs(pairM, pairN, pairD, a, pairD, b, pairD, want, pairN, ra, rb, nr)
	got := make([]float32, pairM*pairN)
	for i := range got {
		got[i] = float32(math.NaN()) // what the kernel does not write shows
	}
	gx, gy := (pairN+k.PerBlock-1)/k.PerBlock, (pairM+k.RowsPerBlock-1)/k.RowsPerBlock
	emu.run(t, k, gx, gy, a, b, ra, rb, got, int64(pairM), int64(pairN), int64(pairD), int64(pairN))
	compare(t, got, want)
}

func checkMap(t *testing.T, emu *emulator, g *Graph, ins []int, k *CUDAKernel) {
	rng := rand.New(rand.NewPCG(3, 4))
	var args []any
	var in [][]float32
	p, err := Lower(g, ins, true)
	if err != nil {
		t.Fatal(err)
	}
	st := cpukern.NewFxState[float32](p)
	nscal := 0
	for _, v := range ins {
		if g.Vars[v].Vector {
			x := make([]float32, mapN)
			for i := range x {
				x[i] = float32(rng.Float64()*4 - 0.5)
				if g.Vars[v].Name == "h" {
					x[i] = float32(rng.Float64()*3000 - 1000)
				}
			}
			x[1], x[2] = 1, 0 // the comparisons' edges
			in = append(in, x)
			args = append(args, x)
		} else {
			s := 0.5 + rng.Float64()
			st.Regs[nscal] = s
			nscal++
			args = append(args, s)
		}
	}
	want := make([]float32, mapN)
	st.Run(mapN, in, [][]float32{want})
	got := make([]float32, mapN)
	emu.run(t, k, 3, 1, append(args, got, int64(mapN))...) // fewer threads than elements: the grid stride
	compare(t, got, want)
}

// compare holds the kernel to the evaluator: the same NaN and infinities,
// and float32 rounding in another order (the kernels sum in float64, the
// evaluator in float32 chunks).
func compare(t *testing.T, got, want []float32) {
	t.Helper()
	bad := 0
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		ok := g == w || math.IsNaN(g) && math.IsNaN(w) || math.Abs(g-w) <= 2e-5*(1+math.Abs(w))
		if !ok {
			if bad < 5 {
				t.Errorf("element %d: kernel %v, evaluator %v", i, g, w)
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%d of %d elements differ", bad, len(want))
	}
}

// TestCUDARefusals: what the emitter cannot write is an error, and one
// the caller can fall back on (ErrNoKernel) when the formula itself is the
// reason.
func TestCUDARefusals(t *testing.T) {
	graph := func(src string, vars []Var, reduce bool, n int) *Graph {
		g, err := parseFor(t, src, vars, reduce).Graph(n)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	for _, src := range []string{"p - max(p)", "p/mean(p)", "sum(p)", "norm(p)"} {
		if _, err := CUDAMap(graph(src, mapVars, false, 10), []int{0}); !errors.Is(err, ErrNoKernel) {
			t.Errorf("CUDAMap(%s): %v, want ErrNoKernel", src, err)
		}
	}
	// A formula rewritten over dot products has no per-pair kernel.
	plan, err := CompilePair(parseFor(t, "exp(-sum((a-b)^2)/(2*s^2))", PairVars, true), 10, false)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Product == nil {
		t.Fatal("the formula was not rewritten over dot products")
	}
	if _, err := plan.CUDAPair(); !errors.Is(err, ErrNoKernel) {
		t.Errorf("CUDAPair of a product plan: %v, want ErrNoKernel", err)
	}
	// A vector where one number is needed.
	if _, err := CUDAPair(graph("a - b", PairVars, false, 10), []int{0, 1}); !errors.Is(err, ErrNoKernel) {
		t.Errorf("CUDAPair(a - b): %v, want ErrNoKernel", err)
	}
	// Inputs that do not match the graph: the caller's mistake.
	for _, c := range []struct {
		name string
		fn   func() (*CUDAKernel, error)
	}{
		{"map without its input", func() (*CUDAKernel, error) { return CUDAMap(graph("exp(p)", mapVars, false, 10), nil) }},
		{"pair of one image", func() (*CUDAKernel, error) { return CUDAPair(graph("sum(a)", PairVars, true, 10), []int{0}) }},
		{"input out of range", func() (*CUDAKernel, error) { return CUDAMap(graph("exp(p)", mapVars, false, 10), []int{3}) }},
	} {
		k, err := c.fn()
		if err == nil || errors.Is(err, ErrNoKernel) {
			t.Errorf("%s: kernel %v, error %v; want an error other than ErrNoKernel", c.name, k != nil, err)
		}
	}
}

// TestCUDASource: constants written exactly, names unique to the source,
// the same source for the same formula.
func TestCUDASource(t *testing.T) {
	for _, v := range []float64{0.1, -1e-300, math.MaxFloat64, 5e-324, math.Pi, math.Copysign(0, -1)} {
		lit := strings.Trim(cLit(v), "()")
		back, err := strconv.ParseFloat(lit, 64)
		if err != nil || back != v || math.Signbit(back) != math.Signbit(v) {
			t.Errorf("cLit(%v) = %s, reads back as %v (%v)", v, lit, back, err)
		}
	}
	mk := func(src string) *CUDAKernel {
		g, err := parseFor(t, src, mapVars, false).Graph(10)
		if err != nil {
			t.Fatal(err)
		}
		k, err := CUDAMap(g, []int{0})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k1, k2, k3 := mk("exp(-p)"), mk("exp(-p)"), mk("exp(-p) + 0")
	if k1.Src != k2.Src || k1.Name != k2.Name {
		t.Error("the same formula gave two sources")
	}
	if k3.Name != k1.Name {
		t.Error("exp(-p) + 0 is exp(-p), but got another kernel")
	}
	if k4 := mk("exp(-2*p)"); k4.Name == k1.Name {
		t.Error("two formulas got one kernel name")
	}
}

// emulator runs the cases' kernels under the CUDA emulator.
type emulator struct{ p *kernelemu.Program }

func newEmulator(t *testing.T, cases []kernelCase) *emulator {
	t.Helper()
	var srcs []string
	for _, c := range cases {
		srcs = append(srcs, c.k.Src)
	}
	p, err := kernelemu.Compile(srcs...)
	if errors.Is(err, kernelemu.ErrNoCompiler) {
		t.Skip("g++ not installed: the emulated kernels need it")
	}
	if err != nil {
		t.Fatal(err)
	}
	return &emulator{p}
}

// run launches k over gx×gy blocks; buffers are copied in and back out.
func (e *emulator) run(t *testing.T, k *CUDAKernel, gx, gy int, args ...any) {
	t.Helper()
	if err := e.p.Run(k.Name, gx, gy, k.Block, args...); err != nil {
		t.Fatal(err)
	}
}
