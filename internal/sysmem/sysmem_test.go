package sysmem

import (
	"runtime"
	"testing"
)

func TestParseSize(t *testing.T) {
	good := map[string]int64{"512MiB": 512 << 20, "2GB": 2e9, "1.5GiB": 3 << 29, "1048576": 1 << 20, "64 MiB": 64 << 20, "1kB": 1000}
	for s, want := range good {
		if got, err := ParseSize(s); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "lots", "-5MiB", "0", "12XB"} {
		if _, err := ParseSize(s); err == nil {
			t.Errorf("ParseSize(%q): no error", s)
		}
	}
}

func TestProbeSeesAllocation(t *testing.T) {
	p := NewProbe()
	defer p.Close()
	before := p.RSS()
	if before <= 0 {
		t.Skip("no /proc/self/statm")
	}
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	after := p.RSS()
	if after-before < 32<<20 {
		t.Errorf("RSS grew by %d bytes after touching 64 MiB", after-before)
	}
	if p.PeakRSS() < after {
		t.Errorf("peak RSS %d below current %d", p.PeakRSS(), after)
	}
	if p.HeapBytes() < 64<<20 {
		t.Errorf("heap %d bytes with 64 MiB live", p.HeapBytes())
	}
	runtime.KeepAlive(buf)
	if a, err := Available(); err != nil || a <= 0 {
		t.Errorf("Available() = %d, %v", a, err)
	}
}
