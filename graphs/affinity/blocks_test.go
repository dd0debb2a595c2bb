package affinity

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/tapeloop/tapeloop/internal/workloadtest"
)

// blockConfigs are affinities that must not depend on how the rows are
// cut: formulas from dot products and per pair (direct), and the
// built-in metrics.
var blockConfigs = []Config{
	{Formula: "exp(-sum((a-b)^2)/9)"},
	{Formula: "exp(-sum((a-b)^2)/9)", Method: "direct"},
	{Formula: "sum((a-mean(a))*(b-mean(b)))/(norm(a-mean(a))*norm(b-mean(b)))"},
	{Formula: "sum((a-mean(a))*(b-mean(b)))/(norm(a-mean(a))*norm(b-mean(b)))", Method: "direct"},
	{Formula: "exp(-(sum(a*a)+sum(b*b)-2*sum(a*b))/s)", Params: map[string]float64{"s": 7}},
	{Formula: "log(1+norm(a)*norm(b)) + sum(a)*sum(b)/3 + sum(a*b)"},
	{Formula: "exp(-norm(a))*exp(-norm(b))*sum(a*b)"},
	{Formula: "sqrt(sum(a*a)+1)+sqrt(sum(b*b)+1)-sum(a*b)/(mean(a)*mean(b)+5)"},
	{Formula: "sum(min(a,b))/sum(max(a,b))"},
	{Formula: "-sum(abs(a-b))"},
	{Metric: "dot"}, {Metric: "cosine"}, {Metric: "l1"}, {Metric: "l2"},
}

// matrixOf runs cfg over x (n images of d values) in blocks of batch rows,
// rows [lo, hi) of shard index of count (count 0: the whole matrix).
func matrixOf[T float32 | float64](t *testing.T, cfg Config, x []T, n, d, batch, index, count int, dtype string) (rows []T, lo int) {
	t.Helper()
	var p *Program
	var err error
	if count == 0 {
		p, err = Compile(cfg, n, d, 0, workloadtest.CPU(t, batch, dtype))
	} else {
		p, err = CompileShard(cfg, n, d, index, count, workloadtest.CPU(t, batch, dtype))
	}
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	lo, _ = p.Rows()
	rows = make([]T, p.OutLen())
	if err := p.Run(x, nil, rows, nil, nil); err != nil {
		t.Fatal(err)
	}
	return rows, lo
}

// Each pair's affinity depends on its two images only: not on the block
// size, the row's place in its block, the shard or the number of threads.
// Every block size and shard gives the whole matrix's bits.
func TestAffinityBitsIndependentOfBlocks(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	sizes := [][2]int{{37, 23}, {21, 131}}
	if testing.Short() {
		sizes = sizes[:1]
	}
	for _, nd := range sizes {
		n, d := nd[0], nd[1]
		x64 := make([]float64, n*d)
		for i := range x64 {
			x64[i] = float64(float32(rng.NormFloat64()*2 + 0.5))
		}
		x32 := make([]float32, len(x64))
		for i, v := range x64 {
			x32[i] = float32(v)
		}
		for _, cfg := range blockConfigs {
			name := fmt.Sprintf("N%d_D%d/%s%s%s", n, d, cfg.Metric, cfg.Formula, cfg.Method)
			t.Run(name+"/float32", func(t *testing.T) { checkBlocks(t, cfg, x32, n, d, "float32") })
			t.Run(name+"/float64", func(t *testing.T) { checkBlocks(t, cfg, x64, n, d, "float64") })
		}
	}
}

func checkBlocks[T float32 | float64](t *testing.T, cfg Config, x []T, n, d int, dtype string) {
	bits := func(v T) uint64 {
		if f, ok := any(v).(float32); ok {
			return uint64(math.Float32bits(f))
		}
		return math.Float64bits(float64(any(v).(float64)))
	}
	want, _ := matrixOf(t, cfg, x, n, d, n, 0, 0, dtype)
	same := func(what string, got []T, lo int) {
		t.Helper()
		for k, v := range got {
			if w := want[lo*n+k]; bits(v) != bits(w) {
				i, j := lo+k/n, k%n
				t.Fatalf("%s: A[%d, %d] = %v (%x), the whole matrix in one block's %v (%x); A[%d, %d] there %v",
					what, i, j, v, bits(v), w, bits(w), j, i, want[j*n+i])
			}
		}
	}
	for _, batch := range []int{1, 2, 3, 4, 5, 7, 16} {
		got, _ := matrixOf(t, cfg, x, n, d, batch, 0, 0, dtype)
		same(fmt.Sprintf("block %d", batch), got, 0)
	}
	for _, batch := range []int{4, 5, n} {
		for _, count := range []int{2, 3} {
			for i := range count {
				got, lo := matrixOf(t, cfg, x, n, d, batch, i, count, dtype)
				same(fmt.Sprintf("block %d, shard %d/%d", batch, i, count), got, lo)
			}
		}
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	got, _ := matrixOf(t, cfg, x, n, d, 6, 0, 0, dtype)
	same("block 6, one thread", got, 0)
}
