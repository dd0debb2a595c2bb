package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// written calls fn, one of the functions that write a string into a
// caller's buffer (tl_version, tl_release, tl_build), with a buffer of n
// bytes, and returns the string, or the error message it returned (freed
// with free, tl_free: a test file cannot name C's types).
func written[C any, N ~int64](fn func(*C, N) *C, free func(*C), n int) (string, string) {
	buf := make([]byte, n+1)
	buf[n] = 0xff // past the buffer given: must stay
	var p *C
	if n > 0 {
		p = (*C)(unsafe.Pointer(&buf[0]))
	}
	if e := fn(p, N(n)); e != nil {
		defer free(e)
		var msg []byte
		for q := (*byte)(unsafe.Pointer(e)); *q != 0; q = (*byte)(unsafe.Add(unsafe.Pointer(q), 1)) {
			msg = append(msg, *q)
		}
		return "", string(msg)
	}
	if buf[n] != 0xff {
		panic("written past the buffer")
	}
	s, _, _ := bytes.Cut(buf, []byte{0})
	return string(s), ""
}

// TestVersionAndRelease: tl_version writes the ABI version, tl_release
// the release in internal/version/VERSION (tapeloop.__version__), each
// into a buffer just large enough; a smaller one is an error naming the
// size needed.
func TestVersionAndRelease(t *testing.T) {
	b, err := os.ReadFile("../internal/version/VERSION")
	if err != nil {
		t.Fatal(err)
	}
	release := strings.TrimSpace(string(b))
	if got, msg := written(tl_version, tl_free, len(Version)+1); got != Version || msg != "" {
		t.Errorf("tl_version: %q (error %q), want %q", got, msg, Version)
	}
	if got, msg := written(tl_release, tl_free, len(release)+1); got != release || msg != "" {
		t.Errorf("tl_release: %q (error %q), want %q", got, msg, release)
	}
	for _, n := range []int{0, len(release)} {
		if got, msg := written(tl_release, tl_free, n); got != "" || !strings.HasSuffix(msg, "need "+strconv.Itoa(len(release)+1)) {
			t.Errorf("tl_release into %d bytes: %q, error %q; want an error naming %d bytes", n, got, msg, len(release)+1)
		}
	}
}
