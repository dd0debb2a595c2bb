package filejob

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestCheckPaths(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.npy")
	if err := os.WriteFile(in, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.npy")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard.npy")
	if err := os.Link(in, hard); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	toNew := filepath.Join(dir, "to-new.npy") // a link to a file not made yet
	if err := os.Symlink("new2.npy", toNew); err != nil {
		t.Fatal(err)
	}
	inputs := []Path{{Flag: "x", Path: in}, {Flag: "f", Path: ""}}
	out := func(flag, p string) Path { return Path{Flag: flag, Path: p} }
	cases := []struct {
		outs []Path
		want string // "" allowed
	}{
		{[]Path{out("out", filepath.Join(dir, "new.npy"))}, ""},
		{[]Path{out("out", in)}, "is the input --x"},
		{[]Path{out("out", link)}, "is the input --x"},
		{[]Path{out("out", hard)}, "is the input --x"},
		{[]Path{out("report", filepath.Join(dir, ".", "in.npy"))}, "is the input --x"},
		{[]Path{out("out", sub)}, "is a directory"},
		{[]Path{out("out", filepath.Join(dir, "missing", "o.npy"))}, "does not exist"},
		{[]Path{out("out", filepath.Join(dir, "o.npy")), out("report", filepath.Join(sub, "..", "o.npy"))}, "is also --out"},
		{[]Path{{Flag: "out", Path: filepath.Join(dir, "made", "deeper"), Dir: true}, out("out", filepath.Join(dir, "made", "deeper", "drr.npy"))}, ""},
		{[]Path{{Flag: "out", Path: in, Dir: true}}, "is a file"},
		{[]Path{{Flag: "out", Path: dir, Dir: true}, out("out", filepath.Join(dir, "in.npy"))}, "is the input --x"},
		{[]Path{out("out", "")}, ""},
		{[]Path{out("out", toNew)}, ""},
		{[]Path{out("out", fifo)}, "is a pipe or FIFO"},
		{[]Path{out("out", "/dev/null")}, "is a character device"},
		{[]Path{out("report", "/dev/stdout")}, "open file of a process"},
		{[]Path{out("out", "/dev/fd/2")}, "open file of a process"},
		{[]Path{out("out", "-")}, "standard output is not written to"},
	}
	for i, c := range cases {
		err := CheckPaths(inputs, c.outs)
		if c.want == "" {
			if err != nil {
				t.Errorf("case %d: %v, want allowed", i, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrPath) {
			t.Errorf("case %d: %v, want an ErrPath saying %q", i, err, c.want)
		}
	}
	if b, err := os.ReadFile(in); err != nil || string(b) != "data" {
		t.Errorf("input changed: %q %v", b, err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO changed: %v %v", fi, err)
	}
}
