package graphs

import (
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"

	"gorgonia.org/tensor"
)

func TestCompileInterp(t *testing.T) {
	const m, g, batch = 7, 33, 1001
	f := make([]float64, m*g)
	for i := range f {
		f[i] = float64(i%g) * 0.25
	}
	p, err := CompileInterp(InterpSpec{Reduce: "sum"}, f, m, g, batch, tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	x := make([]float64, batch)
	for i := range x {
		x[i] = float64(i) / batch
	}
	dst := make([]float64, p.OutLen())
	if err := p.Run(x, dst); err != nil {
		t.Fatal(err)
	}
	first := append([]float64(nil), dst...)
	allocs := testing.AllocsPerRun(50, func() {
		if err := p.Run(x, dst); err != nil {
			t.Fatal(err)
		}
	})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		if err := p.Run(x, dst); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	perRun := (after.TotalAlloc - before.TotalAlloc) / 100
	t.Logf("%.0f allocations, %d bytes per Run", allocs, perRun)
	// The TapeMachine's own bookkeeping allocates a little per run; no
	// buffer of the batch's size may be among it.
	if allocs > 64 || perRun > 4096 {
		t.Errorf("a Run allocates %.0f objects, %d bytes: want at most 64 and 4096 (the batch is %d bytes)", allocs, perRun, 8*batch)
	}
	for i := range dst {
		if dst[i] != first[i] {
			t.Fatalf("run 2 differs from run 1 at %d: %g, %g", i, dst[i], first[i])
		}
	}
	if err := p.Run(x[:batch-1], dst); !errors.Is(err, ErrBatch) {
		t.Errorf("short batch: %v, want ErrBatch", err)
	}
	if err := p.Run(make([]float32, batch), make([]float32, batch)); !errors.Is(err, ErrBatch) {
		t.Errorf("float32 batch of a float64 program: %v, want ErrBatch", err)
	}
	if _, err := CompileInterp(InterpSpec{Reduce: "max(w)"}, f, m, g, batch, tensor.Float64); err == nil || !strings.HasPrefix(err.Error(), `--reduce "max(w)"`) {
		t.Errorf("bad formula: %v", err)
	}
}

func TestCompileAffinity(t *testing.T) {
	const n, d = 13, 7
	for _, metric := range []string{"dot", "cosine", "l1", "l2"} {
		p, err := CompileAffinity(AffinitySpec{Metric: metric}, n, d, tensor.Float64)
		if err != nil {
			t.Fatal(err)
		}
		dst := make([]float64, n*n)
		for run := range 2 { // the second run's images replace the first's
			x := make([]float64, n*d)
			for i := range x {
				x[i] = float64((i*7+run*5)%11) - 4.5
			}
			if err := p.Run(x, dst); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				for j := range n {
					var dot, ni, nj, l1, l2 float64
					for k := range d {
						a, b := x[i*d+k], x[j*d+k]
						dot, ni, nj = dot+a*b, ni+a*a, nj+b*b
						l1, l2 = l1-math.Abs(a-b), l2-(a-b)*(a-b)
					}
					want := map[string]float64{"dot": dot, "cosine": dot / math.Sqrt(ni*nj), "l1": l1, "l2": l2}[metric]
					if got := dst[i*n+j]; math.Abs(got-want) > 1e-9*(1+math.Abs(want)) {
						t.Fatalf("%s, run %d: A[%d, %d] = %g, want %g", metric, run, i, j, got, want)
					}
				}
			}
		}
		p.Close()
	}
	if _, err := CompileAffinity(AffinitySpec{Formula: "-sum(abs(a-c))"}, n, d, tensor.Float32); err == nil || !strings.HasPrefix(err.Error(), "--formula") {
		t.Errorf("bad formula: %v", err)
	}
}
