package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// mergeCheckArgs is a small affinity run, split into 8 shards below.
var mergeCheckArgs = []string{"affinity", "--quiet", "--n", "83", "--height", "5", "--width", "4", "--metric", "l1", "--block", "16"}

// dirNames lists dir's entries.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestShardsResubmittedTasks runs an array of 8 shards as SLURM runs it
// (--shards 8, SLURM_ARRAY_TASK_ID 0…7) with tasks 3 and 7 failed, then
// resubmits them as sbatch --array=3,7 does (SLURM_ARRAY_TASK_MIN=3,
// SLURM_ARRAY_TASK_MAX=7, SLURM_ARRAY_TASK_COUNT=2): they must compute
// shards 3 and 7, and the merge must be the single run's bytes.
func TestShardsResubmittedTasks(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	if _, se, code := run(t, append(mergeCheckArgs, "--out", p("whole.npy"))...); code != 0 {
		t.Fatalf("single run: exit %d: %s", code, se)
	}
	task := func(id int, env ...string) {
		t.Helper()
		cmd := exec.Command(binary, append(mergeCheckArgs, "--shards", "8", "--out", p(fmt.Sprintf("shard_%d.npz", id)))...)
		cmd.Env = append(filterEnv(os.Environ(), "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX", "SLURM_ARRAY_TASK_COUNT", "JOB_COMPLETION_INDEX"),
			append([]string{fmt.Sprintf("SLURM_ARRAY_TASK_ID=%d", id)}, env...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("task %d: %v: %s", id, err, out)
		}
	}
	var shards []string
	for id := range 8 {
		shards = append(shards, p(fmt.Sprintf("shard_%d.npz", id)))
		if id != 3 && id != 7 {
			task(id, "SLURM_ARRAY_TASK_MIN=0", "SLURM_ARRAY_TASK_MAX=7", "SLURM_ARRAY_TASK_COUNT=8")
		}
	}
	so, _, code := run(t, append([]string{"merge", "--check"}, shards[:3]...)...)
	if code != 1 || !strings.Contains(so, "--array=3-7") {
		t.Errorf("check of shards 0…2: exit %d, stdout %q; want 1 and --array=3-7", code, so)
	}
	for _, id := range []int{3, 7} {
		task(id, "SLURM_ARRAY_TASK_MIN=3", "SLURM_ARRAY_TASK_MAX=7", "SLURM_ARRAY_TASK_COUNT=2")
	}
	if so, se, code := run(t, append([]string{"merge", "--check"}, shards...)...); code != 0 {
		t.Errorf("merge --check after the resubmission: exit %d\n%s%s", code, so, se)
	}
	if _, se, code := run(t, append([]string{"merge", "--out", p("merged.npy")}, shards...)...); code != 0 {
		t.Fatalf("merge after the resubmission: exit %d: %s", code, se)
	}
	a, _ := os.ReadFile(p("whole.npy"))
	b, _ := os.ReadFile(p("merged.npy"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("merged shards (%d bytes) differ from the single run (%d bytes)", len(b), len(a))
	}
}

// TestMergeCheck: of 8 shards, 3 and 7 missing and 1 held by two files,
// merge --check names each, with the files of the duplicated one, prints
// the --array= list, exits 1 and writes nothing; the complete set exits
// 0. The ordinary merge of the incomplete set names both missing shards.
func TestMergeCheck(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	var all []string
	for i := range 8 {
		all = append(all, p(fmt.Sprintf("s%d.npz", i)))
		if _, se, code := run(t, append(mergeCheckArgs, "--shard", fmt.Sprintf("%d/8", i), "--out", all[i])...); code != 0 {
			t.Fatalf("shard %d: exit %d: %s", i, code, se)
		}
	}
	b, err := os.ReadFile(all[1])
	if err != nil {
		t.Fatal(err)
	}
	cp := p("s1-copy.npz")
	if err := os.WriteFile(cp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	set := []string{all[0], all[1], all[2], cp, all[4], all[5], all[6]}
	before := dirNames(t, dir)

	so, se, code := run(t, append([]string{"merge", "--check"}, set...)...)
	t.Logf("merge --check:\n%s%s", so, se)
	if code != 1 {
		t.Errorf("incomplete set: exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(so), "\n")
	for _, want := range []string{
		"missing: shard 3 (rows [31, 41))",
		"missing: shard 7 (rows [72, 83))",
		"duplicated: shard 1 in " + all[1] + ", " + cp,
		"resubmit: --array=3,7",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("incomplete set: no line %q in\n%s", want, so)
		}
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "missing:") && !strings.Contains(l, "shard 3 ") && !strings.Contains(l, "shard 7 ") {
			t.Errorf("incomplete set: a shard that is there listed as missing: %q", l)
		}
	}
	if strings.Count(strings.TrimSpace(se), "\n") != 0 || !strings.Contains(se, "2 missing, 1 duplicated") {
		t.Errorf("incomplete set: stderr %q, want one line counting 2 missing, 1 duplicated", se)
	}
	if after := dirNames(t, dir); !slices.Equal(before, after) {
		t.Errorf("merge --check wrote files: %v, was %v", after, before)
	}

	so, se, code = run(t, append([]string{"merge", "--check"}, all...)...)
	if code != 0 || se != "" || !strings.Contains(so, "complete") || strings.Contains(so, "missing: ") {
		t.Errorf("complete set: exit %d, stdout %q, stderr %q; want 0 and complete", code, so, se)
	}

	// The ordinary merge names the missing shards first, and the files
	// that hold one twice.
	mergeRefuses(t, "incomplete set", p("m.npy"), "shards 3 and 7 of 8 are missing", set...)
	_, se, _ = run(t, append([]string{"merge", "--out", p("m.npy")}, set...)...)
	for _, want := range []string{"--array=3,7", "rows [31, 41) and [72, 83)", all[1] + " and " + cp + " hold the same rows"} {
		if !strings.Contains(se, want) {
			t.Errorf("merge of the incomplete set: %q does not say %q", se, want)
		}
	}
	if after := dirNames(t, dir); !slices.Equal(before, after) {
		t.Errorf("the refused merge wrote files: %v, was %v", after, before)
	}

	// --check and --out together, or a file that is not a shard.
	if _, se, code := run(t, "merge", "--check", "--out", p("m.npy"), all[0]); code != 1 || !strings.Contains(se, "--check writes nothing") {
		t.Errorf("--check with --out: exit %d, %q", code, se)
	}
	junk := p("junk.npz")
	os.WriteFile(junk, []byte("junk"), 0o644)
	if so, _, code := run(t, append([]string{"merge", "--check", junk}, all...)...); code != 1 || !strings.Contains(so, "does not belong: ") || !strings.Contains(so, junk) {
		t.Errorf("a junk file among the shards: exit %d, stdout %q; want 1 and the file named", code, so)
	}
}
