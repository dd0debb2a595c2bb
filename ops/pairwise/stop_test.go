package pairwise

import (
	"errors"
	"sync/atomic"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/ops"
)

// TestPairwiseStopsWhenAsked: with the stop flag set, Pairwise ends its run
// with ops.ErrStopped; with it clear, the same run succeeds (as package
// ops's TestOpsStopWhenAsked for its ops).
func TestPairwiseStopsWhenAsked(t *testing.T) {
	x := make([]float32, 40*6)
	for i := range x {
		x[i] = float32(i%11) - 5
	}
	data, err := NewPairData(x, 40, 6, MetricL1)
	if err != nil {
		t.Fatal(err)
	}
	pw := NewPairwise(data, MetricL1, 8)
	pw.RowsFromData = true
	idx := tensor.New(tensor.WithShape(8), tensor.WithBacking([]float64{0, 1, 2, 3, 4, 5, 6, 7}))
	var stop ops.Stopper = pw
	var flag atomic.Bool
	stop.SetStop(&flag)
	if _, err := pw.Do(idx); err != nil {
		t.Fatalf("%v with the flag clear", err)
	}
	flag.Store(true)
	if _, err := pw.Do(idx); !errors.Is(err, ops.ErrStopped) {
		t.Errorf("%v with the flag set, want ErrStopped", err)
	}
}
