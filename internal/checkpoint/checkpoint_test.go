package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func header() Header {
	return Header{Workload: "wavelet", Fingerprint: "abc", Lo: 0, Hi: 10, Record: 3}
}

// TestResumeDiscardsTornRecord: records appended come back in order; a
// record cut short or garbled at the end is discarded, and appending goes
// on after the whole ones.
func TestResumeDiscardsTornRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.csv.ckpt")
	for _, cut := range []int64{0, 1, 4, 6} { // 0: the last record whole
		c, err := Create(path, header(), 10, "items")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Append([][]byte{[]byte("abc"), []byte("def")}); err != nil {
			t.Fatal(err)
		}
		if err := c.Append([][]byte{[]byte("ghi")}); err != nil {
			t.Fatal(err)
		}
		c.Close()
		fi, _ := os.Stat(path)
		if err := os.Truncate(path, fi.Size()-cut); err != nil {
			t.Fatal(err)
		}
		want := "abcdefghi"
		if cut > 0 {
			want = "abcdef"
		}
		var got []byte
		c, err = Resume(path, header(), 10, "items", func(b []byte) error { got = append(got, b...); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("cut %d: records %q, want %q", cut, got, want)
		}
		if err := c.Append([][]byte{[]byte("jkl")}); err != nil {
			t.Fatal(err)
		}
		c.Close()
		got = got[:0]
		c, err = Resume(path, header(), 10, "items", func(b []byte) error { got = append(got, b...); return nil })
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if string(got) != want+"jkl" {
			t.Errorf("cut %d: after appending, records %q", cut, got)
		}
	}
	// A garbled last record.
	b, _ := os.ReadFile(path)
	b[len(b)-5] ^= 1
	os.WriteFile(path, b, 0o644)
	n := 0
	c, err := Resume(path, header(), 10, "items", func([]byte) error { n++; return nil })
	if err != nil || n != 2 {
		t.Errorf("garbled: %d records, %v, want 2", n, err)
	}
	c.Close()
}

func TestResumeRefuses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.csv.ckpt")
	if _, err := Resume(path, header(), 10, "items", nil); err == nil || !strings.Contains(err.Error(), "no checkpoint at "+path) {
		t.Errorf("missing: %v", err)
	}
	c, err := Create(path, header(), 10, "items")
	if err != nil {
		t.Fatal(err)
	}
	c.Append([][]byte{[]byte("abc")})
	c.Close()
	other := header()
	other.Fingerprint = "abd"
	if _, err := Resume(path, other, 10, "items", nil); !errors.Is(err, ErrMismatch) {
		t.Errorf("another run's: %v", err)
	}
	os.WriteFile(path, []byte("not one"), 0o644)
	if _, err := Resume(path, header(), 10, "items", nil); err == nil || !strings.Contains(err.Error(), "not a tapeloop checkpoint") {
		t.Errorf("not a checkpoint: %v", err)
	}
}

// TestCloseKeepsOnlyWork: a checkpoint without records is removed on
// Close; one with records stays, and CloseAll says what it holds.
func TestCloseKeepsOnlyWork(t *testing.T) {
	dir := t.TempDir()
	empty, _ := Create(filepath.Join(dir, "a.ckpt"), header(), 10, "items")
	full, _ := Create(filepath.Join(dir, "b.ckpt"), header(), 10, "items")
	full.Append([][]byte{[]byte("abc")})
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
}
