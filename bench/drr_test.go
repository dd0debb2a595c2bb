package bench

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/tapeloop/tapeloop/graphs/drr"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops"
)

// BenchmarkDRRSteadyState renders 1000 poses of the phantom (128³, 128×128
// detector, trilinear) through one compiled graph, 4 poses per batch
// (batches of ~10 ms, long enough that load noise does not swamp the
// ratio), and reports the run's drift (median batch time of the last
// decile over the first) and Go heap growth from the first batch to the
// last: flat means ≤ 1.05 and ≤ 1 MiB.
func BenchmarkDRRSteadyState(b *testing.B) {
	v := volume.Phantom(128, 192, 0.02)
	poses, err := ops.Orbit(1000, [3]float64{}, 1020, 510, 128, 128, 3)
	if err != nil {
		b.Fatal(err)
	}
	benchmarkSteadyState(b, 4, func() engine.Job {
		job, err := drr.New(drr.Setup{Vol: v, Poses: poses, Step: 0.75})
		if err != nil {
			b.Fatal(err)
		}
		return job
	})
}

func benchmarkDRR(b *testing.B, step float64) {
	const n = 256
	rng := rand.New(rand.NewPCG(7, 8))
	v := &volume.Volume{V: make([]float32, n*n*n), N: [3]int64{n, n, n},
		Origin: [3]float64{-128, -128, -128}, Spacing: [3]float64{1, 1, 1}}
	sysmem.AdviseHugePagesOf(v.V) // as the volume readers do
	for i := range v.V {
		v.V[i] = rng.Float32() * 0.02
	}
	poses, err := ops.Orbit(128, [3]float64{}, 1020, 510, 200, 200, 2)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		job, err := drr.New(drr.Setup{Vol: v, Poses: poses, Step: step})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := engine.Run(context.Background(), job, engine.RunConfig{MemLimit: 1 << 30}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(poses)*b.N)/b.Elapsed().Seconds(), "DRR/s")
}

// BenchmarkDRRSiddon: 256³ volume, 200×200 detector, 128 poses per run.
func BenchmarkDRRSiddon(b *testing.B) { benchmarkDRR(b, 0) }

// BenchmarkDRRTrilinear: the same at 0.5 mm steps on each pose's longest
// ray: a mean of 533–552 samples per ray through the 256 mm volume,
// depending on the pose.
func BenchmarkDRRTrilinear(b *testing.B) { benchmarkDRR(b, 0.5) }
