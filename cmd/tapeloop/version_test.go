package main

import (
	"os"
	"strings"
	"testing"
)

// TestVersionIsTheFile: tapeloop --version prints one line naming the
// release in internal/version/VERSION, the file the Python wheel and
// tapeloop.__version__ take theirs from, and info shows the same.
func TestVersionIsTheFile(t *testing.T) {
	b, err := os.ReadFile("../../internal/version/VERSION")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSpace(string(b))
	so, se, code := run(t, "--version")
	if code != 0 || se != "" {
		t.Fatalf("--version: exit %d, stderr %q", code, se)
	}
	if so != "tapeloop version "+want+"\n" {
		t.Fatalf("--version printed %q, want one line naming %s", so, want)
	}
	so, se, code = run(t, "info")
	if code != 0 {
		t.Fatalf("info: exit %d, stderr %q", code, se)
	}
	if first, _, _ := strings.Cut(so, "\n"); strings.Fields(first)[1] != want {
		t.Fatalf("info's first line is %q, want tapeloop %s", first, want)
	}
}
