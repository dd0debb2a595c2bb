package engine

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	pkgerrors "github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/ops"
)

// Workload builds one workload's graph for a fixed batch size.
type Workload interface {
	// Name is the workload's name, as in the CLI.
	Name() string
	// Dtype is the element type of the graph's inputs and outputs.
	Dtype() tensor.Dtype
	// Items is the number of items (queries, poses, rows) to process.
	Items() int
	// MaxBatch is the largest batch worth planning; 0 means Items.
	MaxBatch() int
	// Build adds the graph for batch items to g and returns its input
	// nodes (the first dimension of each is the batch) and output nodes.
	// It must not allocate data buffers: the planner builds graphs only to
	// read their shapes.
	Build(g *G.ExprGraph, batch int) (in, out []*G.Node, err error)
}

// ErrBatch is wrapped by errors about a batch that does not fit a Program.
var ErrBatch = errors.New("engine: bad batch")

// Program is a Workload's graph compiled once for a fixed batch size, with
// its inputs bound to preallocated tensors.
type Program struct {
	Name  string
	Batch int
	Dtype tensor.Dtype

	g       *G.ExprGraph
	vm      G.VM
	tape    tapeRunner // vm, run on the caller
	inNodes []*G.Node
	in      []*tensor.Dense
	outNode []*G.Node
	out     []*tensor.Dense
	valid   int
	counted []ops.RowCounter // ops told the valid row count before each run
	stop    atomic.Bool      // set by Stop; the long-running ops check it
}

// Compile builds w's graph for batch items, binds every input node to a
// zeroed tensor of its shape and compiles the graph into a TapeMachine.
func Compile(w Workload, batch int) (p *Program, err error) {
	if batch < 1 {
		return nil, fmt.Errorf("%w: batch size %d < 1", ErrBatch, batch)
	}
	g := G.NewGraph()
	inNodes, outNodes, err := w.Build(g, batch)
	if err != nil {
		return nil, err
	}
	p = &Program{Name: w.Name(), Batch: batch, Dtype: w.Dtype(), g: g, inNodes: inNodes, outNode: outNodes, valid: batch}
	for _, n := range inNodes {
		if s := n.Shape(); len(s) == 0 || s[0] != batch {
			return nil, fmt.Errorf("engine: %s: input %q has shape %v, want a first dimension of %d", w.Name(), n.Name(), s, batch)
		}
		t := tensor.New(tensor.WithShape(n.Shape()...), tensor.Of(n.Dtype()))
		if err := G.Let(n, t); err != nil {
			return nil, fmt.Errorf("engine: %s: bind input %q: %w", w.Name(), n.Name(), err)
		}
		p.in = append(p.in, t)
	}
	for _, n := range outNodes {
		if owned(n) {
			p.out = append(p.out, nil) // read in place after the first run
			continue
		}
		p.out = append(p.out, tensor.New(tensor.WithShape(n.Shape()...), tensor.Of(n.Dtype())))
	}
	for _, n := range g.AllNodes() {
		if rc, ok := n.Op().(ops.RowCounter); ok && n.Op() != nil {
			p.counted = append(p.counted, rc)
		}
		if s, ok := n.Op().(ops.Stopper); ok && n.Op() != nil {
			s.SetStop(&p.stop)
		}
	}
	defer func() {
		// NewTapeMachine panics when the graph does not compile.
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("engine: %s: compile: %v", w.Name(), r)
		}
	}()
	p.vm = G.NewTapeMachine(g)
	if p.tape, err = newTapeRunner(p.vm); err != nil {
		p.vm.Close()
		return nil, err
	}
	return p, nil
}

// Graph is the compiled expression graph.
func (p *Program) Graph() *G.ExprGraph { return p.g }

// Inputs are the tensors bound to the input nodes, in Build's order; a Job
// fills their first n rows and then calls Pad(n).
func (p *Program) Inputs() []*tensor.Dense { return p.in }

// Outputs are the results of the last Run: result buffers Run copied the
// output nodes into or, for ops that own their output (ops.Owner), those
// ops' buffers, valid until the next Run.
func (p *Program) Outputs() []*tensor.Dense { return p.out }

// owned reports whether n's op keeps its output buffer for good.
func owned(n *G.Node) bool {
	o, ok := n.Op().(ops.Owner)
	return ok && n.Op() != nil && o.OwnsOutput()
}

// Feed copies src into input i. src must have the input's dtype and shape,
// except that its first dimension may be shorter than the batch (a short
// last batch); call Pad with that length after feeding every input.
func (p *Program) Feed(i int, src *tensor.Dense) error {
	if i < 0 || i >= len(p.in) {
		return fmt.Errorf("%w: %s has %d inputs, no input %d", ErrBatch, p.Name, len(p.in), i)
	}
	dst := p.in[i]
	name := p.inNodes[i].Name()
	ds, ss := dst.Shape(), src.Shape()
	if src.Dtype() != dst.Dtype() {
		return fmt.Errorf("%w: input %q of %s is %v, batch is %v", ErrBatch, name, p.Name, dst.Dtype(), src.Dtype())
	}
	ok := len(ss) == len(ds) && ss[0] >= 1 && ss[0] <= ds[0]
	for k := 1; ok && k < len(ds); k++ {
		ok = ss[k] == ds[k]
	}
	if !ok {
		return fmt.Errorf("%w: input %q of %s has shape %v (first dimension up to %d), batch has shape %v", ErrBatch, name, p.Name, ds, ds[0], ss)
	}
	if src.IsMaterializable() || src.DataOrder().IsColMajor() {
		return fmt.Errorf("%w: input %q: batch is a strided view, not contiguous C order", ErrBatch, name)
	}
	n := src.Shape().TotalSize()
	switch d := dst.Data().(type) {
	case []float32:
		copy(d, src.Data().([]float32)[:n])
	case []float64:
		copy(d, src.Data().([]float64)[:n])
	default:
		return fmt.Errorf("%w: input %q has unsupported dtype %v", ErrBatch, name, dst.Dtype())
	}
	return nil
}

// Pad zeroes rows [n, Batch) of every input and records that only the first
// n rows of the outputs are valid.
func (p *Program) Pad(n int) error {
	if n < 1 || n > p.Batch {
		return fmt.Errorf("%w: %d valid rows, want 1 to %d", ErrBatch, n, p.Batch)
	}
	p.valid = n
	if n == p.Batch {
		return nil
	}
	for _, t := range p.in {
		row := t.Shape().TotalSize() / p.Batch
		switch d := t.Data().(type) {
		case []float32:
			clear(d[n*row:])
		case []float64:
			clear(d[n*row:])
		}
	}
	return nil
}

// Run executes the graph once, copies every output node's value into its
// result buffer and resets the machine. It returns the number of valid rows.
func (p *Program) Run() (int, error) {
	if p.vm == nil {
		return 0, fmt.Errorf("engine: %s: run: the program is closed", p.Name)
	}
	defer p.vm.Reset()
	for _, rc := range p.counted {
		rc.SetValidRows(p.valid)
	}
	if err := p.tape.RunOnCaller(); err != nil {
		return 0, fmt.Errorf("engine: %s: run: %w", p.Name, opError(err))
	}
	for i, n := range p.outNode {
		v, ok := n.Value().(*tensor.Dense)
		if !ok {
			return 0, fmt.Errorf("engine: %s: output %q is %T, not a dense tensor", p.Name, n.Name(), n.Value())
		}
		if owned(n) {
			p.out[i] = v
			continue
		}
		switch d := p.out[i].Data().(type) {
		case []float32:
			copy(d, v.Data().([]float32))
		case []float64:
			copy(d, v.Data().([]float64))
		}
	}
	n := p.valid
	p.valid = p.Batch
	return n, nil
}

// Stop makes the run in progress, and every later one, end early with an
// error: the ops that take long check for it between blocks of work. It
// may be called from any goroutine.
func (p *Program) Stop() { p.stop.Store(true) }

// Close releases the machine. Gorgonia's TapeMachine carries a finalizer,
// and a structure with a finalizer that reaches itself is never collected
// (runtime.SetFinalizer): the finalizer is cleared once the machine is
// closed, so that the machine and what its ops hold are freed.
func (p *Program) Close() error {
	if p.vm == nil {
		return nil
	}
	err := p.vm.Close()
	runtime.SetFinalizer(p.vm, nil)
	p.vm, p.tape = nil, nil
	return err
}

// opError digs the failing op's own error out of the TapeMachine's
// wrapping ("PC 2. Failed to execute instruction …: Failed to carry
// op.Do(): …"): the op's error says what went wrong, the rest is noise to a
// user.
func opError(err error) error {
	if e, ok := err.(interface{ Err() error }); ok && e.Err() != nil { // gorgonia's vmContextualError
		err = e.Err()
	}
	return pkgerrors.Cause(err)
}
