package formula

import (
	"fmt"
	"go/token"
	"math"
)

//go:generate go run ./internal/gen -out ../cpukern

// The table of the language's operations: each is declared here once,
// with its reference in Go and its code for the evaluator of package
// cpukern and for CUDA. The parser takes the operators and functions from
// it, Apply its Go code, the CUDA emitter its CUDA code, and `go generate`
// writes the evaluator's instruction numbers and code from it into
// internal/cpukern/formula_ops.h and formula_ops.go (a test fails when
// those files are not what the table makes).

// Op is an operation of the formula's graph.
type Op uint8

// The operations. The elementwise ones apply lane by lane to vectors;
// OpSum, OpRMax and OpRMin reduce a vector to one number.
const (
	OpConst Op = iota // a number
	OpVar             // a variable, by index into the Env's Vars
	OpNeg
	OpAdd
	OpSub
	OpMul
	OpDiv
	OpPow
	OpAbs
	OpExp
	OpLog
	OpLog1p
	OpSqrt
	OpSin
	OpCos
	OpTanh
	OpSigmoid
	OpMin // elementwise minimum of two
	OpMax
	OpLT
	OpLE
	OpGT
	OpGE
	OpEQ
	OpNE
	OpAnd
	OpOr
	OpNot
	OpWhere // where(c, x, y): x where c ≠ 0, else y
	OpFloor
	OpRound // half to even, as NumPy's round
	OpMod   // as NumPy's mod: the sign of the divisor
	OpSum   // reductions
	OpRMax
	OpRMin
	OpHist  // hist(v, lo, hi, bins): the counts of a vector's elements in equal bins
	OpHist2 // hist2(u, v, lo, hi, bins): the counts of pairs (u, v) in bins × bins cells
	numOps
)

// Kind says how an operation applies.
type Kind uint8

const (
	Leaf        Kind = iota // a number or a variable: no arguments
	Elementwise             // on numbers, and lane by lane on vectors
	Reduction               // a vector to one number
	Histogram               // one or two vectors to the counts of a histogram (Node.Range)
)

// OpInfo is everything the compiler knows of one operation.
type OpInfo struct {
	Op    Op
	Name  string // as written: the operator or the function's name
	Arity int
	Kind  Kind
	// Token is the operator that writes it (unary for arity 1, binary for
	// 2); token.ILLEGAL when it is called by name.
	Token token.Token
	// Commutes: the arguments may be swapped (two formulas differing only
	// in their order are the same).
	Commutes bool

	// Go computes the operation on numbers, in float64: the reference
	// every other implementation is checked against (Apply).
	Go func(v []float64) float64

	// Ins is the evaluator's instruction: TL_FX_<INS> in C, Fx<Ins> in Go,
	// numbered as the Op.
	Ins string
	// C is the evaluator's expression over the doubles a, b and c (the
	// arguments) in a scalar block.
	C string
	// CVector is its expression in a vector block (formula_impl.h's body):
	// over the vectors u[k], v[k], c[k] of type V, with one and zero (V)
	// and absmask (VI) at hand; with Lanes, over the elements us[k], vs[k]
	// of type T instead, FN(name) the libm function of T.
	CVector string
	Lanes   bool
	// Fold: the evaluator folds it into a sum in one instruction,
	// sum(x op y), with the expression CVector.
	Fold bool

	// CUDA is the expression in CUDA C: $x, $y, $z the arguments, $0 and $1
	// zero and one of the type computed in, and $f the suffix of a float
	// libm function ("f" in float, nothing in double). For a reduction, it
	// is the statement folding the element $x into the accumulator $r (a
	// double), which starts at CUDAInit.
	CUDA     string
	CUDAInit string
}

func b2f(c bool) float64 {
	if c {
		return 1
	}
	return 0
}

var opTable = [numOps]OpInfo{
	OpConst: {Name: "const", Kind: Leaf},
	OpVar:   {Name: "var", Kind: Leaf},
	OpNeg: {Name: "neg", Arity: 1, Kind: Elementwise, Token: token.SUB,
		Go:  func(v []float64) float64 { return -v[0] },
		Ins: "Neg", C: "-a", CVector: "-u[k]", CUDA: "(-$x)"},
	OpAdd: {Name: "+", Arity: 2, Kind: Elementwise, Token: token.ADD, Commutes: true,
		Go:  func(v []float64) float64 { return v[0] + v[1] },
		Ins: "Add", C: "a + b", CVector: "u[k] + v[k]", Fold: true, CUDA: "($x + $y)"},
	OpSub: {Name: "-", Arity: 2, Kind: Elementwise, Token: token.SUB,
		Go:  func(v []float64) float64 { return v[0] - v[1] },
		Ins: "Sub", C: "a - b", CVector: "u[k] - v[k]", Fold: true, CUDA: "($x - $y)"},
	OpMul: {Name: "*", Arity: 2, Kind: Elementwise, Token: token.MUL, Commutes: true,
		Go:  func(v []float64) float64 { return v[0] * v[1] },
		Ins: "Mul", C: "a * b", CVector: "u[k] * v[k]", Fold: true, CUDA: "($x * $y)"},
	OpDiv: {Name: "/", Arity: 2, Kind: Elementwise, Token: token.QUO,
		Go:  func(v []float64) float64 { return v[0] / v[1] },
		Ins: "Div", C: "a / b", CVector: "u[k] / v[k]", CUDA: "($x / $y)"},
	OpPow: {Name: "^", Arity: 2, Kind: Elementwise, Token: token.XOR,
		Go:  func(v []float64) float64 { return pow(v[0], v[1]) },
		Ins: "Pow", C: "pow(a, b)", CVector: "FN(pow)(us[k], vs[k])", Lanes: true, CUDA: "pow$f($x, $y)"},
	OpAbs: {Name: "abs", Arity: 1, Kind: Elementwise,
		Go:  func(v []float64) float64 { return math.Abs(v[0]) },
		Ins: "Abs", C: "fabs(a)", CVector: "(V)((VI)u[k] & absmask)", CUDA: "fabs$f($x)"},
	OpExp: {Name: "exp", Arity: 1, Kind: Elementwise,
		Go:  func(v []float64) float64 { return math.Exp(v[0]) },
		Ins: "Exp", C: "exp(a)", CVector: "FN(exp)(us[k])", Lanes: true, CUDA: "exp$f($x)"},
	OpLog: {Name: "log", Arity: 1, Kind: Elementwise,
		Go:  func(v []float64) float64 { return log(v[0]) },
		Ins: "Log", C: "log(a)", CVector: "FN(log)(us[k])", Lanes: true, CUDA: "log$f($x)"},
	OpLog1p: {Name: "log1p", Arity: 1, Kind: Elementwise,
		Go:  func(v []float64) float64 { return math.Log1p(v[0]) },
		Ins: "Log1p", C: "log1p(a)", CVector: "FN(log1p)(us[k])", Lanes: true, CUDA: "log1p$f($x)"},
	OpSqrt: {Name: "sqrt", Arity: 1, Kind: Elementwise,
		Go:  func(v []float64) float64 { return math.Sqrt(v[0]) },
		Ins: "Sqrt", C: "sqrt(a)", CVector: "FN(sqrt)(us[k])", Lanes: true, CUDA: "sqrt$f($x)"},
	OpSin: {Name: "sin", Arity: 1, Kind: Elementwise,
		Go:  func(v []float64) float64 { return math.Sin(v[0]) },
		Ins: "Sin", C: "sin(a)", CVector: "FN(sin)(us[k])", Lanes: true, CUDA: "sin$f($x)"},
	OpCos: {Name: "cos", Arity: 1, Kind: Elementwise,
		Go:  func(v []float64) float64 { return math.Cos(v[0]) },
		Ins: "Cos", C: "cos(a)", CVector: "FN(cos)(us[k])", Lanes: true, CUDA: "cos$f($x)"},
	OpTanh: {Name: "tanh", Arity: 1, Kind: Elementwise,
		Go:  func(v []float64) float64 { return math.Tanh(v[0]) },
		Ins: "Tanh", C: "tanh(a)", CVector: "FN(tanh)(us[k])", Lanes: true, CUDA: "tanh$f($x)"},
	OpSigmoid: {Name: "sigmoid", Arity: 1, Kind: Elementwise,
		Go:  func(v []float64) float64 { return 1 / (1 + math.Exp(-v[0])) },
		Ins: "Sigmoid", C: "1 / (1 + exp(-a))", CVector: "(T)1 / ((T)1 + FN(exp)(-us[k]))", Lanes: true,
		CUDA: "($1 / ($1 + exp$f(-$x)))"},
	OpMin: {Name: "min", Arity: 2, Kind: Elementwise, Commutes: true,
		Go: func(v []float64) float64 {
			if v[1] < v[0] {
				return v[1]
			}
			return v[0]
		},
		Ins: "Min", C: "b < a ? b : a", CVector: "SFX(select)(v[k] < u[k], v[k], u[k])", Fold: true,
		CUDA: "($y < $x ? $y : $x)"},
	OpMax: {Name: "max", Arity: 2, Kind: Elementwise, Commutes: true,
		Go: func(v []float64) float64 {
			if v[1] > v[0] {
				return v[1]
			}
			return v[0]
		},
		Ins: "Max", C: "b > a ? b : a", CVector: "SFX(select)(v[k] > u[k], v[k], u[k])", Fold: true,
		CUDA: "($y > $x ? $y : $x)"},
	OpLT: {Name: "<", Arity: 2, Kind: Elementwise, Token: token.LSS,
		Go:  func(v []float64) float64 { return b2f(v[0] < v[1]) },
		Ins: "LT", C: "a < b", CVector: "SFX(bits)(u[k] < v[k], one)", CUDA: "($x < $y ? $1 : $0)"},
	OpLE: {Name: "<=", Arity: 2, Kind: Elementwise, Token: token.LEQ,
		Go:  func(v []float64) float64 { return b2f(v[0] <= v[1]) },
		Ins: "LE", C: "a <= b", CVector: "SFX(bits)(u[k] <= v[k], one)", CUDA: "($x <= $y ? $1 : $0)"},
	OpGT: {Name: ">", Arity: 2, Kind: Elementwise, Token: token.GTR,
		Go:  func(v []float64) float64 { return b2f(v[0] > v[1]) },
		Ins: "GT", C: "a > b", CVector: "SFX(bits)(u[k] > v[k], one)", CUDA: "($x > $y ? $1 : $0)"},
	OpGE: {Name: ">=", Arity: 2, Kind: Elementwise, Token: token.GEQ,
		Go:  func(v []float64) float64 { return b2f(v[0] >= v[1]) },
		Ins: "GE", C: "a >= b", CVector: "SFX(bits)(u[k] >= v[k], one)", CUDA: "($x >= $y ? $1 : $0)"},
	OpEQ: {Name: "==", Arity: 2, Kind: Elementwise, Token: token.EQL, Commutes: true,
		Go:  func(v []float64) float64 { return b2f(v[0] == v[1]) },
		Ins: "EQ", C: "a == b", CVector: "SFX(bits)(u[k] == v[k], one)", CUDA: "($x == $y ? $1 : $0)"},
	OpNE: {Name: "!=", Arity: 2, Kind: Elementwise, Token: token.NEQ, Commutes: true,
		Go:  func(v []float64) float64 { return b2f(v[0] != v[1]) },
		Ins: "NE", C: "a != b", CVector: "SFX(bits)(u[k] != v[k], one)", CUDA: "($x != $y ? $1 : $0)"},
	OpAnd: {Name: "&&", Arity: 2, Kind: Elementwise, Token: token.LAND, Commutes: true,
		Go:  func(v []float64) float64 { return b2f(v[0] != 0 && v[1] != 0) },
		Ins: "And", C: "a != 0 && b != 0", CVector: "SFX(bits)((u[k] != zero) & (v[k] != zero), one)",
		CUDA: "($x != $0 && $y != $0 ? $1 : $0)"},
	OpOr: {Name: "||", Arity: 2, Kind: Elementwise, Token: token.LOR, Commutes: true,
		Go:  func(v []float64) float64 { return b2f(v[0] != 0 || v[1] != 0) },
		Ins: "Or", C: "a != 0 || b != 0", CVector: "SFX(bits)((u[k] != zero) | (v[k] != zero), one)",
		CUDA: "($x != $0 || $y != $0 ? $1 : $0)"},
	OpNot: {Name: "!", Arity: 1, Kind: Elementwise, Token: token.NOT,
		Go:  func(v []float64) float64 { return b2f(v[0] == 0) },
		Ins: "Not", C: "a == 0", CVector: "SFX(bits)(u[k] == zero, one)", CUDA: "($x == $0 ? $1 : $0)"},
	OpWhere: {Name: "where", Arity: 3, Kind: Elementwise,
		Go: func(v []float64) float64 {
			if v[0] != 0 {
				return v[1]
			}
			return v[2]
		},
		Ins: "Where", C: "a != 0 ? b : c", CVector: "SFX(select)(u[k] != zero, v[k], c[k])",
		CUDA: "($x != $0 ? $y : $z)"},
	OpFloor: {Name: "floor", Arity: 1, Kind: Elementwise,
		Go:  func(v []float64) float64 { return math.Floor(v[0]) },
		Ins: "Floor", C: "floor(a)", CVector: "FN(floor)(us[k])", Lanes: true, CUDA: "floor$f($x)"},
	// round is NumPy's (and rint's in the default rounding mode): a
	// half goes to the even neighbour, round(2.5) = 2.
	OpRound: {Name: "round", Arity: 1, Kind: Elementwise,
		Go:  func(v []float64) float64 { return math.RoundToEven(v[0]) },
		Ins: "Round", C: "rint(a)", CVector: "FN(rint)(us[k])", Lanes: true, CUDA: "rint$f($x)"},
	// mod is NumPy's mod (Python's %): the remainder has the sign of the
	// divisor, mod(-1, 3) = 2; mod(x, 0) is NaN.
	OpMod: {Name: "mod", Arity: 2, Kind: Elementwise,
		Go:  func(v []float64) float64 { return pyMod(v[0], v[1]) },
		Ins: "Mod", C: "tl_fx_mod(a, b)", CVector: "FN(tl_fx_mod)(us[k], vs[k])", Lanes: true, CUDA: "tl_fx_mod$f($x, $y)"},
	// The reductions' code in the evaluator is its own (formula_impl.h):
	// they fold a whole vector, chunk by chunk.
	OpSum: {Name: "sum", Arity: 1, Kind: Reduction, Ins: "RSum",
		CUDA: "$r += $x;", CUDAInit: "0.0"},
	OpRMax: {Name: "max", Arity: 1, Kind: Reduction, Ins: "RMax",
		CUDA: "if ($x > $r) $r = $x;", CUDAInit: "(-TL_FX_INF)"},
	OpRMin: {Name: "min", Arity: 1, Kind: Reduction, Ins: "RMin",
		CUDA: "if ($x < $r) $r = $x;", CUDAInit: "TL_FX_INF"},
	// The histograms' code in the evaluator is its own (formula_impl.h);
	// they have none in CUDA (the GPU kernels refuse them).
	OpHist:  {Name: "hist", Arity: 1, Kind: Histogram, Ins: "Hist"},
	OpHist2: {Name: "hist2", Arity: 2, Kind: Histogram, Ins: "Hist2"},
}

// Ops lists every operation, in the order of their numbers.
func Ops() []OpInfo {
	out := make([]OpInfo, numOps)
	for o := range opTable {
		out[o] = opTable[o]
		out[o].Op = Op(o)
	}
	return out
}

// function is a function of the language: a call of one operation, or
// built from several.
type function struct {
	Name, Args, About string
	// op is the operation a call is (its argument a vector, for a
	// reduction); OpConst when build makes the call's nodes instead.
	op    Op
	build func(c *call) (*Node, error)
}

// functions are the functions of the language, in the order help texts
// list them. Two of one name differ in their number of arguments.
var functions = []function{
	{Name: "abs", Args: "x", About: "|x|", op: OpAbs},
	{Name: "exp", Args: "x", About: "eˣ", op: OpExp},
	{Name: "log", Args: "x", About: "natural logarithm", op: OpLog},
	{Name: "log1p", Args: "x", About: "log(1 + x), accurate for small x", op: OpLog1p},
	{Name: "sqrt", Args: "x", About: "√x", op: OpSqrt},
	{Name: "sin", Args: "x", About: "sine (radians)", op: OpSin},
	{Name: "cos", Args: "x", About: "cosine (radians)", op: OpCos},
	{Name: "tanh", Args: "x", About: "hyperbolic tangent", op: OpTanh},
	{Name: "sigmoid", Args: "x", About: "1 / (1 + e⁻ˣ)", op: OpSigmoid},
	{Name: "pow", Args: "x, y", About: "xʸ, the same as x^y", op: OpPow},
	{Name: "min", Args: "x, y", About: "the smaller, element by element", op: OpMin},
	{Name: "max", Args: "x, y", About: "the larger, element by element", op: OpMax},
	{Name: "clamp", Args: "x, lo, hi", About: "min(max(x, lo), hi)", build: func(c *call) (*Node, error) {
		return c.b.op(OpMin, c.b.op(OpMax, c.args[0], c.args[1]), c.args[2]), nil
	}},
	{Name: "where", Args: "c, x, y", About: "x where c ≠ 0, else y", op: OpWhere},
	{Name: "floor", Args: "x", About: "the largest integer ≤ x", op: OpFloor},
	{Name: "round", Args: "x", About: "the nearest integer, a half to the even one (as NumPy's round)", op: OpRound},
	{Name: "mod", Args: "x, y", About: "x − y·floor(x/y), with the sign of y (as NumPy's mod and Python's %)", op: OpMod},
	{Name: "sum", Args: "v", About: "Σ over the vector axis", op: OpSum},
	{Name: "mean", Args: "v", About: "sum(v) / length", build: func(c *call) (*Node, error) {
		s, err := c.reduce(OpSum, c.args[0])
		if err != nil {
			return nil, err
		}
		if b := c.args[0].Bins; b > 0 { // a histogram's mean: over its bins
			return c.b.op(OpDiv, s, c.b.num(float64(b))), nil
		}
		return c.b.op(OpDiv, s, c.b.num(float64(c.n))), nil
	}},
	{Name: "max", Args: "v", About: "the largest element", op: OpRMax},
	{Name: "min", Args: "v", About: "the smallest element", op: OpRMin},
	{Name: "hist", Args: "v, lo, hi, bins", About: "the counts of v's elements in bins equal bins over [lo, hi] (as NumPy's histogram): a vector of bins numbers", build: func(c *call) (*Node, error) {
		return c.hist(OpHist, maxHistBins)
	}},
	{Name: "hist2", Args: "u, v, lo, hi, bins", About: "the counts of the pairs (u, v) in bins × bins cells over [lo, hi]² (as NumPy's histogram2d), row by row", build: func(c *call) (*Node, error) {
		return c.hist(OpHist2, maxHist2Bins)
	}},
	{Name: "dot", Args: "u, v", About: "sum(u*v)", build: func(c *call) (*Node, error) {
		return c.reduce(OpSum, c.b.op(OpMul, c.args[0], c.args[1]))
	}},
	{Name: "norm", Args: "v", About: "sqrt(sum(v^2))", build: func(c *call) (*Node, error) {
		s, err := c.reduce(OpSum, c.b.op(OpMul, c.args[0], c.args[0]))
		if err != nil {
			return nil, err
		}
		return c.b.op(OpSqrt, s), nil
	}},
}

// arity is the number of arguments of fn.
func (fn *function) arity() int {
	n := 1
	for _, r := range fn.Args {
		if r == ',' {
			n++
		}
	}
	return n
}

func (o Op) String() string {
	if o < numOps {
		return opTable[o].Name
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Arity is the number of arguments the operation takes.
func (o Op) Arity() int { return opTable[o].Arity }

// IsReduction tells the operations that reduce a vector to one number.
func (o Op) IsReduction() bool { return opTable[o].Kind == Reduction }

// IsHistogram tells hist and hist2.
func (o Op) IsHistogram() bool { return opTable[o].Kind == Histogram }

// Apply computes an elementwise operation on numbers, in float64, the way
// the evaluator does.
func Apply(o Op, v ...float64) float64 {
	if o >= numOps || opTable[o].Go == nil {
		panic("formula: Apply of " + o.String())
	}
	return opTable[o].Go(v)
}

// pow is x^y as C's pow gives it. Go's math.Pow (and math.Log) are far
// off for a subnormal x (math.Pow(5e-324, -0.625) is 6.7e207, not
// 1.17e202), so a subnormal x is scaled into the normal range first.
func pow(x, y float64) float64 {
	if a := math.Abs(x); a == 0 || a >= 0x1p-1022 || math.IsNaN(x) {
		return math.Pow(x, y)
	}
	const k = 64 // x·2^k is normal
	return math.Pow(x*0x1p64, y) * math.Pow(2, -k*y)
}

// log is ln x as C's log gives it: a subnormal x is split into its
// fraction and exponent (math.Log(5e-324) is −709.09, not −744.44).
func log(x float64) float64 {
	if x <= 0 || x >= 0x1p-1022 || math.IsNaN(x) {
		return math.Log(x)
	}
	f, e := math.Frexp(x)
	return math.Log(f) + float64(e)*math.Ln2
}

// pyMod is NumPy's mod (np.mod, Python's %): C's fmod, moved by y when
// it has the other sign, so that the result has the sign of y; a zero
// result is a zero of y's sign.
func pyMod(x, y float64) float64 {
	m := math.Mod(x, y)
	if y == 0 {
		return m // NaN
	}
	switch {
	case m == 0:
		return math.Copysign(0, y)
	case (y < 0) != (m < 0):
		return m + y
	}
	return m
}
