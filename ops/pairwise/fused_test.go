package pairwise

import (
	"math/rand/v2"
	"testing"

	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

// TestFuseOnTheCPU: the CPU's Pairwise has no fused passes: the graph
// keeps TopK and Mirror.
func TestFuseOnTheCPU(t *testing.T) {
	rng := rand.New(rand.NewPCG(49, 50))
	const n, d = 30, 4
	data, err := NewPairData(opstest.Normals32(rng, n*d), n, d, MetricDot)
	if err != nil {
		t.Fatal(err)
	}
	pw := NewPairwise(data, MetricDot, 8)
	pw.RowsFromData = true
	if op, ok := FuseTopK(pw, 3); ok || op != nil {
		t.Error("FuseTopK fused the CPU op")
	}
	pw.Upper = true
	if op, ok := FuseMatrix(pw, make([]float32, n*n)); ok || op != nil {
		t.Error("FuseMatrix fused the CPU op")
	}
}
