package formula

import (
	"math/rand/v2"
	"testing"

	"github.com/tapeloop/tapeloop/internal/cpukern"
)

func evalPlan(t *testing.T, p *PairPlan, a, b []float64) float64 {
	d := len(a)
	nr := p.NRow()
	ra, rb := make([]float64, nr), make([]float64, nr)
	for k, r := range p.Rows {
		st := cpukern.NewFxState[float64](r)
		st.Run(d, [][]float64{a}, nil)
		ra[k] = st.Regs[r.Result]
		st.Reset()
		st.Run(d, [][]float64{b}, nil)
		rb[k] = st.Regs[r.Result]
	}
	if p.Product != nil {
		dot := 0.0
		for i := range a {
			dot += a[i] * b[i]
		}
		st := cpukern.NewFxState[float64](p.Product)
		copy(st.Regs, ra)
		in := [][]float64{{dot}}
		for k := range nr {
			in = append(in, []float64{rb[k]})
		}
		out := []float64{0}
		st.Run(1, in, [][]float64{out})
		return out[0]
	}
	st := cpukern.NewFxState[float64](p.Pair)
	out := []float64{0}
	st.Pairs(1, 1, d, a, d, b, d, out, 1, ra, rb, nr)
	return out[0]
}

func TestQuick2(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 1037
	a := make([]float64, n)
	b := make([]float64, n)
	for i := range a {
		a[i], b[i] = rng.Float64(), rng.Float64()
	}
	for _, src := range []string{"-sum(abs(a-b))", "exp(-sum((a-b)^2)/(2*4^2))", "sum(min(a,b))/sum(max(a,b))",
		"sum((a-mean(a))*(b-mean(b)))/(norm(a-mean(a))*norm(b-mean(b)))", "dot(a,b)/(norm(a)*norm(b))", "max(a) - max(b)*sum(a*b)"} {
		f, err := Parse(src, Env{Flag: "--formula", Vars: PairVars, Reduce: true})
		if err != nil {
			t.Fatal(err)
		}
		p1, err := CompilePair(f, n, false)
		if err != nil {
			t.Fatal(err)
		}
		p2, err := CompilePair(f, n, true)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: product=%v terms=%v  %v %v", src, p1.Product != nil, p1.Terms, evalPlan(t, p1, a, b), evalPlan(t, p2, a, b))
	}
}
