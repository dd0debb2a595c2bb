package formula

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/cpukern"
)

var pairEnv = Env{Flag: "--formula", Vars: PairVars, Reduce: true}

// TestParseErrors: every mistake is one message naming the formula, the
// column where it can, and the problem.
func TestParseErrors(t *testing.T) {
	withS := pairEnv
	withS.Params = map[string]float64{"s": 2}
	for _, c := range []struct {
		env  Env
		src  string
		col  int
		want string
	}{
		{pairEnv, "sum(abss(a-b))", 5, "unknown function abss"},
		{pairEnv, "sum(c*a)", 5, "unknown name c"},
		{pairEnv, "exp(-sum((a-b)^2)/(2*s^2))", 22, "--param s=VALUE"},
		{pairEnv, "sum(a, b)", 1, "sum takes 1 argument, got 2"},
		{pairEnv, "where(a > b, 1)", 1, "where takes 3 arguments, got 2"},
		{pairEnv, "max(a, b, 1)", 1, "max takes 1 or 2 arguments, got 3"},
		{pairEnv, "abs(a-b)", 0, "must reduce to one number"},
		{pairEnv, "sum(a-b", 8, ""},
		{pairEnv, "sum(a**2)", 7, "write powers as x^y"},
		{pairEnv, "sum(a*b)//2", 9, "// is not an operator here: for Python's floor division write floor(a/b)"},
		{pairEnv, "sum(a*b) // 2", 10, "floor(a/b)"},
		{pairEnv, "sum(a*b)/*2*/*3", 9, "/* is not allowed in a formula"},
		{pairEnv, "sum(a[0])", 5, "not part of the language"},
		{pairEnv, "sum(a % b)", 7, "operator % is not part of the language"},
		{pairEnv, "sum(sum(a))", 1, "no vector axis"},
		{pairEnv, "sum(a) + 'x'", 10, "is not a number"},
		{pairEnv, "", 0, "empty formula"},
		{pairEnv, "sum(exp)", 5, "exp is a function"},
		{withS, "-sum(abs(a-b))", 0, "parameter s is not used"},
		{Env{Flag: "--formula", Vars: PairVars, Params: map[string]float64{"a": 1}}, "sum(a)", 0, "name of a variable"},
		{Env{Flag: "--formula", Vars: PairVars, Params: map[string]float64{"exp": 1}}, "sum(a)", 0, "name of a function"},
		{Env{Flag: "--kernel", Vars: []Var{{Name: "x", Vector: true}}, Pointwise: true}, "x - mean(x)", 0, "cannot reduce"},
	} {
		_, err := Parse(c.src, c.env)
		var fe *Error
		if !errors.As(err, &fe) || !errors.Is(err, ErrFormula) {
			t.Errorf("%q: error %v, want a formula error", c.src, err)
			continue
		}
		if fe.Column != c.col || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.env.Flag+" \"") ||
			strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %q (column %d), want column %d and %q", c.src, err, fe.Column, c.col, c.want)
		}
	}
}

// eval evaluates a formula over scalar variables with the evaluator.
func eval(t *testing.T, src string, vars map[string]float64) float64 {
	t.Helper()
	var vs []Var
	var ins []int
	var regs []float64
	for name, v := range vars {
		vs = append(vs, Var{Name: name})
		ins = append(ins, len(ins))
		regs = append(regs, v)
	}
	f, err := Parse(src, Env{Flag: "f", Vars: vs})
	if err != nil {
		t.Fatal(err)
	}
	g, err := f.Graph(1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Lower(g, ins, false)
	if err != nil {
		t.Fatal(err)
	}
	st := cpukern.NewFxState[float64](p)
	copy(st.Regs, regs)
	st.Run(0, nil, nil)
	return st.Regs[p.Result]
}

// TestPrecedence: ^ binds tighter than unary minus and * /, and to the
// right, as in mathematics (Go's parser alone reads ^ as exclusive or,
// at the level of + and −).
func TestPrecedence(t *testing.T) {
	x, s := 1.7, 2.5
	for _, c := range []struct {
		src  string
		want float64
	}{
		{"-x^2", -x * x},
		{"2*s^2", 2 * s * s},
		{"x/2*s^2", x / 2 * s * s},
		{"2^3^2", 512},
		{"(2^3)^2", 64},
		{"x^-2", 1 / (x * x)},
		{"-x^2 + 2*x - 1", -x*x + 2*x - 1},
		{"x - s^2*x", x - s*s*x},
		{"pow(x, 3)", math.Pow(x, 3)},
		{"x^0.5", math.Sqrt(x)},
		{"1 - 2 - 3", -4},
		{"8/4/2", 1},
		{"x > 1 && s < 2 || !(x == s)", 1},
		{"clamp(x, 0, 1) + where(s != 2.5, 10, 20)", 21},
		{"sigmoid(x) + tanh(s) + log1p(x) + log(s) + sin(x)*cos(s)", 1/(1+math.Exp(-x)) + math.Tanh(s) + math.Log1p(x) + math.Log(s) + math.Sin(x)*math.Cos(s)},
		{"pi", math.Pi},
		{"min(x, s) - max(x, s) + abs(-x)", x - s + x},
		{"1_000 + 0x10 + 1e3", 2016},
		// -- and ++ are two signs, as in Python and NumPy.
		{"x--s", x + s},
		{"x-- s", x + s},
		{"--x", x},
		{"x---s", x - s},
		{"x----s", x + s},
		{"x++s", x + s},
		{"++x - -s", x + s},
		{"x*--s^2", x * s * s},
		{"x*- -s^2", x * s * s},
		{"x*-+-s^2", x * s * s},
		{"x*---s^2", -x * s * s},
		{"-(-s)^2", -s * s},
		{"- -2^-x", math.Pow(2, -x)},
		{"2--x^2", 2 + x*x},
		{"x<-s", 0}, // x < (−s), as Python reads it
		{"-x<-s", 0},
		{"-s<-x", 1},
	} {
		if got := eval(t, c.src, map[string]float64{"x": x, "s": s}); math.Abs(got-c.want) > 1e-12*math.Max(1, math.Abs(c.want)) {
			t.Errorf("%s = %v, want %v", c.src, got, c.want)
		}
	}
}

// TestReductions: the vector evaluator's reductions and elementwise
// operations against loops in this file, on odd lengths (a short last
// chunk), float32 and float64, including reductions nested in others.
func TestReductions(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 7))
	env := Env{Flag: "f", Vars: []Var{{Name: "a", Vector: true}, {Name: "b", Vector: true}}, Reduce: true}
	for _, n := range []int{1, 7, 513, 1037, 4099} {
		a, b := make([]float64, n), make([]float64, n)
		for i := range a {
			a[i], b[i] = rng.NormFloat64(), rng.Float64()+0.5
		}
		loop := func(f func(x, y float64) float64) (s float64) {
			for i := range a {
				s += f(a[i], b[i])
			}
			return s
		}
		mx := func(v []float64) float64 {
			m := math.Inf(-1)
			for _, x := range v {
				m = math.Max(m, x)
			}
			return m
		}
		ma := loop(func(x, _ float64) float64 { return x }) / float64(n)
		for _, c := range []struct {
			src  string
			want float64
		}{
			{"sum(a*b)", loop(func(x, y float64) float64 { return x * y })},
			{"max(a) - min(b)", mx(a) + mx(neg(b))},
			{"sum(abs(a-b))", loop(func(x, y float64) float64 { return math.Abs(x - y) })},
			{"sum((a-b)^2)", loop(func(x, y float64) float64 { return (x - y) * (x - y) })},
			{"sum(min(a, b)) / sum(max(a, b))", loop(math.Min) / loop(math.Max)},
			{"sum((a - mean(a))^2)", loop(func(x, _ float64) float64 { return (x - ma) * (x - ma) })},
			{"sum(where(a > 0, exp(-b), log(b)))", loop(func(x, y float64) float64 {
				if x > 0 {
					return math.Exp(-y)
				}
				return math.Log(y)
			})},
			{"norm(a) + dot(a, b)", math.Sqrt(loop(func(x, _ float64) float64 { return x * x })) + loop(func(x, y float64) float64 { return x * y })},
			{"max(sigmoid(a) * sqrt(b))", func() float64 {
				v := make([]float64, n)
				for i := range a {
					v[i] = 1 / (1 + math.Exp(-a[i])) * math.Sqrt(b[i])
				}
				return mx(v)
			}()},
		} {
			f, err := Parse(c.src, env)
			if err != nil {
				t.Fatal(err)
			}
			g, _ := f.Graph(n)
			p, err := Lower(g, []int{0, 1}, false)
			if err != nil {
				t.Fatal(err)
			}
			s64 := cpukern.NewFxState[float64](p)
			s64.Run(n, [][]float64{a, b}, nil)
			if got := s64.Regs[p.Result]; math.Abs(got-c.want) > 1e-12*math.Max(1, math.Abs(c.want)) {
				t.Errorf("n=%d float64 %s = %v, want %v", n, c.src, got, c.want)
			}
			a32, b32 := to32(a), to32(b)
			s32 := cpukern.NewFxState[float32](p)
			s32.Run(n, [][]float32{a32, b32}, nil)
			if got := s32.Regs[p.Result]; math.Abs(got-c.want) > 1e-5*math.Max(1, math.Abs(c.want)) {
				t.Errorf("n=%d float32 %s = %v, want %v", n, c.src, got, c.want)
			}
		}
	}
}

func neg(v []float64) []float64 {
	o := make([]float64, len(v))
	for i, x := range v {
		o[i] = -x
	}
	return o
}

func to32(v []float64) []float32 {
	o := make([]float32, len(v))
	for i, x := range v {
		o[i] = float32(x)
	}
	return o
}

// TestPairPlans: what runs from dot products and what per pair, and that
// the symmetry test and Same tell formulas apart.
func TestPairPlans(t *testing.T) {
	for _, c := range []struct {
		src       string
		product   bool
		symmetric bool
	}{
		{"-sum(abs(a-b))", false, true},
		{"exp(-sum((a-b)^2)/8)", true, true},
		{"dot(a, b)/(norm(a)*norm(b))", true, true},
		{"sum((a-mean(a))*(b-mean(b)))", true, true},
		{"sum(min(a,b))/sum(max(a,b))", false, true},
		{"sum(a^2) - dot(a, b)", true, false},
		{"max(a*b)", false, true},
		{"sum(a^3*b)", false, false},
		{"sum(a - b)", true, false},
	} {
		f, err := Parse(c.src, pairEnv)
		if err != nil {
			t.Fatal(err)
		}
		p, err := CompilePair(f, 11, false)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := CompilePair(f, 11, true)
		sym, _ := Symmetric(f)
		if (p.Product != nil) != c.product || d.Product != nil || sym != c.symmetric {
			t.Errorf("%s: from dot products %v (direct %v), symmetric %v; want %v, %v", c.src, p.Product != nil, d.Product != nil, sym, c.product, c.symmetric)
		}
	}
	f, _ := Parse("sum(v*v)", Env{Flag: "--reduce", Vars: []Var{{Name: "v", Vector: true}}, Reduce: true})
	if same, _ := Same(f, "sum(v^2)"); !same {
		t.Error("sum(v*v) is not the same as sum(v^2)")
	}
	if same, _ := Same(f, "sum(v)"); same {
		t.Error("sum(v*v) is the same as sum(v)")
	}
}
