package main

import (
	"os"
	"path/filepath"
	"testing"
)

// tinySweep is a wavelet run that takes a moment.
var tinySweep = []string{"wavelet", "--quiet", "--size", "8x8x8", "--theta", "0", "--phi", "0", "--xi", "1"}

// TestSideFileLinksNotFollowed: a lock file or checkpoint beside --out
// that is a symbolic link to a file of the user's is refused in one line
// naming it, and the file it leads to is left as it was.
func TestSideFileLinksNotFollowed(t *testing.T) {
	for _, side := range []string{".lock", ".ckpt"} {
		dir := t.TempDir()
		victim := filepath.Join(dir, "victim.txt")
		if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "ql.csv")
		if err := os.Symlink("victim.txt", out+side); err != nil {
			t.Fatal(err)
		}
		args := append(tinySweep, "--out", out)
		_, se, code := run(t, args...)
		failsWithOneLine(t, args, se, code, out+side, "is a symbolic link")
		if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
			t.Errorf("%s: victim.txt holds %q", side, b)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: --out written", side)
		}
	}
}

// TestOutputIsAnotherOutputsSideFile: --report named as the checkpoint or
// lock file of --out is refused before any work, in one line naming both
// flags, and nothing is written.
func TestOutputIsAnotherOutputsSideFile(t *testing.T) {
	for _, side := range []string{".ckpt", ".lock"} {
		dir := t.TempDir()
		out := filepath.Join(dir, "q.csv")
		args := append(tinySweep, "--out", out, "--report", out+side)
		_, se, code := run(t, args...)
		failsWithOneLine(t, args, se, code, "--report "+out+side, "--out "+out)
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%s: left %v", side, entries)
		}
	}
}
