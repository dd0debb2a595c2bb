//go:build tapeloop_cudaemu

package filejob

// The compiled in-process workloads on the CUDA emulator (build tag
// tapeloop_cudaemu: the kernels on the CPU, cuBLAS and cuFFT as reference
// loops) against the same programs on the CPU, over several calls with new
// inputs each: what a GPU holds between calls (the wavelet's transformed
// volume) must follow each call. The affinity's and the DRR's are in their
// own packages.

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/graphs/wavelet"
	"github.com/tapeloop/tapeloop/internal/workloadtest"
)

func TestInprocOnEmulatedCUDA(t *testing.T) {
	rng := rand.New(rand.NewPCG(91, 92))

	for _, c := range []struct {
		boundary string
		columns  []string
	}{{"wrap", nil}, {"reflect", nil}, {"wrap", []string{"std", "energy"}}, {"reflect", []string{"max"}}} {
		boundary := c.boundary
		ws := DefaultWaveletSpec()
		ws.Boundary, ws.Columns = boundary, c.columns
		nv := [3]int{9, 8, 7}
		vol := make([]float32, 9*8*7)
		for i := range vol {
			vol[i] = float32(rng.NormFloat64())
		}
		cpuW, err := wavelet.Compile(ws.Config, vol, nv, workloadtest.CPU(t, 0, ""))
		if err != nil {
			t.Fatal(err)
		}
		gpuW, err := wavelet.Compile(ws.Config, vol, nv, workloadtest.EmulatedCUDA(t, 0))
		if err != nil {
			t.Fatal(err)
		}
		if g, w := strings.Join(gpuW.Columns(), ","), strings.Join(cpuW.Columns(), ","); g != w || c.columns != nil && len(cpuW.Columns()) != 3+len(c.columns) {
			t.Fatalf("wavelet %s %q: GPU columns %s, CPU %s", boundary, c.columns, g, w)
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
