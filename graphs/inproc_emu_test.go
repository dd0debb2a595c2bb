//go:build tapeloop_cudaemu

package graphs

// The compiled in-process workloads on the CUDA emulator (build tag
// tapeloop_cudaemu: the kernels on the CPU, cuBLAS and cuFFT as reference
// loops) against the same programs on the CPU, over several calls with new
// inputs each: what a GPU holds between calls (the affinity's images, the
// DRR's volume, the wavelet's transformed volume) must follow each call.

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tapeloop/tapeloop/graphs/engine"
	"github.com/tapeloop/tapeloop/graphs/wavelet"
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

func TestInprocOnEmulatedCUDA(t *testing.T) {
	rng := rand.New(rand.NewPCG(91, 92))
	const n, d = 37, 29
	for _, s := range []AffinitySpec{{Metric: "dot"}, {Metric: "cosine"}, {Metric: "l2"}, {Metric: "l1"},
		{Formula: "exp(-sum((a-b)^2)/(2*s^2))", Params: map[string]float64{"s": 4}}} {
		cpu, err := CompileAffinity(s, n, d, inprocDev(t, 7, "float32"), AffinityOptions{})
		if err != nil {
			t.Fatal(err)
		}
		gpu, err := CompileAffinity(s, n, d, emuDev(t, 7), AffinityOptions{})
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
			near32(t, s.Metric+s.Formula+" call "+string(rune('0'+call)), got, want, 1e-5)
		}
		cpu.Close()
		gpu.Close()
	}

	v := volume.Phantom(19, 192, 0.02)
	ds := DefaultDRRSpec()
	cpuDRR, err := CompileDRR(ds, v, 11, 13, inprocDev(t, 2, ""))
	if err != nil {
		t.Fatal(err)
	}
	gpuDRR, err := CompileDRR(ds, v, 11, 13, emuDev(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	poses, err := cpuDRR.Orbit(5, ds.SDD, ds.SID, 3)
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

	for _, boundary := range []string{"wrap", "reflect"} {
		ws := DefaultWaveletSpec()
		ws.Boundary = boundary
		nv := [3]int{9, 8, 7}
		vol := make([]float32, 9*8*7)
		for i := range vol {
			vol[i] = float32(rng.NormFloat64())
		}
		cpuW, err := wavelet.Compile(ws.Config, vol, nv, inprocDev(t, 0, ""))
		if err != nil {
			t.Fatal(err)
		}
		gpuW, err := wavelet.Compile(ws.Config, vol, nv, emuDev(t, 0))
		if err != nil {
			t.Fatal(err)
		}
		for _, sweep := range [][3][]float64{{{0, 1}, {0.5}, {1, 2}}, {{0.3}, {0, 2}, {3}}} {
			cols := len(cpuW.Columns())
			k := len(sweep[0]) * len(sweep[1]) * len(sweep[2])
			want, got := make([]float64, k*cols), make([]float64, k*cols)
			if err := cpuW.Run(sweep[0], sweep[1], sweep[2], want); err != nil {
				t.Fatal(err)
			}
			if err := gpuW.Run(sweep[0], sweep[1], sweep[2], got); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if math.Abs(got[i]-want[i]) > 1e-5*(1+math.Abs(want[i])) {
					t.Fatalf("wavelet %s: value %d (%s): GPU %g, CPU %g", boundary, i, cpuW.Columns()[i%cols], got[i], want[i])
				}
			}
		}
		cpuW.Close()
		gpuW.Close()
	}
}
