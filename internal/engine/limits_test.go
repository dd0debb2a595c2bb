package engine_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/sysmem"
)

// fakeCgroup lays out a cgroup v2 group "job" limited to max bytes with
// current bytes in use, and makes the memory limits read it.
func fakeCgroup(t *testing.T, max, current string) {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "job"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{"job/memory.max": max + "\n", "job/memory.current": current + "\n", "self": "0::/job\n"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(sysmem.UseCgroupFiles(root, filepath.Join(root, "self")))
}

// TestMemLimitLoweredToTheCgroup: a --mem-limit above what the process's
// cgroup leaves (its limit less what the group uses) is lowered to that,
// with one warning line; one below it is kept, without a word.
func TestMemLimitLoweredToTheCgroup(t *testing.T) {
	const mib = 1 << 20
	fakeCgroup(t, "536870912", "104857600") // 512 MiB, 100 MiB in use: 412 MiB left
	var warn bytes.Buffer
	d, err := engine.Open(engine.Engine{MemLimit: 2 << 30, Warn: &warn})
	if err != nil {
		t.Fatal(err)
	}
	if d.MemLimit != 412*mib {
		t.Errorf("limit %d, want the 412 MiB the cgroup leaves", d.MemLimit)
	}
	w := warn.String()
	if !strings.HasPrefix(w, "tapeloop: warning: --mem-limit 2.0 GiB is more than the cgroup memory.max of ") ||
		!strings.HasSuffix(w, ": lowered to 412 MiB\n") || strings.Count(w, "\n") != 1 {
		t.Errorf("warning %q, want one line saying the limit was lowered to 412 MiB", w)
	}
	if d.LimitWarning == "" || !strings.Contains(w, d.LimitWarning) {
		t.Errorf("LimitWarning %q, printed %q", d.LimitWarning, w)
	}
	// The lowered limit is the run's: a plan refused under it says why.
	err = (&engine.BudgetError{Workload: "x", Need: 500 * mib, Limit: d.MemLimit})
	if !strings.Contains(err.Error(), "lowered from --mem-limit 2.0 GiB to what the cgroup memory.max of ") {
		t.Errorf("a refusal under the lowered limit: %v", err)
	}
	if !errors.Is(err, engine.ErrOverBudget) {
		t.Errorf("%v is not ErrOverBudget", err)
	}

	warn.Reset()
	if d, err = engine.Open(engine.Engine{MemLimit: 300 * mib, Warn: &warn}); err != nil {
		t.Fatal(err)
	}
	if d.MemLimit != 300*mib || warn.Len() != 0 || d.LimitWarning != "" {
		t.Errorf("a limit within the cgroup: %d, warning %q", d.MemLimit, warn.String())
	}
	// The default is half of what the cgroup leaves, without a warning.
	if d, err = engine.Open(engine.Engine{Warn: &warn}); err != nil {
		t.Fatal(err)
	}
	if d.MemLimit != 206*mib || warn.Len() != 0 {
		t.Errorf("default limit %d, want 206 MiB; warning %q", d.MemLimit, warn.String())
	}
}

// TestMemLimitWarningInTheReport: an in-process program (the C ABI's and
// the Python package's) has no stderr to warn on: its report carries the
// warning.
func TestMemLimitWarningInTheReport(t *testing.T) {
	fakeCgroup(t, "268435456", "0")
	d, err := engine.Open(engine.Engine{MemLimit: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if d.MemLimit != 256<<20 {
		t.Fatalf("limit %d, want 256 MiB", d.MemLimit)
	}
	s, err := engine.NewSession(chain{items: 10, width: 4}, d, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if r := s.Report(); !strings.Contains(r.MemLimitWarning, "lowered to 256 MiB") || r.Plan.Limit != 256<<20 {
		t.Errorf("report: warning %q, limit %d", r.MemLimitWarning, r.Plan.Limit)
	}
}
