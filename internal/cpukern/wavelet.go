package cpukern

// The wavelet sweep's kernels of wavelet.c: the Mexican hat's spectrum in
// closed form, multiplied into the volume's, the sums of a response, and
// the energy of a spectrum.

// #include "wavelet.h"
import "C"

import (
	"math"
	"unsafe"
)

// HatThreshold is the s = ωᵀBω past which HatMul leaves a term out: its
// c·s·exp(−s/2) is below 1.1·10⁻⁷ of the transform's peak, float32's rounding, c·2/e.
const HatThreshold = 40

// HatMul sets dst, for the rows (i, j) with i in [i0, i1) and j in [j0, j1)
// of the half spectrum of a real array of dims p (p[0]·p[1]·(p[2]/2+1)
// coefficients, the last axis halved), to spec times the discrete
// transform of the Mexican hat ψ(u) = (3 − q)·exp(−q/2), q = uᵀB⁻¹u,
// sampled on the whole integer grid and wrapped around the array: the sum
// over the aliases m ∈ ℤ³ of (2π)^{3/2}·√det B·s·exp(−s/2),
// s = (ω+2πm)ᵀB(ω+2πm), computed in double and rounded to float32 in the
// product. b holds the symmetric positive definite B as b00 b01 b02 b11
// b12 b22, scratch at least p[2]/2 + 16 values. It sets energy[j−j0] to
// the rows' part of Σ ψ̂² over the whole spectrum (added over i in
// order); Σ ψ² over the periodised kernel is the total over all rows
// divided by p[0]·p[1]·p[2] (Parseval).
//
// With dst nil no product is written. With genergy not nil it sets
// genergy[j−j0] the same way to the rows' part of Σ |spec·ψ̂|² over the
// whole spectrum, computed in double from spec and ψ̂ (not from the
// rounded product), the same whether or not dst is written: over all rows,
// divided by p[0]·p[1]·p[2], Σ g² of the array g whose half spectrum the
// product is. With dc not nil and row (0, 0) among the rows, it sets *dc to
// the product's first coefficient, spec(0)·ψ̂(0), in double: Σ g.
func HatMul(dst, spec []complex64, p [3]int, i0, i1, j0, j1 int, b [6]float64, scratch, energy, genergy []float64, dc *float64) {
	h := p[2]/2 + 1
	if len(spec) < p[0]*p[1]*h || (dst != nil && len(dst) < len(spec)) || len(scratch) < p[2]/2+16 ||
		i0 < 0 || i1 > p[0] || j0 < 0 || j1 > p[1] || len(energy) < j1-j0 || (genergy != nil && len(genergy) < j1-j0) {
		panic("cpukern: HatMul: short buffers or rows outside the array")
	}
	if i0 >= i1 || j0 >= j1 {
		return
	}
	det := b[0]*(b[3]*b[5]-b[4]*b[4]) - b[1]*(b[1]*b[5]-b[2]*b[4]) + b[2]*(b[1]*b[4]-b[3]*b[2])
	if !(det > 0) || !(b[5] > 0) {
		panic("cpukern: HatMul: B is not positive definite")
	}
	c := math.Pow(2*math.Pi, 1.5) * math.Sqrt(det)
	var g *C.double
	var dp *C.float
	if dst != nil {
		dp = (*C.float)(unsafe.Pointer(&dst[0]))
	}
	if genergy != nil {
		g = (*C.double)(&genergy[0])
	}
	C.tl_hat_mul((*C.float)(unsafe.Pointer(&spec[0])), dp,
		C.int64_t(p[0]), C.int64_t(p[1]), C.int64_t(p[2]), C.int64_t(i0), C.int64_t(i1), C.int64_t(j0), C.int64_t(j1),
		C.double(b[0]), C.double(b[1]), C.double(b[2]), C.double(b[3]), C.double(b[4]), C.double(b[5]),
		C.double(c), HatThreshold, (*C.double)(&scratch[0]), (*C.double)(&energy[0]), g, (*C.double)(dc))
}

// What BlockSums computes: the sums Σ g and Σ g², the maximum, or both.
const (
	SumsOnly = 1
	MaxOnly  = 2
	SumsMax  = SumsOnly | MaxOnly
)

// BlockSums sets dst[0:3] to Σ g, Σ g² and max g, in float64, over the n1
// rows of n2 values at x[j·ld:], j < n1 (max is NaN where a value is);
// what (SumsOnly, MaxOnly or SumsMax) says which: the others are left as
// they were.
func BlockSums(dst []float64, x []float32, ld, n1, n2, what int) {
	if what < SumsOnly || what > SumsMax {
		panic("cpukern: BlockSums: what is not SumsOnly, MaxOnly or SumsMax")
	}
	if n1 <= 0 || n2 <= 0 {
		if what&SumsOnly != 0 {
			dst[0], dst[1] = 0, 0
		}
		if what&MaxOnly != 0 {
			dst[2] = math.Inf(-1)
		}
		return
	}
	if len(dst) < 3 || n2 > ld || (n1-1)*ld+n2 > len(x) {
		panic("cpukern: BlockSums: rows outside the array")
	}
	C.tl_block_sums((*C.float)(&x[0]), C.int64_t(ld), C.int64_t(n1), C.int64_t(n2), (*C.double)(&dst[0]), C.int(what))
}

// HalfEnergy sets dst[j−j0], for the rows j in [j0, j1) of every plane i,
// to their part of Σ |c|² over the whole spectrum of a real array of dims
// p whose half c is (p[0]·p[1]·(p[2]/2+1) coefficients, the last axis
// halved): a row's coefficients count twice but its first and, p[2] even,
// its last, whose mirror images are themselves. Each part is added over i
// in order, so it does not depend on how the rows are split between calls.
// By Parseval's theorem the total over all rows divided by
// p[0]·p[1]·p[2] is Σ x² over the array.
func HalfEnergy(dst []float64, c []complex64, p [3]int, j0, j1 int) {
	h := p[2]/2 + 1
	if len(c) < p[0]*p[1]*h || j0 < 0 || j1 > p[1] || len(dst) < j1-j0 {
		panic("cpukern: HalfEnergy: short buffers or rows outside the array")
	}
	if j0 >= j1 || p[0] == 0 {
		return
	}
	C.tl_half_energy((*C.float)(unsafe.Pointer(&c[0])), C.int64_t(p[0]), C.int64_t(p[1]), C.int64_t(p[2]),
		C.int64_t(j0), C.int64_t(j1), (*C.double)(&dst[0]))
}
