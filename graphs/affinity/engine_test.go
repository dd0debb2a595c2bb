package affinity_test

import (
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs/affinity"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/ops/pairwise"
)

// TestRunErrorIsTheOps: an op failing at run time is reported in its own
// words, without the TapeMachine's wrapping, and stays matchable.
func TestRunErrorIsTheOps(t *testing.T) {
	const n, d, batch = 30, 5, 4
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(i % 7)
	}
	data, err := pairwise.NewPairData(x, n, d, pairwise.MetricL1)
	if err != nil {
		t.Fatal(err)
	}
	job, err := affinity.New(affinity.Setup{Data: data, Metric: pairwise.MetricL1, Symmetric: true})
	if err != nil {
		t.Fatal(err)
	}
	p, err := engine.Compile(job, batch)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// Symmetric blocks compute from their first row on: a first row
	// outside the images is the op's error.
	if err := p.Feed(0, tensor.New(tensor.WithBacking([]float64{40, 41, 42, 43}))); err != nil {
		t.Fatal(err)
	}
	_, err = p.Run()
	want := "engine: affinity: run: pairwise: first row index 40 outside [0, 30)"
	if err == nil || err.Error() != want {
		t.Fatalf("Run error %q, want %q", err, want)
	}
}
