package formula

import "math"

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
	// Bins: the value is a histogram, or computed bin by bin from one:
	// Bins numbers (hist's bins, hist2's cells). 0 for any other value.
	Bins int
	// Range: of OpHist and OpHist2, the range and the number of bins (per
	// axis) they count in.
	Range HistRange
	id    int
}

// HistRange is the range of a histogram: N equal bins over [Lo, Hi], the
// last bin closed at Hi.
type HistRange struct {
	Lo, Hi float64
	N      int
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
	k.hist = n.Range
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
	op   Op
	val  uint64 // a number's bits, a variable's index
	a    [3]int // the arguments' ids
	hist HistRange
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
	vec, bins := false, 0
	for _, a := range args {
		allConst = allConst && a.IsConst()
		vec = vec || a.Vec
		bins = max(bins, a.Bins)
	}
	if o.IsReduction() {
		vec, bins = false, 0
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
	return b.intern(&Node{Op: o, Args: args, Vec: vec, Bins: bins})
}

// hist makes the histogram o (OpHist of one vector, OpHist2 of two) over
// r: r.N numbers, or r.N² (row-major, the first argument's bin the row).
func (b *builder) hist(o Op, r HistRange, args ...*Node) *Node {
	bins := r.N
	if o == OpHist2 {
		bins = r.N * r.N
	}
	return b.intern(&Node{Op: o, Args: args, Bins: bins, Range: r})
}

// like makes a node as n, over args (nodes of b).
func (b *builder) like(n *Node, args []*Node) *Node {
	if n.Op.IsHistogram() {
		return b.hist(n.Op, n.Range, args...)
	}
	return b.op(n.Op, args...)
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
