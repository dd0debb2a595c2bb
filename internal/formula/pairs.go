package formula

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tapeloop/tapeloop/internal/cpukern"
)

// PairVars are the variables of an affinity formula: the two flattened
// images.
var PairVars = []Var{
	{Name: "a", Vector: true, About: "the first image, flattened"},
	{Name: "b", Vector: true, About: "the second image, flattened"},
}

// PairPlan is an affinity formula compiled for the pairwise workload.
//
// The reductions that read one image only (norm(a), mean(b), …) are Rows:
// programs over one image x, evaluated once per image, not once per pair.
// When every reduction that reads both images is the sum of a polynomial
// of degree two in them (sum((a-b)^2), dot(a, b), sum((a-mean(a))*b), …)
// it expands into Σa·b, Σa², Σb², Σa, Σb and the length, and the pair's
// value needs only the dot products: Product is then a program over one
// row of a matrix of dot products (input slot 0, the columns' row values
// in slots 1 … NRow, the row's own in slots NRow+1 … 2·NRow, each a
// vector like the others), run after the dot-product kernel. Every
// operation of Product is elementwise in the element type (no number is
// computed aside in float64), so a pair's value is a function of its own
// inputs only, the same at every place in the vector; for a symmetric
// formula the caller may give a pair's two images either role, e.g. the
// smaller index always the row's, and get the same bits from every
// block, shard or orientation. Otherwise Pair evaluates the formula over both
// images of every pair (inputs a and b; registers 0 … NRow−1 the first
// image's row values, NRow … 2·NRow−1 the second's).
type PairPlan struct {
	Rows    []*cpukern.FxProgram
	Pair    *cpukern.FxProgram // nil when Product is set
	Product *cpukern.FxProgram
	// Terms names what the pair's value is made of, for the graph's
	// labels: the row reductions, and "a·b" for the dot products.
	Terms []string
	// The graphs the programs are compiled from, for the GPU's kernels
	// (CUDAPair): Pair's, with its inputs in the program's order (a, b,
	// the first image's row values, the second's); Product's, with its
	// inputs (the dot products, the columns' row values, the row's own);
	// and Rows', each over one image x.
	PairGraph     *Graph
	PairInputs    []int
	ProductGraph  *Graph
	ProductInputs []int
	RowGraphs     []*Graph
}

// NRow is the number of values computed per image.
func (p *PairPlan) NRow() int { return len(p.Rows) }

// CompilePair compiles an affinity formula (checked against PairVars) for
// images of d values. direct keeps every reduction over both images as it
// is written (no expansion into dot products).
func CompilePair(f *Formula, d int, direct bool) (*PairPlan, error) {
	g, err := f.Graph(d)
	if err != nil {
		return nil, err
	}
	c := &pairCompiler{d: d, rowKey: map[int]int{}, canon: newCanon(rowVars)}
	pair, err := c.generic(g)
	if err != nil {
		return nil, err
	}
	plan := &PairPlan{}
	if !direct {
		if prod, ok := c.product(pair); ok {
			plan.ProductGraph, plan.ProductInputs = prod, c.productInputs(prod)
			plan.Product, err = Lower(prod, plan.ProductInputs, true)
			if err != nil {
				return nil, err
			}
			plan.Terms = append([]string{"a·b"}, c.rowText...)
		}
	}
	if plan.Product == nil {
		c.rows, c.rowText = c.rows[:c.nGeneric], c.rowText[:c.nGeneric]
		ins := []int{0, 1}
		for side := range 2 {
			for k := range c.nGeneric {
				ins = append(ins, c.rowVar[k][side])
			}
		}
		if plan.Pair, err = Lower(pair, ins, false); err != nil {
			return nil, err
		}
		plan.PairGraph, plan.PairInputs = pair, ins
		plan.Terms = append([]string{"f(a, b)"}, c.rowText...)
	}
	for _, r := range c.rows {
		p, err := Lower(r, []int{0}, false)
		if err != nil {
			return nil, err
		}
		plan.Rows = append(plan.Rows, p)
		plan.RowGraphs = append(plan.RowGraphs, r)
	}
	return plan, nil
}

type pairCompiler struct {
	d        int
	rows     []*Graph // functions of one image x
	rowText  []string
	rowKey   map[int]int // a row function's canonical form → its index
	canon    *canon      // of the row functions, over rowVars
	nGeneric int         // rows the generic program uses
	rowVar   [][2]int    // variable indices of row k for a and b in the pair graph
	gb       *builder    // the product graph's builder
	gRow     map[[2]int]*Node
	varRow   map[int][2]int // pair graph variable → (row, side)
}

var rowVars = []Var{{Name: "x", Vector: true}}

// row returns the index of the row function n, a reduction reading only
// variable side (0: a, 1: b) of graph g, adding it when new.
func (c *pairCompiler) row(n *Node, side int) int {
	rb := newBuilder(rowVars)
	r := copyGraph(n, rb, func(v *Node) *Node {
		if v.Var == side {
			return rb.variable(0)
		}
		panic("formula: row function reads the other image")
	})
	key := c.canon.id(r)
	if k, ok := c.rowKey[key]; ok {
		return k
	}
	c.rowKey[key] = len(c.rows)
	c.rows = append(c.rows, &Graph{Root: r, Nodes: rb.nodes, Vars: rowVars})
	c.rowText = append(c.rowText, Pretty(r, rowVars))
	return len(c.rows) - 1
}

// generic rebuilds g with each reduction that reads one image replaced by
// a row value: the graph evaluated per pair.
func (c *pairCompiler) generic(g *Graph) (*Graph, error) {
	vars := append([]Var(nil), PairVars...)
	b := newBuilder(vars)
	deps := sides(g)
	memo := map[*Node]*Node{}
	// A reduction that reads one image becomes a row value: the walk
	// stops there.
	rowed := func(n *Node) bool { d := deps[n]; return n.Op.IsReduction() && (d == 1 || d == 2) }
	postorder(g.Root, func(n *Node) bool { return !rowed(n) }, func(n *Node) {
		var m *Node
		switch d := deps[n]; {
		case rowed(n):
			k := c.row(n, d-1)
			for len(c.rowVar) <= k {
				c.rowVar = append(c.rowVar, [2]int{-1, -1})
			}
			if c.rowVar[k][d-1] < 0 {
				b.vars = append(b.vars, Var{Name: fmt.Sprintf("row%d%s", k, "ab"[d-1:d])})
				c.rowVar[k][d-1] = len(b.vars) - 1
			}
			m = b.variable(c.rowVar[k][d-1])
		case n.Op == OpVar:
			m = b.variable(n.Var)
		case n.Op == OpConst:
			m = b.num(n.Val)
		default:
			args := make([]*Node, len(n.Args))
			for i, a := range n.Args {
				args[i] = memo[a]
			}
			m = b.like(n, args)
		}
		memo[n] = m
	})
	root := memo[g.Root]
	// Every row value is an input of the generic program, on both sides.
	for k := range c.rowVar {
		for side := range 2 {
			if c.rowVar[k][side] < 0 {
				b.vars = append(b.vars, Var{Name: fmt.Sprintf("row%d%s", k, "ab"[side:side+1])})
				c.rowVar[k][side] = len(b.vars) - 1
			}
		}
	}
	c.nGeneric = len(c.rows)
	return &Graph{Root: root, Nodes: b.nodes, Vars: b.vars}, nil
}

// sides tells, for each node of g, which images it reads: bit 1 a, bit 2 b.
func sides(g *Graph) map[*Node]int {
	d := map[*Node]int{}
	for _, n := range g.Nodes {
		if n.Op == OpVar {
			d[n] = 1 << n.Var
			continue
		}
		for _, a := range n.Args {
			d[n] |= d[a]
		}
	}
	return d
}

// The monomials of a polynomial of degree two in a and b.
const (
	mOne = iota
	mA
	mB
	mAA
	mAB
	mBB
	nMono
)

var monoMul = [3][3]int{ // of degree ≤ 1 monomials
	mOne: {mOne, mA, mB},
	mA:   {mA, mAA, mAB},
	mB:   {mB, mAB, mBB},
}

type poly [nMono]*Node // coefficients in the product graph; nil is zero

// product rebuilds the generic graph pair, whose reductions read both
// images, into a graph over the dot products, or reports that one of its
// reductions is not the sum of a polynomial of degree two.
func (c *pairCompiler) product(pair *Graph) (g *Graph, ok bool) {
	// Variables: dot (vector over the columns), then each row value: the
	// row's own (a) a number, the columns' (b) a vector.
	c.gb = newBuilder([]Var{{Name: "dot", Vector: true}})
	c.gRow = map[[2]int]*Node{}
	defer func() {
		if !ok {
			c.rows, c.rowText = c.rows[:c.nGeneric], c.rowText[:c.nGeneric]
			for k, v := range c.rowKey {
				if v >= c.nGeneric {
					delete(c.rowKey, k)
				}
			}
		}
	}()
	c.varRow = map[int][2]int{}
	for k, v := range c.rowVar {
		c.varRow[v[0]] = [2]int{k, 0}
		c.varRow[v[1]] = [2]int{k, 1}
	}
	// Each node of pair becomes, in the product graph, a number (scal)
	// or, along the vector axis, a polynomial in a and b (polys).
	scal := map[*Node]*Node{}
	polys := map[*Node]poly{}
	polyOf := func(n *Node) poly {
		if n.Vec {
			return polys[n]
		}
		var p poly
		p[mOne] = scal[n]
		return p
	}
	failed := false
	postorder(pair.Root, nil, func(n *Node) {
		if failed {
			return
		}
		if n.Vec {
			p, ok := c.expand(n, polyOf, scal)
			polys[n], failed = p, !ok
			return
		}
		m, ok := c.scalar(n, polyOf, scal)
		scal[n], failed = m, !ok
	})
	if failed {
		return nil, false
	}
	return &Graph{Root: scal[pair.Root], Nodes: c.gb.nodes, Vars: c.gb.vars}, true
}

// scalar is the product graph's node for n, a number of the pair graph
// (its arguments already done), or false when n is not a sum of a
// polynomial of degree two.
func (c *pairCompiler) scalar(n *Node, polyOf func(*Node) poly, scal map[*Node]*Node) (*Node, bool) {
	switch {
	case n.Op == OpVar && n.Var >= 2:
		r := c.varRow[n.Var]
		return c.rowNode(r[0], r[1]), true
	case n.Op == OpConst:
		return c.gb.num(n.Val), true
	case n.Op == OpSum:
		p := polyOf(n.Args[0])
		term := func(mono int) *Node {
			var s *Node
			switch mono {
			case mOne:
				s = c.gb.num(float64(c.d))
			case mA, mB:
				s = c.rowNode(c.rowOf("sum(x)"), mono-mA)
			case mAA, mBB:
				s = c.rowNode(c.rowOf("sum(x*x)"), (mono-mAA)/2)
			case mAB:
				s = c.gb.variable(0)
			}
			return c.gb.op(OpMul, p[mono], s)
		}
		// Each monomial is added to its mirror image (a and b swapped)
		// before the rest: a formula that is the same with a and b
		// swapped then gives pair (i, j) and pair (j, i) the same bits,
		// whichever image is the row.
		m := c.gb.num(0)
		for _, g := range [][]int{{mOne}, {mA, mB}, {mAA, mBB}, {mAB}} {
			var s *Node
			for _, mono := range g {
				switch {
				case p[mono] == nil:
				case s == nil:
					s = term(mono)
				default:
					s = c.gb.op(OpAdd, s, term(mono))
				}
			}
			if s != nil {
				m = c.gb.op(OpAdd, m, s)
			}
		}
		return m, true
	case n.Op.IsReduction() && n.Args[0].Bins > 0, n.Op.IsHistogram(), n.Bins > 0:
		return nil, false // a histogram: counted per pair
	case n.Op.IsReduction() || n.Op == OpVar:
		return nil, false // max or min of both images, or an image outside a reduction
	}
	args := make([]*Node, len(n.Args))
	for i, a := range n.Args {
		args[i] = scal[a]
	}
	return c.gb.op(n.Op, args...), true
}

// expand is n, a value along the vector axis of the pair graph (its
// arguments already done), as a polynomial of degree two in a and b, or
// false when it is not one.
func (c *pairCompiler) expand(n *Node, polyOf func(*Node) poly, scal map[*Node]*Node) (poly, bool) {
	var p poly
	switch n.Op {
	case OpVar:
		p[mA+n.Var] = c.gb.num(1)
		return p, true
	case OpNeg:
		x := polyOf(n.Args[0])
		for i := range x {
			if x[i] != nil {
				p[i] = c.gb.op(OpNeg, x[i])
			}
		}
		return p, true
	case OpAdd, OpSub:
		x, y := polyOf(n.Args[0]), polyOf(n.Args[1])
		for i := range p {
			switch {
			case y[i] == nil:
				p[i] = x[i]
			case n.Op == OpSub && x[i] == nil:
				p[i] = c.gb.op(OpNeg, y[i])
			case x[i] == nil:
				p[i] = y[i]
			default:
				p[i] = c.gb.op(n.Op, x[i], y[i])
			}
		}
		return p, true
	case OpMul:
		x, y := polyOf(n.Args[0]), polyOf(n.Args[1])
		for i := range x {
			for j := range y {
				if x[i] == nil || y[j] == nil {
					continue
				}
				if i > mB || j > mB {
					return p, false // degree above two
				}
				k, t := monoMul[i][j], c.gb.op(OpMul, x[i], y[j])
				if p[k] == nil {
					p[k] = t
				} else {
					p[k] = c.gb.op(OpAdd, p[k], t)
				}
			}
		}
		return p, true
	case OpDiv:
		if n.Args[1].Vec {
			return p, false
		}
		x, y := polyOf(n.Args[0]), scal[n.Args[1]]
		for i := range x {
			if x[i] != nil {
				p[i] = c.gb.op(OpDiv, x[i], y)
			}
		}
		return p, true
	}
	return p, false
}

// rowOf is the index of the row function written src (over x), added
// when new.
func (c *pairCompiler) rowOf(src string) int {
	f, err := Parse(src, Env{Flag: "row", Vars: rowVars, Reduce: true})
	if err != nil {
		panic(err)
	}
	g, err := f.Graph(c.d)
	if err != nil {
		panic(err)
	}
	key := c.canon.id(g.Root)
	if k, ok := c.rowKey[key]; ok {
		return k
	}
	c.rowKey[key] = len(c.rows)
	c.rows = append(c.rows, g)
	c.rowText = append(c.rowText, Pretty(g.Root, rowVars))
	return len(c.rows) - 1
}

// rowNode is the product graph's variable for row value k of side (0: the
// row's own image, 1: the columns'). Both are vectors: were the row's a
// number, what is computed of it alone would run once, in float64, and
// its twin over the columns elementwise in the element type, and a pair's
// value would depend on which of its images is the row.
func (c *pairCompiler) rowNode(k, side int) *Node {
	if n, ok := c.gRow[[2]int{k, side}]; ok {
		return n
	}
	c.gb.vars = append(c.gb.vars, Var{Name: fmt.Sprintf("row%d%s", k, "ab"[side:side+1]), Vector: true})
	n := c.gb.variable(len(c.gb.vars) - 1)
	c.gRow[[2]int{k, side}] = n
	return n
}

// productInputs orders the product graph's variables as Product expects:
// dot, the columns' row values by row, the row's own by row.
func (c *pairCompiler) productInputs(g *Graph) []int {
	ins := []int{0}
	for side := 1; side >= 0; side-- {
		for k := range c.rows {
			n := c.rowNode(k, side)
			ins = append(ins, n.Var)
		}
	}
	g.Vars = c.gb.vars
	return ins
}

// copyGraph copies the graph under n into b, replacing variables by
// what leaf returns.
func copyGraph(n *Node, b *builder, leaf func(*Node) *Node) *Node {
	memo := map[*Node]*Node{}
	postorder(n, nil, func(n *Node) {
		var m *Node
		switch n.Op {
		case OpVar:
			m = leaf(n)
		case OpConst:
			m = b.num(n.Val)
		default:
			args := make([]*Node, len(n.Args))
			for i, a := range n.Args {
				args[i] = memo[a]
			}
			m = b.like(n, args)
		}
		memo[n] = m
	})
	return memo[n]
}

// Symmetric tells whether an affinity formula is provably the same with
// its images swapped: f(a, b) = f(b, a) term for term (up to the order of
// the arguments of + * min max == != && ||). A formula not shown
// symmetric is computed for every ordered pair.
func Symmetric(f *Formula) (bool, error) {
	g, err := f.Graph(1)
	if err != nil {
		return false, err
	}
	b := newBuilder(g.Vars)
	swapped := copyGraph(g.Root, b, func(v *Node) *Node { return b.variable(1 - v.Var) })
	c := newCanon(g.Vars)
	return c.id(g.Root) == c.id(swapped), nil
}

// canon gives nodes canonical forms, as numbers: two nodes get the same
// number when they are written the same with variable names, the
// arguments of commutative operations in order (+ * min max == != && ||),
// and a difference under abs or squared with its terms in order
// (|x−y| = |y−x|, (x−y)·(x−y) = (y−x)·(y−x)). Nodes of several graphs
// over the same variables may be compared.
type canon struct {
	vars []Var
	ids  map[canonKey]int
	memo map[*Node]int
}

type canonKey struct {
	op   Op
	even bool   // |x−y| or (x−y)²: a holds x and y
	val  uint64 // a number's bits
	name string // a variable's name
	a    [3]int
	hist HistRange
}

func newCanon(vars []Var) *canon {
	return &canon{vars: vars, ids: map[canonKey]int{}, memo: map[*Node]int{}}
}

// id is the canonical form of n.
func (c *canon) id(n *Node) int {
	if id, ok := c.memo[n]; ok {
		return id
	}
	postorder(n, func(m *Node) bool { _, done := c.memo[m]; return !done }, func(m *Node) {
		if _, done := c.memo[m]; !done {
			c.memo[m] = c.intern(c.key(m))
		}
	})
	return c.memo[n]
}

func (c *canon) key(n *Node) canonKey {
	k := canonKey{op: n.Op, hist: n.Range}
	switch n.Op {
	case OpConst:
		k.val = math.Float64bits(n.Val)
		if math.IsNaN(n.Val) {
			k.val = math.Float64bits(math.NaN())
		}
		return k
	case OpVar:
		k.name = c.vars[n.Var].Name
		return k
	}
	if even := n.Op == OpAbs || n.Op == OpMul && n.Args[0] == n.Args[1]; even && n.Args[0].Op == OpSub {
		d := n.Args[0]
		k.even, k.a[0], k.a[1] = true, c.memo[d.Args[0]], c.memo[d.Args[1]]
		if k.a[1] < k.a[0] {
			k.a[0], k.a[1] = k.a[1], k.a[0]
		}
		return k
	}
	for i, a := range n.Args {
		k.a[i] = c.memo[a]
	}
	if opTable[n.Op].Commutes && k.a[1] < k.a[0] {
		k.a[0], k.a[1] = k.a[1], k.a[0]
	}
	return k
}

func (c *canon) intern(k canonKey) int {
	if id, ok := c.ids[k]; ok {
		return id
	}
	id := len(c.ids) + 1 // 0: no argument
	c.ids[k] = id
	return id
}

// Same tells whether f computes the same as the formula src over the
// same variables, term for term (as Symmetric compares).
func Same(f *Formula, src string) (bool, error) {
	other, err := Parse(src, Env{Flag: f.Env.Flag, Vars: f.Env.Vars, Reduce: f.Env.Reduce})
	if err != nil {
		return false, err
	}
	g1, err := f.Graph(1)
	if err != nil {
		return false, err
	}
	g2, err := other.Graph(1)
	if err != nil {
		return false, err
	}
	c := newCanon(g1.Vars)
	return c.id(g1.Root) == c.id(g2.Root), nil
}

// Pretty writes n as a formula of the language, with the parentheses the
// operators' precedence needs, for labels.
func Pretty(n *Node, vars []Var) string {
	// A stack of what is left to write, last first: a node (written in
	// parentheses when its precedence is below min) or a piece of text.
	type item struct {
		n    *Node
		min  int
		text string
	}
	var sb strings.Builder
	stack := []item{{n: n}}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if it.n == nil {
			sb.WriteString(it.text)
			continue
		}
		parts, p := layout(it.n, vars)
		paren := p < it.min
		if paren {
			stack = append(stack, item{text: ")"})
		}
		for i := len(parts) - 1; i >= 0; i-- {
			stack = append(stack, item{n: parts[i].n, min: parts[i].min, text: parts[i].text})
		}
		if paren {
			stack = append(stack, item{text: "("})
		}
	}
	return sb.String()
}

// part is a piece of a node written out: an argument, written in
// parentheses when its precedence is below min, or text.
type part struct {
	n    *Node
	min  int
	text string
}

// prettyPrec is the precedence of the binary operators as written: Go's,
// || and && taken as one level (^ is written apart, above them all).
var prettyPrec = func() map[Op]int {
	m := map[Op]int{}
	for tok, o := range binops {
		if o != OpPow {
			m[o] = max(tok.Precedence()-2, 0)
		}
	}
	return m
}()

// layout is how n is written, and the precedence of its outermost
// operator (5 for an operand).
func layout(n *Node, vars []Var) ([]part, int) {
	switch n.Op {
	case OpConst:
		return []part{{text: strconv.FormatFloat(n.Val, 'g', -1, 64)}}, 5
	case OpVar:
		return []part{{text: vars[n.Var].Name}}, 5
	}
	arg := func(i, min int) part { return part{n: n.Args[i], min: min} }
	text := func(s string) part { return part{text: s} }
	switch {
	case n.Op == OpMul && n.Args[0] == n.Args[1]:
		return []part{arg(0, 5), text("^2")}, 4
	case n.Op == OpPow:
		return []part{arg(0, 5), text("^"), arg(1, 5)}, 4
	case n.Op == OpNeg:
		return []part{text("-"), arg(0, 4)}, 3
	case n.Op == OpNot:
		return []part{text("!"), arg(0, 5)}, 4
	}
	if p, ok := prettyPrec[n.Op]; ok {
		right := p + 1 // left-associative
		if n.Op == OpAdd || n.Op == OpMul {
			right = p
		}
		return []part{arg(0, p), text(n.Op.String()), arg(1, right)}, p
	}
	parts := []part{text(n.Op.String() + "(")}
	for i := range n.Args {
		if i > 0 {
			parts = append(parts, text(", "))
		}
		parts = append(parts, arg(i, 0))
	}
	if n.Op.IsHistogram() {
		r := n.Range
		parts = append(parts, text(fmt.Sprintf(", %s, %s, %d", strconv.FormatFloat(r.Lo, 'g', -1, 64), strconv.FormatFloat(r.Hi, 'g', -1, 64), r.N)))
	}
	return append(parts, text(")")), 5
}
