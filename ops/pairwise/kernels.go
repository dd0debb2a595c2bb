package pairwise

// Launch specifications of the pairwise GPU twins' kernels
// (cuda/kernels/*.cu), as in package ops (its kernels.go): which kernel,
// its grid, and its arguments in order, generic in the pointer type P so
// that the GPU build passes device pointers and the emulator tests pass host
// buffers through the same argument lists. Integers are int64 and reals
// float64: every kernel parameter is 8 bytes wide.

import (
	"github.com/tapeloop/tapeloop/internal/formula"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// pairwiseLaunch computes columns c0… of the block's first m rows: b and
// out point at column c0 of the images and of the output row 0, norm at
// norm[c0]. Each block of threads computes a 128×128 tile, 8×8 per thread.
func pairwiseLaunch[P any](op *Pairwise, c0, m int, rows, b, out, rinv, norm P) launch {
	name := map[Metric]string{MetricL1: "pairwise_l1", MetricL2: "pairwise_l2", MetricDot: "pairwise_dot", MetricCosine: "pairwise_cosine"}[op.Metric]
	nc := op.Data.N - c0
	return launch{Kernel: name, GX: opkit.Blocks(nc, 128), GY: opkit.Blocks(m, 128), Block: 256, Args: []any{rows, int64(m), b, int64(nc),
		int64(op.Data.D), out, int64(op.Data.N), rinv, norm}}
}

// cosineScaleLaunch turns the dot products of the block's first m rows,
// columns c0… (out at column c0 of row 0, cnorm at norm[c0]), into cosines.
func cosineScaleLaunch[P any](op *Pairwise, c0, m int, out, rinv, cnorm P) launch {
	nc := op.Data.N - c0
	return launch{Kernel: "cosine_scale", GX: opkit.Blocks(m*nc, 256), GY: 1, Block: 256, Args: []any{out, int64(m), int64(nc),
		int64(op.Data.N), rinv, cnorm}}
}

// transposeLaunch writes the transpose of the rows×cols matrix at in
// (leading dimension ldi) to out (leading dimension ldo).
func transposeLaunch[P any](in P, ldi, rows, cols int, out P, ldo int) launch {
	return launch{Kernel: "transpose", GX: opkit.Blocks(cols, 32), GY: opkit.Blocks(rows, 32), Block: 256, Args: []any{in, int64(ldi), int64(rows), int64(cols), out, int64(ldo)}}
}

// topkLaunch selects the top k of each of m rows of the block at blk
// (leading dimension ldb, n columns, row r's own column self0+r skipped)
// into vals and idx, k per row: topk_rows for k ≤ 32 (128 threads a row),
// topk_rows128 up to 128 (a warp a row).
func topkLaunch[P any](blk P, ldb, m, n, k, self0 int, vals, idx P) launch {
	name, threads := "topk_rows", 128
	if k > 32 {
		name, threads = "topk_rows128", 32
	}
	return launch{Kernel: name, GX: m, GY: 1, Block: threads, Args: []any{blk, int64(ldb), int64(n), int64(k), int64(self0), vals, idx}}
}

// topkMax is the largest k the GPU selects.
const topkMax = 128

// pairFormulaLaunch computes a user's formula per pair (formula.CUDAPair's
// kernel k, compiled at run time): m rows at a (their values at ra)
// against the n images at b (their values at rb), d elements each, into
// out with rows ldo apart.
func pairFormulaLaunch[P any](k *formula.CUDAKernel, m, n, d, ldo int, a, b, ra, rb, out P) launch {
	return launch{Kernel: k.Name, GX: opkit.Blocks(n, k.PerBlock), GY: opkit.Blocks(m, k.RowsPerBlock), Block: k.Block, Args: []any{a, b, ra, rb, out, int64(m), int64(n), int64(d), int64(ldo)}}
}
