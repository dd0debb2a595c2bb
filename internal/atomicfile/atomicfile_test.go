package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// TestWriteBackKeepsTheBytes: WriteBack between writes of odd sizes
// (after some writes, several times with nothing new, after a write
// that went back over earlier bytes) changes neither the file's position
// nor its bytes: the file committed over an earlier one holds exactly
// what was written.
func TestWriteBackKeepsTheBytes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.bin")
	if err := os.WriteFile(path, []byte("an earlier, longer file than nothing"), 0o644); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Abort()
	var want []byte
	for i := range 40 {
		b := make([]byte, 1+rng.IntN(300_001))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
		want = append(want, b...)
		for range i % 3 {
			f.WriteBack()
		}
		if i == 20 { // back over bytes already queued, then on at the end
			if _, err := f.WriteAt([]byte{1, 2, 3}, 7); err != nil {
				t.Fatal(err)
			}
			copy(want[7:], []byte{1, 2, 3})
			f.WriteBack()
		}
	}
	if pos, err := f.Seek(0, io.SeekCurrent); err != nil || pos != int64(len(want)) {
		t.Fatalf("position %d (%v) after WriteBack, want %d", pos, err, len(want))
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("committed file: %d bytes, want the %d written", len(got), len(want))
	}
}

// restart undoes RemovePending's stop, for the tests that follow.
func restart() {
	pending.Lock()
	pending.stopped = false
	pending.Unlock()
}

func TestRemovePending(t *testing.T) {
	defer restart()
	dir := t.TempDir()
	made, err := MakeDirs(filepath.Join(dir, "a", "b"))
	if err != nil || len(made) != 2 {
		t.Fatalf("made %v, %v", made, err)
	}
	f, err := Create(filepath.Join(dir, "a", "b", "out.npy"))
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("half")
	kept, err := MakeDirs(filepath.Join(dir, "kept"))
	if err != nil {
		t.Fatal(err)
	}
	KeepDirs(kept)
	if err := WriteFile(filepath.Join(dir, "done.npy"), []byte("whole")); err != nil {
		t.Fatal(err)
	}
	RemovePending()
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 2 || names[0] != "done.npy" || names[1] != "kept" {
		t.Fatalf("after RemovePending: %v, want [done.npy kept]", names)
	}
}

// TestCreateRemovesStale: Create removes the temporary files in its
// directory left by processes of this host that are gone, and keeps those
// of a live process and of other hosts.
func TestCreateRemovesStale(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no true(1) to take a dead process's id from")
	}
	dead := cmd.Process.Pid
	host := hostname()
	names := map[string]bool{ // name: kept
		fmt.Sprintf(".out.csv.tmp-%s-%d-123", host, dead):        false,
		fmt.Sprintf(".out.csv.tmp-%s-%d-456", host, os.Getpid()): true,
		fmt.Sprintf(".out.csv.tmp-otherhost-%d-789", dead):       true,
		fmt.Sprintf(".other.csv.tmp-%s-%d-123", host, dead):      false,
		"other.csv": true,
	}
	for n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f, err := Create(filepath.Join(dir, "out.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Abort()
	for n, kept := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); (err == nil) != kept {
			t.Errorf("%s: exists %v, want %v", n, err == nil, kept)
		}
	}
}

// TestCommitResult: a result that took less than SyncAfter replaces the
// file at Path without a sync, one that took SyncAfter or more is synced
// first, as Commit always syncs; each leaves exactly its bytes and no
// temporary file.
func TestCommitResult(t *testing.T) {
	syncs := 0
	syncFile = func(f *os.File) error { syncs++; return f.Sync() }
	defer func() { syncFile = (*os.File).Sync }()
	dir := t.TempDir()
	path := filepath.Join(dir, "out.npy")
	for i, c := range []struct {
		commit func(*File) error
		syncs  int
	}{
		{func(f *File) error { return f.CommitResult(SyncAfter - time.Millisecond) }, 0},
		{func(f *File) error { return f.CommitResult(0) }, 0},
		{func(f *File) error { return f.CommitResult(SyncAfter) }, 1},
		{func(f *File) error { return f.CommitResult(3 * SyncAfter) }, 1},
		{(*File).Commit, 1},
	} {
		syncs = 0
		f, err := Create(path)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Repeat(fmt.Sprint(i), 1000+i)
		f.WriteString(want)
		if err := c.commit(f); err != nil {
			t.Fatal(err)
		}
		if syncs != c.syncs {
			t.Errorf("case %d: %d syncs, want %d", i, syncs, c.syncs)
		}
		if b, _ := os.ReadFile(path); string(b) != want {
			t.Errorf("case %d: read back %d bytes, want %d", i, len(b), len(want))
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Errorf("case %d: directory holds %v", i, entries)
		}
	}
}

// TestMap: bytes written into the mapped file are the committed file's,
// over an earlier file, with parts sent to the disk early or not; a
// mapped file aborted leaves nothing; a second Map is refused.
func TestMap(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.npy")
	if err := WriteFile(path, []byte("earlier")); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, size := range []int{1, 4095, 4096, 1<<20 + 13} {
		f, err := Create(path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := f.Map(int64(size))
		if errors.Is(err, ErrNoMap) {
			f.Abort()
			t.Skipf("this file system cannot map: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(m) != size {
			t.Fatalf("mapped %d bytes, want %d", len(m), size)
		}
		if _, err := f.Map(int64(size)); err == nil {
			t.Error("a second Map: no error")
		}
		want := make([]byte, size)
		for i := range want {
			want[i] = byte(rng.Uint32())
		}
		copy(m[:size/2], want)
		f.WriteBackRange(0, int64(size/2))
		copy(m[size/2:], want[size/2:])
		if err := f.CommitResult(0); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, want) {
			t.Fatalf("size %d: the file differs from what was written into the mapping", size)
		}
	}
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Map(12345); err != nil {
		t.Fatal(err)
	}
	f.Abort()
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("Abort of a mapped file left %v", entries)
	}
}

// TestCreateFollowsLinks: an output that is a symbolic link (to a file, to
// a file not made yet, relative, through a chain) has the file it leads to
// written, and stays a link; one that leads into /proc is refused before
// anything is made.
func TestCreateFollowsLinks(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(sub, "old.npy")
	if err := os.WriteFile(old, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{ // link → what it holds
		"to-old.npy":    "sub/old.npy",
		"to-new.npy":    filepath.Join(sub, "new.npy"),
		"chain.npy":     "to-chain2.npy",
		"to-chain2.npy": "sub/chained.npy",
	}
	for l, to := range links {
		if err := os.Symlink(to, filepath.Join(dir, l)); err != nil {
			t.Fatal(err)
		}
	}
	for link, file := range map[string]string{"to-old.npy": old, "to-new.npy": filepath.Join(sub, "new.npy"), "chain.npy": filepath.Join(sub, "chained.npy")} {
		want := "written through " + link
		if err := WriteFile(filepath.Join(dir, link), []byte(want)); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Lstat(filepath.Join(dir, link)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer a link: %v %v", link, fi, err)
		}
		if b, err := os.ReadFile(file); err != nil || string(b) != want {
			t.Errorf("%s: the file it leads to holds %q (%v), want %q", link, b, err, want)
		}
	}
	if entries, _ := os.ReadDir(sub); len(entries) != 3 {
		t.Errorf("%s holds %v: want old.npy, new.npy and chained.npy only", sub, entries)
	}
	for _, p := range []string{"/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"} {
		if _, err := Create(p); !errors.Is(err, ErrProcFile) {
			t.Errorf("Create(%s): %v, want ErrProcFile", p, err)
		}
	}
}
