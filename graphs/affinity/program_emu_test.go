//go:build tapeloop_cudaemu

package affinity

// The compiled affinity on the CUDA emulator (build tag tapeloop_cudaemu:
// the kernels on the CPU, cuBLAS as reference loops) against the same
// program on the CPU, over several calls with new images each: the
// images the GPU holds between calls must follow each call.

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tapeloop/tapeloop/internal/workloadtest"
)

func TestInprocOnEmulatedCUDA(t *testing.T) {
	rng := rand.New(rand.NewPCG(91, 92))
	const n, d = 37, 29
	for _, s := range []Config{{Metric: "dot"}, {Metric: "cosine"}, {Metric: "l2"}, {Metric: "l1"},
		{Formula: "exp(-sum((a-b)^2)/(2*s^2))", Params: map[string]float64{"s": 4}}} {
		cpu, err := Compile(s, n, d, 0, workloadtest.CPU(t, 7, "float32"))
		if err != nil {
			t.Fatal(err)
		}
		gpu, err := Compile(s, n, d, 0, workloadtest.EmulatedCUDA(t, 7))
		if err != nil {
			t.Fatal(err)
		}
		for call := range 3 { // each call new images: the device's copy must follow
			x := make([]float32, n*d)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			want, got := make([]float32, n*n), make([]float32, n*n)
			if err := cpu.Run(x, nil, want, nil, nil); err != nil {
				t.Fatal(err)
			}
			if err := gpu.Run(x, nil, got, nil, nil); err != nil {
				t.Fatal(err)
			}
			workloadtest.Near32(t, s.Metric+s.Formula+" call "+string(rune('0'+call)), got, want, 1e-5)
		}
		cpu.Close()
		gpu.Close()
	}
}

// TestInprocTF32OnEmulatedCUDA: TF32 reaches the GPU's dot products in
// process: the emulated cuBLAS rounds their operands to TF32's 10 bits,
// so the matrix moves from the float32 one, within TF32's error.
func TestInprocTF32OnEmulatedCUDA(t *testing.T) {
	rng := rand.New(rand.NewPCG(93, 94))
	const n, d = 37, 29
	for _, metric := range []string{"dot", "cosine"} {
		full, err := Compile(Config{Metric: metric}, n, d, 0, workloadtest.EmulatedCUDA(t, 7))
		if err != nil {
			t.Fatal(err)
		}
		tf32, err := Compile(Config{Metric: metric, TF32: true}, n, d, 0, workloadtest.EmulatedCUDA(t, 7))
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float32, n*d)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		want, got := make([]float32, n*n), make([]float32, n*n)
		if err := full.Run(x, nil, want, nil, nil); err != nil {
			t.Fatal(err)
		}
		if err := tf32.Run(x, nil, got, nil, nil); err != nil {
			t.Fatal(err)
		}
		workloadtest.Near32(t, metric+" tf32", got, want, 3e-3*math.Sqrt(d))
		moved := 0
		for i := range want {
			if got[i] != want[i] {
				moved++
			}
		}
		if moved == 0 {
			t.Errorf("%s: TF32 gave the float32 matrix bit for bit: not used", metric)
		}
		full.Close()
		tf32.Close()
	}
}
