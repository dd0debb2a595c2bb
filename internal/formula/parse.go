package formula

import (
	"errors"
	"fmt"
	"go/ast"
	"go/token"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Var is a variable a workload offers its formulas.
type Var struct {
	Name string
	// Vector: the variable has one value per element of the vector axis
	// (an image's pixels, the M interpolants); otherwise one value per
	// evaluation.
	Vector bool
	// About says what the variable is, for messages and help texts.
	About string
}

// Env is what a formula may use and must give.
type Env struct {
	// Flag names the formula in messages, e.g. "--formula".
	Flag string
	Vars []Var
	// Params are the named constants the user gave (--param name=value).
	// Each must be used; a name the formula uses that is neither a
	// variable nor a parameter is an error.
	Params map[string]float64
	// Reduce: the formula must give one number per evaluation (a formula
	// over vectors must reduce them).
	Reduce bool
	// Pointwise: the formula is evaluated point by point, so it may not
	// reduce (its vector variables are the points' coordinates).
	Pointwise bool
	// Shared: Params are shared with other formulas of the run, so one
	// this formula does not use is not an error here (the caller checks
	// that every one is used by some formula, with Uses).
	Shared bool
}

// ErrFormula is wrapped by every error about a formula.
var ErrFormula = errors.New("formula")

// Error is a problem with a formula, at a column (1-based; 0: the
// formula as a whole).
type Error struct {
	Flag, Src string
	Column    int
	Msg       string
}

// Error is one line. A formula longer than quoteLen bytes is quoted
// shortened, around the column of the error (the formula's beginning and
// end when the error has no column), a … standing for what is left out.
func (e *Error) Error() string {
	if e.Column > 0 {
		return fmt.Sprintf("%s %q: column %d: %s", e.Flag, excerpt(e.Src, e.Column), e.Column, e.Msg)
	}
	return fmt.Sprintf("%s %q: %s", e.Flag, excerpt(e.Src, 0), e.Msg)
}

// quoteLen is the longest formula an error quotes whole; a longer one is
// quoted as about quoteLen bytes of it.
const quoteLen = 120

// excerpt is src, or for a long src about quoteLen bytes of it: around
// column col (1-based, in bytes), or with col 0 its beginning and end.
func excerpt(src string, col int) string {
	if len(src) <= quoteLen {
		return src
	}
	const ellipsis = "…"
	if col <= 0 || col > len(src)+1 {
		head, tail := runeStart(src, quoteLen*2/3), runeStart(src, len(src)-quoteLen/3)
		return src[:head] + ellipsis + src[tail:]
	}
	at := col - 1 // the byte the column points at (len(src): just past the end)
	lo, hi := at-quoteLen/2, at+quoteLen/2
	if lo < 0 {
		lo, hi = 0, quoteLen
	}
	if hi > len(src) {
		lo, hi = len(src)-quoteLen, len(src)
	}
	lo, hi = runeStart(src, lo), runeStart(src, hi)
	out := src[lo:hi]
	if lo > 0 {
		out = ellipsis + out
	}
	if hi < len(src) {
		out += ellipsis
	}
	return out
}

// runeStart moves i back to the start of the UTF-8 character holding
// byte i of s.
func runeStart(s string, i int) int {
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// Unwrap makes errors.Is(err, ErrFormula) true.
func (e *Error) Unwrap() error { return ErrFormula }

// Functions lists the functions of the language: name, arguments, meaning.
var Functions = func() []struct{ Name, Args, About string } {
	out := make([]struct{ Name, Args, About string }, len(functions))
	for i, fn := range functions {
		out[i].Name, out[i].Args, out[i].About = fn.Name, fn.Args, fn.About
	}
	return out
}()

// Constants the language knows by name.
var constants = map[string]float64{"pi": math.Pi}

// Formula is a parsed, checked formula.
type Formula struct {
	Src   string
	Env   Env
	expr  ast.Expr // the value: the last statement
	lets  []*let   // the statements before it, name = expression
	fset  *token.FileSet
	names map[string]bool // the names the formula uses
}

// let is a named subexpression, name = expr: a later statement naming it
// stands for expr's value.
type let struct {
	name *ast.Ident
	expr ast.Expr
}

// Parse reads src and checks it against env: syntax, names, arities, and
// that it reduces where env needs one number. Nothing is evaluated.
func Parse(src string, env Env) (*Formula, error) {
	f := &Formula{Src: src, Env: env, fset: token.NewFileSet()}
	if strings.TrimSpace(src) == "" {
		return nil, f.errorf(0, "empty formula")
	}
	seen := map[string]bool{}
	for _, v := range env.Vars {
		seen[v.Name] = true
	}
	for p := range env.Params {
		switch {
		case seen[p]:
			return nil, f.errorf(0, "parameter %s has the name of a variable", p)
		case !token.IsIdentifier(p):
			return nil, f.errorf(0, "parameter name %q is not a name (letters, digits, _)", p)
		case isFunction(p) || constants[p] != 0:
			return nil, f.errorf(0, "parameter %s has the name of a function or constant", p)
		}
	}
	if len(src) > MaxLen {
		return nil, f.tooLong()
	}
	if err := f.parseSyntax(src); err != nil {
		return nil, err
	}
	f.expr = reassociate(f.expr)
	assigned := map[string]*let{}
	for _, l := range f.lets {
		l.expr = reassociate(l.expr)
		name, col := l.name.Name, f.col(l.name)
		_, isParam := env.Params[name]
		switch {
		case seen[name]:
			return nil, f.errorf(col, "%s is a variable of this formula: a named subexpression needs another name", name)
		case isParam:
			return nil, f.errorf(col, "%s is a parameter (--param %s): a named subexpression needs another name", name, name)
		case constants[name] != 0:
			return nil, f.errorf(col, "%s is a constant: a named subexpression needs another name", name)
		case isFunction(name):
			return nil, f.errorf(col, "%s is a function: a named subexpression needs another name", name)
		case assigned[name] != nil:
			return nil, f.errorf(col, "%s is assigned twice (first at column %d)", name, f.col(assigned[name].name))
		}
		assigned[name] = l
	}
	g, used, err := f.graph(1)
	if err != nil {
		return nil, err
	}
	for _, l := range f.lets {
		if !used[l.name.Name] {
			return nil, f.errorf(f.col(l.name), "%s is assigned but not used", l.name.Name)
		}
	}
	var unused []string
	for p := range env.Params {
		if !f.Uses(p) {
			unused = append(unused, p)
		}
	}
	if len(unused) > 0 && !env.Shared {
		sort.Strings(unused)
		return nil, f.errorf(0, "parameter %s is not used", strings.Join(unused, ", "))
	}
	if env.Pointwise {
		for _, n := range g.Nodes {
			if n.Op.IsHistogram() {
				return nil, f.errorf(0, "hist and hist2 count over the vector axis, and this formula is evaluated point by point: it cannot count")
			}
			if n.Op.IsReduction() {
				return nil, f.errorf(0, "sum, mean, max or min of one argument, dot and norm reduce, and this formula is evaluated point by point: it cannot reduce")
			}
		}
	}
	if g.Root.Bins > 0 {
		return nil, f.errorf(0, "gives a histogram, %d numbers; it must reduce to one number: wrap it in sum, mean, max or min", g.Root.Bins)
	}
	if env.Reduce && g.Root.Vec {
		return nil, f.errorf(0, "gives one value per element of %s; it must reduce to one number: wrap it in sum, mean, max or min",
			strings.Join(g.vectorNames(), " and "))
	}
	return f, nil
}

func isFunction(name string) bool {
	for _, fn := range Functions {
		if fn.Name == name {
			return true
		}
	}
	return false
}

// errorf makes an error at column col. The message stays one line: a line
// break it quotes from the formula (inside a `…` literal) is written \n.
func (f *Formula) errorf(col int, format string, args ...any) error {
	msg := strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(fmt.Sprintf(format, args...))
	return &Error{Flag: f.Env.Flag, Src: f.Src, Column: col, Msg: msg}
}

func (f *Formula) col(n ast.Node) int { return f.fset.Position(n.Pos()).Column }

// Uses tells whether the formula names name.
func (f *Formula) Uses(name string) bool { return f.names[name] }

// String is the formula as written.
func (f *Formula) String() string { return f.Src }

// Canonical is the formula with its parameters' values, as one string: two
// runs whose Canonical strings are equal compute the same function.
func (f *Formula) Canonical() string {
	names := make([]string, 0, len(f.Env.Params))
	for p := range f.Env.Params {
		names = append(names, p)
	}
	sort.Strings(names)
	var sb strings.Builder
	sb.WriteString(strings.Join(strings.Fields(f.Src), " "))
	for _, p := range names {
		fmt.Fprintf(&sb, "; %s=%s", p, strconv.FormatFloat(f.Env.Params[p], 'g', -1, 64))
	}
	return sb.String()
}

// Graph is a formula built into nodes for a vector axis of length n.
type Graph struct {
	Root  *Node
	Nodes []*Node // every node, arguments before their users
	Vars  []Var
}

func (g *Graph) vectorNames() []string {
	var names []string
	seen := map[int]bool{}
	for _, n := range g.Nodes {
		if n.Op == OpVar && n.Vec && !seen[n.Var] {
			seen[n.Var] = true
			names = append(names, g.Vars[n.Var].Name)
		}
	}
	return names
}

// Graph builds the formula's nodes for a vector axis of n elements (mean
// divides by n), parameters as constants, constants folded.
func (f *Formula) Graph(n int) (*Graph, error) {
	g, _, err := f.graph(n)
	return g, err
}

// graph is Graph, and which named subexpressions are used.
func (f *Formula) graph(n int) (*Graph, map[string]bool, error) {
	b := newBuilder(f.Env.Vars)
	sc := &scope{named: map[string]*Node{}, used: map[string]bool{}, later: map[string]int{}}
	for _, l := range f.lets {
		sc.later[l.name.Name] = f.col(l.name)
	}
	for _, l := range f.lets {
		v, err := f.build(b, l.expr, n, sc)
		if err != nil {
			return nil, nil, err
		}
		delete(sc.later, l.name.Name)
		// A name stands for its expression's node: the same value
		// wherever it is used (a reduction in it reduces as written).
		sc.named[l.name.Name] = v
	}
	root, err := f.build(b, f.expr, n, sc)
	if err != nil {
		return nil, nil, err
	}
	return &Graph{Root: root, Nodes: b.nodes, Vars: f.Env.Vars}, sc.used, nil
}

// scope is the named subexpressions a statement may use.
type scope struct {
	named map[string]*Node // assigned by an earlier statement
	used  map[string]bool
	later map[string]int // assigned by this statement or a later one, at a column
}

// binops and unops are the operators of the language: the table's
// operations written with a token.
var binops, unops = func() (bin, un map[token.Token]Op) {
	bin, un = map[token.Token]Op{}, map[token.Token]Op{}
	for o, info := range opTable {
		switch {
		case info.Token == token.ILLEGAL:
		case info.Arity == 2:
			bin[info.Token] = Op(o)
		case info.Arity == 1:
			un[info.Token] = Op(o)
		}
	}
	return bin, un
}()

// build makes the nodes of e, arguments first. It keeps its own stack
// rather than recursing: a chain of operators as long as the formula is a
// tree as deep.
func (f *Formula) build(b *builder, e ast.Expr, n int, sc *scope) (*Node, error) {
	type frame struct {
		e    ast.Expr
		kids []ast.Expr
		i    int
	}
	var stack []frame
	var vals []*Node // the built values of finished subexpressions
	enter := func(e ast.Expr) error {
		kids, err := f.children(e)
		if err != nil {
			return err
		}
		stack = append(stack, frame{e: e, kids: kids})
		return nil
	}
	if err := enter(e); err != nil {
		return nil, err
	}
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if top.i < len(top.kids) {
			k := top.kids[top.i]
			top.i++
			if err := enter(k); err != nil {
				return nil, err
			}
			continue
		}
		args := vals[len(vals)-len(top.kids):]
		m, err := f.node(b, top.e, args, n, sc)
		if err != nil {
			return nil, err
		}
		vals = append(vals[:len(vals)-len(top.kids)], m)
		stack = stack[:len(stack)-1]
	}
	return vals[0], nil
}

// children checks what can be checked of e before its subexpressions and
// returns them, in the order they are built.
func (f *Formula) children(e ast.Expr) ([]ast.Expr, error) {
	switch e := e.(type) {
	case *ast.ParenExpr:
		return []ast.Expr{e.X}, nil
	case *ast.BasicLit, *ast.Ident:
		return nil, nil
	case *ast.UnaryExpr:
		return []ast.Expr{e.X}, nil
	case *ast.StarExpr:
		return nil, f.errorf(f.col(e), "unexpected *: write powers as x^y or pow(x, y)")
	case *ast.BinaryExpr:
		if _, ok := binops[e.Op]; !ok {
			return nil, f.errorf(f.fset.Position(e.OpPos).Column, "operator %s is not part of the language", e.Op)
		}
		return []ast.Expr{e.X, e.Y}, nil
	case *ast.CallExpr:
		if _, ok := e.Fun.(*ast.Ident); !ok {
			return nil, f.errorf(f.col(e.Fun), "only a function's name can be called")
		}
		if e.Ellipsis.IsValid() {
			return nil, f.errorf(f.fset.Position(e.Ellipsis).Column, "unexpected ...")
		}
		return e.Args, nil
	}
	return nil, f.errorf(f.col(e), "this is not part of the language (numbers, names, operators and function calls)")
}

// node makes the node of e from the nodes of its subexpressions.
func (f *Formula) node(b *builder, e ast.Expr, args []*Node, n int, sc *scope) (*Node, error) {
	switch e := e.(type) {
	case *ast.ParenExpr:
		return args[0], nil
	case *ast.BasicLit:
		if e.Kind != token.INT && e.Kind != token.FLOAT {
			return nil, f.errorf(f.col(e), "%s is not a number", e.Value)
		}
		v, err := strconv.ParseFloat(strings.ReplaceAll(e.Value, "_", ""), 64)
		if err != nil && e.Kind == token.INT { // 0x…, 0o…
			var i int64
			if i, err = strconv.ParseInt(e.Value, 0, 64); err == nil {
				v = float64(i)
			}
		}
		if err != nil {
			return nil, f.errorf(f.col(e), "%s is not a number", e.Value)
		}
		return b.num(v), nil
	case *ast.Ident:
		for i, v := range f.Env.Vars {
			if v.Name == e.Name {
				return b.variable(i), nil
			}
		}
		if v, ok := f.Env.Params[e.Name]; ok {
			return b.num(v), nil
		}
		if v, ok := constants[e.Name]; ok {
			return b.num(v), nil
		}
		if v, ok := sc.named[e.Name]; ok {
			sc.used[e.Name] = true
			return v, nil
		}
		if col, ok := sc.later[e.Name]; ok {
			return nil, f.errorf(f.col(e), "%s is used before it is assigned (at column %d)", e.Name, col)
		}
		if isFunction(e.Name) {
			return nil, f.errorf(f.col(e), "%s is a function: call it, %s(…)", e.Name, e.Name)
		}
		return nil, f.errorf(f.col(e), "unknown name %s (variables: %s; a parameter is given with --param %s=VALUE)",
			e.Name, f.varList(), e.Name)
	case *ast.UnaryExpr:
		if o, ok := unops[e.Op]; ok {
			return b.op(o, args[0]), nil
		}
		if e.Op == token.ADD {
			return args[0], nil
		}
		return nil, f.errorf(f.col(e), "operator %s is not part of the language", e.Op)
	case *ast.BinaryExpr:
		if err := f.sameAxis(f.fset.Position(e.OpPos).Column, e.Op.String(), args); err != nil {
			return nil, err
		}
		return b.op(binops[e.Op], args[0], args[1]), nil
	case *ast.CallExpr:
		if id, ok := e.Fun.(*ast.Ident); ok && sc.named[id.Name] != nil {
			return nil, f.errorf(f.col(id), "%s is a named subexpression, not a function", id.Name)
		}
		return f.call(b, e, append([]*Node(nil), args...), n)
	}
	return nil, f.errorf(f.col(e), "this is not part of the language (numbers, names, operators and function calls)")
}

func (f *Formula) varList() string {
	var names []string
	for _, v := range f.Env.Vars {
		names = append(names, v.Name)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// call is a call of a function being built: its arguments built, and
// what building it needs.
type call struct {
	f    *Formula
	b    *builder
	name string
	col  int
	args []*Node
	n    int // the length of the vector axis
}

// sameAxis checks that the arguments of an elementwise operation (what,
// at column col) can be combined element by element: at most one of them
// along the vector axis, or histograms of one length, beside numbers.
func (f *Formula) sameAxis(col int, what string, args []*Node) error {
	vec, bins := false, 0
	for _, a := range args {
		vec = vec || a.Vec
		switch {
		case a.Bins == 0:
		case bins != 0 && a.Bins != bins:
			return f.errorf(col, "%s combines histograms of %d and %d numbers element by element: they must have as many bins", what, bins, a.Bins)
		default:
			bins = a.Bins
		}
	}
	if vec && bins > 0 {
		return f.errorf(col, "%s combines a histogram (%d numbers) with values along the vector axis (%s) element by element: reduce one of them first (sum, mean, max, min)",
			what, bins, strings.TrimPrefix(f.vectorList(), "vectors: "))
	}
	return nil
}

// The most bins a histogram may have: hist's, and hist2's per axis (its
// cells are their square).
const (
	maxHistBins  = 4096
	maxHist2Bins = 256
)

// hist is the histogram o of the call's first one (hist) or two (hist2)
// arguments over the range and number of bins its last three give, which
// must be numbers (or parameters).
func (c *call) hist(o Op, most int) (*Node, error) {
	nv := o.Arity()
	vals, lim := c.args[:nv], c.args[nv:]
	for _, v := range vals {
		if !v.Vec {
			what := "has no vector axis"
			if v.Bins > 0 {
				what = "is a histogram"
			}
			return nil, c.f.errorf(c.col, "%s counts the elements of a vector (%s), but its argument %s", c.name, c.f.vectorList(), what)
		}
	}
	for i, name := range []string{"lo", "hi", "bins"} {
		if !lim[i].IsConst() {
			return nil, c.f.errorf(c.col, "%s's %s must be a number or a parameter, not computed from the data", c.name, name)
		}
	}
	lo, hi, n := lim[0].Val, lim[1].Val, lim[2].Val
	switch {
	case math.IsInf(lo, 0) || math.IsNaN(lo) || math.IsInf(hi, 0) || math.IsNaN(hi) || !(lo < hi):
		return nil, c.f.errorf(c.col, "%s's range [lo, hi] must be finite with lo < hi, got [%g, %g]", c.name, lo, hi)
	case !(n >= 1 && n <= float64(most)) || n != math.Trunc(n):
		return nil, c.f.errorf(c.col, "%s's bins must be a whole number from 1 to %d, got %g", c.name, most, n)
	}
	return c.b.hist(o, HistRange{Lo: lo, Hi: hi, N: int(n)}, vals...), nil
}

// reduce is the reduction o of x, which must vary along the vector axis
// or be a histogram.
func (c *call) reduce(o Op, x *Node) (*Node, error) {
	if !x.Vec && x.Bins == 0 {
		return nil, c.f.errorf(c.col, "%s reduces over the vector axis (%s), but its argument has no vector axis",
			c.name, c.f.vectorList())
	}
	return c.b.op(o, x), nil
}

// call makes the node of a call of a function, its arguments built: the
// function of its name taking as many arguments.
func (f *Formula) call(b *builder, e *ast.CallExpr, args []*Node, n int) (*Node, error) {
	id := e.Fun.(*ast.Ident)
	c := &call{f: f, b: b, name: id.Name, col: f.col(id), args: args, n: n}
	if err := f.sameAxis(c.col, c.name, args); err != nil {
		return nil, err
	}
	var arities []int
	for i := range functions {
		fn := &functions[i]
		if fn.Name != c.name {
			continue
		}
		if fn.arity() != len(args) {
			arities = append(arities, fn.arity())
			continue
		}
		switch {
		case fn.build != nil:
			return fn.build(c)
		case fn.op.IsReduction():
			return c.reduce(fn.op, args[0])
		}
		return b.op(fn.op, args...), nil
	}
	switch {
	case len(arities) == 0:
		return nil, f.errorf(c.col, "unknown function %s (functions: %s)", c.name, functionList())
	case len(arities) == 2:
		lo, hi := min(arities[0], arities[1]), max(arities[0], arities[1])
		return nil, f.errorf(c.col, "%s takes %d or %d arguments, got %d", c.name, lo, hi, len(args))
	}
	s := "s"
	if arities[0] == 1 {
		s = ""
	}
	return nil, f.errorf(c.col, "%s takes %d argument%s, got %d", c.name, arities[0], s, len(args))
}

func (f *Formula) vectorList() string {
	var names []string
	for _, v := range f.Env.Vars {
		if v.Vector {
			names = append(names, v.Name)
		}
	}
	if len(names) == 0 {
		return "this formula has none"
	}
	return "vectors: " + strings.Join(names, ", ")
}

func functionList() string {
	var names []string
	seen := map[string]bool{}
	for _, fn := range Functions {
		if !seen[fn.Name] {
			seen[fn.Name] = true
			names = append(names, fn.Name)
		}
	}
	return strings.Join(names, " ")
}

// reassociate gives ^ its mathematical precedence. Go's parser reads ^ as
// exclusive or, at the level of + and −, left to right: it reads 2*s^2 as
// (2*s)^2 and -x^2 as (-x)^2. Each maximal chain of + − * / ^ (bounded by
// parentheses, calls and the other operators) is flattened and rebuilt
// with ^ above * and /, above + and −, ^ right-associative, and the
// signs on a power's base moved outside the power. Chains are walked and
// rebuilt in loops: only parentheses, calls, signs and operators of
// higher precedence recurse, and the parser bounds their nesting.
func reassociate(e ast.Expr) ast.Expr {
	switch x := e.(type) {
	case *ast.ParenExpr:
		x.X = reassociate(x.X)
		return x
	case *ast.UnaryExpr:
		x.X = reassociate(x.X)
		return x
	case *ast.CallExpr:
		for i := range x.Args {
			x.Args[i] = reassociate(x.Args[i])
		}
		return x
	case *ast.BinaryExpr:
		if arith(x.Op) {
			return rebuild(flatten(x))
		}
		// A left-associative chain of other operators (a < b < c, a && b
		// && c): down its left side in a loop.
		var spine []*ast.BinaryExpr
		for b, ok := ast.Expr(x), true; ok; b = spine[len(spine)-1].X {
			var bx *ast.BinaryExpr
			if bx, ok = b.(*ast.BinaryExpr); !ok || arith(bx.Op) {
				break
			}
			spine = append(spine, bx)
		}
		last := spine[len(spine)-1]
		last.X = reassociate(last.X)
		for _, b := range spine {
			b.Y = reassociate(b.Y)
		}
		return x
	}
	return e
}

// flatten lists the operands and operators of the chain of + − * / ^ at
// x, in order, each operand reassociated.
func flatten(x *ast.BinaryExpr) *chain {
	c := &chain{}
	// In order: the left side first, then the operator, then the right.
	type item struct {
		e    ast.Expr
		op   *ast.BinaryExpr // after e's left side: the operator, then e's right side
		left bool
	}
	stack := []item{{e: x}}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if it.op != nil {
			c.ops = append(c.ops, it.op)
			stack = append(stack, item{e: it.op.Y})
			continue
		}
		if b, ok := it.e.(*ast.BinaryExpr); ok && arith(b.Op) {
			stack = append(stack, item{op: b}, item{e: b.X})
			continue
		}
		c.operands = append(c.operands, reassociate(it.e))
	}
	return c
}

func arith(t token.Token) bool {
	return t == token.ADD || t == token.SUB || t == token.MUL || t == token.QUO || t == token.XOR
}

// chain is a flattened run of operands and operators: operands[i] and
// operands[i+1] are joined by ops[i].
type chain struct {
	operands []ast.Expr
	ops      []*ast.BinaryExpr
}

// rebuild makes the tree of a chain: each run of ^ folded from the right
// (a sign on a power's base moved outside the power), then the products
// and quotients of the powers from the left, then the sums and
// differences of those from the left.
func rebuild(c *chain) ast.Expr {
	// Powers: factors[k] joined to factors[k+1] by fops[k] (* / + −).
	var factors []ast.Expr
	var fops []*ast.BinaryExpr
	for i := 0; i < len(c.operands); {
		j := i // operands i … j are one run of ^
		for j < len(c.ops) && c.ops[j].Op == token.XOR {
			j++
		}
		r := c.operands[j]
		for k := j - 1; k >= i; k-- {
			op, lhs := c.ops[k], c.operands[k]
			// -x^2 is −(x²): the signs on the base apply to the power,
			// every one of them (- -x^2 is −(−(x²)), as in Python).
			var signs []*ast.UnaryExpr
			for {
				u, ok := lhs.(*ast.UnaryExpr)
				if !ok || (u.Op != token.SUB && u.Op != token.ADD) {
					break
				}
				signs, lhs = append(signs, u), u.X
			}
			r = &ast.BinaryExpr{X: lhs, OpPos: op.OpPos, Op: token.XOR, Y: r}
			for k := len(signs) - 1; k >= 0; k-- {
				r = &ast.UnaryExpr{OpPos: signs[k].OpPos, Op: signs[k].Op, X: r}
			}
		}
		factors = append(factors, r)
		if j < len(c.ops) {
			fops = append(fops, c.ops[j])
		}
		i = j + 1
	}
	// Products, then sums.
	var terms []ast.Expr
	var tops []*ast.BinaryExpr
	t := factors[0]
	for k, op := range fops {
		if op.Op == token.MUL || op.Op == token.QUO {
			t = &ast.BinaryExpr{X: t, OpPos: op.OpPos, Op: op.Op, Y: factors[k+1]}
			continue
		}
		terms, tops = append(terms, t), append(tops, op)
		t = factors[k+1]
	}
	terms = append(terms, t)
	s := terms[0]
	for k, op := range tops {
		s = &ast.BinaryExpr{X: s, OpPos: op.OpPos, Op: op.Op, Y: terms[k+1]}
	}
	return s
}
