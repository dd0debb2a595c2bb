package formula

import (
	"go/token"
	"math"
	"testing"
)

// TestOpTable: the table is whole and consistent: every operation named,
// with the arity and code its kind needs; every function of an operation
// takes as many arguments as the operation; every operator reads back to
// its operation.
func TestOpTable(t *testing.T) {
	for o, info := range Ops() {
		op := Op(o)
		switch {
		case info.Op != op:
			t.Errorf("Ops()[%d] is %v", o, info.Op)
		case info.Name == "" || op.String() != info.Name:
			t.Errorf("operation %d has no name", o)
		case info.Kind == Leaf && info.Arity != 0, info.Kind == Reduction && info.Arity != 1:
			t.Errorf("%s: %d arguments for its kind", info.Name, info.Arity)
		case info.Kind == Elementwise && (info.Go == nil || info.C == "" || info.CVector == "" || info.CUDA == ""):
			t.Errorf("%s: elementwise without its Go, C or CUDA code", info.Name)
		case info.Kind == Leaf && info.CUDA != "":
			t.Errorf("%s: CUDA code for a number or a variable", info.Name)
		case info.Kind == Reduction && (info.CUDA == "" || info.CUDAInit == ""):
			t.Errorf("%s: a reduction without its CUDA code", info.Name)
		}
		if info.Token != token.ILLEGAL {
			m := binops
			if info.Arity == 1 {
				m = unops
			}
			if m[info.Token] != op {
				t.Errorf("%s: operator %s reads as %v", info.Name, info.Token, m[info.Token])
			}
		}
	}
	type sig struct {
		name  string
		arity int
	}
	seen := map[sig]bool{}
	for _, fn := range functions {
		if (fn.op == OpConst) == (fn.build == nil) {
			t.Errorf("function %s: needs an operation or a builder, not both", fn.Name)
		}
		if fn.op != OpConst && fn.op.Arity() != fn.arity() {
			t.Errorf("function %s(%s): %d arguments, its operation %d", fn.Name, fn.Args, fn.arity(), fn.op.Arity())
		}
		if k := (sig{fn.Name, fn.arity()}); seen[k] {
			t.Errorf("two functions %s of %d arguments", fn.Name, fn.arity())
		} else {
			seen[k] = true
		}
	}
}

// TestApplyTable: Apply computes each operation as written out here,
// independently of the table.
func TestApplyTable(t *testing.T) {
	for _, c := range []struct {
		op   Op
		args []float64
		want float64
	}{
		{OpNeg, []float64{2}, -2}, {OpAdd, []float64{2, 3}, 5}, {OpSub, []float64{2, 3}, -1}, {OpMul, []float64{2, 3}, 6},
		{OpDiv, []float64{3, 2}, 1.5}, {OpPow, []float64{2, 10}, 1024}, {OpAbs, []float64{-3}, 3},
		{OpExp, []float64{0}, 1}, {OpLog, []float64{1}, 0}, {OpLog1p, []float64{0}, 0}, {OpSqrt, []float64{9}, 3},
		{OpSin, []float64{0}, 0}, {OpCos, []float64{0}, 1}, {OpTanh, []float64{0}, 0}, {OpSigmoid, []float64{0}, 0.5},
		{OpMin, []float64{2, math.NaN()}, 2}, {OpMax, []float64{2, math.NaN()}, 2}, {OpMin, []float64{3, 2}, 2},
		{OpMax, []float64{3, 4}, 4}, {OpLT, []float64{1, 2}, 1}, {OpLE, []float64{2, 2}, 1}, {OpGT, []float64{1, 2}, 0},
		{OpGE, []float64{1, 2}, 0}, {OpEQ, []float64{2, 2}, 1}, {OpNE, []float64{2, 2}, 0}, {OpAnd, []float64{1, 0}, 0},
		{OpOr, []float64{1, 0}, 1}, {OpNot, []float64{0}, 1}, {OpWhere, []float64{math.NaN(), 1, 2}, 1},
		{OpWhere, []float64{0, 1, 2}, 2}, {OpFloor, []float64{-1.5}, -2}, {OpFloor, []float64{2}, 2},
		{OpRound, []float64{2.5}, 2}, {OpRound, []float64{-0.5}, 0}, {OpRound, []float64{1.5}, 2}, {OpRound, []float64{0.7}, 1},
		{OpMod, []float64{-1, 3}, 2}, {OpMod, []float64{1, -3}, -2}, {OpMod, []float64{7.5, 2}, 1.5}, {OpMod, []float64{-7.5, -2}, -1.5},
	} {
		if got := Apply(c.op, c.args...); got != c.want {
			t.Errorf("Apply(%v, %v) = %v, want %v", c.op, c.args, got, c.want)
		}
	}
	if got := Apply(OpMod, -4, 2); got != 0 || !math.Signbit(Apply(OpMod, 4, -2)) || math.Signbit(got) {
		t.Errorf("mod(-4, 2) = %v, mod(4, -2) = %v: want 0 and -0 (the sign of the divisor)", got, Apply(OpMod, 4, -2))
	}
	if got := Apply(OpMod, 1, 0); !math.IsNaN(got) {
		t.Errorf("mod(1, 0) = %v, want NaN", got)
	}
	if got := Apply(OpMin, math.NaN(), 2); !math.IsNaN(got) {
		t.Errorf("min(NaN, 2) = %v, want NaN (a NaN first argument is kept)", got)
	}
}

// TestPowOfSubnormal: x^y and ln x for a subnormal x as C's pow and log
// give them (Go's math.Pow and math.Log are off there): against
// exp(y·ln x) and values from C's log.
func TestPowOfSubnormal(t *testing.T) {
	for _, c := range []struct{ x, y float64 }{{5e-324, -0.625}, {2e-322, -0.625}, {3e-310, 0.5}, {1e-315, -1.0 / 3}, {-4e-320, 3}} {
		got := pow(c.x, c.y)
		f, e := math.Frexp(math.Abs(c.x)) // ln|x| = ln f + e·ln 2: math.Log is off for a subnormal
		want := math.Exp(c.y * (math.Log(f) + float64(e)*math.Ln2))
		if c.x < 0 {
			want = -want // an odd integer power
		}
		if math.Abs(got-want) > 1e-9*math.Abs(want) {
			t.Errorf("pow(%g, %g) = %g, want %g", c.x, c.y, got, want)
		}
	}
	if got := pow(2, 10); got != 1024 {
		t.Errorf("pow(2, 10) = %g", got)
	}
	for x, want := range map[float64]float64{5e-324: -744.4400719213812, 1e-315: -725.3143042946427, 3e-310: -712.7027665394861} {
		if got := log(x); math.Abs(got-want) > 1e-12*math.Abs(want) {
			t.Errorf("log(%g) = %.16g, want %.16g", x, got, want)
		}
	}
}
