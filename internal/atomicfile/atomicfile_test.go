package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCommitAndAbort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.npy")
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("half")
	if _, err := os.Stat(path); err == nil {
		t.Fatal("destination exists before Commit")
	}
	f.Abort()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("Abort left %v", entries)
	}
	if err := WriteFile(path, []byte("whole")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "whole" {
		t.Fatalf("read back %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("directory holds %v", entries)
	}
	if _, err := Create(filepath.Join(dir, "no", "such", "dir")); err == nil {
		t.Error("Create in a missing directory: no error")
	}
}
