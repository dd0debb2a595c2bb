package cpukern

import (
	"fmt"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"testing"
)

// hatB returns B = Rᵀ·diag((a·ξ)², a², a²)·R for a random rotation R, and
// M = B⁻¹.
func hatB(rng *rand.Rand, a, xi float64) (b, m [3][3]float64) {
	// A random rotation: Gram–Schmidt on a random matrix.
	var r [3][3]float64
	for i := range 3 {
		for {
			for k := range 3 {
				r[i][k] = rng.NormFloat64()
			}
			for j := range i {
				d := r[i][0]*r[j][0] + r[i][1]*r[j][1] + r[i][2]*r[j][2]
				for k := range 3 {
					r[i][k] -= d * r[j][k]
				}
			}
			if n := math.Sqrt(r[i][0]*r[i][0] + r[i][1]*r[i][1] + r[i][2]*r[i][2]); n > 0.1 {
				for k := range 3 {
					r[i][k] /= n
				}
				break
			}
		}
	}
	d := [3]float64{a * a * xi * xi, a * a, a * a}
	for i := range 3 {
		for j := range 3 {
			for k := range 3 {
				b[i][j] += r[k][i] * d[k] * r[k][j]
				m[i][j] += r[k][i] / d[k] * r[k][j]
			}
		}
	}
	return b, m
}

// TestHatMul compares HatMul's spectrum with a float64 discrete Fourier
// transform of the hat sampled on the grid far past its support and
// wrapped around the array, on odd and even sizes and scales small enough
// (a = 0.7) that several aliases of each coefficient count.
func TestHatMul(t *testing.T) {
	top := tl()
	defer limitISA(top)
	for isa := top; isa >= isaBase; isa-- {
		limitISA(isa)
		testHatMul(t, isa)
	}
}

func testHatMul(t *testing.T, isa int) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		p     [3]int
		a, xi float64
	}{
		{[3]int{9, 10, 11}, 0.7, 2.5},
		{[3]int{12, 7, 16}, 1.3, 0.6},
		{[3]int{16, 16, 13}, 2.1, 1},
	} {
		b, m := hatB(rng, tc.a, tc.xi)
		p := tc.p
		// The kernel, sampled wherever q ≤ 400, wrapped.
		ker := make([]float64, p[0]*p[1]*p[2])
		var lim [3]int
		for i := range 3 {
			lim[i] = int(math.Ceil(math.Sqrt(400 * b[i][i])))
		}
		for x := -lim[0]; x <= lim[0]; x++ {
			for y := -lim[1]; y <= lim[1]; y++ {
				for z := -lim[2]; z <= lim[2]; z++ {
					u := [3]float64{float64(x), float64(y), float64(z)}
					var q float64
					for i := range 3 {
						for j := range 3 {
							q += u[i] * m[i][j] * u[j]
						}
					}
					ker[((x%p[0]+p[0])%p[0]*p[1]+(y%p[1]+p[1])%p[1])*p[2]+(z%p[2]+p[2])%p[2]] += (3 - q) * math.Exp(-q/2)
				}
			}
		}
		var energy float64
		for _, v := range ker {
			energy += v * v
		}
		h := p[2]/2 + 1
		spec := make([]complex64, p[0]*p[1]*h)
		for i := range spec {
			spec[i] = complex(float32(rng.NormFloat64()), float32(rng.NormFloat64()))
		}
		dst := make([]complex64, len(spec))
		bb := [6]float64{b[0][0], b[0][1], b[0][2], b[1][1], b[1][2], b[2][2]}
		scratch := make([]float64, p[2]/2+16)
		// In two pieces along each of the first two axes.
		parts, gparts := make([]float64, 2*p[1]), make([]float64, 2*p[1])
		dc := math.NaN()
		for q, i := range [][2]int{{0, 2}, {2, p[0]}} {
			HatMul(dst, spec, p, i[0], i[1], 0, 3, bb, scratch, parts[q*p[1]:], gparts[q*p[1]:], &dc)
			HatMul(dst, spec, p, i[0], i[1], 3, p[1], bb, scratch, parts[q*p[1]+3:], gparts[q*p[1]+3:], &dc)
		}
		// All rows in one call, with the product and without: the same
		// sums, bit for bit.
		parts1, gparts1 := make([]float64, p[1]), make([]float64, p[1])
		parts2, gparts2 := make([]float64, p[1]), make([]float64, p[1])
		dc1, dc2 := math.NaN(), math.NaN()
		HatMul(make([]complex64, len(spec)), spec, p, 0, p[0], 0, p[1], bb, scratch, parts1, gparts1, &dc1)
		HatMul(nil, spec, p, 0, p[0], 0, p[1], bb, scratch, parts2, gparts2, &dc2)
		if dc1 != dc2 || fmt.Sprint(parts1, gparts1) != fmt.Sprint(parts2, gparts2) {
			t.Errorf("isa %d, %v: without the product Σ g %v, rows %v %v; with it %v, %v %v", isa, p, dc2, parts2, gparts2, dc1, parts1, gparts1)
		}
		var got float64
		for _, e := range parts {
			got += e
		}
		got /= float64(p[0] * p[1] * p[2])
		var peak, worst, gwant float64
		var dcwant float64
		for k0 := range p[0] {
			for k1 := range p[1] {
				for k2 := range h {
					var want complex128
					for x := range p[0] {
						for y := range p[1] {
							for z := range p[2] {
								ph := -2 * math.Pi * (float64(k0*x)/float64(p[0]) + float64(k1*y)/float64(p[1]) + float64(k2*z)/float64(p[2]))
								want += complex(ker[(x*p[1]+y)*p[2]+z], 0) * cmplx.Exp(complex(0, ph))
							}
						}
					}
					i := (k0*p[1]+k1)*h + k2
					want *= complex128(spec[i])
					// Each coefficient stands for itself and its mirror
					// image, but the first and (p[2] even) the last of a
					// row.
					wt := 2.0
					if k2 == 0 || 2*k2 == p[2] {
						wt = 1
					}
					gwant += wt * real(want*cmplx.Conj(want))
					if i == 0 {
						dcwant = real(want)
					}
					peak = max(peak, cmplx.Abs(want))
					worst = max(worst, cmplx.Abs(complex128(dst[i])-want))
				}
			}
		}
		if worst > 1e-6*peak {
			t.Errorf("isa %d, %v a=%g ξ=%g: spectrum off by %.3g of its peak %.3g", isa, p, tc.a, tc.xi, worst/peak, peak)
		}
		if math.Abs(got-energy) > 1e-7*energy {
			t.Errorf("isa %d, %v a=%g ξ=%g: Σψ² %.12g, want %.12g", isa, p, tc.a, tc.xi, got, energy)
		}
		var ggot, galone float64
		for _, e := range gparts {
			ggot += e
		}
		for _, e := range gparts2 {
			galone += e
		}
		if math.Abs(ggot-gwant) > 1e-6*gwant || math.Abs(galone-gwant) > 1e-6*gwant {
			t.Errorf("isa %d, %v a=%g ξ=%g: Σ |spec·ψ̂|² %.12g (without the product %.12g), want %.12g", isa, p, tc.a, tc.xi, ggot, galone, gwant)
		}
		if math.Abs(dc-dcwant) > 1e-6*peak {
			t.Errorf("isa %d, %v a=%g ξ=%g: spec(0)·ψ̂(0) %.12g, want %.12g", isa, p, tc.a, tc.xi, dc, dcwant)
		}
		t.Logf("isa %d, %v a=%g ξ=%g: spectrum within %.2g of its peak, Σψ² within %.2g", isa, p, tc.a, tc.xi, worst/peak, math.Abs(got-energy)/energy)
	}
}

// TestBlockSums compares BlockSums with plain loops, on rows of odd
// lengths inside a wider array, and with a NaN; the sums alone and the
// maximum alone leave the other entries as they were.
func TestBlockSums(t *testing.T) {
	top := tl()
	defer limitISA(top)
	for isa := top; isa >= isaBase; isa-- {
		limitISA(isa)
		testBlockSums(t)
	}
}

func testBlockSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, n2 := range []int{1, 7, 16, 33, 101} {
		ld, n1 := n2+5, 13
		x := make([]float32, n1*ld)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 3)
		}
		var s, q float64
		m := math.Inf(-1)
		for j := range n1 {
			for _, v := range x[j*ld : j*ld+n2] {
				g := float64(v)
				s, q, m = s+g, q+g*g, max(m, g)
			}
		}
		got := make([]float64, 3)
		BlockSums(got, x, ld, n1, n2, SumsMax)
		if math.Abs(got[0]-s) > 1e-12*q || math.Abs(got[1]-q) > 1e-12*q || got[2] != m {
			t.Errorf("n2=%d: got %v, want %v %v %v", n2, got, s, q, m)
		}
		mark := -12345.0
		only := []float64{mark, mark, mark}
		BlockSums(only, x, ld, n1, n2, SumsOnly)
		if only[0] != got[0] || only[1] != got[1] || only[2] != mark {
			t.Errorf("n2=%d: the sums alone %v, want %v %v and the mark", n2, only, got[0], got[1])
		}
		only = []float64{mark, mark, mark}
		BlockSums(only, x, ld, n1, n2, MaxOnly)
		if only[0] != mark || only[1] != mark || only[2] != m {
			t.Errorf("n2=%d: the maximum alone %v, want the marks and %v", n2, only, m)
		}
		x[(n1/2)*ld+n2/2] = float32(math.NaN())
		if BlockSums(got, x, ld, n1, n2, SumsMax); !math.IsNaN(got[0]) || !math.IsNaN(got[2]) {
			t.Errorf("n2=%d: with a NaN got %v", n2, got)
		}
	}
}

// TestHalfEnergy: the half spectrum of a random real array of odd and
// even sizes, by a float64 discrete Fourier transform written out; the
// parts of HalfEnergy over all rows, in two uneven calls, over the
// array's size is Σ x² (Parseval) to float32's rounding of the
// coefficients.
func TestHalfEnergy(t *testing.T) {
	top := tl()
	defer limitISA(top)
	rng := rand.New(rand.NewPCG(13, 14))
	for _, p := range [][3]int{{5, 4, 7}, {3, 6, 8}, {7, 5, 1}, {4, 3, 2}, {3, 5, 37}} {
		x := make([]float64, p[0]*p[1]*p[2])
		var want float64
		for i := range x {
			x[i] = rng.NormFloat64() + 0.5
			want += x[i] * x[i]
		}
		h := p[2]/2 + 1
		c := make([]complex64, p[0]*p[1]*h)
		for k0 := range p[0] {
			for k1 := range p[1] {
				for k2 := range h {
					var s complex128
					for i := range p[0] {
						for j := range p[1] {
							for l := range p[2] {
								ph := -2 * math.Pi * (float64(k0*i)/float64(p[0]) + float64(k1*j)/float64(p[1]) + float64(k2*l)/float64(p[2]))
								s += complex(x[(i*p[1]+j)*p[2]+l], 0) * cmplx.Exp(complex(0, ph))
							}
						}
					}
					c[(k0*p[1]+k1)*h+k2] = complex64(s)
				}
			}
		}
		for isa := top; isa >= isaBase; isa-- {
			limitISA(isa)
			parts := make([]float64, p[1])
			cut := p[1] / 3
			HalfEnergy(parts[:cut], c, p, 0, cut)
			HalfEnergy(parts[cut:], c, p, cut, p[1])
			var got float64
			for _, e := range parts {
				got += e
			}
			got /= float64(len(x))
			if math.Abs(got-want) > 1e-6*want {
				t.Errorf("isa %d, %v: Σ |c|²/L = %.9g, Σ x² = %.9g", isa, p, got, want)
			}
			// One call for all rows gives the same parts, bit for bit.
			whole := make([]float64, p[1])
			HalfEnergy(whole, c, p, 0, p[1])
			for j := range whole {
				if whole[j] != parts[j] {
					t.Errorf("isa %d, %v: row %d's part %v in one call, %v in two", isa, p, j, whole[j], parts[j])
				}
			}
		}
	}
}

// BenchmarkHatMul times the hat's spectrum times a volume's, one thread,
// for a 200³ transform at the scales of the wavelet benchmark (a = 1:
// several aliases near the edges of each row; a = 4: the first only),
// row by row along the second axis through every plane, as the inverse
// transform asks for them; and the sums alone, without the product.
func BenchmarkHatMul(b *testing.B) {
	rng := rand.New(rand.NewPCG(11, 12))
	p := [3]int{200, 200, 200}
	spec := make([]complex64, p[0]*p[1]*(p[2]/2+1))
	for i := range spec {
		spec[i] = complex(float32(rng.NormFloat64()), float32(rng.NormFloat64()))
	}
	dst := make([]complex64, len(spec))
	scratch, energy := make([]float64, p[2]/2+16), make([]float64, p[1])
	for _, a := range []float64{1, 4} {
		bm, _ := hatB(rng, a, 2)
		bb := [6]float64{bm[0][0], bm[0][1], bm[0][2], bm[1][1], bm[1][2], bm[2][2]}
		b.Run(fmt.Sprintf("a=%g", a), func(b *testing.B) {
			for b.Loop() {
				for j := range p[1] {
					HatMul(dst, spec, p, 0, p[0], j, j+1, bb, scratch, energy[j:], nil, nil)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spec)), "ns/coefficient")
		})
		// The sums alone (no product written), 25 rows along the second
		// axis at a time, as a sweep of the energy and std alone runs it.
		genergy := make([]float64, p[1])
		var dc float64
		b.Run(fmt.Sprintf("a=%g/sums", a), func(b *testing.B) {
			for b.Loop() {
				for j := 0; j < p[1]; j += 25 {
					HatMul(nil, spec, p, 0, p[0], j, j+25, bb, scratch, energy[j:], genergy[j:], &dc)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spec)), "ns/coefficient")
		})
	}
}
