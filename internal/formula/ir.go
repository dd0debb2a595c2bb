package formula

import (
	"fmt"
	"math"
)

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
	OpSum   // reductions
	OpRMax
	OpRMin
	numOps
)

var opNames = [numOps]string{"const", "var", "neg", "+", "-", "*", "/", "^", "abs", "exp", "log", "log1p",
	"sqrt", "sin", "cos", "tanh", "sigmoid", "min", "max", "<", "<=", ">", ">=", "==", "!=", "&&", "||", "!",
	"where", "sum", "max", "min"}

func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Arity is the number of arguments the operation takes.
func (o Op) Arity() int {
	switch {
	case o <= OpVar:
		return 0
	case o == OpNeg || o == OpNot || (o >= OpAbs && o <= OpSigmoid) || o >= OpSum:
		return 1
	case o == OpWhere:
		return 3
	}
	return 2
}

// IsReduction tells the operations that reduce a vector to one number.
func (o Op) IsReduction() bool { return o >= OpSum }

// Node is one value of a formula's graph. Equal subexpressions are one
// node: a graph is a DAG.
type Node struct {
	Op   Op
	Args []*Node
	Val  float64 // OpConst
	Var  int     // OpVar
	// Vec: the value varies along the vector axis (it depends on a vector
	// variable outside any reduction).
	Vec bool
	id  int
}

// IsConst tells a number.
func (n *Node) IsConst() bool { return n.Op == OpConst }

// ID is the node's index in its builder, a topological order.
func (n *Node) ID() int { return n.id }

// builder makes nodes, folding constants and merging equal nodes.
type builder struct {
	nodes []*Node
	byKey map[nodeKey]*Node
	vars  []Var
}

func newBuilder(vars []Var) *builder {
	return &builder{byKey: map[nodeKey]*Node{}, vars: vars}
}

func (b *builder) intern(n *Node) *Node {
	k := nodeKey{op: n.Op, a: [3]int{-1, -1, -1}}
	switch n.Op {
	case OpConst:
		k.val = math.Float64bits(n.Val)
	case OpVar:
		k.val = uint64(n.Var)
	}
	for i, a := range n.Args {
		k.a[i] = a.id
	}
	if m, ok := b.byKey[k]; ok {
		return m
	}
	n.id = len(b.nodes)
	b.nodes = append(b.nodes, n)
	b.byKey[k] = n
	return n
}

// nodeKey identifies a node within its builder: equal keys, equal nodes.
type nodeKey struct {
	op  Op
	val uint64 // a number's bits, a variable's index
	a   [3]int // the arguments' ids
}

func (b *builder) num(v float64) *Node { return b.intern(&Node{Op: OpConst, Val: v}) }

func (b *builder) variable(i int) *Node {
	return b.intern(&Node{Op: OpVar, Var: i, Vec: b.vars[i].Vector})
}

// op makes op(args...), folding it when every argument is a number and
// simplifying the identities that keep results exact (x·1, x+0, x^1,
// x^2 as x·x, x^0.5 as √x).
func (b *builder) op(o Op, args ...*Node) *Node {
	allConst := true
	vec := false
	for _, a := range args {
		allConst = allConst && a.IsConst()
		vec = vec || a.Vec
	}
	if o.IsReduction() {
		vec = false
	}
	if allConst && !o.IsReduction() {
		vals := make([]float64, len(args))
		for i, a := range args {
			vals[i] = a.Val
		}
		return b.num(Apply(o, vals...))
	}
	isNum := func(n *Node, v float64) bool { return n.IsConst() && n.Val == v }
	switch o {
	case OpMul:
		if isNum(args[0], 1) {
			return args[1]
		}
		if isNum(args[1], 1) {
			return args[0]
		}
	case OpAdd:
		if isNum(args[0], 0) {
			return args[1]
		}
		if isNum(args[1], 0) {
			return args[0]
		}
	case OpSub:
		if isNum(args[1], 0) {
			return args[0]
		}
	case OpDiv:
		if isNum(args[1], 1) {
			return args[0]
		}
	case OpPow:
		switch {
		case isNum(args[1], 1):
			return args[0]
		case isNum(args[1], 2):
			return b.op(OpMul, args[0], args[0])
		case isNum(args[1], 0.5):
			return b.op(OpSqrt, args[0])
		}
	}
	return b.intern(&Node{Op: o, Args: args, Vec: vec})
}

// Apply computes an elementwise operation on numbers, in float64, the way
// the evaluator does.
func Apply(o Op, v ...float64) float64 {
	b2f := func(c bool) float64 {
		if c {
			return 1
		}
		return 0
	}
	switch o {
	case OpNeg:
		return -v[0]
	case OpAdd:
		return v[0] + v[1]
	case OpSub:
		return v[0] - v[1]
	case OpMul:
		return v[0] * v[1]
	case OpDiv:
		return v[0] / v[1]
	case OpPow:
		return math.Pow(v[0], v[1])
	case OpAbs:
		return math.Abs(v[0])
	case OpExp:
		return math.Exp(v[0])
	case OpLog:
		return math.Log(v[0])
	case OpLog1p:
		return math.Log1p(v[0])
	case OpSqrt:
		return math.Sqrt(v[0])
	case OpSin:
		return math.Sin(v[0])
	case OpCos:
		return math.Cos(v[0])
	case OpTanh:
		return math.Tanh(v[0])
	case OpSigmoid:
		return 1 / (1 + math.Exp(-v[0]))
	case OpMin:
		if v[1] < v[0] {
			return v[1]
		}
		return v[0]
	case OpMax:
		if v[1] > v[0] {
			return v[1]
		}
		return v[0]
	case OpLT:
		return b2f(v[0] < v[1])
	case OpLE:
		return b2f(v[0] <= v[1])
	case OpGT:
		return b2f(v[0] > v[1])
	case OpGE:
		return b2f(v[0] >= v[1])
	case OpEQ:
		return b2f(v[0] == v[1])
	case OpNE:
		return b2f(v[0] != v[1])
	case OpAnd:
		return b2f(v[0] != 0 && v[1] != 0)
	case OpOr:
		return b2f(v[0] != 0 || v[1] != 0)
	case OpNot:
		return b2f(v[0] == 0)
	case OpWhere:
		if v[0] != 0 {
			return v[1]
		}
		return v[2]
	}
	panic("formula: Apply of " + o.String())
}

// postorder calls visit once on every node under root, arguments before
// their users, in the order a recursive walk taking the arguments left to
// right would. It keeps its own stack: a chain of a hundred thousand
// operators is a graph as deep. With descend, the arguments of a node for
// which it returns false are not walked (the node itself is visited).
func postorder(root *Node, descend func(*Node) bool, visit func(*Node)) {
	type frame struct {
		n *Node
		i int // next argument; −1: not yet entered
	}
	seen := map[*Node]bool{root: true}
	stack := []frame{{root, -1}}
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if top.i < 0 {
			top.i = 0
			if descend != nil && !descend(top.n) {
				top.i = len(top.n.Args)
			}
		}
		if top.i < len(top.n.Args) {
			a := top.n.Args[top.i]
			top.i++
			if !seen[a] {
				seen[a] = true
				stack = append(stack, frame{a, -1})
			}
			continue
		}
		n := top.n
		stack = stack[:len(stack)-1]
		visit(n)
	}
}
