package cpukern

import (
	"math"
	"math/rand/v2"
	"testing"
)

// fxRef is each elementwise instruction's meaning, written out here.
func fxRef(op FxOp, a, b, c float64) float64 {
	b2f := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	switch op {
	case FxNeg:
		return -a
	case FxAdd:
		return a + b
	case FxSub:
		return a - b
	case FxMul:
		return a * b
	case FxDiv:
		return a / b
	case FxPow:
		return math.Pow(a, b)
	case FxAbs:
		return math.Abs(a)
	case FxExp:
		return math.Exp(a)
	case FxLog:
		return math.Log(a)
	case FxLog1p:
		return math.Log1p(a)
	case FxSqrt:
		return math.Sqrt(a)
	case FxSin:
		return math.Sin(a)
	case FxCos:
		return math.Cos(a)
	case FxTanh:
		return math.Tanh(a)
	case FxSigmoid:
		return 1 / (1 + math.Exp(-a))
	case FxMin:
		return math.Min(a, b)
	case FxMax:
		return math.Max(a, b)
	case FxLT:
		return b2f(a < b)
	case FxLE:
		return b2f(a <= b)
	case FxGT:
		return b2f(a > b)
	case FxGE:
		return b2f(a >= b)
	case FxEQ:
		return b2f(a == b)
	case FxNE:
		return b2f(a != b)
	case FxAnd:
		return b2f(a != 0 && b != 0)
	case FxOr:
		return b2f(a != 0 || b != 0)
	case FxNot:
		return b2f(a == 0)
	case FxWhere:
		if a != 0 {
			return b
		}
		return c
	case FxFloor:
		return math.Floor(a)
	case FxRound:
		return math.RoundToEven(a)
	case FxMod:
		return a - b*math.Floor(a/b)
	case FxAbsDiff:
		return math.Abs(a - b)
	case FxSqDiff:
		return (a - b) * (a - b)
	}
	panic("no reference")
}

// TestFormulaEvaluator runs every instruction on every instruction set
// the CPU has, float32 and float64, over lengths with short last chunks,
// against fxRef: elementwise (stored), folded into sums (FxRSumOp), and
// the reductions, with a broadcast register as one operand.
func TestFormulaEvaluator(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 13))
	top := tl()
	defer limitISA(top)
	for isa := top; isa >= isaBase; isa-- {
		limitISA(isa)
		for _, n := range []int{1, 15, 17, FxChunk, FxChunk + 3, 3*FxChunk - 1} {
			a, b, c := make([]float64, n), make([]float64, n), make([]float64, n)
			for i := range a {
				a[i], b[i] = rng.Float64()*2+0.1, rng.Float64()*2+0.1
				c[i] = float64(rng.IntN(3)) // zeros and ties for the comparisons
				if i%5 == 0 {
					b[i] = a[i]
				}
			}
			for op := FxNeg; op <= FxSqDiff; op++ {
				if op >= FxRSum && op <= FxRMin || op == FxHist || op == FxHist2 || op == FxBins {
					continue
				}
				checkElementwise(t, isa, op, n, a, b, c)
			}
			for _, op := range []FxOp{FxAdd, FxSub, FxMul, FxMin, FxMax, FxAbsDiff, FxSqDiff} {
				checkFold(t, isa, op, a, b)
			}
			checkReductions(t, isa, a)
		}
	}
}

func tl() int { return limitISA(isaAVX512) }

func checkElementwise(t *testing.T, isa int, op FxOp, n int, a, b, c []float64) {
	t.Helper()
	p := &FxProgram{Inputs: 3, Slots: 4, Outputs: 1, Regs: []float64{0},
		Blocks: []FxBlock{{Vector: true, Body: []FxIns{{Op: op, Dst: 3, A: 0, B: 1, C: 2}, {Op: FxStore, Dst: 0, A: 3}}}}}
	out64 := make([]float64, n)
	NewFxState[float64](p).Run(n, [][]float64{a, b, c}, [][]float64{out64})
	a32, b32, c32 := f32(a), f32(b), f32(c)
	out32 := make([]float32, n)
	NewFxState[float32](p).Run(n, [][]float32{a32, b32, c32}, [][]float32{out32})
	for i := range n {
		want := fxRef(op, a[i], b[i], c[i])
		if d := math.Abs(out64[i] - want); d > 1e-15*math.Max(1, math.Abs(want)) {
			t.Fatalf("isa %d n %d op %d float64 [%d]: %v, want %v", isa, n, op, i, out64[i], want)
		}
		want32 := fxRef(op, float64(a32[i]), float64(b32[i]), float64(c32[i]))
		if d := math.Abs(float64(out32[i]) - want32); d > 4e-7*math.Max(1, math.Abs(want32)) {
			t.Fatalf("isa %d n %d op %d float32 [%d]: %v, want %v", isa, n, op, i, out32[i], want32)
		}
	}
}

func checkFold(t *testing.T, isa int, op FxOp, a, b []float64) {
	t.Helper()
	n := len(a)
	// Σ op(a, r) with r a register broadcast into slot 2.
	p := &FxProgram{Inputs: 1, Slots: 2, Regs: []float64{0, 0.75},
		Blocks: []FxBlock{{Vector: true,
			Prologue: []FxIns{{Op: FxInitSum, Dst: 0}, {Op: FxBcast, Dst: 1, A: 1}},
			Body:     []FxIns{{Op: FxRSumOp, Dst: 0, A: 0, B: 1, C: int32(op)}}}}}
	var want float64
	for i := range a {
		want += fxRef(op, a[i], 0.75, 0)
	}
	s := NewFxState[float64](p)
	s.Run(n, [][]float64{a}, nil)
	if d := math.Abs(s.Regs[0] - want); d > 1e-12*math.Max(1, math.Abs(want)) {
		t.Errorf("isa %d n %d fold %d: %v, want %v", isa, n, op, s.Regs[0], want)
	}
}

func checkReductions(t *testing.T, isa int, a []float64) {
	t.Helper()
	p := &FxProgram{Inputs: 1, Slots: 1, Regs: []float64{0, 0, 0},
		Blocks: []FxBlock{{Vector: true,
			Prologue: []FxIns{{Op: FxInitSum, Dst: 0}, {Op: FxInitMax, Dst: 1}, {Op: FxInitMin, Dst: 2}},
			Body:     []FxIns{{Op: FxRSum, Dst: 0, A: 0}, {Op: FxRMax, Dst: 1, A: 0}, {Op: FxRMin, Dst: 2, A: 0}}}}}
	sum, mx, mn := 0.0, math.Inf(-1), math.Inf(1)
	for _, x := range a {
		sum, mx, mn = sum+x, math.Max(mx, x), math.Min(mn, x)
	}
	s := NewFxState[float32](p)
	a32 := f32(a)
	s.Run(len(a), [][]float32{a32}, nil)
	if math.Abs(s.Regs[0]-sum) > 1e-5*math.Abs(sum) || s.Regs[1] != float64(float32(mx)) || s.Regs[2] != float64(float32(mn)) {
		t.Errorf("isa %d n %d: sum, max, min %v, want %v %v %v", isa, len(a), s.Regs, sum, mx, mn)
	}
	// NaN elements are skipped, wherever they sit in a chunk.
	nan := append([]float32(nil), a32...)
	for i := 0; i < len(nan); i += 17 {
		nan[i] = float32(math.NaN())
	}
	sk := NewFxState[float32](p)
	sk.Run(len(nan), [][]float32{nan}, nil)
	wmx, wmn := math.Inf(-1), math.Inf(1)
	for i, x := range nan {
		if i%17 != 0 {
			wmx, wmn = math.Max(wmx, float64(x)), math.Min(wmn, float64(x))
		}
	}
	if sk.Regs[1] != wmx || sk.Regs[2] != wmn {
		t.Errorf("isa %d n %d with NaN: max, min %v %v, want %v %v", isa, len(a), sk.Regs[1], sk.Regs[2], wmx, wmn)
	}
	// The same in pieces, as Stream feeds a response row by row.
	st := NewFxState[float32](p)
	got := st.Stream(a32, func(piece func(lo, hi int)) {
		for lo := 0; lo < len(a32); lo += 7 {
			piece(lo, min(lo+7, len(a32)))
		}
	})
	if math.Abs(got-sum) > 1e-5*math.Abs(sum) || st.Regs[1] != s.Regs[1] {
		t.Errorf("isa %d n %d streamed: %v, want %v", isa, len(a), st.Regs, s.Regs)
	}
}

func f32(v []float64) []float32 {
	o := make([]float32, len(v))
	for i, x := range v {
		o[i] = float32(x)
	}
	return o
}

// TestFormulaPairs: the per-pair evaluation (tiles of rows and columns
// through the vector axis together) against loops, on every instruction
// set, odd sizes, with row values in registers.
func TestFormulaPairs(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 19))
	top := tl()
	defer limitISA(top)
	// −Σ|a−b| + max(a·b)·ra − rb: two reductions in one pass, row values.
	p := &FxProgram{Inputs: 2, Slots: 3, Regs: []float64{0, 0, 0, 0, 0, 0},
		Blocks: []FxBlock{
			{Vector: true, Prologue: []FxIns{{Op: FxInitSum, Dst: 2}, {Op: FxInitMax, Dst: 3}},
				Body: []FxIns{{Op: FxRSumOp, Dst: 2, A: 0, B: 1, C: int32(FxAbsDiff)}, {Op: FxMul, Dst: 2, A: 0, B: 1}, {Op: FxRMax, Dst: 3, A: 2}}},
			{Body: []FxIns{{Op: FxMul, Dst: 4, A: 3, B: 0}, {Op: FxSub, Dst: 4, A: 4, B: 2}, {Op: FxSub, Dst: 5, A: 4, B: 1}}},
		}, Result: 5}
	for isa := top; isa >= isaBase; isa-- {
		limitISA(isa)
		for _, d := range []int{3, 1037, 9001} {
			m, n := 5, 19
			a, x := make([]float32, m*d), make([]float32, n*d)
			ra, rb := make([]float64, m), make([]float64, n)
			for i := range a {
				a[i] = rng.Float32()
			}
			for i := range x {
				x[i] = rng.Float32()
			}
			for i := range ra {
				ra[i] = rng.Float64()
			}
			for i := range rb {
				rb[i] = rng.Float64()
			}
			out := make([]float32, m*n)
			NewFxState[float32](p).Pairs(m, n, d, a, d, x, d, out, n, ra, rb, 1)
			for i := range m {
				for j := range n {
					mx := math.Inf(-1)
					for k := range d {
						mx = math.Max(mx, float64(a[i*d+k]*x[j*d+k]))
					}
					sum := 0.0
					for k := range d {
						sum += math.Abs(float64(a[i*d+k]) - float64(x[j*d+k]))
					}
					exact := mx*ra[i] - sum - rb[j]
					if got := float64(out[i*n+j]); math.Abs(got-exact) > 1e-5*math.Max(1, math.Abs(exact)) {
						t.Fatalf("isa %d d %d pair (%d, %d): %v, want %v", isa, d, i, j, got, exact)
					}
				}
			}
		}
	}
}

// An input of one value is the same value for every element: the bits
// of the input repeated, over whole and short chunks, every instruction
// set.
func TestFormulaBroadcastInput(t *testing.T) {
	top := tl()
	defer limitISA(top)
	// (a·b + c)/b then exp: inputs a and c broadcast in turn.
	p := &FxProgram{Inputs: 3, Slots: 4, Outputs: 1, Regs: []float64{0},
		Blocks: []FxBlock{{Vector: true, Body: []FxIns{{Op: FxMul, Dst: 3, A: 0, B: 1}, {Op: FxAdd, Dst: 3, A: 3, B: 2},
			{Op: FxDiv, Dst: 3, A: 3, B: 1}, {Op: FxExp, Dst: 3, A: 3}, {Op: FxStore, Dst: 0, A: 3}}}}}
	rng := rand.New(rand.NewPCG(5, 6))
	for isa := top; isa >= isaBase; isa-- {
		limitISA(isa)
		for _, n := range []int{2, 7, FxChunk, FxChunk + 13, 3*FxChunk - 1} {
			b := make([]float32, n)
			for i := range b {
				b[i] = float32(rng.NormFloat64())
			}
			va, vc := float32(rng.NormFloat64()), float32(rng.NormFloat64())
			full := func(v float32) []float32 {
				s := make([]float32, n)
				for i := range s {
					s[i] = v
				}
				return s
			}
			want, got := make([]float32, n), make([]float32, n)
			NewFxState[float32](p).Run(n, [][]float32{full(va), b, full(vc)}, [][]float32{want})
			NewFxState[float32](p).Run(n, [][]float32{{va}, b, {vc}}, [][]float32{got})
			for i := range n {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("isa %d n %d [%d]: %v, want %v", isa, n, i, got[i], want[i])
				}
			}
		}
	}
}
