package engine

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	G "gorgonia.org/gorgonia"

	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/ops"
)

// WriteDOT writes g as a Graphviz digraph named name. Each node is labelled
// with its name, its op (or "input"), shape, dtype and buffer bytes, plus
// the bytes an op holds resident; edges run from an op's inputs to the op.
func WriteDOT(w io.Writer, name string, g *G.ExprGraph) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "digraph %s {\n", strconv.Quote(name))
	fmt.Fprintln(bw, "\trankdir=LR;")
	fmt.Fprintln(bw, "\tnode [shape=box, style=rounded, fontname=\"monospace\", fontsize=10];")
	nodes := g.AllNodes()
	for _, n := range nodes {
		op := "input"
		shape := "ellipse"
		if n.Op() != nil {
			op, shape = n.Op().String(), "box"
		}
		dims := "scalar"
		if s := n.Shape(); len(s) > 0 {
			dims = fmt.Sprint(s)
		}
		lines := []string{n.Name(), op, dims + " " + n.Dtype().String(), sysmem.Format(nodeBytes(n))}
		if r, ok := n.Op().(ops.Resident); ok && n.Op() != nil && r.ResidentBytes() > 0 {
			lines = append(lines, "+ "+sysmem.Format(r.ResidentBytes())+" resident")
		}
		fmt.Fprintf(bw, "\tn%d [shape=%s, label=%s];\n", n.ID(), shape, dotString(strings.Join(lines, "\n")))
	}
	for _, n := range nodes {
		children := g.From(n.ID())
		for children.Next() {
			c := children.Node()
			fmt.Fprintf(bw, "\tn%d -> n%d;\n", c.ID(), n.ID())
		}
	}
	fmt.Fprintln(bw, "}")
	return bw.Flush()
}

// dotString quotes s as a DOT string, with newlines as centred line breaks.
func dotString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}
