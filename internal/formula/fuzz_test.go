package formula

import (
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/cpukern"
)

// fuzzVars are the variables of the fuzzed formulas: two numbers and two
// vectors.
var fuzzVars = []Var{{Name: "x"}, {Name: "y"}, {Name: "v", Vector: true}, {Name: "w", Vector: true}}

// fuzzValue makes a value of a byte: small multiples of 1/8, or one of
// the values that test the edges (NaN, infinities, signed zeros, huge
// and tiny numbers).
func fuzzValue(b byte) float64 {
	special := []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 1e300, -1e300, 1e-300, 5e-324,
		math.MaxFloat64, 0.1, math.Pi, 1e16}
	if int(b) < len(special) {
		return special[b]
	}
	return (float64(b) - 140) / 8
}

// fuzzInputs makes the variables' values from data: the vectors' length
// (1 … 48, past a chunk's vector width and tail), x, y, then v and w.
func fuzzInputs(data []byte) (n int, scal []float64, vec [][]float64) {
	at := func(i int) byte {
		if len(data) == 0 {
			return byte(140 + i*7)
		}
		return data[i%len(data)]
	}
	n = 1 + int(at(0))%48
	scal = []float64{fuzzValue(at(1)), fuzzValue(at(2))}
	vec = [][]float64{make([]float64, n), make([]float64, n)}
	for k := range n {
		vec[0][k] = fuzzValue(at(3 + 2*k))
		vec[1][k] = fuzzValue(at(4 + 2*k))
	}
	return n, scal, vec
}

// refEval evaluates g by the definition: every node in float64 with
// Apply, element by element, the reductions in order (max and min passing
// over NaN). With seed > 0, every value of every node (each element of a
// vector) is multiplied by 1 ± 1e-11, the sign drawn from seed, the node
// and the element: how far that moves the result tells how much rounding
// the formula can amplify there.
func refEval(g *Graph, n int, scal []float64, vec [][]float64, seed uint64) []float64 {
	type value struct {
		s float64
		v []float64
		h []float64 // a histogram, or computed from one bin by bin
	}
	vals := make([]value, len(g.Nodes))
	perturb := func(x float64, id, k int) float64 {
		if seed == 0 {
			return x
		}
		h := (seed*0x9E3779B97F4A7C15 ^ uint64(id)*0xBF58476D1CE4E5B9 ^ uint64(k)*0x94D049BB133111EB) * 0x2545F4914F6CDD1D
		if h>>63 == 0 {
			return x * (1 + 1e-11)
		}
		return x * (1 - 1e-11)
	}
	elem := func(a *Node, k int) float64 {
		switch {
		case a.Vec:
			return vals[a.id].v[k]
		case a.Bins > 0:
			return vals[a.id].h[k]
		}
		return vals[a.id].s
	}
	// bin is the bin of v in r as NumPy's histogram counts it, found by
	// walking the edges; −1 outside.
	bin := func(v float64, r HistRange) int {
		if !(v >= r.Lo && v <= r.Hi) {
			return -1
		}
		step := (r.Hi - r.Lo) / float64(r.N)
		i := 0
		for i+1 < r.N && v >= float64(i+1)*step+r.Lo {
			i++
		}
		return i
	}
	for _, nd := range g.Nodes {
		var out value
		switch {
		case nd.Op == OpConst:
			out.s = nd.Val
		case nd.Op == OpVar && nd.Vec:
			out.v = append([]float64(nil), vec[nd.Var-2]...)
		case nd.Op == OpVar:
			out.s = scal[nd.Var]
		case nd.Op.IsHistogram():
			out.h = make([]float64, nd.Bins)
			for k := range n {
				i := bin(elem(nd.Args[0], k), nd.Range)
				if nd.Op == OpHist2 && i >= 0 {
					if j := bin(elem(nd.Args[1], k), nd.Range); j >= 0 {
						out.h[i*nd.Range.N+j]++
					}
				} else if i >= 0 {
					out.h[i]++
				}
			}
		case nd.Bins > 0:
			out.h = make([]float64, nd.Bins)
			args := make([]float64, len(nd.Args))
			for k := range nd.Bins {
				for i, a := range nd.Args {
					args[i] = elem(a, k)
				}
				out.h[k] = Apply(nd.Op, args...)
			}
		case nd.Op.IsReduction():
			a := nd.Args[0]
			r := map[Op]float64{OpSum: 0, OpRMax: math.Inf(-1), OpRMin: math.Inf(1)}[nd.Op]
			m := n
			if a.Bins > 0 {
				m = a.Bins
			}
			if nd.Op == OpSum {
				// The reference's sum is the exact one, rounded once; the
				// perturbed references add in other orders (the evaluator
				// adds in vector lanes), so that a sum whose rounding
				// depends on the order is seen as decided by rounding. A
				// sum in one order can overflow where the exact one does
				// not (43 values of MaxFloat64/43).
				xs := make([]float64, m)
				for k := range m {
					xs[k] = elem(a, k)
				}
				if seed == 0 {
					out.s = exactSum(xs)
				} else {
					out.s = orderedSum(xs, seed)
				}
				break
			}
			for k := range m {
				e := elem(a, k)
				switch {
				case nd.Op == OpSum:
					r += e
				case nd.Op == OpRMax && e > r, nd.Op == OpRMin && e < r:
					r = e
				}
			}
			out.s = r
		case nd.Vec:
			out.v = make([]float64, n)
			args := make([]float64, len(nd.Args))
			for k := range n {
				for i, a := range nd.Args {
					args[i] = elem(a, k)
				}
				out.v[k] = Apply(nd.Op, args...)
			}
		default:
			args := make([]float64, len(nd.Args))
			for i, a := range nd.Args {
				args[i] = elem(a, 0)
			}
			out.s = Apply(nd.Op, args...)
		}
		out.s = perturb(out.s, nd.id, -1)
		for k := range out.v {
			out.v[k] = perturb(out.v[k], nd.id, k)
		}
		vals[nd.id] = out
	}
	r := vals[g.Root.id]
	if g.Root.Vec {
		return r.v
	}
	return []float64{r.s}
}

// agree tells whether got, from the evaluator, is the reference ref,
// given refs, the reference with every value perturbed: NaN where the
// reference is NaN, the same infinity, and within a hundred times the
// perturbations' spread (a few ulps where they do not move it). Where a
// perturbation turns the result into another kind (NaN, an infinity,
// finite) or moves it by a good part of itself, the result hangs on
// rounding and any value agrees.
// exactSum is Σ xs rounded once to float64 (NaN where an addition of
// infinities would be).
func exactSum(xs []float64) float64 {
	inf := 0.0
	for _, x := range xs {
		switch {
		case math.IsNaN(x):
			return math.NaN()
		case math.IsInf(x, 0):
			if inf != 0 && inf != x {
				return math.NaN()
			}
			inf = x
		}
	}
	if inf != 0 {
		return inf
	}
	s := new(big.Float).SetPrec(2200)
	for _, x := range xs {
		s.Add(s, big.NewFloat(x))
	}
	f, _ := s.Float64()
	return f
}

// orderedSum adds xs in an order chosen by seed: 1 backwards, 2 pairwise
// by halves, 4 forwards (a scalar loop's, for short vectors), else in 8
// strided lanes added pairwise, as a vector loop does.
func orderedSum(xs []float64, seed uint64) float64 {
	var pairwise func([]float64) float64
	pairwise = func(x []float64) float64 {
		switch len(x) {
		case 0:
			return 0
		case 1:
			return x[0]
		}
		h := len(x) / 2
		return pairwise(x[:h]) + pairwise(x[h:])
	}
	switch seed {
	case 1:
		var r float64
		for k := len(xs) - 1; k >= 0; k-- {
			r += xs[k]
		}
		return r
	case 2:
		return pairwise(xs)
	case 4:
		var r float64
		for _, x := range xs {
			r += x
		}
		return r
	}
	lanes := make([]float64, 8)
	for k, x := range xs {
		lanes[k%8] += x
	}
	return pairwise(lanes)
}

func agree(got, ref float64, refs []float64) bool {
	kind := func(x float64) int {
		switch {
		case math.IsNaN(x):
			return 0
		case math.IsInf(x, 1):
			return 1
		case math.IsInf(x, -1):
			return 2
		}
		return 3
	}
	spread := 0.0
	for _, r := range refs {
		if kind(r) != kind(ref) {
			return true
		}
		if kind(r) == 3 {
			spread = max(spread, math.Abs(r-ref))
		}
	}
	// A perturbation of 1e-11 moving the result by 1e-4 of itself or more
	// (a difference of nearly equal sums, a quotient by one): rounding
	// decides it, and may make it anything, a division by zero included.
	if kind(ref) == 3 && spread > 1e-4*math.Abs(ref) {
		return true
	}
	if kind(got) != kind(ref) {
		return false
	}
	if kind(ref) != 3 {
		return true
	}
	return math.Abs(got-ref) <= 100*spread+4*math.Abs(ref)*0x1p-52+math.SmallestNonzeroFloat64
}

// FuzzFormula: whatever formula parses compiles, and the evaluator of
// package cpukern computes it over the vectors' elements as the reference
// does (refEval: Apply node by node). A formula that does not parse gets
// one line, a formula error.
func FuzzFormula(f *testing.F) {
	for _, s := range []struct {
		src  string
		data []byte
	}{
		{"exp(-sum((v-w)^2)/(2*x^2))", []byte{20, 150, 160, 141, 142, 143, 150}},
		{"sum(abs(v - w)) + max(v) * min(w) - mean(v*w)", []byte{9, 148, 0, 200, 3, 141, 1, 2}},
		{"where(v > w, sigmoid(v), tanh(w)) + log1p(abs(v)) ^ y", []byte{33, 150, 152, 5, 6, 7, 8, 240, 100, 30}},
		{"clamp(v, -1, x) * norm(w) + dot(v, w) / y", []byte{47, 100, 200, 11, 12, 150, 160, 170, 180}},
		{"!(v < x) || w >= y && sin(v) != cos(w)", []byte{3, 150, 130, 4, 4, 150, 150}},
		{"pow(v, w) - sqrt(x) + log(y) - -v^2", []byte{16, 160, 139, 255, 128, 141, 0}},
		{"sum(max(v, w) - min(v, w)) / (sum(v) - sum(w))", []byte{40, 1, 2, 141, 141, 11, 11}},
		{"mean(abs(v - mean(v - w))) + pi", nil},
		{"max(v, w, x)", nil},
		{"d = v - w; h = hist(d, -2, 3, 7); sum(min(h, hist(w, -2, 3, 7))) + max(h*x) - mean(floor(d)*round(w)) + sum(mod(v, y))", []byte{30, 150, 131, 141, 160, 135, 149, 2}},
		{"p = hist2(v, w, -3, 3, 4) / 5; -sum(where(p > 0, p*log(p), 0))", []byte{25, 140, 140, 137, 139, 143, 146, 0, 150}},
		{"sum(", nil},
	} {
		f.Add(s.src, s.data)
	}
	f.Fuzz(func(t *testing.T, src string, data []byte) {
		if len(src) > 4096 {
			t.Skip("long formulas are the scale tests' subject")
		}
		fm, err := Parse(src, Env{Flag: "--formula", Vars: fuzzVars})
		if err != nil {
			var fe *Error
			if !errors.As(err, &fe) || !errors.Is(err, ErrFormula) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("%q: error %q is not one line of a formula error", src, err)
			}
			return
		}
		n, scal, vec := fuzzInputs(data)
		g, err := fm.Graph(n)
		if err != nil {
			t.Fatalf("%q parses but does not build: %v", src, err)
		}
		p, err := Lower(g, []int{0, 1, 2, 3}, false)
		if err != nil {
			t.Fatalf("%q parses but does not compile: %v", src, err)
		}
		st := cpukern.NewFxState[float64](p)
		copy(st.Regs, scal)
		var out [][]float64
		if p.Outputs == 1 {
			out = [][]float64{make([]float64, n)}
		}
		st.Run(n, vec, out)
		got := []float64{st.Regs[p.Result]}
		if out != nil {
			got = out[0]
		}

		ref := refEval(g, n, scal, vec, 0)
		perturbed := [][]float64{refEval(g, n, scal, vec, 1), refEval(g, n, scal, vec, 2), refEval(g, n, scal, vec, 3),
			refEval(g, n, scal, vec, 4)}
		if len(got) != len(ref) {
			t.Fatalf("%q: the evaluator gave %d values, the reference %d", src, len(got), len(ref))
		}
		for k := range ref {
			refs := []float64{perturbed[0][k], perturbed[1][k], perturbed[2][k], perturbed[3][k]}
			if !agree(got[k], ref[k], refs) {
				t.Fatalf("%q over n=%d, x=%v, y=%v, v=%v, w=%v: element %d is %v, the reference %v (perturbed: %v)",
					src, n, scal[0], scal[1], vec[0], vec[1], k, got[k], ref[k], refs)
			}
		}
	})
}
