package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"
)

// TestMapAdvisesHugePages: the mapping of an output is advised into huge
// pages (its VmFlags in /proc/self/smaps carry "hg"), so that filling a
// large matrix takes a fault per 2 MiB where the file system's cache
// allows, not one per 4 KiB page.
func TestMapAdvisesHugePages(t *testing.T) {
	f, err := Create(filepath.Join(t.TempDir(), "out.npy"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Abort()
	m, err := f.Map(5<<20 + 7)
	if errors.Is(err, ErrNoMap) {
		t.Skipf("this file system cannot map: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	flags, err := vmFlags(uintptr(unsafe.Pointer(&m[0])))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(" "+flags+" ", " hg ") {
		t.Errorf("the mapping's VmFlags are %q: no hg (MADV_HUGEPAGE)", flags)
	}
}

// vmFlags is the VmFlags line of the mapping that starts at addr.
func vmFlags(addr uintptr) (string, error) {
	s, err := os.Open("/proc/self/smaps")
	if err != nil {
		return "", err
	}
	defer s.Close()
	// Each mapping is its line "start-end perms …", then its fields, the
	// last of them VmFlags.
	start := fmt.Sprintf("%x-", addr)
	in := false
	sc := bufio.NewScanner(s)
	for sc.Scan() {
		line := sc.Text()
		in = in || strings.HasPrefix(line, start)
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmFlags:")), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("no mapping at %#x in /proc/self/smaps", addr)
}
