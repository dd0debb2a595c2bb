package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// estimateRuns are the workloads at the sizes their docs start from,
// within this machine's memory: interp's built-in case (300 interpolants,
// 10⁶ points), affinity over 10,000 images of 64×64, drr of a 256³ volume
// onto 200² detectors (both ray casters), and wavelet sweeps of a 200³
// volume, one whose stretched kernels lie along different axes (its
// padding the largest along each axis is far more than any one
// combination's).
func estimateRuns(dir string) []struct {
	name string
	args []string
} {
	out := func(name string) []string { return []string{"--out", filepath.Join(dir, name)} }
	return []struct {
		name string
		args []string
	}{
		{"interp 300 × 10⁶", append([]string{"interp"}, out("i.npy")...)},
		{"affinity 10,000 × 64×64 dot", append([]string{"affinity", "-n", "10000", "--height", "64", "--width", "64"}, out("a.npy")...)},
		{"affinity 10,000 × 64×64 l1 top-10", append([]string{"affinity", "-n", "10000", "--height", "64", "--width", "64", "--metric", "l1", "--topk", "10"}, out("a.npz")...)},
		{"drr 256³ siddon", append([]string{"drr", "--size", "256"}, out("ds")...)},
		{"drr 256³ trilinear", append([]string{"drr", "--size", "256", "--method", "trilinear"}, out("dt")...)},
		{"wavelet 200³", append([]string{"wavelet", "--size", "200x200x200"}, out("w.csv")...)},
		{"wavelet 200³ ξ 1…19", append([]string{"wavelet", "--size", "200x200x200", "--theta", "0,1", "--phi", "0,1", "--xi", "1:20:19"}, out("wx.csv")...)},
	}
}

// TestEstimatedPeakRSS: for each workload at a large size, the peak
// resident set the plan expects (its buffers and the process's resident
// set at start) is within 1.5 times the one measured, either way: the
// planner neither refuses runs that fit nor lets through runs that do not.
// Run with -v for the table.
func TestEstimatedPeakRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every workload at a large size (about a minute)")
	}
	dir := t.TempDir()
	t.Logf("%-36s %10s %10s %10s %10s %6s", "run", "planned", "baseline", "estimate", "peak RSS", "ratio")
	for _, c := range estimateRuns(dir) {
		rep := filepath.Join(dir, "r.json")
		_, se, code := run(t, append(c.args, "--quiet", "--report", rep)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, se)
		}
		var r struct {
			Planned  int64 `json:"planned_bytes"`
			Baseline int64 `json:"baseline_rss_bytes"`
			Estimate int64 `json:"estimated_peak_rss_bytes"`
			Peak     int64 `json:"peak_rss_bytes"`
		}
		b, err := os.ReadFile(rep)
		if err == nil {
			err = json.Unmarshal(b, &r)
		}
		if err != nil {
			t.Fatal(err)
		}
		ratio := float64(r.Peak) / float64(r.Estimate)
		mib := func(b int64) float64 { return float64(b) / (1 << 20) }
		t.Logf("%-36s %10.1f %10.1f %10.1f %10.1f %6.2f", c.name, mib(r.Planned), mib(r.Baseline), mib(r.Estimate), mib(r.Peak), ratio)
		if r.Estimate < r.Planned+r.Baseline || r.Baseline <= 0 {
			t.Errorf("%s: estimate %d is below the planned %d and the baseline %d", c.name, r.Estimate, r.Planned, r.Baseline)
		}
		if r.Peak <= 0 || ratio < 1/1.5 || ratio > 1.5 {
			t.Errorf("%s: peak RSS %d B against an estimate of %d B: ratio %.2f, want within [0.67, 1.5]", c.name, r.Peak, r.Estimate, ratio)
		}
	}
}
