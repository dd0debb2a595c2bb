package fft3

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// dft3 is the 3-D DFT written out as separable sums in float64: the
// reference every backend is held to.
func dft3(x []complex128, n [3]int, sign float64) []complex128 {
	y := append([]complex128(nil), x...)
	stride := [3]int{n[1] * n[2], n[2], 1}
	for a := range 3 {
		next := make([]complex128, len(y))
		for i := range y {
			k := i / stride[a] % n[a] // output index along a
			base := i - k*stride[a]
			var s complex128
			for j := range n[a] {
				ph := sign * 2 * math.Pi * float64(k*j%n[a]) / float64(n[a])
				s += y[base+j*stride[a]] * complex(math.Cos(ph), math.Sin(ph))
			}
			next[i] = s
		}
		y = next
	}
	return y
}

// relErr is the norm-wise relative error ‖got − want‖ / ‖want‖.
func relErr[T complex64 | float32](got []T, want []complex128) float64 {
	var num, den float64
	for i, w := range want {
		g := complex128Of(got[i])
		num += sqAbs(g - w)
		den += sqAbs(w)
	}
	return math.Sqrt(num / den)
}

func complex128Of[T complex64 | float32](v T) complex128 {
	switch v := any(v).(type) {
	case complex64:
		return complex128(v)
	case float32:
		return complex(float64(v), 0)
	}
	panic("unreachable")
}

func sqAbs(c complex128) float64 { return real(c)*real(c) + imag(c)*imag(c) }

// sizes mix radices 4, 2, 3, 5, primes (7, 13, 31, 97 take the DFT-sum
// butterfly), ones, odd and even last axes, lines not a multiple of the
// vector width.
var sizes = [][3]int{
	{1, 1, 1}, {1, 1, 2}, {3, 5, 4}, {6, 7, 9}, {20, 3, 17}, {8, 16, 32}, {5, 1, 13},
	{2, 31, 6}, {25, 18, 10}, {1, 97, 3}, {12, 9, 40}, {17, 33, 1},
}

// isas are the instruction sets this CPU can run, widest first.
func isas() []int {
	var s []int
	for i := int(maxISA); i >= 0; i-- {
		s = append(s, i)
	}
	return s
}

func TestComplexMatchesDFT(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, isa := range isas() {
		for _, n := range sizes {
			t.Run(fmt.Sprintf("isa%d/%v", isa, n), func(t *testing.T) {
				p := New(n[0], n[1], n[2])
				p.setISA(isa)
				x := make([]complex64, p.Len())
				ref := make([]complex128, p.Len())
				for i := range x {
					x[i] = complex(float32(rng.NormFloat64()), float32(rng.NormFloat64()))
					ref[i] = complex128(x[i])
				}
				y := append([]complex64(nil), x...)
				p.Forward(y)
				if e := relErr(y, dft3(ref, n, -1)); e > 3e-7 {
					t.Fatalf("forward: relative error %.3g", e)
				}
				p.Inverse(y)
				if e := relErr(y, ref); e > 3e-7 {
					t.Fatalf("round trip: relative error %.3g", e)
				}
			})
		}
	}
}

func TestRealMatchesDFT(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, isa := range isas() {
		for _, n := range sizes {
			t.Run(fmt.Sprintf("isa%d/%v", isa, n), func(t *testing.T) {
				p := New(n[0], n[1], n[2])
				p.setISA(isa)
				x := make([]float32, p.Len())
				ref := make([]complex128, p.Len())
				for i := range x {
					x[i] = float32(rng.NormFloat64())
					ref[i] = complex(float64(x[i]), 0)
				}
				full := dft3(ref, n, -1)
				h := n[2]/2 + 1
				want := make([]complex128, 0, p.HalfLen())
				for l := range n[0] * n[1] {
					want = append(want, full[l*n[2]:l*n[2]+h]...)
				}
				half := make([]complex64, p.HalfLen())
				for i := range half {
					half[i] = complex(float32(math.NaN()), 0) // every coefficient must be written
				}
				p.ForwardReal(half, x)
				if e := relErr(half, want); !(e <= 3e-7) {
					t.Fatalf("forward: relative error %.3g", e)
				}
				back := make([]float32, p.Len())
				p.InverseReal(back, half)
				if e := relErr(back, ref); !(e <= 3e-7) {
					t.Fatalf("round trip: relative error %.3g", e)
				}
			})
		}
	}
}

// A sparse array (a small kernel in a large one) skips its zero lines and
// planes; the transform must not notice.
func TestRealSparse(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	n := [3]int{24, 20, 18}
	p := New(n[0], n[1], n[2])
	x := make([]float32, p.Len())
	ref := make([]complex128, p.Len())
	for _, i := range []int{0, 1, 22, 23} {
		for _, j := range []int{0, 19} {
			for k := range 3 {
				v := float32(rng.NormFloat64())
				x[(i*n[1]+j)*n[2]+k] = v
				ref[(i*n[1]+j)*n[2]+k] = complex(float64(v), 0)
			}
		}
	}
	full := dft3(ref, n, -1)
	h := n[2]/2 + 1
	half := make([]complex64, p.HalfLen())
	for i := range half {
		half[i] = complex(float32(math.NaN()), 0)
	}
	p.ForwardReal(half, x)
	var want []complex128
	for l := range n[0] * n[1] {
		want = append(want, full[l*n[2]:l*n[2]+h]...)
	}
	if e := relErr(half, want); !(e <= 3e-7) {
		t.Fatalf("relative error %.3g", e)
	}
}

func TestInverseRealCrop(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, isa := range isas() {
		n := [3]int{9, 70, 8}
		p := New(n[0], n[1], n[2])
		p.setISA(isa)
		x := make([]float32, p.Len())
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		half := make([]complex64, p.HalfLen())
		p.ForwardReal(half, x)
		got := make([]float32, p.Len())
		lo, size := [3]int{2, 3, 1}, [3]int{5, 66, 6}
		p.InverseRealCrop(got, half, lo, size)
		for i := lo[0]; i < lo[0]+size[0]; i++ {
			for j := lo[1]; j < lo[1]+size[1]; j++ {
				for k := lo[2]; k < lo[2]+size[2]; k++ {
					idx := (i*n[1]+j)*n[2] + k
					if math.Abs(float64(got[idx]-x[idx])) > 1e-5 {
						t.Fatalf("isa %d (%d, %d, %d): %v, want %v", isa, i, j, k, got[idx], x[idx])
					}
				}
			}
		}
	}
}

// At the workload's size the error stays at float32 rounding.
func TestLargeRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("large transform")
	}
	rng := rand.New(rand.NewPCG(9, 10))
	n := [3]int{120, 100, 200}
	p := New(n[0], n[1], n[2])
	x := make([]float32, p.Len())
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	half := make([]complex64, p.HalfLen())
	p.ForwardReal(half, x)
	// Parseval: Σx² = (1/N) Σ_full |X|², the half spectrum counting the
	// coefficients it stands for twice.
	var sx, sX float64
	for _, v := range x {
		sx += float64(v) * float64(v)
	}
	h := n[2]/2 + 1
	for i, c := range half {
		k := i % h
		w := 2.0
		if k == 0 || (n[2]%2 == 0 && k == n[2]/2) {
			w = 1
		}
		sX += w * sqAbs(complex128(c))
	}
	sX /= float64(p.Len())
	if d := math.Abs(sX-sx) / sx; d > 1e-5 {
		t.Fatalf("Parseval: %g vs %g (%.3g)", sX, sx, d)
	}
	back := make([]float32, p.Len())
	p.InverseReal(back, half)
	var num, den float64
	for i := range x {
		d := float64(back[i] - x[i])
		num += d * d
		den += float64(x[i]) * float64(x[i])
	}
	if e := math.Sqrt(num / den); e > 1e-6 {
		t.Fatalf("round trip relative error %.3g", e)
	}
}

// BenchmarkRealRoundTrip200 times ForwardReal then InverseReal of a 200³
// array, with each instruction set this CPU runs.
func BenchmarkRealRoundTrip200(b *testing.B) {
	p := New(200, 200, 200)
	x := make([]float32, p.Len())
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	half := make([]complex64, p.HalfLen())
	for _, isa := range isas() {
		b.Run(fmt.Sprintf("isa%d", isa), func(b *testing.B) {
			p.setISA(isa)
			for b.Loop() {
				p.ForwardReal(half, x)
				p.InverseReal(x, half)
			}
		})
	}
}
