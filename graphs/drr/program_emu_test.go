//go:build tapeloop_cudaemu

package drr

// The compiled DRR on the CUDA emulator (build tag tapeloop_cudaemu: the
// kernels on the CPU) against the same program on the CPU, over several
// calls: what the GPU holds between calls (the volume) must serve each.

import (
	"math"
	"testing"

	"github.com/tapeloop/tapeloop/graphs/engine"
	"github.com/tapeloop/tapeloop/internal/volume"
)

func emuDev(t *testing.T, batch int) *engine.Device {
	t.Helper()
	d, err := engine.Open(engine.Engine{Device: "cuda", MemLimit: 1 << 30, Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func near32(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	scale := 0.0
	for _, v := range want {
		scale = max(scale, math.Abs(float64(v)))
	}
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); !(d <= tol*scale) {
			t.Fatalf("%s: value %d: GPU %g, CPU %g", what, i, got[i], want[i])
		}
	}
}

func TestProgramOnEmulatedCUDA(t *testing.T) {
	v := volume.Phantom(19, 192, 0.02)
	c := DefaultConfig()
	cpuDRR, err := Compile(c, v, 11, 13, inprocDev(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	gpuDRR, err := Compile(c, v, 11, 13, emuDev(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	poses, err := cpuDRR.Orbit(5, 1020, 510, 3)
	if err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= 5; k += 2 { // 1, 3 and 5 poses: short batches too
		want, got := make([]float32, k*11*13), make([]float32, k*11*13)
		if err := cpuDRR.Run(poses[:k*PoseValues], want); err != nil {
			t.Fatal(err)
		}
		if err := gpuDRR.Run(poses[:k*PoseValues], got); err != nil {
			t.Fatal(err)
		}
		near32(t, "drr", got, want, 1e-5)
	}
	cpuDRR.Close()
	gpuDRR.Close()
}
