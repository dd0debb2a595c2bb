package formula

import (
	"fmt"
	"sort"

	"github.com/tapeloop/tapeloop/internal/cpukern"
)

// fxOp is the evaluator's instruction for operation o: the table's
// operations are numbered alike on both sides (go generate writes
// cpukern's numbers from the table).
func fxOp(o Op) cpukern.FxOp { return cpukern.FxOp(o) }

// Lower compiles g for the evaluator. inputs lists variables by index:
// the vector ones become the program's input slots and the scalar ones
// its first registers, each in the order given. A graph whose result is a
// vector stores it to output 0; one whose result is a number leaves it in
// the program's Result register, or with store, fills output 0 with it.
func Lower(g *Graph, inputs []int, store bool) (*cpukern.FxProgram, error) {
	p := &cpukern.FxProgram{}
	reg := map[*Node]int32{}
	slot := map[int]int32{} // vector variables
	for _, v := range inputs {
		if g.Vars[v].Vector {
			slot[v] = int32(p.Inputs)
			p.Inputs++
		}
	}
	var scalarVars []int
	for _, v := range inputs {
		if !g.Vars[v].Vector {
			scalarVars = append(scalarVars, v)
			p.Regs = append(p.Regs, 0)
		}
	}
	live := reachable(g.Root)
	isInput := map[int]bool{}
	for _, v := range inputs {
		isInput[v] = true
	}
	scalarReg := map[int]int32{}
	for i, v := range scalarVars {
		scalarReg[v] = int32(i)
	}
	for _, n := range live {
		if n.Op != OpVar {
			continue
		}
		if !isInput[n.Var] {
			return nil, fmt.Errorf("formula: variable %s is not an input of the program", g.Vars[n.Var].Name)
		}
		if r, ok := scalarReg[n.Var]; ok {
			reg[n] = r
		}
	}
	newReg := func(init float64) int32 {
		p.Regs = append(p.Regs, init)
		return int32(len(p.Regs) - 1)
	}
	// newRegs: n registers in a row (a histogram's, or a value computed
	// bin by bin), the first's index.
	newRegs := func(n int) int32 {
		p.Regs = append(p.Regs, make([]float64, n)...)
		return int32(len(p.Regs) - n)
	}

	// Levels: a scalar's level is the number of passes over the vector
	// axis it waits for; a vector node's, the level of the scalars it
	// uses (it runs in the pass after them).
	level, byLevel := levels(live)
	maxLevel := len(byLevel) - 1
	storeLevel := -1
	if g.Root.Vec || store {
		storeLevel = level[g.Root] + 1
		maxLevel = max(maxLevel, storeLevel)
	}
	for _, n := range live {
		if !n.Vec && n.Op == OpConst {
			reg[n] = newReg(n.Val)
		}
	}
	scalarBlock := func(l int) {
		if l >= len(byLevel) {
			return
		}
		var body []cpukern.FxIns
		at := func(a *Node) int32 { return reg[a] }
		for _, n := range byLevel[l] {
			if n.Vec || passes(n) || n.Op == OpConst || n.Op == OpVar {
				continue
			}
			if bins := binsOf(n); bins > 0 {
				// Bin by bin: the instruction over bins registers in a
				// row, each argument a histogram's (mask bit) or a number.
				var mask int32
				for i, a := range n.Args {
					if a.Bins > 0 {
						mask |= 1 << i
					}
				}
				r := newReg(0)
				if n.Bins > 0 {
					r = newRegs(n.Bins)
				}
				reg[n] = r
				body = append(body, cpukern.FxIns{Op: cpukern.FxBins, Dst: int32(bins), A: mask}, ins(n, r, at))
				continue
			}
			r := newReg(0)
			reg[n] = r
			body = append(body, ins(n, r, at))
		}
		if len(body) > 0 {
			p.Blocks = append(p.Blocks, cpukern.FxBlock{Body: body})
		}
	}
	scalarBlock(0)
	for l := 1; l <= maxLevel; l++ {
		// The reductions of this level, and the vector nodes they need.
		var roots []*Node
		if l < len(byLevel) {
			for _, n := range byLevel[l] {
				if passes(n) {
					roots = append(roots, n)
				}
			}
		}
		if len(roots) > 0 || l == storeLevel {
			p.Blocks = append(p.Blocks, vectorBlock(p, roots, l == storeLevel, reg, slot, g, newReg, newRegs))
		}
		scalarBlock(l)
	}
	if storeLevel >= 0 {
		p.Outputs = 1
	} else {
		p.Result = reg[g.Root]
	}
	return p, nil
}

// ins is the instruction computing n into dst, its arguments found by at.
func ins(n *Node, dst int32, at func(*Node) int32) cpukern.FxIns {
	x := cpukern.FxIns{Op: fxOp(n.Op), Dst: dst}
	args := []*int32{&x.A, &x.B, &x.C}
	for i, a := range n.Args {
		*args[i] = at(a)
	}
	return x
}

// vectorBlock is one pass over the vector axis computing the reductions
// roots into new registers and, with store, the graph's root into output 0.
func vectorBlock(p *cpukern.FxProgram, roots []*Node, store bool, reg map[*Node]int32, inSlot map[int]int32, g *Graph,
	newReg func(float64) int32, newRegs func(int) int32) cpukern.FxBlock {
	var blk cpukern.FxBlock
	var marked []*Node
	if store && g.Root.Vec {
		marked = append(marked, g.Root)
	}
	body := passNodes(append(roots, marked...)) // the pass's nodes, arguments first
	// Vector operands: input slots, broadcasts of scalars, temporaries.
	nslot := int32(p.Inputs)
	at := map[*Node]int32{}
	bcast := func(n *Node) int32 {
		if s, ok := at[n]; ok {
			return s
		}
		s := nslot
		nslot++
		at[n] = s
		blk.Prologue = append(blk.Prologue, cpukern.FxIns{Op: cpukern.FxBcast, Dst: s, A: reg[n]})
		return s
	}
	operand := func(a *Node) int32 {
		if a.Vec {
			return at[a]
		}
		return bcast(a)
	}
	items := fuse(body, store, g.Root)
	lastUse := map[*Node]int{}
	for i, it := range items {
		for _, a := range it.args {
			lastUse[a] = i
		}
	}
	if store {
		lastUse[g.Root] = len(items)
	}
	var free []int32
	release := func(it item, i int) {
		for _, a := range it.args {
			if a.Vec && a.Op != OpVar && lastUse[a] == i {
				free = append(free, at[a])
				lastUse[a] = -1
			}
		}
	}
	for i, it := range items {
		n := it.n
		x := cpukern.FxIns{Op: it.op, C: int32(it.c)}
		ops := []*int32{&x.A, &x.B, &x.C}
		for k, a := range it.args {
			*ops[k] = operand(a)
		}
		switch {
		case n.Op == OpVar:
			at[n] = inSlot[n.Var]
			continue
		case n.Op.IsHistogram():
			// The counts in n.Bins registers, the range and the number
			// of bins per axis in three more.
			r := newRegs(n.Bins)
			reg[n] = r
			prm := newReg(n.Range.Lo)
			newReg(n.Range.Hi)
			newReg(float64(n.Range.N))
			blk.Prologue = append(blk.Prologue, cpukern.FxIns{Op: cpukern.FxInitHist, Dst: r, A: int32(n.Bins)})
			x.Dst, x.C = r, prm
			if n.Op == OpHist {
				x.B = x.A
			}
			release(it, i)
		case n.Op.IsReduction():
			r := newReg(0)
			reg[n] = r
			init := map[Op]cpukern.FxOp{OpSum: cpukern.FxInitSum, OpRMax: cpukern.FxInitMax, OpRMin: cpukern.FxInitMin}[n.Op]
			blk.Prologue = append(blk.Prologue, cpukern.FxIns{Op: init, Dst: r})
			x.Dst = r
			release(it, i)
		default:
			release(it, i) // the result may take an argument's slot: elementwise, in place
			if len(free) > 0 {
				x.Dst, free = free[len(free)-1], free[:len(free)-1]
			} else {
				x.Dst = nslot
				nslot++
			}
			at[n] = x.Dst
		}
		blk.Body = append(blk.Body, x)
	}
	if store {
		blk.Body = append(blk.Body, cpukern.FxIns{Op: cpukern.FxStore, Dst: 0, A: operand(g.Root)})
	}
	blk.Vector = true
	p.Slots = max(p.Slots, int(nslot))
	return blk
}

// item is one instruction of a pass: node n computed by op over args
// (for FxRSumOp, c is the operation folded).
type item struct {
	n    *Node
	op   cpukern.FxOp
	c    cpukern.FxOp
	args []*Node
}

// fuse turns a pass's nodes into instructions, fusing a difference into
// the abs or square of it (|a−b|, (a−b)²) and an elementwise operation of
// two into the sum of it, when nothing else uses the inner value: one
// instruction instead of two or three, and one trip through the chunk.
func fuse(body []*Node, store bool, root *Node) []item {
	uses := map[*Node]int{}
	for _, n := range body {
		for _, a := range n.Args {
			uses[a]++
		}
	}
	if store {
		uses[root]++
	}
	items := make([]item, len(body))
	index := map[*Node]int{}
	skip := make([]bool, len(body))
	for i, n := range body {
		index[n] = i
		items[i] = item{n: n, op: fxOp(n.Op), args: n.Args}
		if n.Op == OpVar {
			continue
		}
		a := n.Args[0]
		only := func(k int) bool { return a.Vec && a.Op == OpSub && uses[a] == k }
		switch {
		case n.Op == OpAbs && only(1):
			items[i].op, items[i].args = cpukern.FxAbsDiff, a.Args
			skip[index[a]] = true
		case n.Op == OpMul && n.Args[1] == a && only(2):
			items[i].op, items[i].args = cpukern.FxSqDiff, a.Args
			skip[index[a]] = true
		}
	}
	foldable := map[cpukern.FxOp]bool{cpukern.FxAbsDiff: true, cpukern.FxSqDiff: true}
	for o, info := range opTable {
		if info.Fold {
			foldable[fxOp(Op(o))] = true
		}
	}
	for i, n := range body {
		if n.Op != OpSum {
			continue
		}
		a := n.Args[0]
		k, ok := index[a]
		if !ok || a.Op == OpVar || uses[a] != 1 || !foldable[items[k].op] {
			continue
		}
		items[i].op, items[i].c, items[i].args = cpukern.FxRSumOp, items[k].op, items[k].args
		skip[k] = true
	}
	var out []item
	for i, it := range items {
		if !skip[i] {
			out = append(out, it)
		}
	}
	return out
}

// reachable lists the nodes root depends on, arguments first.
func reachable(root *Node) []*Node {
	var out []*Node
	postorder(root, nil, func(n *Node) { out = append(out, n) })
	return out
}

// passes tells the nodes computed in a pass over the vector axis: the
// reductions of a vector, the histograms.
func passes(n *Node) bool {
	return n.Op.IsHistogram() || n.Op.IsReduction() && n.Args[0].Vec
}

// binsOf is the number of bins a node is computed over, bin by bin: its
// own, or for the reduction of a histogram, its argument's; 0 for others.
func binsOf(n *Node) int {
	if n.Op.IsReduction() {
		return n.Args[0].Bins
	}
	return n.Bins
}

// levels gives each node of live (arguments first) its level: a
// scalar's is the number of passes over the vector axis it waits for; a
// vector node's, the level of the scalars it uses (it runs in the pass
// after them). byLevel lists live's nodes by level, in live's order.
func levels(live []*Node) (level map[*Node]int, byLevel [][]*Node) {
	level = make(map[*Node]int, len(live))
	for _, n := range live {
		l := 0
		for _, a := range n.Args {
			l = max(l, level[a])
		}
		if passes(n) {
			l++
		}
		level[n] = l
		for len(byLevel) <= l {
			byLevel = append(byLevel, nil)
		}
		byLevel[l] = append(byLevel[l], n)
	}
	return level, byLevel
}

// passNodes lists the nodes one pass over the vector axis computes for
// roots: the roots, and the vector nodes they read through vector nodes,
// in the order of their graph (arguments first).
func passNodes(roots []*Node) []*Node {
	need := map[*Node]bool{}
	var out []*Node
	stack := append([]*Node(nil), roots...)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if need[n] {
			continue
		}
		need[n] = true
		out = append(out, n)
		for _, a := range n.Args {
			if a.Vec && !need[a] {
				stack = append(stack, a)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}
