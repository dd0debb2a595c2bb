package bench

// The users' formulas against the built-ins they stand beside, each pair
// run as two tapeloop processes on the same input, interleaved, several
// times: the time of the engine's run (the report's total_seconds: the
// batches, not the input's loading) and the peak RSS of each process,
// reported as ratios formula/built-in, minimum and median. Run with
//
//	cd bench && go test -run '^$' -bench Formula -benchtime 1x
//
// BENCH_FORMULA_REPS sets the repetitions (default 3); BENCH_FORMULA_SMALL=1,
// or -short, runs every case at a size of seconds, to check the benchmark
// itself.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

type formulaCase struct {
	name             string
	builtin, formula []string
	small            []string // replaces the size flags with BENCH_FORMULA_SMALL
	timeTarget       float64  // the formula's time within this many times the built-in's (0: reported only)
	memTarget        float64
}

var formulaCases = []formulaCase{
	{
		name:    "affinity-l1/N=4000,D=1e4",
		builtin: []string{"affinity", "--n", "4000", "--height", "100", "--width", "100", "--metric", "l1"},
		formula: []string{"affinity", "--n", "4000", "--height", "100", "--width", "100", "--formula", "-sum(abs(a-b))"},
		small:   []string{"--n", "600"}, timeTarget: 3, memTarget: 1.2,
	},
	{
		name:    "affinity-gaussian/N=4000,D=1e4",
		builtin: []string{"affinity", "--n", "4000", "--height", "100", "--width", "100", "--metric", "dot"},
		formula: []string{"affinity", "--n", "4000", "--height", "100", "--width", "100", "--formula", "exp(-sum((a-b)^2)/(2*s^2))", "--param", "s=100"},
		small:   []string{"--n", "600"}, timeTarget: 1.5, memTarget: 1.2,
	},
	{
		// max(v) needs every value: against sumsq evaluated the same way.
		name:    "interp-max-vs-sumsq-direct/M=300,N=1e6",
		builtin: []string{"interp", "--method", "direct"},
		formula: []string{"interp", "--reduce", "max(v)"},
		small:   []string{"--points", "100000"}, timeTarget: 2,
	},
	{
		// The built-in sumsq's default never forms the M values (a 4×4
		// Gram matrix per grid cell): a different algorithm, reported.
		name:    "interp-max-vs-sumsq-gram/M=300,N=1e6",
		builtin: []string{"interp"},
		formula: []string{"interp", "--reduce", "max(v)"},
		small:   []string{"--points", "100000"},
	},
	{
		name:    "drr-post/256³,16×200²",
		builtin: []string{"drr", "--size", "256", "--orbit", "16", "--detector", "200x200"},
		formula: []string{"drr", "--size", "256", "--orbit", "16", "--detector", "200x200", "--post", "exp(-p)"},
		small:   []string{"--size", "96"}, timeTarget: 1.05,
	},
	{
		name:    "wavelet-kernel/200³,a=3",
		builtin: []string{"wavelet", "--size", "200x200x200", "--a", "3", "--theta", "0:pi:3", "--phi", "0.3", "--xi", "1,2"},
		formula: []string{"wavelet", "--size", "200x200x200", "--a", "3", "--theta", "0:pi:3", "--phi", "0.3", "--xi", "1,2", "--kernel", "exp(-q/2)*cos(u/xi)"},
		small:   []string{"--size", "64x64x64"}, timeTarget: 1.10,
	},
}

func BenchmarkFormula(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "tapeloop")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/tapeloop").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	reps := 3
	if s := os.Getenv("BENCH_FORMULA_REPS"); s != "" {
		reps, _ = strconv.Atoi(s)
	}
	small := os.Getenv("BENCH_FORMULA_SMALL") == "1" || testing.Short()
	for _, c := range formulaCases {
		b.Run(c.name, func(b *testing.B) {
			builtin, formula := c.builtin, c.formula
			if small {
				builtin, formula = withFlags(builtin, c.small), withFlags(formula, c.small)
			}
			var tr, mr []float64
			for b.Loop() {
				for range reps {
					t0, m0 := runReport(b, bin, builtin)
					t1, m1 := runReport(b, bin, formula)
					tr, mr = append(tr, t1/t0), append(mr, m1/m0)
				}
			}
			slices.Sort(tr)
			slices.Sort(mr)
			b.ReportMetric(tr[0], "time-ratio-min")
			b.ReportMetric(tr[len(tr)/2], "time-ratio-median")
			b.ReportMetric(mr[0], "rss-ratio-min")
			b.ReportMetric(mr[len(mr)/2], "rss-ratio-median")
			if c.timeTarget > 0 && tr[len(tr)/2] > c.timeTarget {
				b.Logf("median time ratio %.3g is over the target %.3g", tr[len(tr)/2], c.timeTarget)
			}
			if c.memTarget > 0 && mr[len(mr)/2] > c.memTarget {
				b.Logf("median RSS ratio %.3g is over the target %.3g", mr[len(mr)/2], c.memTarget)
			}
		})
	}
}

// withFlags replaces the values of the flags in over (name, value pairs).
func withFlags(args, over []string) []string {
	out := slices.Clone(args)
	for i := 0; i+1 < len(over); i += 2 {
		if j := slices.Index(out, over[i]); j >= 0 {
			out[j+1] = over[i+1]
		} else {
			out = append(out, over[i], over[i+1])
		}
	}
	return out
}

// runReport runs tapeloop with args and returns the run's seconds and
// peak RSS from its report.
func runReport(b *testing.B, bin string, args []string) (seconds, rss float64) {
	rep := filepath.Join(b.TempDir(), "report.json")
	cmd := exec.Command(bin, append(slices.Clone(args), "--quiet", "--report", rep)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%v: %v\n%s", args, err, out)
	}
	data, err := os.ReadFile(rep)
	if err != nil {
		b.Fatal(err)
	}
	var r struct {
		TotalSeconds float64 `json:"total_seconds"`
		PeakRSSBytes float64 `json:"peak_rss_bytes"`
	}
	if err := json.Unmarshal(data, &r); err != nil || r.TotalSeconds <= 0 || r.PeakRSSBytes <= 0 {
		b.Fatalf("report %s: %v %s", rep, err, data)
	}
	return r.TotalSeconds, r.PeakRSSBytes
}
