package filejob

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestSideFilesRefused: an output named as the checkpoint, lock file or a
// temporary file of --out is refused, naming both flags, in either order
// and spelling; the report of an output without a checkpoint may be named
// NAME.ckpt, and a name that only begins like a side file is allowed.
func TestSideFilesRefused(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	out := func(flag, path string) Path { return Path{Flag: flag, Path: path} }
	drr := Path{Flag: "out", Path: p("rc2"), Dir: true}
	cases := []struct {
		outs []Path
		want string // "" allowed
	}{
		{[]Path{out("out", p("q.csv")), out("report", p("q.csv.ckpt"))}, "--report " + p("q.csv.ckpt") + ": is the checkpoint of --out " + p("q.csv")},
		{[]Path{out("out", p("q.csv")), out("report", p("q.csv.lock"))}, "is the lock file of --out"},
		{[]Path{out("cpuprofile", p("q.csv.lock")), out("out", p("q.csv"))}, "--cpuprofile " + p("q.csv.lock") + ": is the lock file of --out"},
		{[]Path{out("out", p("q.csv")), out("trace", filepath.Join(dir, ".", "sub", "..", "q.csv.ckpt"))}, "is the checkpoint of --out"},
		{[]Path{out("out", p("q.csv")), out("report", p(".q.csv.tmp-vm-12-345"))}, "is named as a temporary file of --out"},
		{[]Path{out("report", p("r.json")), out("memprofile", p(".r.json.tmp-x"))}, "is named as a temporary file of --report"},
		{[]Path{drr, out("out", p("rc2/drr.npy")), out("report", p("rc2/drr.npy.lock"))}, "is the lock file of --out " + p("rc2/drr.npy")},
		{[]Path{out("out", p("q.csv")), out("report", p("q.csv.ckpt.json"))}, ""},
		{[]Path{out("out", p("q.csv")), out("report", p("q.csv.locked"))}, ""},
		{[]Path{out("report", p("r.json")), out("trace", p("r.json.ckpt"))}, ""},
		{[]Path{out("out", p("q.csv")), out("report", p("q.csv.tmp-x"))}, ""},
	}
	for i, c := range cases {
		err := CheckPaths(nil, c.outs)
		if c.want == "" {
			if err != nil {
				t.Errorf("case %d: %v, want allowed", i, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrPath) || strings.Contains(err.Error(), "\n") {
			t.Errorf("case %d: %v, want one line saying %q", i, err, c.want)
		}
	}
}
