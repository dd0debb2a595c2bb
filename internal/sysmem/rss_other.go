//go:build unix && !linux && !darwin

package sysmem

import (
	"fmt"
	"runtime"
	"syscall"
)

// maxRSSBytes is getrusage's maxrss in bytes: the BSDs count KiB.
func maxRSSBytes(ru *syscall.Rusage) int64 { return int64(ru.Maxrss) << 10 }

// adviseHuge does nothing: transparent huge pages are Linux's.
func adviseHuge([]byte) {}

// memAvailable is not known here: a run needs --mem-limit.
func memAvailable() (int64, error) {
	return 0, fmt.Errorf("sysmem: the available memory is not known on %s: give --mem-limit", runtime.GOOS)
}
