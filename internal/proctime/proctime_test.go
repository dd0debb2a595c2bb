package proctime

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The helper prints how long ago Started says the process began, and the
// test checks that against the wall time it measured around the whole
// process: the start cannot precede the parent's call to start it.
func TestStartedWithinTheProcessLife(t *testing.T) {
	if os.Getenv("PROCTIME_HELPER") == "1" {
		time.Sleep(30 * time.Millisecond)
		s, ok := Started()
		if !ok {
			os.Stdout.WriteString("unknown\n")
			os.Exit(0)
		}
		os.Stdout.WriteString(strconv.FormatInt(int64(time.Since(s)), 10) + "\n")
		os.Exit(0)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestStartedWithinTheProcessLife$")
	cmd.Env = append(os.Environ(), "PROCTIME_HELPER=1")
	began := time.Now()
	out, err := cmd.Output()
	wall := time.Since(began)
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	s := strings.TrimSpace(string(out))
	if s == "unknown" {
		t.Skip("the test binary runs no C constructors (internal linking)")
	}
	ns, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("helper printed %q", out)
	}
	if age := time.Duration(ns); age < 30*time.Millisecond || age > wall {
		t.Errorf("process age %v at its end: want at least the helper's 30 ms sleep and at most the %v the parent measured", age, wall)
	}
}
