// Package sysmem reads the memory figures tapeloop plans and reports with:
// available memory (the least of what /proc/meminfo's MemAvailable, the
// cgroup's limit and the process's address-space and data limits leave),
// the process's resident set, its peak, and the Go heap.
package sysmem

import (
	"bytes"
	"fmt"
	"math"
	"math/bits"
	"os"
	"runtime"
	"runtime/metrics"
	"strings"
	"syscall"
	"unsafe"

	"github.com/dustin/go-humanize"
)

// ParseSize parses a byte size such as "512MiB", "2GB", "1.5GiB" or
// "1048576". Decimal units (kB, MB, GB) are powers of 1000, binary units
// (KiB, MiB, GiB) powers of 1024.
func ParseSize(s string) (int64, error) {
	v, err := humanize.ParseBytes(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("bad size %q (want e.g. 512MiB or 2GB)", s)
	}
	if v == 0 || v > 1<<62 {
		return 0, fmt.Errorf("bad size %q: must be between 1 byte and 4 EiB", s)
	}
	return int64(v), nil
}

// Format formats bytes with binary units, e.g. "64 MiB".
func Format(b int64) string {
	if b < 0 {
		return "-" + humanize.IBytes(uint64(-b))
	}
	return humanize.IBytes(uint64(b))
}

// PeakRSS is the process's peak resident set size (getrusage maxrss).
func PeakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return maxRSSBytes(&ru)
}

// ResetPeakRSS asks the kernel to restart the peak-RSS count from the
// current RSS (Linux /proc/self/clear_refs, value 5). It reports whether
// that worked; getrusage's maxrss is not reset by it, so use Probe.PeakRSS.
func ResetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// Probe reads RSS and the Go heap without allocating, for use once per
// batch. It is not safe for concurrent use.
type Probe struct {
	statm   *os.File
	status  *os.File
	buf     [512]byte
	samples []metrics.Sample
	page    int64
}

// NewProbe opens /proc/self/statm and /proc/self/status once.
func NewProbe() *Probe {
	p := &Probe{
		samples: []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}},
		page:    int64(os.Getpagesize()),
	}
	p.statm, _ = os.Open("/proc/self/statm")
	p.status, _ = os.Open("/proc/self/status")
	return p
}

// Close closes the files the probe holds.
func (p *Probe) Close() {
	if p.statm != nil {
		p.statm.Close()
	}
	if p.status != nil {
		p.status.Close()
	}
}

// HeapBytes is the Go heap occupied by live and not-yet-swept objects.
func (p *Probe) HeapBytes() int64 {
	metrics.Read(p.samples)
	if p.samples[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(p.samples[0].Value.Uint64())
}

// LiveHeapBytes runs two garbage collections and returns the Go heap then
// occupied: the live objects. One is not enough: what sync.Pools held (the
// Gorgonia tensor pools among them) survives the first collection in the
// pools' victim caches, which would show as tens of MB "freed" during the
// next run (the previous run's buffers). It costs two collections; use it at the edges of a run, not
// per batch.
func (p *Probe) LiveHeapBytes() int64 {
	runtime.GC()
	runtime.GC()
	return p.HeapBytes()
}

// RSS is the current resident set size, or 0 where /proc is missing
// (macOS).
func (p *Probe) RSS() int64 {
	if p.statm == nil {
		return 0
	}
	n, err := p.statm.ReadAt(p.buf[:], 0)
	if n == 0 && err != nil {
		return 0
	}
	b := p.buf[:n]
	i := bytes.IndexByte(b, ' ')
	if i < 0 {
		return 0
	}
	b = b[i+1:]
	var pages int64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		pages = pages*10 + int64(c-'0')
	}
	return pages * p.page
}

// PeakRSS is VmHWM from /proc/self/status (which ResetPeakRSS resets),
// falling back to getrusage where /proc is missing (macOS).
func (p *Probe) PeakRSS() int64 {
	if p.status == nil {
		return PeakRSS()
	}
	var buf [4096]byte
	n, _ := p.status.ReadAt(buf[:], 0)
	b := buf[:n]
	i := bytes.Index(b, []byte("VmHWM:"))
	if i < 0 {
		return PeakRSS()
	}
	var kb int64
	for _, c := range b[i+6:] {
		if c == ' ' || c == '\t' {
			if kb > 0 {
				break
			}
			continue
		}
		if c < '0' || c > '9' {
			break
		}
		kb = kb*10 + int64(c-'0')
	}
	return kb << 10
}

// AdviseHugePages asks the kernel to back the whole 2 MiB pages inside b
// with transparent huge pages (madvise MADV_HUGEPAGE), where THP is in
// "madvise" mode: one fault per 2 MiB instead of per 4 KiB when a large
// buffer is first written. Call it before writing b. It is best effort:
// errors are ignored, and small buffers are left alone. Linux only;
// elsewhere it does nothing.
func AdviseHugePages(b []byte) {
	const huge = 2 << 20
	if len(b) < 4*huge {
		return
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	lo := (p + huge - 1) &^ (huge - 1)
	hi := (p + uintptr(len(b))) &^ (huge - 1)
	if hi <= lo {
		return
	}
	off := lo - p
	adviseHuge(b[off : off+(hi-lo)])
}

// AdviseHugePagesOf is AdviseHugePages for a slice of floats.
func AdviseHugePagesOf[T float32 | float64 | complex64](x []T) {
	if len(x) == 0 {
		return
	}
	AdviseHugePages(unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), len(x)*int(unsafe.Sizeof(x[0]))))
}

// Product returns the product of n and the factors, or −1 when it does not
// fit in an int64 (or a factor is negative): for sizes from headers and
// flags, checked before anything is allocated.
func Mul(n int64, factors ...int64) int64 {
	if n < 0 {
		return -1
	}
	for _, f := range factors {
		if f < 0 {
			return -1
		}
		hi, lo := bits.Mul64(uint64(n), uint64(f))
		if hi != 0 || lo > math.MaxInt64 {
			return -1
		}
		n = int64(lo)
	}
	return n
}
