package engine_test

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/engine"
)

// chain is a synthetic workload: x (batch, width) → Square → Mul → output,
// with built-in ops whose intermediates the planner must count.
type chain struct {
	items, width, maxBatch int
}

func (c chain) Name() string        { return "chain" }
func (c chain) Dtype() tensor.Dtype { return tensor.Float64 }
func (c chain) Items() int          { return c.items }
func (c chain) MaxBatch() int       { return c.maxBatch }
func (c chain) Build(g *G.ExprGraph, batch int) ([]*G.Node, []*G.Node, error) {
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(batch, c.width), G.WithName("x"))
	sq, err := G.Square(x)
	if err != nil {
		return nil, nil, err
	}
	y, err := G.HadamardProd(sq, x)
	if err != nil {
		return nil, nil, err
	}
	return []*G.Node{x}, []*G.Node{y}, nil
}

func TestFootprintCountsEveryBuffer(t *testing.T) {
	w := chain{items: 100, width: 10}
	bufs, err := engine.Footprint(w, 4)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int64{}
	for _, b := range bufs {
		kinds[b.Kind] += b.Bytes
	}
	const row = 4 * 10 * 8 // one (4, 10) float64 buffer
	want := map[string]int64{engine.KindInput: row, engine.KindIntermediate: row, engine.KindOutput: row, engine.KindResult: row}
	for k, v := range want {
		if kinds[k] != v {
			t.Errorf("%s bytes %d, want %d (buffers %+v)", k, kinds[k], v, bufs)
		}
	}
	if engine.Total(bufs) != 4*row {
		t.Errorf("total %d, want %d", engine.Total(bufs), 4*row)
	}
}

func TestPlanPicksLargestBatchUnderLimit(t *testing.T) {
	perItem := int64(4 * 10 * 8) // input, intermediate, output, result: 10 float64 each
	for _, limit := range []int64{perItem, perItem + 1, 7*perItem - 1, 7 * perItem, 1000 * perItem, 1 << 40} {
		w := chain{items: 500, width: 10}
		p, err := engine.NewPlan(w, limit, 0)
		if err != nil {
			t.Fatalf("limit %d: %v", limit, err)
		}
		if p.Bytes > limit {
			t.Errorf("limit %d: plan takes %d bytes", limit, p.Bytes)
		}
		if p.Batch < w.items {
			next, _ := engine.Footprint(w, p.Batch+1)
			if engine.Total(next) <= limit {
				t.Errorf("limit %d: batch %d chosen but %d fits", limit, p.Batch, p.Batch+1)
			}
		}
		if p.Batches*p.Batch < w.items || (p.Batches-1)*p.Batch >= w.items {
			t.Errorf("limit %d: %d batches of %d do not cover %d items exactly", limit, p.Batches, p.Batch, w.items)
		}
	}
}

func TestPlanRespectsMaxBatch(t *testing.T) {
	p, err := engine.NewPlan(chain{items: 500, width: 3, maxBatch: 64}, 1<<30, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Batch != 64 || p.Batches != 8 {
		t.Errorf("batch %d × %d, want 64 × 8", p.Batch, p.Batches)
	}
}

func TestPlanOverBudget(t *testing.T) {
	w := chain{items: 10, width: 1000}
	_, err := engine.NewPlan(w, 1000, 0)
	var be *engine.BudgetError
	if !errors.As(err, &be) || !errors.Is(err, engine.ErrOverBudget) {
		t.Fatalf("error %v, want a BudgetError", err)
	}
	if be.Need != 4*1000*8 || be.Limit != 1000 || be.Batch != 1 {
		t.Errorf("BudgetError %+v", be)
	}
	for _, s := range []string{"32000", "1000"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %s bytes", err, s)
		}
	}
	// A forced batch must fit as well.
	if _, err := engine.NewPlan(w, 100_000, 5); !errors.As(err, &be) || be.Batch != 5 {
		t.Errorf("forced batch over budget: %v", err)
	}
}

func TestWriteDOT(t *testing.T) {
	job := newFakeJob(10, 3)
	job.resident = 1000
	p, err := engine.Compile(job, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var buf bytes.Buffer
	if err := engine.WriteDOT(&buf, "fake", p.Graph()); err != nil {
		t.Fatal(err)
	}
	s := buf.String()
	for _, want := range []string{`digraph "fake"`, "affine{2x+1, width 3}", "(10, 3) float64", "240 B", "resident", "->"} {
		if !strings.Contains(s, want) {
			t.Errorf("DOT lacks %q:\n%s", want, s)
		}
	}
	if _, err := exec.LookPath("dot"); err != nil {
		t.Skip("graphviz dot not installed; syntax not checked")
	}
	cmd := exec.Command("dot", "-Tsvg")
	cmd.Stdin = &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("dot rejects the graph: %v\n%s", err, out)
	}
}
