package filejob

import (
	"context"
	"fmt"
	"math"

	"github.com/tapeloop/tapeloop/graphs/wavelet"
	"github.com/tapeloop/tapeloop/internal/engine"
)

// DemoCase is one workload of the demo, on built-in data at a size that
// runs in seconds on two cores, with the result a reader can check.
type DemoCase struct {
	Workload, Size string

	batch  int
	open   func(dev *engine.Device) (Task, error)
	result func(Task) string
}

// DemoCases are the demo's workloads, in the order it prints them.
func DemoCases() []DemoCase {
	return []DemoCase{
		demoInterp("interp sumsq", "sumsq", 1_000_000, 1<<14, "N=1e6"),
		demoInterp("interp none", "none", 100_000, 1<<11, "N=1e5"),
		{
			// The negative L1 affinities of 2000 standard-normal 64×64 images
			// in blocks of 50 rows (40 batches: enough for each decile of the
			// drift column to hold more than one). For independent standard
			// normals E|x − y| = 2/√π per value, so the mean off-diagonal
			// affinity is about −4096·2/√π ≈ −4622. Whole rows are streamed
			// although the matrix would fit, so every block does the same work
			// and the drift column measures the engine alone.
			Workload: "affinity l1", Size: "N=2000 64×64 block=50",
			open: func(dev *engine.Device) (Task, error) {
				block := 50
				s := AffinitySpec{N: 2000, Height: 64, Width: 64, Seed: 1, Block: &block, Streamed: true}
				s.Metric = "l1"
				return OpenAffinity(s, dev, false)
			},
			result: func(t Task) string {
				const n, d = 2000, 64 * 64
				mean := t.(*AffinityTask).Summary().Checksum / float64(n*(n-1))
				return fmt.Sprintf("mean A=%.1f (≈%.1f expected)", mean, -float64(d)*2/math.Sqrt(math.Pi))
			},
		},
		{
			// The 96³ Shepp–Logan phantom over a 72-pose orbit.
			Workload: "drr siddon", Size: "phantom 96³ 72 poses 128²", batch: 2,
			open: func(dev *engine.Device) (Task, error) {
				s := DefaultDRRSpec()
				s.Size, s.Orbit, s.Detector = 96, 72, "128x128"
				return OpenDRR(s, dev, false)
			},
			result: func(t Task) string {
				r := t.(*DRRTask).Summary()
				return fmt.Sprintf("Σ=%.5g, max line integral %.4f", r.Sum, r.Max)
			},
		},
		{
			// 64 kernels over a 24³ random volume with periodic boundaries:
			// every batch the same work (in reflect mode the kernels run
			// grouped by the padding they need, and a group of wider kernels
			// costs more per batch, which the drift column would show).
			Workload: "wavelet", Size: "24³ wrap 8θ×4φ×2ξ", batch: 2,
			open: func(dev *engine.Device) (Task, error) {
				s := WaveletSpec{Config: wavelet.Config{A: 1, Boundary: "wrap"}, Size: "24x24x24", Seed: 1, Theta: "0:pi:8", Phi: "0:pi:4", Xi: "1,2"}
				return OpenWavelet(s, dev, false)
			},
			result: func(t Task) string {
				r := t.(*WaveletTask).Summary()
				if r.Largest == nil {
					return "no energy"
				}
				return fmt.Sprintf("max energy %.4g at θ=%.3g φ=%.3g ξ=%g", r.MaxEnergy, r.Theta, r.Phi, r.Xi)
			},
		},
	}
}

// demoInterp is the interpolation case: f = x² in every one of 300 rows on
// a 4096-point grid, n uniform queries on [0, 1]. The cubic scheme
// reproduces x² exactly away from the padded ends, so Σ_j value_j² ≈ M·x⁴
// with mean M/5 per query, and Σ_j value_j ≈ M·x² with mean M/3.
func demoInterp(name, reduce string, n, batch int, size string) DemoCase {
	const m, g = 300, 4096
	return DemoCase{
		Workload: name, Size: fmt.Sprintf("M=%d G=%d %s", m, g, size), batch: batch,
		open: func(dev *engine.Device) (Task, error) {
			s := InterpSpec{Interpolants: m, Grid: g, Points: n, Seed: 1}
			s.Reduce = reduce
			return OpenInterp(s, dev, false)
		},
		result: func(t Task) string {
			expect := float64(n*m) / 5
			if reduce != "sumsq" {
				expect = float64(n*m) / 3
			}
			return fmt.Sprintf("Σ=%.6g (≈%.6g expected)", t.(*InterpTask).Summary().Sum, expect)
		},
	}
}

// Run opens the case on dev (quiet, with the case's batch size), runs it
// and returns what it measured and its result column.
func (c DemoCase) Run(ctx context.Context, dev *engine.Device) (*engine.Outcome, string, error) {
	d := dev.Quiet()
	if c.batch > 0 {
		d = d.WithBatch(c.batch)
	}
	t, err := c.open(d)
	if err != nil {
		return nil, "", err
	}
	defer t.Close()
	if a, ok := t.(interface{ Device() *engine.Device }); ok { // a task that sets its own batch
		d = a.Device()
	}
	out, err := d.Run(ctx, t.Job())
	if err != nil {
		return nil, "", err
	}
	return out, c.result(t), nil
}
