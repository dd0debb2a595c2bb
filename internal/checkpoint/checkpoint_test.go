package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func header() Header {
	return Header{Workload: "wavelet", Fingerprint: "abc", Lo: 0, Hi: 10, Record: 3}
}

// restored is a record as Restore passed it.
type restored struct {
	item int
	rec  string
}

// resume scans path for items [0, items) and restores it, returning the
// records passed and the open file.
func resume(t *testing.T, path string, h Header, items int, prefix bool) ([]restored, *File) {
	t.Helper()
	s, err := Scan(path, h, items, prefix)
	if err != nil {
		t.Fatal(err)
	}
	var got []restored
	c, err := s.Restore(items, "items", func(i int, b []byte) error {
		got = append(got, restored{i, string(b)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != len(got) {
		t.Errorf("Len %d, restored %d", s.Len(), len(got))
	}
	return got, c
}

func recs(ss ...string) [][]byte {
	var b [][]byte
	for _, s := range ss {
		b = append(b, []byte(s))
	}
	return b
}

// TestResumeDiscardsTornRecord: records appended come back in order; a
// record cut short or garbled at the end is discarded, and appending goes
// on after the whole ones.
func TestResumeDiscardsTornRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.csv.ckpt")
	for _, cut := range []int64{0, 1, 4, 6, 15} { // 0: the last record whole
		c, err := Create(path, header(), 10, "items")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Append(0, recs("abc", "def")); err != nil {
			t.Fatal(err)
		}
		if err := c.Append(2, recs("ghi")); err != nil {
			t.Fatal(err)
		}
		c.Close()
		fi, _ := os.Stat(path)
		if err := os.Truncate(path, fi.Size()-cut); err != nil {
			t.Fatal(err)
		}
		want := []restored{{0, "abc"}, {1, "def"}, {2, "ghi"}}
		if cut > 0 {
			want = want[:2]
		}
		for _, prefix := range []bool{false, true} {
			got, c := resume(t, path, header(), 10, prefix)
			if !slices.Equal(got, want) {
				t.Errorf("cut %d, prefix %v: records %v, want %v", cut, prefix, got, want)
			}
			c.Close()
		}
		got, c := resume(t, path, header(), 10, true)
		if err := c.Append(len(got), recs("jkl")); err != nil {
			t.Fatal(err)
		}
		c.Close()
		got, c = resume(t, path, header(), 10, true)
		c.Close()
		if !slices.Equal(got, append(want, restored{len(want), "jkl"})) {
			t.Errorf("cut %d: after appending, records %v", cut, got)
		}
		if n, err := Count(path); err != nil || n != len(want)+1 {
			t.Errorf("cut %d: Count %d, %v; want %d", cut, n, err, len(want)+1)
		}
	}
	// A garbled last record.
	b, _ := os.ReadFile(path)
	b[len(b)-5] ^= 1
	os.WriteFile(path, b, 0o644)
	if got, c := resume(t, path, header(), 10, false); len(got) != 2 {
		t.Errorf("garbled: %d records, want 2", len(got))
	} else {
		c.Close()
	}
}

// TestRecordsOfAnotherRunAreSkipped: records copied from the checkpoint of
// another run (their CRCs valid there) are never restored, wherever they
// stand, and the checkpoint is rewritten without them.
func TestRecordsOfAnotherRunAreSkipped(t *testing.T) {
	dir := t.TempDir()
	mine, theirs := filepath.Join(dir, "a.ckpt"), filepath.Join(dir, "b.ckpt")
	other := header()
	other.Fingerprint = "abd" // the same sizes: only the run differs
	c, _ := Create(theirs, other, 10, "items")
	c.Append(0, recs("XXX", "YYY", "ZZZ"))
	c.Close()
	tb, _ := os.ReadFile(theirs)
	hb, _, _ := encodeHeader(other)
	foreign := tb[len(hb):] // three records of items 0, 1, 2

	c, _ = Create(mine, header(), 10, "items")
	c.Append(0, recs("abc"))
	c.Close()
	f, _ := os.OpenFile(mine, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(foreign[15:30]) // their item 1
	f.Close()
	c, _ = Create(filepath.Join(dir, "c.ckpt"), header(), 10, "items") // the records of my run, to copy
	c.Append(2, recs("ghi"))
	c.Close()
	cb, _ := os.ReadFile(filepath.Join(dir, "c.ckpt"))
	f, _ = os.OpenFile(mine, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(cb[len(cb)-15:]) // my item 2
	f.Write(foreign)         // their items 0, 1, 2
	f.Close()

	s, err := Scan(mine, header(), 10, false)
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 2 || s.Unused != 4 {
		t.Errorf("Len %d, Unused %d; want 2 and 4", s.Len(), s.Unused)
	}
	got, c := resume(t, mine, header(), 10, false)
	c.Close()
	if want := []restored{{0, "abc"}, {2, "ghi"}}; !slices.Equal(got, want) {
		t.Errorf("restored %v, want %v", got, want)
	}
	// Rewritten: it now holds only my two records.
	if fi, _ := os.Stat(mine); fi.Size() != int64(len(hb))+2*15 {
		t.Errorf("size %d after the rewrite, want %d", fi.Size(), len(hb)+30)
	}
	// A header of one run over records of another: nothing restored.
	os.WriteFile(mine, append(append([]byte{}, cb[:len(cb)-15]...), foreign...), 0o644)
	if got, c := resume(t, mine, header(), 10, false); len(got) != 0 {
		t.Errorf("another run's records restored: %v", got)
	} else {
		c.Close()
	}
	if n, _ := Count(mine); n != 0 {
		t.Errorf("Count %d of another run's records, want 0", n)
	}
}

// TestRepeatedAndOutOfOrderRecords: as two runs racing on one checkpoint
// would leave it. Each item is restored once; with prefix, only the items
// before the first missing one, in item order.
func TestRepeatedAndOutOfOrderRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.ckpt")
	c, _ := Create(path, header(), 10, "items")
	c.AppendItems([]int{0, 1, 1, 3, 2, 5, 0}, recs("a0_", "a1_", "b1_", "a3_", "a2_", "a5_", "b0_"))
	c.Close()
	got, c := resume(t, path, header(), 10, false)
	c.Close()
	if want := []restored{{0, "a0_"}, {1, "a1_"}, {3, "a3_"}, {2, "a2_"}, {5, "a5_"}}; !slices.Equal(got, want) {
		t.Errorf("restored %v, want %v", got, want)
	}
	got, c = resume(t, path, header(), 10, true)
	c.Close()
	if want := []restored{{0, "a0_"}, {1, "a1_"}, {2, "a2_"}, {3, "a3_"}}; !slices.Equal(got, want) {
		t.Errorf("prefix: restored %v, want %v", got, want)
	}
	// Items out of the run's range are never restored.
	c, _ = Create(path, header(), 10, "items")
	c.AppendItems([]int{0, 12, 1}, recs("abc", "zzz", "def"))
	c.Close()
	got, c = resume(t, path, header(), 10, false)
	c.Close()
	if want := []restored{{0, "abc"}, {1, "def"}}; !slices.Equal(got, want) {
		t.Errorf("out of range: restored %v, want %v", got, want)
	}
}

// TestCountReadsRecordsNotSize: a checkpoint with a long sparse tail
// counts the records in it without reading the tail: the bytes the process
// reads are counted, not timed.
func TestCountReadsRecordsNotSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.ckpt")
	c, _ := Create(path, header(), 10, "items")
	c.Append(0, recs("abc", "def", "ghi"))
	c.Close()
	fi, _ := os.Stat(path)
	if err := os.Truncate(path, fi.Size()+8<<30); err != nil {
		t.Skip("no sparse 8 GiB file here:", err)
	}
	before, counted := bytesRead()
	n, err := Count(path)
	if err != nil || n != 3 {
		t.Errorf("Count %d, %v; want 3", n, err)
	}
	if after, _ := bytesRead(); counted && after-before > 16<<20 { // a few buffers, not the tail
		t.Errorf("Count read %d bytes of a file of 3 records and an 8 GiB sparse tail", after-before)
	}
}

// bytesRead is the bytes this process has read so far (rchar in
// /proc/self/io); ok is false where that is not known.
func bytesRead() (n int64, ok bool) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, found := strings.CutPrefix(l, "rchar: "); found {
			_, err := fmt.Sscan(v, &n)
			return n, err == nil
		}
	}
	return 0, false
}

// hangAfter is how long a call that should return at once may block before
// a test calls it hung: far beyond what a loaded machine takes.
const hangAfter = 2 * time.Minute

func TestResumeRefuses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.csv.ckpt")
	if _, err := Scan(path, header(), 10, false); err == nil || !strings.Contains(err.Error(), "no checkpoint at "+path) {
		t.Errorf("missing: %v", err)
	}
	c, err := Create(path, header(), 10, "items")
	if err != nil {
		t.Fatal(err)
	}
	c.Append(0, recs("abc"))
	c.Close()
	other := header()
	other.Fingerprint = "abd"
	if _, err := Scan(path, other, 10, false); !errors.Is(err, ErrMismatch) {
		t.Errorf("another run's: %v", err)
	}
	os.WriteFile(path, []byte("not one"), 0o644)
	if _, err := Scan(path, header(), 10, false); err == nil || !strings.Contains(err.Error(), "not a tapeloop checkpoint") {
		t.Errorf("not a checkpoint: %v", err)
	}
	os.WriteFile(path, []byte(oldMagic+"\x02\x00\x00\x00{}"), 0o644)
	if _, err := Scan(path, header(), 10, false); err == nil || !strings.Contains(err.Error(), "earlier release") {
		t.Errorf("an earlier release's: %v", err)
	}
	if _, err := Count(path); err == nil {
		t.Error("Count of an earlier release's checkpoint: no error")
	}
}

// reopen undoes CloseAll's stop, for the tests that follow.
func reopen() {
	open.Lock()
	open.closed = false
	open.Unlock()
}

// TestCloseKeepsOnlyWork: a checkpoint without records is removed on
// Close; one with records stays, and CloseAll says what it holds and
// releases the locks.
func TestCloseKeepsOnlyWork(t *testing.T) {
	defer reopen()
	dir := t.TempDir()
	empty, _ := Create(filepath.Join(dir, "a.ckpt"), header(), 10, "items")
	full, _ := Create(filepath.Join(dir, "b.ckpt"), header(), 10, "items")
	full.Append(0, recs("abc"))
	l, err := Take(full.Path())
	if err != nil {
		t.Fatal(err)
	}
	notes := CloseAll()
	if len(notes) != 1 || !strings.Contains(notes[0], "1 of 10 items done, saved in "+full.Path()) {
		t.Errorf("notes %q", notes)
	}
	if _, err := os.Stat(empty.Path()); err == nil {
		t.Error("the empty checkpoint stayed")
	}
	if _, err := os.Stat(full.Path()); err != nil {
		t.Error("the checkpoint with a record was removed")
	}
	if _, err := os.Stat(l.path); err == nil {
		t.Error("CloseAll left the lock file")
	}
}

// TestLock: a second lock on one checkpoint is refused, not waited on,
// naming the holder's pid; after Release it can be taken again, and the
// lock file is gone.
func TestLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.npy.ckpt")
	a, err := Take(path)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(LockPath(path)); !bytes.HasPrefix(b, []byte(fmt.Sprint(os.Getpid(), " "))) {
		t.Errorf("lock file holds %q", b)
	}
	second := make(chan error, 1)
	go func() { _, err := Take(path); second <- err }()
	select {
	case err = <-second:
	case <-time.After(hangAfter):
		t.Fatalf("hung: a second Take still waits on the lock after %v", hangAfter)
	}
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("second lock: %v", err)
	}
	a.Release()
	a.Release()
	if _, err := os.Stat(LockPath(path)); err == nil {
		t.Error("the lock file stayed after Release")
	}
	b, err := Take(path)
	if err != nil {
		t.Fatalf("after Release: %v", err)
	}
	b.Release()
}

// TestNotARegularFile: a FIFO where the checkpoint should be is refused at
// once, not waited on.
func TestNotARegularFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.csv.ckpt")
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skip(err)
	}
	done := make(chan error, 2)
	go func() { _, err := Count(path); done <- err }()
	go func() { _, err := Scan(path, header(), 10, false); done <- err }()
	for range 2 {
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("a FIFO: %v", err)
			}
		case <-time.After(hangAfter):
			t.Fatalf("hung: blocked on a FIFO for %v", hangAfter)
		}
	}
}

// TestLinksNotFollowed: a lock file or checkpoint that is a symbolic link
// (to a file of the user's, or to nowhere) is refused, naming it, and the
// file it leads to is neither written nor made.
func TestLinksNotFollowed(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim.txt")
	if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, to := range []string{victim, filepath.Join(dir, "made.txt")} {
		path := filepath.Join(dir, "q.csv.ckpt")
		if err := os.Symlink(to, LockPath(path)); err != nil {
			t.Fatal(err)
		}
		l, err := Take(path)
		if !errors.Is(err, ErrSymlink) || !strings.Contains(err.Error(), LockPath(path)) {
			t.Errorf("a lock file linking to %s: %v, want an error naming it a symbolic link", to, err)
		}
		l.Release()
		os.Remove(LockPath(path))
		if err := os.Symlink(to, path); err != nil {
			t.Fatal(err)
		}
		if _, err := Count(path); !errors.Is(err, ErrSymlink) || !strings.Contains(err.Error(), path) {
			t.Errorf("Count of a checkpoint linking to %s: %v, want an error naming it a symbolic link", to, err)
		}
		if _, err := Scan(path, header(), 10, false); !errors.Is(err, ErrSymlink) {
			t.Errorf("Scan of a checkpoint linking to %s: %v, want an error naming it a symbolic link", to, err)
		}
		c, err := Create(path, header(), 10, "items") // replaces the link itself
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		os.Remove(path)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Errorf("victim.txt holds %q", b)
	}
	if _, err := os.Lstat(filepath.Join(dir, "made.txt")); err == nil {
		t.Error("made.txt was made through a link")
	}
}

// TestStaleLocksRemoved: taking a lock removes the lock files in its
// directory that killed runs of this host left (nobody holds them, their
// process is gone), and keeps a held one, another host's, one of a live
// process and a file of the user's that only ends in .lock.
func TestStaleLocksRemoved(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no true(1) to take a dead process's id from")
	}
	dead := cmd.Process.Pid
	host, _ := os.Hostname()
	held, err := Take(filepath.Join(dir, "held.csv.ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	sweptLocks.Clear()
	files := map[string]struct {
		text string
		kept bool
	}{
		"stale.npy.lock": {fmt.Sprintf("%d %s\n", dead, host), false},
		"other.npy.lock": {fmt.Sprintf("%d otherhost\n", dead), true},
		"live.npy.lock":  {fmt.Sprintf("%d %s\n", os.Getpid(), host), true},
		"notes.lock":     {"remember the milk\n", true},
		"empty.lock":     {"", true},
	}
	for name, f := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(f.text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A dead process's id in a file held locked: a live run of another
	// PID namespace, whose id means nothing here.
	hf, err := os.OpenFile(filepath.Join(dir, "ns.npy.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	fmt.Fprintf(hf, "%d %s\n", dead, host)
	if err := syscall.Flock(int(hf.Fd()), syscall.LOCK_EX); err != nil {
		t.Skip(err)
	}
	files["ns.npy.lock"] = struct {
		text string
		kept bool
	}{"", true}
	l, err := Take(filepath.Join(dir, "out.csv.ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	for name, f := range files {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != f.kept {
			t.Errorf("%s: exists %v, want %v", name, err == nil, f.kept)
		}
	}
	if _, err := os.Stat(LockPath(filepath.Join(dir, "held.csv.ckpt"))); err != nil {
		t.Errorf("the held lock file: %v", err)
	}
}

// TestNoCheckpointAfterCloseAll: a checkpoint made after CloseAll (a run
// still setting up as its process stops) is refused and leaves no file.
func TestNoCheckpointAfterCloseAll(t *testing.T) {
	defer reopen()
	CloseAll()
	path := filepath.Join(t.TempDir(), "late.csv.ckpt")
	if c, err := Create(path, header(), 10, "items"); err == nil {
		c.Close()
		t.Error("Create after CloseAll: no error")
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("Create after CloseAll left the checkpoint")
	}
}

// TestScanOtherShard: a checkpoint of the same run's other items is
// refused as another shard's, with advice to keep it and never to remove
// it; one of another run as before.
func TestScanOtherShard(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.ckpt")
	h := Header{Workload: "wavelet", Fingerprint: "fp", Lo: 30, Hi: 40, Record: 8}
	f, err := Create(path, h, 10, "kernels")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Append(30, [][]byte{make([]byte, 8)}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	run := h
	run.Lo, run.Hi = 0, 10
	_, err = Scan(path, run, 10, false)
	if !errors.Is(err, ErrOtherShard) || errors.Is(err, ErrMismatch) {
		t.Fatalf("other shard: %v, want ErrOtherShard", err)
	}
	for _, want := range []string{"[30, 40)", "[0, 10)", "keep it", "--array="} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("other shard: %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "remove") {
		t.Errorf("other shard: %q advises removing it", err)
	}
	run.Fingerprint = "other"
	if _, err := Scan(path, run, 10, false); !errors.Is(err, ErrMismatch) {
		t.Errorf("other run: %v, want ErrMismatch", err)
	}
}
