// Package testutil holds helpers shared by tapeloop's tests.
package testutil

import (
	"os/exec"
	"strings"
	"testing"
)

// Python returns a python3 that imports every module given (numpy, scipy…),
// preferring Debian's /usr/bin/python3, or skips the test or benchmark.
func Python(tb testing.TB, modules ...string) string {
	tb.Helper()
	stmt := "import " + strings.Join(modules, ", ")
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if err := exec.Command(py, "-c", stmt).Run(); err == nil {
			return py
		}
	}
	tb.Skipf("no python3 with %s (make test-deps installs python3-numpy python3-scipy)", strings.Join(modules, ", "))
	return ""
}
