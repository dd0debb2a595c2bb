// Package cpukern holds tapeloop's CPU kernels written in C and compiled
// by cgo. On x86-64 each family is compiled for AVX-512, AVX2 and SSE2
// and picks the widest the CPU has at run time; on every other
// architecture (isa.h) each compiles its portable path alone, plain C and
// GCC vector extensions, which on arm64 GCC turns into NEON code: the
// level TL_ISA_BASE, named "neon" there and "generic" elsewhere. Each file
// has one selector per family (a switch on tl_cpu_isa()), where a kernel
// for another instruction set hooks in; Paths names what runs.
//
//   - pairdist.c: blocked pairwise kernels (negative L1 and squared-L2
//     distances, dot products) behind the affinity workload, built for
//     AVX-512, AVX2 and SSE2 with GCC vector extensions and dispatched at
//     run time. No BLAS is linked: the dot kernel needs no system package, is immune to
//     OpenBLAS picking a slow kernel family for an unrecognised CPU, and
//     sums every pair in the same order wherever it sits in a block, so
//     shards of a matrix merge bit for bit with a single run.
//   - formula.c: the vectorised evaluator of users' formulas: a program
//     of simple instructions, each over a chunk of 512 elements with GCC
//     vector operators, built from formula_impl.h for each instruction
//     set and element type.
//   - gemm.c: the float32 dot products on AVX-512 as a packed,
//     cache-blocked matrix product (BLIS's design: panels packed for the
//     caches, a 14×32 register-blocked micro-kernel), with a block's rows
//     packed once and shared by the cores that compute its column tiles,
//     and the copy of a symmetric tile to its mirror image.
//   - drr.c: line integrals of a voxel volume along rays, exact (Siddon's
//     radiological path) or trilinearly sampled, behind the DRR workload;
//     drr_fan.c: the same for fans of rays that share their x and y (a
//     detector column along z), with AVX-512 and AVX2 paths that share the
//     x-y work across the fan and read voxels with contiguous loads, both
//     compiled from one template, drr_fan_impl.h, which elsewhere gives
//     the trilinear fans a portable path (NEON on arm64).
//   - drrgrad.c: the same line integrals in float64 with their
//     derivatives with respect to each ray's end points, for gradient-based
//     registration, and the adjoint with respect to the volume; trilinear
//     rays through a padded volume go 8 at a time through AVX-512 double
//     lanes with gathered voxels, else one by one (AVX2 and FMA, or SSE2).
//   - interp.c: cubic interpolation of M interpolants on a shared uniform
//     grid behind the interpolation workload: the sum of squares and the
//     sum per query from per-cell tables (a 4×4 Gram matrix, column sums)
//     with the queries across the vector lanes, and the M values, or their
//     sum or sum of squares, along the interpolants; written once in
//     interp_impl.h for AVX-512, AVX2 and SSE2, float and double.
//   - stats.c: a sum in float64 and a maximum in a fixed order of
//     additions (eight partial sums), the batch totals of the
//     interpolation and of streamed affinity rows.
package cpukern
