package main

// Paths as the user gives them: an empty path is refused, not read as
// "the built-in data" or "no output".

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestPathsEmptyRefused: every flag that names a file or directory, given
// "" (an unset shell variable), is refused with one line naming it, and
// nothing is written: not the built-in data read, not a run without its
// output.
func TestPathsEmptyRefused(t *testing.T) {
	drr := []string{"drr", "--quiet", "--orbit", "2", "--detector", "4x4"}
	wv := []string{"wavelet", "--quiet", "--theta", "0", "--phi", "0", "--xi", "1"}
	// Small runs: without the check, a flag of the built-in data beside
	// the empty one is refused too, but not as an empty path.
	ip := []string{"interp", "--quiet", "--points", "10", "--grid", "8", "--interpolants", "2"}
	aff := []string{"affinity", "--quiet", "-n", "4", "--height", "2", "--width", "2"}
	for _, c := range []struct {
		flag string
		args []string
	}{
		{"volume", drr},
		{"geometry", []string{"drr", "--quiet"}},
		{"out", drr},
		{"report", drr},
		{"volume", wv},
		{"out", wv},
		{"trace", wv},
		{"f", ip},
		{"x", ip},
		{"out", ip},
		{"cpuprofile", ip},
		{"memprofile", ip},
		{"images", aff},
		{"out", aff},
		{"out", []string{"merge"}},
		{"volume", []string{"dot", "drr"}},
	} {
		args := append(append([]string{}, c.args...), "--"+c.flag, "")
		if c.args[0] == "merge" {
			args = append(args, "x.npz")
		}
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			dir := t.TempDir()
			stdout, stderr, code := outputsRun{args: args, dir: dir, fsize: -1}.run(t)
			failsWithOneLine(t, args, stderr, code, "--"+c.flag+": empty path")
			if stdout != "" {
				t.Errorf("tapeloop %s: printed %q", strings.Join(args, " "), stdout)
			}
			sameContents(t, args, dir, map[string]string{})
		})
	}
}

// TestPathsFlagsMarked: every flag whose help names a FILE or DIR is
// marked as a path (TakesFile), the one mark the empty-path check reads.
func TestPathsFlagsMarked(t *testing.T) {
	var walk func(prefix string, cmds []*cli.Command)
	n := 0
	walk = func(prefix string, cmds []*cli.Command) {
		for _, cmd := range cmds {
			name := prefix + cmd.Name
			walk(name+" ", cmd.Subcommands)
			for _, f := range cmd.Flags {
				sf, ok := f.(*cli.StringFlag)
				if !ok {
					continue
				}
				path := strings.Contains(sf.Usage, "`FILE") || strings.Contains(sf.Usage, "`DIR")
				if path != sf.TakesFile {
					t.Errorf("%s --%s: names a path: %v, marked TakesFile: %v", name, sf.Name, path, sf.TakesFile)
				}
				if sf.TakesFile {
					n++
				}
			}
		}
	}
	walk("", newApp().Commands)
	if n < 14 {
		t.Errorf("%d path flags, want at least 14", n)
	}
}
