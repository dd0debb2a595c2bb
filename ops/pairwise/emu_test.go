package pairwise

// The GPU kernels (cuda/kernels/*.cu) run on the CPU under the CUDA
// emulator (internal/kernelemu: each block's threads are fibers,
// __syncthreads a barrier among them), through the same launch specifications the GPU
// twins use (kernels.go), against the CPU ops. This checks the kernels'
// arithmetic and indexing and the argument lists on machines without a
// GPU; it skips where g++ is missing.

import (
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

func TestEmuPairwiseKernel(t *testing.T) {
	opstest.Emulator(t)
	rng := rand.New(rand.NewPCG(55, 56))
	// 150 rows against 300 images: more than one 128×128 tile each way,
	// and d not a multiple of the 16-wide k-slices.
	const n, d, batch, lo = 300, 37, 150, 30
	x := opstest.Normals32(rng, n*d)
	idx := make([]float64, batch)
	for i := range idx {
		idx[i] = float64(lo + i)
	}
	for _, metric := range []Metric{MetricL1, MetricL2, MetricDot, MetricCosine} {
		data, err := NewPairData(x, n, d, metric)
		if err != nil {
			t.Fatal(err)
		}
		for _, upper := range []bool{false, true} {
			op := NewPairwise(data, metric, batch)
			op.Upper = upper
			rowsIn := tensor.New(tensor.WithShape(batch, d), tensor.WithBacking(append([]float32(nil), x[lo*d:(lo+batch)*d]...)))
			want, err := op.Do(rowsIn, tensor.New(tensor.WithShape(batch), tensor.WithBacking(idx)))
			if err != nil {
				t.Fatal(err)
			}
			c0 := 0
			if upper {
				c0 = lo
			}
			// The kernel writes from column c0 of row 0 on: give it views
			// starting there, as the twin offsets its device pointers.
			rows := append([]float32(nil), x[lo*d:(lo+batch)*d]...)
			b := append([]float32(nil), x[c0*d:]...)
			rinv := make([]float64, batch)
			for i := range rinv {
				var ss float64
				for _, v := range rows[i*d : (i+1)*d] {
					ss += float64(v) * float64(v)
				}
				rinv[i] = 1 / math.Sqrt(ss)
			}
			var norm []float64
			if len(data.norm) > 0 {
				norm = append(norm, data.norm[c0:]...)
			}
			out := opstest.Buf32(batch*n - c0)
			opstest.Emulate(t, pairwiseLaunch[any](op, c0, batch, rows, b, out, rinv, norm))
			ref := want.Data().([]float32)
			var gs, ws []float32
			for i := range batch {
				gs = append(gs, out[i*n:i*n+n-c0]...)
				ws = append(ws, ref[i*n+c0:(i+1)*n]...)
			}
			if e := opstest.RelErr(gs, ws); !(e <= 1e-5) {
				t.Errorf("%v upper=%v: relative error %.3g", metric, upper, e)
			}
		}
	}
}
func TestEmuCosineScaleKernel(t *testing.T) {
	opstest.Emulator(t)
	rng := rand.New(rand.NewPCG(59, 60))
	const n, d, batch, c0 = 40, 3, 7, 11
	x := opstest.Normals32(rng, n*d)
	data, err := NewPairData(x, n, d, MetricCosine)
	if err != nil {
		t.Fatal(err)
	}
	op := NewPairwise(data, MetricCosine, batch)
	out := opstest.Normals32(rng, batch*n-c0) // from column c0 of row 0, as the twin passes it
	rinv := make([]float64, batch)
	for i := range rinv {
		rinv[i] = 0.5 + rng.Float64()
	}
	want := append([]float32(nil), out...)
	for i := range batch {
		for j := range n - c0 {
			want[i*n+j] = float32(float64(want[i*n+j]) * rinv[i] / data.norm[c0+j])
		}
	}
	cn := append([]float64(nil), data.norm[c0:]...)
	opstest.Emulate(t, cosineScaleLaunch[any](op, c0, batch, out, rinv, cn))
	if e := opstest.RelErr(out, want); !(e <= 1e-6) {
		t.Errorf("relative error %.3g", e)
	}
}
