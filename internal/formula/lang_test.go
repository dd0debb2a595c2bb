package formula

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/testutil"
)

// The language's named subexpressions, floor, round and mod, and
// histograms: against NumPy on fresh random inputs of odd lengths, and
// the mistakes each refused with one line.

// langVars: two vectors and a number.
var langVars = []Var{{Name: "a", Vector: true}, {Name: "b", Vector: true}, {Name: "x"}}

// evalLang runs src over a and b (and x) with the evaluator, in float64
// and float32, and returns both results.
func evalLang(t *testing.T, src string, params map[string]float64, a, b []float64, x float64) (f64, f32 float64) {
	t.Helper()
	f, err := Parse(src, Env{Flag: "--formula", Vars: langVars, Params: params, Reduce: true})
	if err != nil {
		t.Fatalf("%q: %v", src, err)
	}
	g, err := f.Graph(len(a))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Lower(g, []int{0, 1, 2}, false)
	if err != nil {
		t.Fatal(err)
	}
	s64 := cpukern.NewFxState[float64](p)
	s64.Regs[0] = x
	s64.Run(len(a), [][]float64{a, b}, nil)
	s32 := cpukern.NewFxState[float32](p)
	s32.Regs[0] = float64(float32(x))
	a32, b32 := make([]float32, len(a)), make([]float32, len(b))
	for i := range a {
		a32[i], b32[i] = float32(a[i]), float32(b[i])
	}
	s32.Run(len(a), [][]float32{a32, b32}, nil)
	return s64.Regs[p.Result], s32.Regs[p.Result]
}

// numpy evaluates Python expressions over a and b (float64 arrays) and
// returns their values, in order.
func numpy(t *testing.T, a, b []float64, exprs []string) []float64 {
	t.Helper()
	py := testutil.Python(t, "numpy")
	nulls := func(v []float64) []any { // JSON has no NaN: null, read back as NaN
		out := make([]any, len(v))
		for i, x := range v {
			if !math.IsNaN(x) {
				out[i] = x
			}
		}
		return out
	}
	in, err := json.Marshal(map[string]any{"a": nulls(a), "b": nulls(b), "e": exprs})
	if err != nil {
		t.Fatal(err)
	}
	script := `
import json, sys, numpy as np
d = json.loads(sys.stdin.read())
a, b = np.array(d["a"], dtype=np.float64), np.array(d["b"], dtype=np.float64)
def H(v, lo, hi, n): return np.histogram(v, n, (lo, hi))[0].astype(np.float64)
def H2(u, v, lo, hi, n): return np.histogram2d(u, v, n, [[lo, hi], [lo, hi]])[0].astype(np.float64)
def ent(h):
    p = h / h.sum()
    return -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1)), 0))
print(json.dumps([float(eval(e)) for e in d["e"]]).replace("NaN", "null"))
`
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("numpy: %v\n%s", err, out)
	}
	var vals []float64
	if err := json.Unmarshal(out, &vals); err != nil {
		t.Fatalf("numpy: %v\n%s", err, out)
	}
	return vals
}

func close(got, want, tol float64) bool {
	return got == want || math.Abs(got-want) <= tol*math.Max(1, math.Abs(want))
}

// TestNamedSubexpressions: a formula with names computes what the same
// formula written out computes, bit for bit, a reduction in a name
// reducing as written; and NumPy agrees.
func TestNamedSubexpressions(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 37))
	n := 1031
	a, b := make([]float64, n), make([]float64, n)
	for i := range a {
		a[i], b[i] = rng.NormFloat64()+0.3, rng.Float64()*3-1
	}
	for _, c := range []struct{ named, written, py string }{
		{"d = a - b; -sum(abs(d))", "-sum(abs(a - b))", "-np.sum(np.abs(a-b))"},
		{"ca = a - mean(a); cb = b - mean(b); sum(ca*cb)/(norm(ca)*norm(cb))",
			"sum((a-mean(a))*(b-mean(b)))/(norm(a-mean(a))*norm(b-mean(b)))", "np.corrcoef(a, b)[0, 1]"},
		{"m = max(a); e = exp(a - m); s = sum(e); log(s) + m", "log(sum(exp(a - max(a)))) + max(a)",
			"np.log(np.sum(np.exp(a - a.max()))) + a.max()"},
		{"k = x * 2; d = (a - b)^2\n; sum(d) / k;", "sum((a-b)^2) / (x*2)", "np.sum((a-b)**2) / (1.75*2)"},
	} {
		want := numpy(t, a, b, []string{c.py})[0]
		n64, n32 := evalLang(t, c.named, nil, a, b, 1.75)
		w64, w32 := evalLang(t, c.written, nil, a, b, 1.75)
		if math.Float64bits(n64) != math.Float64bits(w64) || math.Float64bits(n32) != math.Float64bits(w32) {
			t.Errorf("%q: %v (float32 %v), written out %v (%v)", c.named, n64, n32, w64, w32)
		}
		if !close(n64, want, 1e-12) || !close(n32, want, 1e-5) {
			t.Errorf("%q: %v (float32 %v), numpy %v", c.named, n64, n32, want)
		}
	}
}

// TestFloorRoundMod: NumPy's floor, round (half to even) and mod (the
// divisor's sign), halves and negative values included.
func TestFloorRoundMod(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 43))
	n := 517
	a, b := make([]float64, n), make([]float64, n)
	for i := range a {
		a[i] = math.Round(rng.Float64()*40-20) / 2 // halves: ties for round
		if i%3 == 0 {
			a[i] = rng.NormFloat64() * 7
		}
		b[i] = (rng.Float64()*4 + 0.25) * float64(1-2*(i%2)) // both signs, never 0
	}
	for _, c := range []struct{ src, py string }{
		{"sum(floor(a) * (1 + abs(b)))", "np.sum(np.floor(a) * (1 + np.abs(b)))"},
		{"sum(round(a) * (1 + abs(b)))", "np.sum(np.round(a) * (1 + np.abs(b)))"},
		{"sum(mod(a, b) * (1 + abs(b)))", "np.sum(np.mod(a, b) * (1 + np.abs(b)))"},
		{"sum(mod(a, 3))", "np.sum(np.mod(a, 3))"},
		{"sum(mod(-a, -2.5))", "np.sum(np.mod(-a, -2.5))"},
		{"max(abs(round(a) - a))", "np.max(np.abs(np.round(a) - a))"},
		{"sum(round(a) == floor(a))", "np.sum(np.round(a) == np.floor(a))"},
	} {
		want := numpy(t, a, b, []string{c.py})[0]
		g64, _ := evalLang(t, c.src, nil, a, b, 0)
		if !close(g64, want, 1e-12) {
			t.Errorf("%q: %v, numpy %v", c.src, g64, want)
		}
	}
	// float32: the elements rounded to float32 first, as the evaluator
	// reads them.
	a32, b32 := make([]float64, n), make([]float64, n)
	for i := range a {
		a32[i], b32[i] = float64(float32(a[i])), float64(float32(b[i]))
	}
	want := numpy(t, a32, b32, []string{"np.sum(np.mod(a.astype(np.float32), b.astype(np.float32)).astype(np.float64))",
		"np.sum(np.round(a.astype(np.float32)).astype(np.float64))"})
	for i, src := range []string{"sum(mod(a, b))", "sum(round(a))"} {
		if _, g32 := evalLang(t, src, nil, a32, b32, 0); !close(g32, want[i], 1e-5) {
			t.Errorf("%q in float32: %v, numpy %v", src, g32, want[i])
		}
	}
}

// TestHistograms: hist and hist2 count as NumPy's histogram and
// histogram2d (the last bin closed, values outside and NaN not counted,
// edges exact on whole numbers), and histogram intersection, entropy and
// mutual information written with them are NumPy's.
func TestHistograms(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 53))
	for _, n := range []int{1, 263, 2049} {
		a, b := make([]float64, n), make([]float64, n)
		for i := range a {
			a[i] = rng.Float64()*280 - 12 // some below 0, some at or past 256
			b[i] = math.Floor(rng.Float64() * 260)
			switch i % 11 {
			case 3:
				a[i] = math.NaN()
			case 5:
				a[i] = float64(rng.IntN(33) * 8) // on the edges of 32 bins, 256 included
			case 7:
				b[i] = 256
			}
		}
		cases := []struct{ src, py string }{
			{"sum(hist(a, 0, 256, 32))", "H(a, 0, 256, 32).sum()"},
			{"max(hist(b, 0, 256, 32))", "H(b, 0, 256, 32).max()"},
			{"min(hist(a, 0, 256, 7))", "H(a, 0, 256, 7).min()"},
			{"mean(hist(a, -3.5, 100.25, 13))", "H(a, -3.5, 100.25, 13).mean()"},
			{"dot(hist(a, 0, 256, 32), hist(b, 0, 256, 32))", "H(a, 0, 256, 32) @ H(b, 0, 256, 32)"},
			{"sum(hist(a, 0, 256, 32) * hist(a, 0, 256, 32) * (x + 1))", "(H(a, 0, 256, 32)**2).sum() * 2.5"},
			{"sum(hist(a, 0, 256, 256) * (1 + mod(hist(b, 0, 256, 256), 5)))",
				"(H(a, 0, 256, 256) * (1 + np.mod(H(b, 0, 256, 256), 5))).sum()"},
			// Histogram intersection, normalised.
			{"ha = hist(a, 0, 256, 32); hb = hist(b, 0, 256, 32); sum(min(ha, hb)) / sum(hb)",
				"np.minimum(H(a, 0, 256, 32), H(b, 0, 256, 32)).sum() / H(b, 0, 256, 32).sum()"},
			// Entropy.
			{"h = hist(a, 0, 256, 16); p = h / sum(h); -sum(where(p > 0, p*log(p), 0))", "ent(H(a, 0, 256, 16))"},
			// The joint histogram, cell by cell: the first argument's bin the row.
			{"sum(hist2(a, b, 0, 256, 8) * hist2(a, b, 0, 256, 8))", "(H2(a, b, 0, 256, 8)**2).sum()"},
			{"sum(hist2(a, b, 0, 200, 5) * hist2(b, a, 0, 200, 5))", "(H2(a, b, 0, 200, 5) * H2(b, a, 0, 200, 5)).sum()"},
			{"max(hist2(b, a, -1, 300, 3))", "H2(b, a, -1, 300, 3).max()"},
			// Mutual information as H(a) + H(b) − H(a, b).
			{"ha = hist(a, 0, 256, 16); hb = hist(b, 0, 256, 16); hab = hist2(a, b, 0, 256, 16); " +
				"pa = ha/sum(ha); pb = hb/sum(hb); pab = hab/sum(hab); " +
				"sum(where(pab > 0, pab*log(pab), 0)) - sum(where(pa > 0, pa*log(pa), 0)) - sum(where(pb > 0, pb*log(pb), 0))",
				"ent(H(a, 0, 256, 16)) + ent(H(b, 0, 256, 16)) - ent(H2(a, b, 0, 256, 16))"},
		}
		var py []string
		for _, c := range cases {
			py = append(py, c.py)
		}
		want := numpy(t, a, b, py)
		for i, c := range cases {
			g64, g32 := evalLang(t, c.src, nil, a, b, 1.5)
			if math.IsNaN(want[i]) && n == 1 {
				continue // 0/0 of an empty histogram
			}
			if !close(g64, want[i], 1e-12) || !close(g32, want[i], 1e-12) {
				t.Errorf("n=%d %q: %v (float32 %v), numpy %v", n, c.src, g64, g32, want[i])
			}
		}
	}
}

// TestLanguageMistakes: each mistake is one line naming the problem, at
// its column.
func TestLanguageMistakes(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"a = b; sum(a)", "column 1: a is a variable of this formula: a named subexpression needs another name"},
		{"s = a; sum(s)", "column 1: s is a parameter (--param s): a named subexpression needs another name"},
		{"pi = a; sum(pi)", "column 1: pi is a constant"},
		{"norm = a; sum(norm)", "column 1: norm is a function"},
		{"d = a; e = 2; sum(d)", "column 8: e is assigned but not used"},
		{"d = a; d = b; sum(d)", "column 8: d is assigned twice (first at column 1)"},
		{"e = d; d = a; sum(e)", "column 5: d is used before it is assigned (at column 8)"},
		{"d = d + 1; sum(a)", "column 5: d is used before it is assigned (at column 1)"},
		{"d := a; sum(d)", "column 3: write d = expression, not :="},
		{"sum(a); sum(b)", "column 7: unexpected ;: only the last statement is an expression"},
		{"(d) = a; sum(d)", "column 1: only a name can be assigned"},
		{"d = a - b", "column 10: the formula ends with the assignment of d"},
		{"d = a - b;", "column 11: the formula ends with the assignment of d"},
		{"d = ; sum(a)", "column 5: unexpected ;: expected the expression d stands for"},
		{"d = a; d(1)", "column 8: d is a named subexpression, not a function"},
		{"sum(floor(a, b))", "column 5: floor takes 1 argument, got 2"},
		{"sum(mod(a))", "column 5: mod takes 2 arguments, got 1"},
		{"hist(a, 0, 1, 4)", "gives a histogram, 4 numbers; it must reduce to one number"},
		{"sum(hist(a, 0, 1, 4) + a)", "column 22: + combines a histogram (4 numbers) with values along the vector axis (a, b) element by element"},
		{"sum(hist(a, 0, 1, 4) * hist(b, 0, 1, 5))", "column 22: * combines histograms of 4 and 5 numbers element by element"},
		{"sum(hist(a, 0, 1, 0))", "column 5: hist's bins must be a whole number from 1 to 4096, got 0"},
		{"sum(hist(a, 0, 1, 2.5))", "hist's bins must be a whole number from 1 to 4096, got 2.5"},
		{"sum(hist(a, 0, 1, 5000))", "hist's bins must be a whole number from 1 to 4096, got 5000"},
		{"sum(hist2(a, b, 0, 1, 300))", "hist2's bins must be a whole number from 1 to 256, got 300"},
		{"sum(hist(a, 1, 1, 4))", "hist's range [lo, hi] must be finite with lo < hi, got [1, 1]"},
		{"sum(hist(a, 0, 1/0, 4))", "hist's range [lo, hi] must be finite with lo < hi, got [0, +Inf]"},
		{"sum(hist(a, 0, max(a), 4))", "hist's hi must be a number or a parameter, not computed from the data"},
		{"sum(hist(x, 0, 1, 4))", "hist counts the elements of a vector (vectors: a, b), but its argument has no vector axis"},
		{"sum(hist(hist(a, 0, 1, 4), 0, 1, 4))", "hist counts the elements of a vector (vectors: a, b), but its argument is a histogram"},
		{"sum(hist(a, 0, 1))", "hist takes 4 arguments, got 3"},
		{"h = hist(a, 0, 1, 4); h", "gives a histogram, 4 numbers"},
	} {
		_, err := Parse(c.src, Env{Flag: "--formula", Vars: langVars, Params: map[string]float64{"s": 1}, Reduce: true, Shared: true})
		var fe *Error
		switch {
		case err == nil:
			t.Errorf("%q: accepted", c.src)
		case !errors.As(err, &fe) || strings.Contains(err.Error(), "\n"):
			t.Errorf("%q: %q is not one line of a formula error", c.src, err)
		case !strings.Contains(err.Error(), c.want):
			t.Errorf("%q: %q, want %q", c.src, err, c.want)
		}
	}
	// Point by point (a wavelet kernel): no histograms.
	_, err := Parse("hist(a, 0, 1, 4)", Env{Flag: "--kernel", Vars: langVars, Pointwise: true})
	if err == nil || !strings.Contains(err.Error(), "hist and hist2 count over the vector axis") {
		t.Errorf("a histogram evaluated point by point: %v", err)
	}
	// The GPU's kernels refuse histograms (the CPU computes them).
	f, err := Parse("sum(min(hist(a, 0, 1, 4), hist(b, 0, 1, 4)))", Env{Flag: "--formula", Vars: PairVars, Reduce: true})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := CompilePair(f, 10, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plan.CUDAPair(); !errors.Is(err, ErrNoKernel) || !strings.Contains(err.Error(), "without --device cuda") {
		t.Errorf("CUDAPair of a histogram: %v", err)
	}
}
