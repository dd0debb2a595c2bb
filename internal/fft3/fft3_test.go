package fft3

import (
	"math"
	"math/cmplx"
	"math/rand/v2"
	"testing"
)

// TestMatchesDefinition compares with the DFT sum written out.
func TestMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := [3]int{3, 5, 4}
	x := make([]complex128, 60)
	for i := range x {
		x[i] = complex(rng.NormFloat64(), rng.NormFloat64())
	}
	p := New(n[0], n[1], n[2])
	y := append([]complex128(nil), x...)
	p.Forward(y)
	for k0 := range n[0] {
		for k1 := range n[1] {
			for k2 := range n[2] {
				var s complex128
				for j0 := range n[0] {
					for j1 := range n[1] {
						for j2 := range n[2] {
							ph := -2 * math.Pi * (float64(k0*j0)/3 + float64(k1*j1)/5 + float64(k2*j2)/4)
							s += x[(j0*5+j1)*4+j2] * cmplx.Exp(complex(0, ph))
						}
					}
				}
				if d := cmplx.Abs(s - y[(k0*5+k1)*4+k2]); d > 1e-10 {
					t.Fatalf("coefficient (%d, %d, %d) off by %g", k0, k1, k2, d)
				}
			}
		}
	}
	p.Inverse(y)
	for i := range x {
		if cmplx.Abs(y[i]-x[i]) > 1e-12 {
			t.Fatalf("round trip element %d: %v, want %v", i, y[i], x[i])
		}
	}
}

func TestRealTransformsMatchComplex(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range [][3]int{{3, 5, 4}, {6, 7, 9}, {1, 1, 2}, {20, 3, 17}} {
		p := New(n[0], n[1], n[2])
		x := make([]float64, p.Len())
		c := make([]complex128, p.Len())
		for i := range x {
			x[i] = rng.NormFloat64()
			c[i] = complex(x[i], 0)
		}
		p.Forward(c)
		half := make([]complex128, p.HalfLen())
		p.ForwardReal(half, x)
		h := n[2]/2 + 1
		for i := range n[0] * n[1] {
			for k := range h {
				if d := cmplx.Abs(half[i*h+k] - c[i*n[2]+k]); d > 1e-9 {
					t.Fatalf("%v: coefficient %d,%d off by %g", n, i, k, d)
				}
			}
		}
		back := make([]float64, p.Len())
		p.InverseReal(back, half)
		for i := range x {
			if math.Abs(back[i]-x[i]) > 1e-12 {
				t.Fatalf("%v: round trip %d: %v, want %v", n, i, back[i], x[i])
			}
		}
	}
}

func TestInverseRealCrop(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	n := [3]int{9, 10, 8}
	p := New(n[0], n[1], n[2])
	x := make([]float64, p.Len())
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	half := make([]complex128, p.HalfLen())
	p.ForwardReal(half, x)
	got := make([]float64, p.Len())
	lo, size := [3]int{2, 3, 1}, [3]int{5, 4, 6}
	p.InverseRealCrop(got, half, lo, size)
	for i := lo[0]; i < lo[0]+size[0]; i++ {
		for j := lo[1]; j < lo[1]+size[1]; j++ {
			for k := lo[2]; k < lo[2]+size[2]; k++ {
				idx := (i*n[1]+j)*n[2] + k
				if math.Abs(got[idx]-x[idx]) > 1e-12 {
					t.Fatalf("(%d, %d, %d): %v, want %v", i, j, k, got[idx], x[idx])
				}
			}
		}
	}
}
