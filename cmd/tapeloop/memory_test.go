package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// memReport reads what a --report says of a run's memory.
func memReport(t *testing.T, path string) (batch int, planned, peak int64) {
	t.Helper()
	var r struct {
		Batch   int   `json:"batch"`
		PeakRSS int64 `json:"peak_rss_bytes"`
		Planned int64 `json:"planned_bytes"`
	}
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err != nil {
		t.Fatal(err)
	}
	return r.Batch, r.Planned, r.PeakRSS
}

// TestWaveletAndDRRMemory: the wavelet (reflect, 192×160×128) and DRR
// (128 poses of 256×256 from a 256³ volume) runs under two limits each
// keep their peak resident set within 1.2 times the limit, and a limit
// below what the run needs fails at once with the need and the limit,
// writing nothing.
func TestWaveletAndDRRMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("large runs")
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name   string
		args   []string
		limits []string
		mib    []int64
		small  string
	}{
		{"wavelet", []string{"wavelet", "--size", "192x160x128", "--theta", "0.3,1.9", "--phi", "0.5", "--xi", "1,4", "--boundary", "reflect",
			"--out", filepath.Join(dir, "w.csv")}, []string{"160MiB", "320MiB"}, []int64{160, 320}, "64MiB"},
		{"drr", []string{"drr", "--size", "256", "--detector", "256x256", "--orbit", "128", "--out", filepath.Join(dir, "drr")},
			[]string{"160MiB", "320MiB"}, []int64{160, 320}, "32MiB"},
	} {
		for i, lim := range c.limits {
			rep := filepath.Join(dir, c.name+lim+".json")
			_, se, code := run(t, append(c.args, "--quiet", "--mem-limit", lim, "--report", rep)...)
			if code != 0 {
				t.Fatalf("%s --mem-limit %s: exit %d: %s", c.name, lim, code, se)
			}
			batch, planned, peak := memReport(t, rep)
			t.Logf("%s --mem-limit %s: batch %d, planned %.0f MiB, peak RSS %.0f MiB", c.name, lim, batch, float64(planned)/(1<<20), float64(peak)/(1<<20))
			if peak <= 0 || float64(peak) > 1.2*float64(c.mib[i]<<20) || planned > c.mib[i]<<20 {
				t.Errorf("%s --mem-limit %s: planned %d B, peak RSS %d B: want the plan within the limit and the peak within 1.2 times it", c.name, lim, planned, peak)
			}
		}
		out := filepath.Join(dir, c.name+"-small")
		args := append([]string{}, c.args[:len(c.args)-1]...)
		args = append(args, out, "--quiet", "--mem-limit", c.small)
		_, se, code := run(t, args...)
		if code != 1 || !strings.Contains(se, "needs") || !strings.Contains(se, "over the memory limit") || strings.Count(strings.TrimSpace(se), "\n") != 0 {
			t.Errorf("%s --mem-limit %s: exit %d, %q: want exit 1 and one line with the need and the limit", c.name, c.small, code, se)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s --mem-limit %s: %s exists after the refusal", c.name, c.small, out)
		}
	}
}
