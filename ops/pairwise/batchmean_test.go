package pairwise

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tapeloop/tapeloop/internal/cpukern"
)

// TestSetBatchMean: float32 l2's mean (centre) of a batch and column
// images that repeat it is the batch's own, bit for bit, as are the
// centred norms. The first value of each image is chosen so that summing
// on through the columns from the batch's sum rounds away from twice the
// batch's sum (their mean would then differ); the others are random.
func TestSetBatchMean(t *testing.T) {
	if !cpukern.GEMM() {
		t.Skip("the mean is taken for the packed matrix product only")
	}
	first := []float32{2.4229310676074496e+17, 1023.424072265625, -2.4229310676074496e+17, -13.62792682647705,
		8.076436892024832e+16, -8.076436892024832e+16}
	rng := rand.New(rand.NewPCG(rand.Uint64(), 3))
	n, d := len(first), 2*rng.IntN(20)+41
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(rng.NormFloat64()*1e3 + 1e4/3)
	}
	for i, v := range first {
		x[i*d] = v
	}
	alone, err := NewPairData(x, n, d, MetricL2)
	if err != nil {
		t.Fatal(err)
	}
	both := append(slices.Clone(x), x...)
	whole, err := NewPairData(slices.Clone(both), 2*n, d, MetricL2)
	if err != nil {
		t.Fatal(err)
	}
	if whole.mu[0] == alone.mu[0] {
		t.Fatalf("summed in one run, the first value's mean %v is the batch's: the test's values no longer tell", whole.mu[0])
	}
	split, err := NewPairData(both, 2*n, d, MetricL2)
	if err != nil {
		t.Fatal(err)
	}
	split.SetBatch(n)
	split.ensureCentred()
	if !slices.Equal(split.mu, alone.mu) {
		t.Fatalf("the mean of the batch and its repeat differs from the batch's: %v, want %v", split.mu[:3], alone.mu[:3])
	}
	if !slices.Equal(split.sq[:n], alone.sq) || !slices.Equal(split.sq[n:], alone.sq) {
		t.Errorf("centred norms differ from the batch's")
	}
}
