package ops

// Launch specifications of the GPU twins' kernels (cuda/kernels/*.cu):
// which kernel, its grid, and its arguments in order. They are generic in
// the pointer type P so that the GPU build passes device pointers and the
// tests (emu_test.go, which runs the kernels on the CPU) pass host buffers
// through exactly the same argument lists. Integers are int64 and reals
// float64: every kernel parameter is 8 bytes wide.

import (
	"math"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/formula"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// What the interp1d_f32 kernel computes for each query, its argument mode:
// the values of enum interp_mode in cuda/kernels/interp.cu.
const (
	interpGram   int64 = 0 // Σ_j v_j² from the per-cell Gram entries
	interpColsum int64 = 1 // Σ_j v_j from the column sums
	interpSumSq  int64 = 2 // Σ_j v_j² over the table of values
	interpSum    int64 = 3 // Σ_j v_j over the table of values
	interpValues int64 = 4 // all M values
)

// interpMode selects the interp1d_f32 path for op, as the CPU op does.
func interpMode(op *Interp1D) int64 {
	t := op.Table
	switch {
	case op.Reduce == ReduceSumSq && t.gram != nil:
		return interpGram
	case op.Reduce == ReduceSum && t.colsum != nil:
		return interpColsum
	case op.Reduce == ReduceNone:
		return interpValues
	case op.Reduce == ReduceSumSq:
		return interpSumSq
	}
	return interpSum
}

func interpLaunch[P any](op *Interp1D, x, gram, colsum, fpT, out P) launch {
	t, g := op.Table, op.grid() // the grid in the queries' coordinate (Local)
	return launch{Kernel: "interp1d_f32", GX: opkit.Blocks(op.Batch, 256), GY: 1, Block: 256, Args: []any{x, int64(op.Batch), g.A, g.Dx, g.Ub, int64(t.G),
		int64(t.M), interpMode(op), gram, colsum, fpT, out}}
}

// interpGradMode selects the interp1d_grad_x_f32 path for op: the forward's
// (interpMode), except that values given as an input are read as a table
// of values (the twin has no Gram or column-sum tables of them).
func interpGradMode(op *Interp1DGrad) int64 {
	fwd := op.Fwd
	switch {
	case fwd.Reduce == ReduceNone:
		return interpValues
	case fwd.valuesIn && fwd.Reduce == ReduceSumSq:
		return interpSumSq
	case fwd.valuesIn:
		return interpSum
	}
	return interpMode(fwd)
}

// interpGradXLaunch computes the queries' gradient, one thread per query.
func interpGradXLaunch[P any](op *Interp1DGrad, x, up, gram, colsum, fpT, out P) launch {
	fwd := op.Fwd
	t, g := fwd.Table, fwd.grid()
	return launch{Kernel: "interp1d_grad_x_f32", GX: opkit.Blocks(fwd.Batch, 256), GY: 1, Block: 256, Args: []any{x, up, int64(fwd.Batch), g.A, g.Dx, g.Ub,
		int64(t.G), int64(t.M), interpGradMode(op), gram, colsum, fpT, out}}
}

// interpGradFLaunch computes the values' gradient, one thread per
// interpolant, summing in acc, (G+2, M) float64, into out, (M, G).
func interpGradFLaunch[P any](op *Interp1DGrad, x, up, fpT, acc, out P) launch {
	fwd := op.Fwd
	t, g := fwd.Table, fwd.grid()
	return launch{Kernel: "interp1d_grad_f_f32", GX: opkit.Blocks(t.M, 64), GY: 1, Block: 64, Args: []any{x, up, int64(fwd.Batch), g.A, g.Dx, g.Ub,
		int64(t.G), int64(t.M), interpGradMode(op), fpT, acc, out}}
}

// drrLaunch renders a batch of poses, given in the volume's own frame; v
// is the volume the kernel reads (padded for trilinear, as on the CPU),
// axis-aligned, of shape n, origin (the centre of voxel 0) and spacing.
// The kernel takes the box by its low corner, origin − spacing/2.
func drrLaunch[P any](op *DRR, n [3]int64, origin, spacing [3]float64, v, poses, img P) launch {
	c := volume.CornerOf(origin, spacing)
	return launch{Kernel: "drr", GX: opkit.Blocks(op.Batch*op.Rows*op.Cols, 128), GY: 1, Block: 128, Args: []any{v, n[0], n[1], n[2], c[0], c[1],
		c[2], spacing[0], spacing[1], spacing[2], poses, int64(op.Batch), int64(op.Rows), int64(op.Cols), op.Step, img}}
}

// wvBlocks bounds the blocks of the reducing kernels (and their partials).
const wvBlocks = 1024

// hatLaunch evaluates the kernel of (theta, phi, xi) into k, an array of
// dims p, wrapped around the origin; the per-block sums of ψ² go to part.
func hatLaunch[P any](a, theta, phi, xi float64, p [3]int, k, part P) launch {
	h := HatSupport(a, theta, phi, xi)
	r := hatRotation(theta, phi)
	taps := (2*h[0] + 1) * (2*h[1] + 1) * (2*h[2] + 1)
	return launch{Kernel: "hat_scatter", GX: min(opkit.Blocks(taps, 256), wvBlocks), GY: 1, Block: 256, Args: []any{k, int64(p[0]), int64(p[1]), int64(p[2]),
		int64(h[0]), int64(h[1]), int64(h[2]), a, xi, r[0][0], r[0][1], r[0][2], r[1][0], r[1][1], r[1][2], r[2][0],
		r[2][1], r[2][2], part}}
}

// hatSpectrumLaunch sets half, the half spectrum of a real array of dims p,
// to spec times the hat's spectrum in closed form (HatMul's), and writes
// per block its part of Σ ψ² to part.
func hatSpectrumLaunch[P any](a, theta, phi, xi float64, p [3]int, half, spec, part P) launch {
	b := hatB(a, theta, phi, xi)
	det := b[0][0]*(b[1][1]*b[2][2]-b[1][2]*b[1][2]) - b[0][1]*(b[0][1]*b[2][2]-b[0][2]*b[1][2]) + b[0][2]*(b[0][1]*b[1][2]-b[1][1]*b[0][2])
	c := math.Pow(2*math.Pi, 1.5) * math.Sqrt(det)
	thr := float64(cpukern.HatThreshold)
	// The ellipsoid ωᵀBω < thr lies in |ω_a| ≤ √(thr·M_aa), M = B⁻¹.
	m := [3]float64{b[1][1]*b[2][2] - b[1][2]*b[1][2], b[0][0]*b[2][2] - b[0][2]*b[0][2], b[0][0]*b[1][1] - b[0][1]*b[0][1]}
	n := p[0] * p[1] * (p[2]/2 + 1)
	return launch{Kernel: "hat_spectrum", GX: min(opkit.Blocks(n, 256), wvBlocks), GY: 1, Block: 256, Args: []any{half, spec, int64(p[0]), int64(p[1]), int64(p[2]),
		b[0][0], b[0][1], b[0][2], b[1][1], b[1][2], b[2][2], c, thr,
		math.Sqrt(thr * m[0] / det), math.Sqrt(thr * m[1] / det), math.Sqrt(thr * m[2] / det), 1 / float64(p[0]*p[1]*p[2]), part}}
}

// cmulLaunch multiplies n complex64 at a by those at b, in place.
func cmulLaunch[P any](a, b P, n int) launch {
	return launch{Kernel: "cmul", GX: opkit.Blocks(n, 256), GY: 1, Block: 256, Args: []any{a, b, int64(n)}}
}

// statsLaunch reduces the response g (an array of dims p) over the block
// [lo, lo+n), times scale: per block of threads, sum, sum of squares and
// maximum to part.
func statsLaunch[P any](g P, p, lo, n [3]int, scale float64, part P) launch {
	return launch{Kernel: "crop_stats", GX: min(opkit.Blocks(n[0]*n[1]*n[2], 256), wvBlocks), GY: 1, Block: 256, Args: []any{g, int64(p[1]), int64(p[2]),
		int64(lo[0]), int64(lo[1]), int64(lo[2]), int64(n[0]), int64(n[1]), int64(n[2]), scale, part}}
}

// reflectExtendLaunch extends the volume v of dims n into ext, of dims p,
// by half-sample symmetric reflection shifted by pad (transformVolume's
// extension).
func reflectExtendLaunch[P any](v P, n [3]int, ext P, p, pad [3]int) launch {
	return launch{Kernel: "reflect_extend", GX: min(opkit.Blocks(p[0]*p[1]*p[2], 256), 1<<16), GY: 1, Block: 256, Args: []any{v, int64(n[0]), int64(n[1]),
		int64(n[2]), ext, int64(p[0]), int64(p[1]), int64(p[2]), int64(pad[0]), int64(pad[1]), int64(pad[2])}}
}

// finishLaunch finishes one combination's partial sums on the device:
// nstat blocks' statistics at part, nhat blocks' ψ² sums at hat, into the
// four doubles at res.
func finishLaunch[P any](part P, nstat int, hat P, nhat int, res P) launch {
	return launch{Kernel: "finish_stats", GX: 1, GY: 1, Block: 256, Args: []any{part, int64(nstat), hat, int64(nhat), res}}
}

// mapFormulaLaunch applies a user's formula (formula.CUDAMap's kernel k,
// compiled at run time, over one input) to the n values at x, into out.
// The kernel strides over its grid: at most 4096 blocks.
func mapFormulaLaunch[P any](k *formula.CUDAKernel, n int, x, out P) launch {
	return launch{Kernel: k.Name, GX: max(1, min(opkit.Blocks(n, k.Block), 4096)), GY: 1, Block: k.Block, Args: []any{x, out, int64(n)}}
}

// filterRowsLaunch correlates the lines of n pixels at in (lines of them)
// with the taps w (nw of them) along the line, into out (filter_rows).
func filterRowsLaunch[P any](in, out P, lines, n int, w P, nw int, mode FilterMode) launch {
	return launch{Kernel: "filter_rows", GX: max(1, min(opkit.Blocks(lines*n, 256), 1<<16)), GY: 1, Block: 256, Args: []any{in, out, int64(lines),
		int64(n), w, int64(nw), int64(nw / 2), int64(mode)}}
}

// filterColsLaunch correlates down the columns of images rows×cols images
// at in with the taps w, into out (filter_cols).
func filterColsLaunch[P any](in, out P, images, rows, cols int, w P, nw int, mode FilterMode) launch {
	return launch{Kernel: "filter_cols", GX: max(1, min(opkit.Blocks(images*rows*cols, 256), 1<<16)), GY: 1, Block: 256, Args: []any{in, out,
		int64(images), int64(rows), int64(cols), w, int64(nw), int64(nw / 2), int64(mode)}}
}

// drrGradLaunch casts n rays of one view (its lref) through the kernels'
// volume kv (drr_grad): v its values, src and dst the rays' ends, into
// out and, when gsrc is not null, gsrc and gdst (3 per ray).
func drrGradLaunch[P any](kv *volume.Volume, n int, step, lref float64, v, src, dst, out, gsrc, gdst P) launch {
	c, s := kv.Corner(), kv.Spacing
	return launch{Kernel: "drr_grad", GX: opkit.Blocks(n, 128), GY: 1, Block: 128, Args: []any{v, kv.N[0], kv.N[1], kv.N[2], c[0], c[1], c[2],
		s[0], s[1], s[2], padFlag(kv), int64(n), src, dst, step, lref, out, gsrc, gdst}}
}

// drrBackLaunch adds the back-projection of g over n rays of one view
// to grad (drr_backproject: float64, kv's layout).
func drrBackLaunch[P any](kv *volume.Volume, n int, step, lref float64, src, dst, g, grad P) launch {
	c, s := kv.Corner(), kv.Spacing
	return launch{Kernel: "drr_backproject", GX: opkit.Blocks(n, 128), GY: 1, Block: 128, Args: []any{kv.N[0], kv.N[1], kv.N[2], c[0], c[1], c[2],
		s[0], s[1], s[2], padFlag(kv), int64(n), src, dst, step, lref, g, grad}}
}

func padFlag(kv *volume.Volume) int64 {
	if kv.Padded {
		return 1
	}
	return 0
}
