//go:build tapeloop_cudaemu

package drr

// The compiled DRR on the CUDA emulator (build tag tapeloop_cudaemu: the
// kernels on the CPU) against the same program on the CPU, over several
// calls: what the GPU holds between calls (the volume) must serve each.

import (
	"testing"

	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/internal/workloadtest"
)

func TestProgramOnEmulatedCUDA(t *testing.T) {
	v := volume.Phantom(19, 192, 0.02)
	c := DefaultConfig()
	cpuDRR, err := Compile(c, v, 11, 13, workloadtest.CPU(t, 2, ""))
	if err != nil {
		t.Fatal(err)
	}
	gpuDRR, err := Compile(c, v, 11, 13, workloadtest.EmulatedCUDA(t, 2))
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
		workloadtest.Near32(t, "drr", got, want, 1e-5)
	}
	cpuDRR.Close()
	gpuDRR.Close()
}
