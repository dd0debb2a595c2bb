package interp

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/workloadtest"
)

func TestCompile(t *testing.T) {
	const m, g, batch = 7, 33, 1001
	f := make([]float64, m*g)
	for i := range f {
		f[i] = float64(i%g) * 0.25
	}
	p, err := Compile(Config{Reduce: "sum"}, f, m, g, workloadtest.CPU(t, batch, "float64"))
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
	if _, err := Compile(Config{Reduce: "max(w)"}, f, m, g, workloadtest.CPU(t, batch, "float64")); err == nil || !strings.HasPrefix(err.Error(), `--reduce "max(w)"`) {
		t.Errorf("bad formula: %v", err)
	}
}

// FailOnNonFinite fails a call whose formula gives NaN or ±Inf, counting
// that call's values only; without it they are returned.
func TestCompileFailOnNonFinite(t *testing.T) {
	const m, g, n = 2, 8, 50
	f := make([]float64, m*g)
	for i := range f {
		// negative on the grid's second half; positive at 0, the value of
		// a short block's padding
		f[i] = 3.5 - float64(i%g)
	}
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(i) / (n - 1)
	}
	cfg := Config{Reduce: "log(max(v))"}
	p, err := Compile(cfg, f, m, g, workloadtest.CPU(t, 16, "float64"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	y := make([]float64, n)
	if err := p.Run(x, y); err != nil {
		t.Fatal(err)
	}
	var bad int
	for _, v := range y {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			bad++
		}
	}
	if bad == 0 || bad == n {
		t.Fatalf("%d of %d values not finite: want some", bad, n)
	}
	cfg.FailOnNonFinite = true
	q, err := Compile(cfg, f, m, g, workloadtest.CPU(t, n, "float64"))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	want := fmt.Sprintf("--reduce gave %d non-finite values (NaN or ±Inf) and --fail-on-nonfinite is set", bad)
	for range 2 { // the second call counts its own values
		if err := q.Run(x, y); err == nil || err.Error() != want {
			t.Errorf("got %v, want %q", err, want)
		}
	}
	if err := q.Run(x[:5], y[:5]); err != nil {
		t.Errorf("finite values only: %v", err)
	}
}

// TestFormulaCountsOnlyRealQueries: a short last block is padded with
// x = 0, where this table's formula is -Inf; those rows are not the
// caller's and must neither be counted nor fail the call.
func TestFormulaCountsOnlyRealQueries(t *testing.T) {
	const m, g = 3, 8
	f := make([]float64, m*g)
	for i := range f {
		x := float64(i%g) / (g - 1)
		f[i] = x * x // 0 at x = 0: log(max(v)) is -Inf there
	}
	for _, n := range []int{1, 5, 7, 10} { // batch 4: blocks of 1, 1, 3 and 2 real queries
		x := make([]float64, n)
		for i := range x {
			x[i] = 0.05 + 0.9*float64(i)/float64(n)
		}
		p, err := Compile(Config{Reduce: "log(max(v))", FailOnNonFinite: true}, f, m, g, workloadtest.CPU(t, 4, "float64"))
		if err != nil {
			t.Fatal(err)
		}
		y := make([]float64, n)
		if err := p.Run(x, y); err != nil {
			t.Errorf("%d queries, none at 0: %v", n, err)
		}
		for i, v := range y {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Errorf("%d queries: y[%d] = %g", n, i, v)
			}
		}
		p.Close()
	}
}

// TestCompileFloat32Grid: the in-process program refuses, in float32, the
// grids the CLI refuses: a spacing below float32's smallest normal number
// and a grid ending beyond float32's range.
func TestCompileFloat32Grid(t *testing.T) {
	f := make([]float64, 8)
	for _, c := range []struct {
		a, dx float64
		want  string
	}{
		{0, 1e-40, "--dx 1e-40: too small for float32 queries"},
		{3e38, 1e37, "--a 3e+38, --dx 1e+37: the grid's end"},
	} {
		dx := c.dx
		if _, err := Compile(Config{A: c.a, DX: &dx}, f, 1, 8, workloadtest.CPU(t, 8, "float32")); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("a %g, dx %g: %v, want %q…", c.a, c.dx, err, c.want)
		}
		p, err := Compile(Config{A: c.a, DX: &dx}, f, 1, 8, workloadtest.CPU(t, 8, "float64"))
		if err != nil {
			t.Errorf("a %g, dx %g in float64: %v", c.a, c.dx, err)
			continue
		}
		p.Close()
	}
}
