package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

// gradQueries are queries for the gradient checks: testQueries' mix
// (below a, above the last bound, on nodes and on the bounds, uniform
// inside), plus points a thousandth of a step either side of nodes.
func gradQueries(rng *rand.Rand, n int, a, dx float64, g int) []float64 {
	x := testQueries(rng, n, a, dx, g)
	for i := 4; i < n; i += 10 {
		x[i] = a + (float64(rng.IntN(g+1))+[]float64{-1e-3, 1e-3}[rng.IntN(2)])*dx
	}
	return x
}

// refCost is Σ_i Σ_o up[i, o]·out[i, o] for the forward of reduce at the
// queries x, out[i] refReduce's (1 or m values): the cost whose gradient
// the backward returns.
func refCost(f []float64, m, g int, a, dx float64, r Reduce, x, up []float64) float64 {
	c, per := 0.0, 1
	if r == ReduceNone {
		per = m
	}
	for i, xv := range x {
		for o, v := range refReduce(refInterp(f, m, g, a, dx, xv), r) {
			c += up[i*per+o] * v
		}
	}
	return c
}

// fdQueries is the gradient of refCost with respect to each query by
// finite differences of step h·dx: central, except within 3h of a cell's
// edge, where the forward's value is the cubic of the cell on the right
// (the floor's) and a one-sided second-order difference stays in that
// cell; outside [a, ub), where the forward is constant, it looks away
// from the bound (at ub itself, to the right: the derivative from the
// right, as everywhere).
func fdQueries(f []float64, m, g int, a, dx float64, r Reduce, x, up []float64) []float64 {
	const h = 1e-5
	ub := a + float64(g+1)*dx
	per := 1
	if r == ReduceNone {
		per = m
	}
	d := make([]float64, len(x))
	for i, xv := range x {
		ui := up[i*per : (i+1)*per]
		cost := func(v float64) float64 { return refCost(f, m, g, a, dx, r, []float64{v}, ui) }
		u := (xv - a) / dx
		e := h * dx
		left := (3*cost(xv) - 4*cost(xv-e) + cost(xv-2*e)) / (2 * e)
		right := (-3*cost(xv) + 4*cost(xv+e) - cost(xv+2*e)) / (2 * e)
		switch {
		case xv < a: // clamped: look away from the bound
			d[i] = left
		case xv >= ub: // clamped, and from the right at ub itself
			d[i] = right
		case math.Floor(u)+1-u < 3*h:
			d[i] = left
		case u-math.Floor(u) < 3*h:
			d[i] = right
		default:
			d[i] = (cost(xv+e) - cost(xv-e)) / (2 * e)
		}
	}
	return d
}

// fdValues is the gradient of refCost with respect to each value f[j, i]
// by central differences (the cost is linear or quadratic in the values:
// they are exact but for rounding).
func fdValues(f []float64, m, g int, a, dx float64, r Reduce, x, up []float64) []float64 {
	d := make([]float64, len(f))
	fc := slices.Clone(f)
	for p := range f {
		e := 1e-4 * math.Max(1, math.Abs(f[p]))
		fc[p] = f[p] + e
		hi := refCost(fc, m, g, a, dx, r, x, up)
		fc[p] = f[p] - e
		lo := refCost(fc, m, g, a, dx, r, x, up)
		fc[p] = f[p]
		d[p] = (hi - lo) / (2 * e)
	}
	return d
}

// checkClose fails where |got − want| > tol·(|want| + 1e-3·max|want|): an
// element's own error, not one averaged away over the others.
func checkClose[T float32 | float64](t *testing.T, what string, got []T, want []float64, tol float64) {
	t.Helper()
	big := 0.0
	for _, w := range want {
		big = math.Max(big, math.Abs(w))
	}
	if big == 0 {
		t.Fatalf("%s: the reference is all zeros: the check could not fail", what)
	}
	bad := 0
	for i, w := range want {
		if d := math.Abs(float64(got[i]) - w); !(d <= tol*(math.Abs(w)+1e-3*big)) {
			if bad < 5 {
				t.Errorf("%s[%d] = %.10g, want %.10g (relative %.3g)", what, i, got[i], w, d/math.Max(math.Abs(w), 1e-300))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements off", what, bad, len(want))
	}
}

type gradCase struct {
	m, g, n int
	r       Reduce
	me      Method
	values  bool // the values are an input (NewInterp1DValues)
	local   bool
}

func gradCases() []gradCase {
	var cs []gradCase
	for _, s := range []struct{ m, g, n int }{{1, 4, 33}, {3, 7, 61}, {13, 29, 97}, {37, 11, 151}} {
		for _, r := range []Reduce{ReduceSumSq, ReduceSum, ReduceNone} {
			for _, me := range []Method{MethodAuto, MethodDirect} {
				for _, v := range []bool{false, true} {
					cs = append(cs, gradCase{s.m, s.g, s.n, r, me, v, false})
				}
			}
		}
	}
	for _, r := range []Reduce{ReduceSumSq, ReduceSum, ReduceNone} {
		cs = append(cs, gradCase{5, 9, 41, r, MethodAuto, true, true})
	}
	return cs
}

// gradOps builds the forward of c and its two backwards (nil where the
// values are constants) on the (m, g) values f of the grid a + i·dx.
func gradOps(t *testing.T, c gradCase, f []float64, a, dx float64, dt tensor.Dtype) (fwd *Interp1D, gx, gf *Interp1DGrad) {
	t.Helper()
	if c.values {
		var err error
		if fwd, err = NewInterp1DValues(c.m, c.g, a, dx, c.r, c.me, dt, c.n); err != nil {
			t.Fatal(err)
		}
	} else {
		tab, err := NewInterpTable(f, c.m, c.g, a, dx, c.r, c.me, dt)
		if err != nil {
			t.Fatal(err)
		}
		fwd = NewInterp1D(tab, c.r, c.me, dt, c.n)
	}
	fwd.Local = c.local
	gx = NewInterp1DGrad(fwd, WRTQueries)
	if c.values {
		gf = NewInterp1DGrad(fwd, WRTValues)
	}
	return fwd, gx, gf
}

// gradInputs are the backward's inputs: x, the values where they are an
// input, the upstream gradient.
func gradInputs(fwd *Interp1D, dt tensor.Dtype, x, f, up []float64) []G.Value {
	in := []G.Value{opstest.DenseOf(dt, x)}
	if fwd.ValuesInput() {
		in = append(in, tensor.New(tensor.WithShape(fwd.Table.M, fwd.Table.G), tensor.WithBacking(opstest.DenseOf(dt, f).Data())))
	}
	u := opstest.DenseOf(dt, up)
	if fwd.Reduce == ReduceNone {
		u.Reshape(fwd.Batch, fwd.Table.M)
	}
	return append(in, u)
}

// TestInterpGradFiniteDifferences: the backward in float64 against finite
// differences of the float64 reference forward (refInterp), for every
// reduction and method, constant values and values as an input, a grid in
// the local coordinate; the float32 backward against the float64 one on
// the same (float32-exact) data: it computes the same formula in float64
// and rounds once, so it is checked against that formula, not against
// finite differences float32 cannot resolve.
func TestInterpGradFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	for _, c := range gradCases() {
		name := fmt.Sprintf("M%d_G%d_N%d/%v/%v/values=%t/local=%t", c.m, c.g, c.n, c.r, c.me, c.values, c.local)
		t.Run(name, func(t *testing.T) {
			// Multiples of 1/64: every node and both bounds are exact in
			// float32, so the queries on them stay on them.
			a, dx := math.Round(rng.NormFloat64()*3*64)/64, float64(1+rng.IntN(63))/64
			if c.local {
				a = 1e3
			}
			f := opstest.Widen(opstest.Narrow(opstest.Normals64(rng, c.m*c.g)))
			for i := range f {
				f[i] += 0.25
			}
			qa := a
			if c.local {
				qa = 0
			}
			x := opstest.Widen(opstest.Narrow(gradQueries(rng, c.n, qa, dx, c.g)))
			nup := c.n
			if c.r == ReduceNone {
				nup *= c.m
			}
			up := opstest.Widen(opstest.Narrow(opstest.Normals64(rng, nup)))
			wantX := fdQueries(f, c.m, c.g, qa, dx, c.r, x, up)
			var wantF []float64
			if c.values {
				wantF = fdValues(f, c.m, c.g, qa, dx, c.r, x, up)
			}
			var got64 [2][]float64
			for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
				fwd, gx, gf := gradOps(t, c, f, a, dx, dt)
				in := gradInputs(fwd, dt, x, f, up)
				for k, op := range []*Interp1DGrad{gx, gf} {
					if op == nil {
						continue
					}
					out, err := op.Do(in...)
					if err != nil {
						t.Fatal(err)
					}
					got := opstest.ValuesOf(out.(*tensor.Dense))
					what := fmt.Sprintf("%v d/d%v", dt, op.WRT)
					switch {
					case dt == tensor.Float64 && k == 0:
						checkClose(t, what, got, wantX, 1e-4)
					case dt == tensor.Float64:
						checkClose(t, what, got, wantF, 1e-4)
					default:
						checkClose(t, what, got, got64[k], 1e-5)
					}
					got64[k] = got
				}
			}
		})
	}
}

// TestInterpGradThreads: both backwards give the same bits on one core and
// on several (the values' sums run over the queries in order whatever the
// split of the interpolants).
func TestInterpGradThreads(t *testing.T) {
	rng := rand.New(rand.NewPCG(73, 74))
	const m, g, n = 45, 31, 5003
	f := opstest.Normals64(rng, m*g)
	x := gradQueries(rng, n, 0.3, 0.01, g)
	for _, r := range []Reduce{ReduceSumSq, ReduceSum, ReduceNone} {
		nup := n
		if r == ReduceNone {
			nup *= m
		}
		up := opstest.Normals64(rng, nup)
		c := gradCase{m, g, n, r, MethodAuto, true, false}
		var runs [][]float64
		for _, procs := range []int{1, 2, 3, 7} {
			old := runtime.GOMAXPROCS(procs)
			fwd, gx, gf := gradOps(t, c, f, 0.3, 0.01, tensor.Float64)
			in := gradInputs(fwd, tensor.Float64, x, f, up)
			var got []float64
			for _, op := range []*Interp1DGrad{gx, gf} {
				out, err := op.Do(in...)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, opstest.ValuesOf(out.(*tensor.Dense))...)
			}
			runtime.GOMAXPROCS(old)
			runs = append(runs, got)
		}
		for k := 1; k < len(runs); k++ {
			if !slices.Equal(runs[k], runs[0]) {
				t.Errorf("%v: the gradients on %d goroutines differ from those on one", r, []int{1, 2, 3, 7}[k])
			}
		}
	}
}

// TestInterpGradTapeMachine: G.Grad of Σ U∘Interp1D(x, f) through a
// TapeMachine, run several times with new x, f and U bound with Let, gives
// what the backward ops give directly, and the gradient buffers are the
// ops' own (the same from run to run).
func TestInterpGradTapeMachine(t *testing.T) {
	rng := rand.New(rand.NewPCG(75, 76))
	const m, g, n = 7, 19, 203
	for _, r := range []Reduce{ReduceSumSq, ReduceSum, ReduceNone} {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			t.Run(fmt.Sprintf("%v/%v", r, dt), func(t *testing.T) {
				a, dx := -0.7, 0.13
				fwd, err := NewInterp1DValues(m, g, a, dx, r, MethodAuto, dt, n)
				if err != nil {
					t.Fatal(err)
				}
				gr := G.NewGraph()
				xn := G.NewVector(gr, dt, G.WithShape(n), G.WithName("x"))
				fn := G.NewMatrix(gr, dt, G.WithShape(m, g), G.WithName("f"))
				out, err := G.ApplyOp(fwd, xn, fn)
				if err != nil {
					t.Fatal(err)
				}
				ushape := []int{n}
				if r == ReduceNone {
					ushape = []int{n, m}
				}
				un := G.NewTensor(gr, dt, len(ushape), G.WithShape(ushape...), G.WithName("U"))
				cost := G.Must(G.Sum(G.Must(G.HadamardProd(out, un))))
				grads, err := G.Grad(cost, xn, fn)
				if err != nil {
					t.Fatal(err)
				}
				var gx, gf G.Value
				G.Read(grads[0], &gx)
				G.Read(grads[1], &gf)
				vm := G.NewTapeMachine(gr)
				defer vm.Close()
				var bufs []any
				for run := range 3 {
					x := gradQueries(rng, n, a, dx, g)
					f := opstest.Normals64(rng, m*g)
					up := opstest.Normals64(rng, tensor.Shape(ushape).TotalSize())
					in := gradInputs(fwd, dt, x, f, up)
					for k, node := range []*G.Node{xn, fn, un} {
						if err := G.Let(node, in[k]); err != nil {
							t.Fatal(err)
						}
					}
					if err := vm.RunAll(); err != nil {
						t.Fatal(err)
					}
					for k, wrt := range []InterpWRT{WRTQueries, WRTValues} {
						want, err := NewInterp1DGrad(fwd, wrt).Do(in...)
						if err != nil {
							t.Fatal(err)
						}
						got := []G.Value{gx, gf}[k].(*tensor.Dense)
						if run == 0 {
							bufs = append(bufs, got.Uintptr())
						} else if got.Uintptr() != bufs[k] {
							t.Errorf("run %d: d/d%v is in a new buffer", run, wrt)
						}
						if e := opstest.RelErr(opstest.ValuesOf(got), opstest.ValuesOf(want.(*tensor.Dense))); !(e <= 1e-12) {
							t.Errorf("run %d: d/d%v: G.Grad differs from the backward op by %.3g", run, wrt, e)
						}
					}
					vm.Reset()
				}
			})
		}
	}
}

// refGrad is the gradient of refCost with respect to the queries and to
// the values, written out: each query placed as refInterp places it, its
// weights w and their derivatives w' (zero where the query is clamped),
// then the chain rule one interpolant at a time.
func refGrad(f []float64, m, g int, a, dx float64, r Reduce, x, up []float64) (gx, gf []float64) {
	A := []float64{-1.0 / 16, 9.0 / 16, 9.0 / 16, -1.0 / 16}
	B := []float64{1.0 / 24, -9.0 / 8, 9.0 / 8, -1.0 / 24}
	C := []float64{1.0 / 4, -1.0 / 4, -1.0 / 4, 1.0 / 4}
	D := []float64{-1.0 / 6, 1.0 / 2, -1.0 / 2, 1.0 / 6}
	ub := a + float64(g+1)*dx
	gx, gf = make([]float64, len(x)), make([]float64, m*g)
	fp := func(j, p int) float64 {
		if p < 1 || p > g {
			return 0
		}
		return f[j*g+p-1]
	}
	for i, xv := range x {
		xc := math.Min(math.Max(xv, a), ub) - a
		ix := math.Floor(xc / dx)
		t := xc/dx - (ix + 0.5)
		s := min(max(int(ix), 0), g-2)
		var w, dw [4]float64
		for k := range 4 {
			w[k] = A[k] + t*B[k] + t*t*C[k] + t*t*t*D[k]
			if xv >= a && xv < ub { // from the right: clamped at ub
				dw[k] = (B[k] + 2*t*C[k] + 3*t*t*D[k]) / dx
			}
		}
		for j := range m {
			var v, dv float64
			for k := range 4 {
				v += w[k] * fp(j, s+k)
				dv += dw[k] * fp(j, s+k)
			}
			var c float64
			switch r {
			case ReduceNone:
				c = up[i*m+j]
			case ReduceSum:
				c = up[i]
			default:
				c = 2 * up[i] * v
			}
			gx[i] += c * dv
			for k := range 4 {
				if p := s + k; p >= 1 && p <= g {
					gf[j*g+p-1] += c * w[k]
				}
			}
		}
	}
	return gx, gf
}

// benchmarkInterpGrad times, at the seed's table (300 interpolants on a
// 4096-point grid) and batches of 65,536 float32 queries, the forward op
// alone or followed by its backward with respect to wrt, as a step of
// gradient descent runs them. values makes the table's values an input of
// the op (needed for their gradient), refilled every run; else the table
// is a constant, its Gram tables made once.
func benchmarkInterpGrad(b *testing.B, r Reduce, values bool, wrt ...InterpWRT) {
	const m, g, n = 300, 4096, 1 << 16
	rng := rand.New(rand.NewPCG(3, 4))
	f := opstest.Widen(opstest.Uniform32(rng, m*g))
	var fwd *Interp1D
	if values {
		var err error
		if fwd, err = NewInterp1DValues(m, g, 0, 1.0/float64(g-1), r, MethodAuto, tensor.Float32, n); err != nil {
			b.Fatal(err)
		}
	} else {
		tab, err := NewInterpTable(f, m, g, 0, 1.0/float64(g-1), r, MethodAuto, tensor.Float32)
		if err != nil {
			b.Fatal(err)
		}
		fwd = NewInterp1D(tab, r, MethodAuto, tensor.Float32, n)
	}
	x := opstest.Widen(opstest.Uniform32(rng, n))
	ushape := []int{n}
	if r == ReduceNone {
		ushape = []int{n, m}
	}
	up := opstest.Normals64(rng, tensor.Shape(ushape).TotalSize())
	in := gradInputs(fwd, tensor.Float32, x, f, up)
	var backs []*Interp1DGrad
	for _, w := range wrt {
		backs = append(backs, NewInterp1DGrad(fwd, w))
	}
	for b.Loop() {
		if _, err := fwd.Do(in[:len(in)-1]...); err != nil {
			b.Fatal(err)
		}
		for _, op := range backs {
			if _, err := op.Do(in...); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "queries/s")
}

func BenchmarkInterpGradSumSqForward(b *testing.B) { benchmarkInterpGrad(b, ReduceSumSq, false) }
func BenchmarkInterpGradSumSqForwardQueries(b *testing.B) {
	benchmarkInterpGrad(b, ReduceSumSq, false, WRTQueries)
}
func BenchmarkInterpGradSumSqValuesForward(b *testing.B) { benchmarkInterpGrad(b, ReduceSumSq, true) }
func BenchmarkInterpGradSumSqValuesForwardBoth(b *testing.B) {
	benchmarkInterpGrad(b, ReduceSumSq, true, WRTQueries, WRTValues)
}
func BenchmarkInterpGradNoneForward(b *testing.B) { benchmarkInterpGrad(b, ReduceNone, false) }
func BenchmarkInterpGradNoneForwardQueries(b *testing.B) {
	benchmarkInterpGrad(b, ReduceNone, false, WRTQueries)
}
