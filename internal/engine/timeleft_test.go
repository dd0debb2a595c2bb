package engine

import (
	"testing"
	"time"
)

// TestTimeLeft: the time left goes by the cost still to run: 10 s spent
// on a quarter of the cost leaves 30 s.
func TestTimeLeft(t *testing.T) {
	for _, c := range []struct {
		elapsed     time.Duration
		done, total float64
		want        string
	}{
		{10 * time.Second, 25, 100, "~30s left"},
		{90 * time.Second, 3, 4, "~30s left"},
		{time.Second, 0, 4, "time left unknown"},
		{time.Minute, 1, 121, "~2h0m0s left"},
	} {
		if got := timeLeft(c.elapsed, c.done, c.total); got != c.want {
			t.Errorf("timeLeft(%v, %v, %v) = %q, want %q", c.elapsed, c.done, c.total, got, c.want)
		}
	}
}
