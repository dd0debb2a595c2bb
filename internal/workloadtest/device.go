package workloadtest

import (
	"math"
	"testing"

	"github.com/tapeloop/tapeloop/internal/engine"
)

// CPU is the CPU under 1 GiB with batch items per batch (0: planned), in
// dtype ("": the default).
func CPU(t testing.TB, batch int, dtype string) *engine.Device {
	t.Helper()
	d, err := engine.Open(engine.Engine{MemLimit: 1 << 30, Batch: batch, Dtype: dtype})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// EmulatedCUDA is the CUDA device under 1 GiB with batch items per batch
// (0: planned): in a build with tapeloop_cudaemu, the emulated GPU.
func EmulatedCUDA(t testing.TB, batch int) *engine.Device {
	t.Helper()
	d, err := engine.Open(engine.Engine{Device: "cuda", MemLimit: 1 << 30, Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Near32 fails t at the first value of got, the GPU's, farther from
// want's, the CPU's, than tol times the largest magnitude in want.
func Near32(t testing.TB, what string, got, want []float32, tol float64) {
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
