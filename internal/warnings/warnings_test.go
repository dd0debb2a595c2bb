package warnings

import (
	"strings"
	"testing"
)

func TestPrintf(t *testing.T) {
	var b strings.Builder
	Printf(&b, "%s: %d values", "--x", 3)
	if got, want := b.String(), "tapeloop: warning: --x: 3 values\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := Line("m"); got != "tapeloop: warning: m\n" {
		t.Errorf("Line: %q", got)
	}
}
