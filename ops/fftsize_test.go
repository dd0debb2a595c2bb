package ops

import (
	"math"
	"testing"
)

// isSmooth reports whether m's only prime factors are 2, 3 and 5.
func isSmooth(m int) bool {
	for _, f := range []int{2, 3, 5} {
		for m%f == 0 {
			m /= f
		}
	}
	return m == 1
}

// TestFFTSize: the smallest 5-smooth size at least m, against a search of
// every number from m, and at sizes far past memory (a huge wavelet scale
// is refused at once, not after a search through billions).
func TestFFTSize(t *testing.T) {
	for m := 1; m <= 50000; m++ {
		want := m
		for !isSmooth(want) {
			want++
		}
		if got := FFTSize(m); got != want {
			t.Fatalf("FFTSize(%d) = %d, want %d", m, got, want)
		}
	}
	for _, m := range []int{1<<40 + 1, 6_000_000_007, 1 << 62, 3 * 5 * 1 << 55} {
		got := FFTSize(m)
		if got < m || !isSmooth(got) {
			t.Errorf("FFTSize(%d) = %d: not a 5-smooth size at least m", m, got)
		}
		if got < math.MaxInt/2 { // no smaller smooth size between m and got: check the near ones
			for v := m; v < min(got, m+100000); v++ {
				if isSmooth(v) {
					t.Errorf("FFTSize(%d) = %d, but %d is smaller", m, got, v)
					break
				}
			}
		}
	}
	if got := FFTSize(math.MaxInt); got != math.MaxInt {
		t.Errorf("FFTSize(MaxInt) = %d, want MaxInt (none fits)", got)
	}
	for _, c := range [][4]float64{{1e300, 0.3, 0.2, 5}, {1e155, 0, 0, 1}, {1e155, math.Pi / 2, 0, 1}, {1, 0, 0, 1e300}} {
		if h := HatSupport(c[0], c[1], c[2], c[3]); h != [3]int{maxHatSupport, maxHatSupport, maxHatSupport} && c[3] != 1e300 || h[0] != maxHatSupport {
			t.Errorf("HatSupport(a %g, θ %g, φ %g, ξ %g) = %v, want half-widths bounded at %d", c[0], c[1], c[2], c[3], h, maxHatSupport)
		}
	}
}
