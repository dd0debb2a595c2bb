package cpukern

// #include "pairdist.h"
// #include "pairu8.h"
// #include "uniform.h"
//
// // u8_neon_level is the 8-bit kernels' NEON level on arm64 (2 UDOT, 1
// // plain NEON, 0 none), 0 elsewhere.
// static int u8_neon_level(void) {
// #if defined(__aarch64__)
//     return tl_pair_u8_neon_level();
// #else
//     return 0;
// #endif
// }
import "C"

import "runtime"

// Path is the code one kernel family runs on this CPU.
type Path struct {
	Family string `json:"family"`
	Path   string `json:"path"`
}

// Paths lists every kernel family of the package and the code it runs on
// this CPU, as chosen at run time: on x86-64 the widest of AVX-512, AVX2
// and SSE2 the CPU has; on arm64 NEON, hand-written for the matrix product
// and the pairwise kernels, elsewhere the portable C and GCC vector
// extensions compiled for it ("neon"); on other architectures the same
// code for their baseline ("generic").
func Paths() []Path {
	isa := PairDistISA()
	dot := isa + " vector kernels"
	switch {
	case GEMM() && runtime.GOARCH == "arm64":
		dot = "packed matrix product (neon, 8×12 tiles)"
	case GEMM():
		dot = "packed matrix product (avx512f)"
	}
	u8 := "portable loops (compiler-vectorised, " + runtime.GOARCH + ")"
	switch {
	case C.tl_pair_u8_vnni() != 0:
		u8 = "avx512-vnni"
	case C.u8_neon_level() == 2:
		u8 = "neon udot"
	case C.u8_neon_level() == 1:
		u8 = "neon (widening multiplies)"
	}
	drr := isa + ": Siddon and trilinear ray by ray"
	switch {
	case isa == "avx512f":
		drr = "avx512f: fans of rays (Siddon, trilinear), 16 trilinear rays per vector"
	case isa == "avx2":
		drr = "avx2: fans of rays (Siddon, trilinear)"
	case isaTop == isaBase: // the portable build: its trilinear fan path
		drr = isa + ": fans of rays (trilinear, 4 rays per vector), Siddon ray by ray"
	}
	uniform := "Go (math/rand/v2's PCG, 4 streams)"
	if C.tl_cpu_isa() == C.TL_ISA_AVX512 && C.tl_pcg_uniform_f64(0, nil, 0, 0, 0, 0) == 0 {
		uniform = "avx512dq"
	}
	return []Path{
		{"pairwise distances", isa},
		{"float32 dot products", dot},
		{"8-bit pairwise", u8},
		{"drr", drr},
		{"interpolation", isa},
		{"formulas", isa},
		{"wavelet spectra", isa},
		{"image filters", isa},
		{"built-in uniform queries", uniform},
	}
}
