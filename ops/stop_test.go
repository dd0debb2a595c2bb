package ops

import (
	"errors"
	"sync/atomic"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/volume"
)

// TestOpsStopWhenAsked: with the stop flag set, each long-running op ends
// its run with ErrStopped; with it clear, the same run succeeds.
func TestOpsStopWhenAsked(t *testing.T) {
	vol := &volume.Volume{V: make([]float32, 9*8*7), N: [3]int64{9, 8, 7}, Spacing: [3]float64{1, 1, 1}}
	for i := range vol.V {
		vol.V[i] = float32(i%5) / 4
	}
	orbit, err := Orbit(2, [3]float64{4, 3.5, 3}, 60, 30, 5, 7, 1)
	if err != nil {
		t.Fatal(err)
	}
	poses := make([]float64, 2*PoseWidth)
	for i, p := range orbit {
		p.Encode(poses[i*PoseWidth:])
	}
	drr := NewDRR(vol, 5, 7, 0, 2)
	in := tensor.New(tensor.WithShape(2, PoseWidth), tensor.WithBacking(poses))
	for _, c := range []struct {
		name string
		op   interface {
			Stopper
			run() error
		}
	}{
		{"drr", stopRun{drr, func() error { _, err := drr.Do(in); return err }}},
	} {
		var flag atomic.Bool
		c.op.SetStop(&flag)
		if err := c.op.run(); err != nil {
			t.Fatalf("%s: %v with the flag clear", c.name, err)
		}
		flag.Store(true)
		if err := c.op.run(); !errors.Is(err, ErrStopped) {
			t.Errorf("%s: %v with the flag set, want ErrStopped", c.name, err)
		}
	}
}

type stopRun struct {
	Stopper
	fn func() error
}

func (s stopRun) run() error { return s.fn() }
