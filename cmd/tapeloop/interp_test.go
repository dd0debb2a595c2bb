package main

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/tapeloop/tapeloop/graphs/interp"
	"github.com/tapeloop/tapeloop/internal/npy"
)

func TestInterpFlagsCoverConfig(t *testing.T) {
	checkFlagsCover(t, interpCommand, interp.Config{}, func(c *cli.Context) (any, error) { return interpSpec(c) }, nil)
}

// TestInterpReduceNoneSummary: with --reduce none the printed sum is that
// of every value written, and the line says so.
func TestInterpReduceNoneSummary(t *testing.T) {
	out := filepath.Join(t.TempDir(), "v.npy")
	stdout, stderr, code := run(t, "interp", "-q", "--reduce", "none", "--points", "37", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	_, v, err := npy.ReadAll64(out)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, x := range v {
		sum += x
	}
	var got float64
	if _, err := fmt.Sscanf(stdout[strings.LastIndex(stdout, ": ")+2:], "%g", &got); err != nil ||
		!strings.HasPrefix(stdout, "interp: sum of all M values over 37 queries") || math.Abs(got-sum) > 1e-6*math.Abs(sum) {
		t.Errorf("stdout %q: want the sum of all M values, %v", stdout, sum)
	}
}
