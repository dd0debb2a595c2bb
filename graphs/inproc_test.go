package graphs

import (
	"errors"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tapeloop/tapeloop/graphs/drr"
	"github.com/tapeloop/tapeloop/graphs/engine"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/volume"
)

// inprocDev is the CPU with batch items per batch (0: planned) under
// 1 GiB, in dtype.
func inprocDev(t testing.TB, batch int, dtype string) *engine.Device {
	t.Helper()
	d, err := engine.Open(engine.Engine{MemLimit: 1 << 30, Batch: batch, Dtype: dtype})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCompileInterp(t *testing.T) {
	const m, g, batch = 7, 33, 1001
	f := make([]float64, m*g)
	for i := range f {
		f[i] = float64(i%g) * 0.25
	}
	p, err := CompileInterp(InterpSpec{Reduce: "sum"}, f, m, g, inprocDev(t, batch, "float64"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	x := make([]float64, batch)
	for i := range x {
		x[i] = float64(i) / batch
	}
	dst := make([]float64, p.OutLen(batch))
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
	// Any number of queries: blocks of the batch, the last one short, each
	// query's value the same as in one block.
	long := make([]float64, 2*batch+batch/3)
	for i := range long {
		long[i] = x[(i*13)%batch]
	}
	got := make([]float64, len(long))
	if err := p.Run(long, got); err != nil {
		t.Fatal(err)
	}
	for i := range long {
		if got[i] != first[(i*13)%batch] {
			t.Fatalf("query %d of %d: %g, alone in a full block %g", i, len(long), got[i], first[(i*13)%batch])
		}
	}
	if err := p.Run(x[:0], dst[:0]); !errors.Is(err, engine.ErrBatch) {
		t.Errorf("no queries: %v, want ErrBatch", err)
	}
	if err := p.Run(x[:batch-1], dst); !errors.Is(err, engine.ErrBatch) {
		t.Errorf("out of the wrong length: %v, want ErrBatch", err)
	}
	if err := p.Run(make([]float32, batch), make([]float32, batch)); !errors.Is(err, engine.ErrBatch) {
		t.Errorf("float32 batch of a float64 program: %v, want ErrBatch", err)
	}
	if _, err := CompileInterp(InterpSpec{Reduce: "max(w)"}, f, m, g, inprocDev(t, batch, "float64")); err == nil || !strings.HasPrefix(err.Error(), `--reduce "max(w)"`) {
		t.Errorf("bad formula: %v", err)
	}
}

func TestCompileAffinity(t *testing.T) {
	const n, d = 13, 7
	for _, metric := range []string{"dot", "cosine", "l1", "l2"} {
		p, err := CompileAffinity(AffinitySpec{Metric: metric}, n, d, inprocDev(t, 5, "float64"), AffinityOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dst := make([]float64, n*n)
		for run := range 2 { // the second run's images replace the first's
			x := make([]float64, n*d)
			for i := range x {
				x[i] = float64((i*7+run*5)%11) - 4.5
			}
			if err := p.Run(x, nil, dst, nil, nil); err != nil {
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
	if _, err := CompileAffinity(AffinitySpec{Formula: "-sum(abs(a-c))"}, n, d, nil, AffinityOptions{}); err == nil || !strings.HasPrefix(err.Error(), "--formula") {
		t.Errorf("bad formula: %v", err)
	}
}

// affinityRef is −Σ(a−b)² of rows i of x and j of y, the l2 affinity.
func affinityRef(x, y []float64, i, j, d int) float64 {
	var s float64
	for k := range d {
		s -= (x[i*d+k] - y[j*d+k]) * (x[i*d+k] - y[j*d+k])
	}
	return s
}

func TestCompileAffinityColsAndTopK(t *testing.T) {
	const n, c, d, k = 11, 6, 9, 3
	rng := func(i int) float64 { return math.Sin(float64(i)*1.7+0.3) * 3 }
	x, y := make([]float64, n*d), make([]float64, c*d)
	for i := range x {
		x[i] = rng(i)
	}
	for i := range y {
		y[i] = rng(1000 + i)
	}
	cross, err := CompileAffinity(AffinitySpec{Metric: "l2"}, n, d, inprocDev(t, 4, "float64"), AffinityOptions{Cols: c})
	if err != nil {
		t.Fatal(err)
	}
	defer cross.Close()
	dst := make([]float64, n*c)
	if err := cross.Run(x, y, dst, nil, nil); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		for j := range c {
			if want := affinityRef(x, y, i, j, d); math.Abs(dst[i*c+j]-want) > 1e-9*(1-want) {
				t.Fatalf("A[%d, %d] = %g, want %g", i, j, dst[i*c+j], want)
			}
		}
	}
	if err := cross.Run(x, nil, dst, nil, nil); !errors.Is(err, engine.ErrBatch) {
		t.Errorf("no column images: %v, want ErrBatch", err)
	}
	top, err := CompileAffinity(AffinitySpec{Metric: "l2"}, n, d, inprocDev(t, 4, "float64"), AffinityOptions{TopK: k})
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	idx, vals := make([]int64, n*k), make([]float64, n*k)
	if err := top.Run(x, nil, nil, idx, vals); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		// the k largest of row i, self excluded, by a slow selection
		used := map[int]bool{i: true}
		for r := range k {
			best := -1
			for j := range n {
				if !used[j] && (best < 0 || affinityRef(x, x, i, j, d) > affinityRef(x, x, i, best, d)) {
					best = j
				}
			}
			used[best] = true
			if want := affinityRef(x, x, i, best, d); int(idx[i*k+r]) != best || math.Abs(vals[i*k+r]-want) > 1e-9*(1-want) {
				t.Fatalf("row %d, rank %d: column %d (%g), want %d (%g)", i, r, idx[i*k+r], vals[i*k+r], best, want)
			}
		}
	}
	if _, err := CompileAffinity(AffinitySpec{Metric: "l2"}, n, d, inprocDev(t, 0, "float64"), AffinityOptions{TopK: n}); err == nil || !strings.HasPrefix(err.Error(), "--topk") {
		t.Errorf("top-k of N: %v", err)
	}
}

// The in-process DRR (drr.Compile) renders the images of the CLI's run
// (OpenDRR's drr.npy) of the same Config, call after call.
func TestCompileDRRMatchesTheCLIRun(t *testing.T) {
	for _, method := range []string{"siddon", "trilinear"} {
		s := DefaultDRRSpec()
		s.Size, s.Orbit, s.Detector, s.Method = 23, 5, "17x13", method
		s.Post = "exp(-p)"
		s.Out = filepath.Join(t.TempDir(), "out")
		task, err := OpenDRR(s, cpuDevice(t, 1<<30, "float32"), true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := engine.Run(t.Context(), task.Job(), engine.RunConfig{MemLimit: 1 << 30}); err != nil {
			t.Fatal(err)
		}
		if err := task.Commit(); err != nil {
			t.Fatal(err)
		}
		task.Close()
		_, w, err := npy.ReadAll64(filepath.Join(s.Out, "drr.npy"))
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, len(w))
		for i, x := range w {
			want[i] = float32(x)
		}

		v := volume.Phantom(23, 192, s.Water())
		p, err := drr.Compile(s.Config, v, 17, 13, inprocDev(t, 2, ""))
		if err != nil {
			t.Fatal(err)
		}
		poses, err := p.Orbit(5, s.SDD, s.SID, s.Pixel)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, 5*17*13)
		if len(want) != len(got) {
			t.Fatalf("drr.npy holds %d values, want %d", len(want), len(got))
		}
		for range 2 {
			if err := p.Run(poses, got); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%s: pixel %d: %g, the CLI's run %g", method, i, got[i], want[i])
				}
			}
		}
		if p.Report().Calls != 2 || p.Report().LastBatches != 3 {
			t.Errorf("report: %+v, want 2 calls of 3 batches", p.Report())
		}
		bad := append([]float64(nil), poses...)
		bad[12] = 0 // a zero pixel size
		if err := p.Run(bad, got); err == nil || !strings.Contains(err.Error(), "pose 0 has pixel size") {
			t.Errorf("bad pose: %v", err)
		}
		p.Close()
	}
}

func TestInterruptEndsOnlyTheCall(t *testing.T) {
	const n, d = 3000, 512
	p, err := CompileAffinity(AffinitySpec{Metric: "l2"}, n, d, inprocDev(t, 8, "float32"), AffinityOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(i%17) - 8
	}
	dst := make([]float32, n*n)
	time.AfterFunc(50*time.Millisecond, p.Interrupt)
	if err := p.Run(x, nil, dst, nil, nil); !errors.Is(err, engine.ErrInterrupted) {
		t.Fatalf("interrupted call: %v, want ErrInterrupted", err)
	}
	if err := p.Run(x, nil, dst, nil, nil); err != nil {
		t.Fatalf("the call after an interrupted one: %v", err)
	}
	for _, ij := range [][2]int{{0, 1}, {n - 1, 5}, {17, n - 2}} {
		want := affinityRef(f64(x), f64(x), ij[0], ij[1], d)
		if got := float64(dst[ij[0]*n+ij[1]]); math.Abs(got-want) > 1e-5*(1-want) {
			t.Errorf("A%v = %g after the interrupted call, want %g", ij, got, want)
		}
	}
}

func f64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}
