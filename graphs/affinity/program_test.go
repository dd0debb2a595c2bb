package affinity

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/workloadtest"
)

func intp(v int) *int { return &v }

func TestCompileAffinity(t *testing.T) {
	const n, d = 13, 7
	for _, metric := range []string{"dot", "cosine", "l1", "l2"} {
		p, err := Compile(Config{Metric: metric}, n, d, 0, workloadtest.CPU(t, 5, "float64"))
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
	if _, err := Compile(Config{Formula: "-sum(abs(a-c))"}, n, d, 0, nil); err == nil || !strings.HasPrefix(err.Error(), "--formula") {
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
	cross, err := Compile(Config{Metric: "l2"}, n, d, c, workloadtest.CPU(t, 4, "float64"))
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
	top, err := Compile(Config{Metric: "l2", TopK: intp(k)}, n, d, 0, workloadtest.CPU(t, 4, "float64"))
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
	if _, err := Compile(Config{Metric: "l2", TopK: intp(n)}, n, d, 0, workloadtest.CPU(t, 0, "float64")); err == nil || !strings.HasPrefix(err.Error(), "--topk") {
		t.Errorf("top-k of N: %v", err)
	}
}

func TestInterruptEndsOnlyTheCall(t *testing.T) {
	const n, d = 3000, 512
	p, err := Compile(Config{Metric: "l2"}, n, d, 0, workloadtest.CPU(t, 8, "float32"))
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

// TestCompileTF32NeedsAGPU: TF32 is refused on the CPU as the command
// line refuses it, and with a formula.
func TestCompileTF32NeedsAGPU(t *testing.T) {
	if _, err := Compile(Config{Metric: "dot", TF32: true}, 4, 3, 0, nil); err == nil || err.Error() != "--tf32: needs --device cuda" {
		t.Errorf("TF32 on the CPU: %v", err)
	}
	if _, err := Compile(Config{Formula: "sum(a*b)", TF32: true}, 4, 3, 0, nil); err == nil || err.Error() != "--tf32: not used with --formula" {
		t.Errorf("TF32 with a formula: %v", err)
	}
}

// TestCompileFailOnNonFinite: a formula that gives NaN fails the call
// with FailOnNonFinite, and gives the NaN (as the definition does)
// without it; the calls before and after, on images where the formula is
// finite, succeed.
func TestCompileFailOnNonFinite(t *testing.T) {
	const n, d = 9, 5
	good, bad := make([]float64, n*d), make([]float64, n*d)
	for i := range good {
		good[i] = 1 + float64(i%7)/4
	}
	copy(bad, good)
	for k := range d { // image 1 = −image 0: their dot product is negative
		bad[d+k] = -bad[k]
	}
	const f = "log(sum(a*b))"
	for _, method := range []string{"auto", "direct"} {
		strict, err := Compile(Config{Formula: f, Method: method, FailOnNonFinite: true}, n, d, 0, workloadtest.CPU(t, 4, "float64"))
		if err != nil {
			t.Fatal(err)
		}
		lax, err := Compile(Config{Formula: f, Method: method}, n, d, 0, workloadtest.CPU(t, 4, "float64"))
		if err != nil {
			t.Fatal(err)
		}
		dst := make([]float64, n*n)
		if err := lax.Run(bad, nil, dst, nil, nil); err != nil {
			t.Fatalf("%s: without FailOnNonFinite: %v", method, err)
		}
		nans := 0
		for i := range n {
			for j := range n {
				var dot float64
				for k := range d {
					dot += bad[i*d+k] * bad[j*d+k]
				}
				want, got := math.Log(dot), dst[i*n+j]
				if math.IsNaN(want) {
					nans++
				}
				if math.IsNaN(got) != math.IsNaN(want) || !math.IsNaN(want) && math.Abs(got-want) > 1e-12*(1+math.Abs(want)) {
					t.Fatalf("%s: A[%d, %d] = %g, want %g", method, i, j, got, want)
				}
			}
		}
		if nans == 0 {
			t.Fatal("the test's images give no NaN")
		}
		for call, x := range [][]float64{good, bad, good} {
			err := strict.Run(x, nil, dst, nil, nil)
			switch {
			case call == 1 && (err == nil || !strings.HasPrefix(err.Error(), "--formula gave ") ||
				!strings.HasSuffix(err.Error(), " non-finite values (NaN or ±Inf) and --fail-on-nonfinite is set")):
				t.Errorf("%s, call %d: %v, want the non-finite values' error", method, call, err)
			case call != 1 && err != nil:
				t.Errorf("%s, call %d, every value finite: %v", method, call, err)
			}
		}
		strict.Close()
		lax.Close()
	}
	if _, err := Compile(Config{Metric: "dot", FailOnNonFinite: true}, n, d, 0, nil); err == nil || !strings.Contains(err.Error(), "--fail-on-nonfinite: they are for a --formula") {
		t.Errorf("FailOnNonFinite without a formula: %v", err)
	}
}

// A shard's rows are the whole matrix's, bit for bit, for every metric
// and formulas.
func TestCompileShard(t *testing.T) {
	const n, d = 17, 9
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)*1.7)) * 3
	}
	for _, cfg := range []Config{{Metric: "dot"}, {Metric: "cosine"}, {Metric: "l1"}, {Metric: "l2"},
		{Formula: "exp(-sum((a-b)^2)/9)"}, {Formula: "sum(a*b)/(1+sum(abs(a-b)))"}} {
		whole, err := Compile(cfg, n, d, 0, workloadtest.CPU(t, 4, "float32"))
		if err != nil {
			t.Fatal(err)
		}
		all := make([]float32, n*n)
		if err := whole.Run(x, nil, all, nil, nil); err != nil {
			t.Fatal(err)
		}
		whole.Close()
		for count := 1; count <= 5; count += 2 {
			for i := range count {
				p, err := CompileShard(cfg, n, d, i, count, workloadtest.CPU(t, 3, "float32"))
				if err != nil {
					t.Fatal(err)
				}
				lo, hi := p.Rows()
				if want := (i * n) / count; lo != want || hi != ((i+1)*n)/count {
					t.Fatalf("shard %d/%d: rows [%d, %d)", i, count, lo, hi)
				}
				rows := make([]float32, p.OutLen())
				if err := p.Run(x, nil, rows, nil, nil); err != nil {
					t.Fatal(err)
				}
				for k, v := range rows {
					if w := all[lo*n+k]; math.Float32bits(v) != math.Float32bits(w) {
						t.Fatalf("%+v shard %d/%d: A[%d, %d] = %g, the whole matrix's %g", cfg, i, count, lo+k/n, k%n, v, w)
					}
				}
				p.Close()
			}
		}
	}
	if _, err := CompileShard(Config{Metric: "dot"}, 3, 2, 0, 5, nil); err == nil || !strings.Contains(err.Error(), "no rows") {
		t.Errorf("a shard without rows: %v", err)
	}
	if _, err := CompileShard(Config{Metric: "dot"}, 3, 2, 5, 5, nil); err == nil {
		t.Error("shard 5/5 was accepted")
	}
}

// TestCompileColumnsRepeatingTheBatch: a program with column images,
// called with the batch itself as its columns, gives the batch's own
// matrix bit for bit, for every metric and formulas (rewritten over dot
// products or not, symmetric or not), in float32 and float64, on random
// images of odd sizes (whole numbers too, as 8-bit images converted), in
// one block and in several; and a pair of identical images of the batch
// is exactly 0 in l2 as an image's own pair is.
func TestCompileColumnsRepeatingTheBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), 7))
	type fc struct{ metric, formula, method string }
	cases := []fc{{"dot", "", ""}, {"cosine", "", ""}, {"l1", "", ""}, {"l2", "", ""},
		{"", "-sum((a-b)^2)", "auto"}, {"", "-sum((a-b)^2)", "direct"},
		{"", "exp(-sum((a-b)^2)/(2*s^2))", "auto"}, {"", "sum(min(a,b))/sum(max(a,b))", "auto"},
		{"", "sum(a*b)/sqrt(sum(a^2)*sum(b^2))", "auto"}, {"", "sum(a*b)/sqrt(sum(a^2))/sqrt(sum(b^2))", "auto"},
		{"", "sum(a*b)/(sqrt(sum(a^2))*sqrt(sum(b^2)))", "direct"}, {"", "sum(a*b^2) - sum(a)", "auto"}}
	for _, shape := range [][3]int{{37, 23, 0}, {37, 23, 5}, {53, 131, 16}} { // n, d, batch (0: planned)
		n, d := shape[0], shape[1]
		for _, whole := range []bool{false, true} {
			x := make([]float64, n*d)
			for i := range x {
				if whole {
					x[i] = float64(rng.IntN(256))
				} else {
					x[i] = rng.NormFloat64()*3 + 10
				}
			}
			copy(x[7*d:8*d], x[2*d:3*d]) // images 2 and 7 the same
			for _, dtype := range []string{"float32", "float64"} {
				for _, c := range cases {
					cfg := Config{Metric: c.metric, Formula: c.formula, Method: c.method}
					if strings.Contains(c.formula, "s^2") {
						cfg.Params = map[string]float64{"s": float64(d)}
					}
					name := fmt.Sprintf("%dx%d whole=%v %s %s%s", n, d, whole, dtype, c.metric, c.formula)
					square := compileRun(t, cfg, n, d, 0, shape[2], dtype, x)
					cross := compileRun(t, cfg, n, d, n, shape[2], dtype, x)
					for i := range square {
						if math.Float64bits(square[i]) != math.Float64bits(cross[i]) {
							t.Errorf("%s: A[%d, %d] = %v alone, %v against the batch as columns", name, i/n, i%n, square[i], cross[i])
							break
						}
					}
					if c.metric == "l2" && (square[2*n+7] != 0 || square[7*n+2] != 0) {
						t.Errorf("%s: identical images 2 and 7: %v and %v, want 0", name, square[2*n+7], square[7*n+2])
					}
				}
			}
		}
	}
}

// compileRun is the (n, n) or (n, cols) matrix of x (and x as the column
// images) in dtype, as float64.
func compileRun(t *testing.T, cfg Config, n, d, cols, batch int, dtype string, x []float64) []float64 {
	t.Helper()
	p, err := Compile(cfg, n, d, cols, workloadtest.CPU(t, batch, dtype))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var y any
	if dtype == "float32" {
		x32 := make([]float32, len(x))
		for i, v := range x {
			x32[i] = float32(v)
		}
		if cols > 0 {
			y = x32
		}
		dst := make([]float32, p.OutLen())
		if err := p.Run(x32, y, dst, nil, nil); err != nil {
			t.Fatal(err)
		}
		return f64(dst)
	}
	if cols > 0 {
		y = x
	}
	dst := make([]float64, p.OutLen())
	if err := p.Run(x, y, dst, nil, nil); err != nil {
		t.Fatal(err)
	}
	return dst
}
