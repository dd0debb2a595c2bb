package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The flat-cost mode: with TAPELOOP_FLATCOST=DIR, each pair benchmark
// (BenchmarkPair*) times its naive and its planned side one iteration at
// a time instead of benchmarking them, and writes the seconds of every
// iteration to DIR/flat-cost-WORKLOAD.csv (columns series, iteration,
// seconds, as tapeloop plot draws them). TAPELOOP_FLATCOST_N iterations of
// each side (default 200), the naive side's first, after one untimed
// iteration of each. For example:
//
//	cd bench && TAPELOOP_FLATCOST=/tmp/fc go test -run '^$' -bench 'PairInterp$' -benchtime 1x
//	tapeloop plot /tmp/fc/flat-cost-interp.csv --out ../docs/figures/flat-cost.png
const (
	flatCostEnv  = "TAPELOOP_FLATCOST"
	flatCostNEnv = "TAPELOOP_FLATCOST_N"
)

// flatCostDone holds the workloads timed already: the testing package may
// call a benchmark function more than once.
var flatCostDone = map[string]bool{}

// flatCost times the pair if the flat-cost mode is on, and says whether
// it is.
func flatCost(b *testing.B, naive, planned func() []float32) bool {
	dir := os.Getenv(flatCostEnv)
	if dir == "" {
		return false
	}
	name := strings.ToLower(strings.TrimPrefix(strings.SplitN(b.Name(), "/", 2)[0], "BenchmarkPair"))
	if flatCostDone[name] {
		return true
	}
	flatCostDone[name] = true
	n := 200
	if s := os.Getenv(flatCostNEnv); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("%s=%q: want a positive number of iterations", flatCostNEnv, s)
		}
		n = v
	}
	var out strings.Builder
	out.WriteString("series,iteration,seconds\n")
	for _, side := range []struct {
		name string
		run  func() []float32
	}{{"naive", naive}, {"planned", planned}} {
		runtime.GC()
		side.run() // warm: first-touch page faults, caches
		for i := range n {
			t0 := time.Now()
			side.run()
			fmt.Fprintf(&out, "%s %s,%d,%.9f\n", name, side.name, i, time.Since(t0).Seconds())
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "flat-cost-"+name+".csv")
	if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("wrote %s", path)
	return true
}
