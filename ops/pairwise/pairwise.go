package pairwise

import (
	"fmt"
	"hash"
	"math"
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/parallel"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/ops"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// Pairwise is the Gorgonia op that computes a built-in metric between a
// block of Batch images, given as rows (Batch, D) with their row indices
// (Batch,) float64, and all N images: output (Batch, N) (see pairBlocks
// for Upper and RowsFromData). Every metric runs on the blocked kernels of
// package cpukern (dot products for dot and cosine, and for float32 l2
// where the packed matrix product runs; distances for l1 and l2
// otherwise; no BLAS is linked). The working set is the block, its
// (Batch, N) output and the shared (N, D) images; no (Batch, N, D)
// difference array exists. A user's formula is PairwiseFormula's, 8-bit
// images PairwiseU8's.
type Pairwise struct {
	pairBlocks

	Metric Metric
	// TF32 lets the GPU twin's dot products use TF32 tensor cores (about
	// 1e-3 relative); the CPU ignores it.
	TF32 bool

	matrix []float32 // WriteFull's (N, N) matrix, or nil
	tiles  dotTiles  // the packed matrix product's buffers
}

// NewPairwise returns the op for blocks of batch rows of data's float32
// or float64 images.
func NewPairwise(data *PairData, metric Metric, batch int) *Pairwise {
	b := newPairBlocks(data, batch)
	if data.U8 != nil {
		panic("ops: Pairwise over 8-bit images (PairwiseU8 computes them)")
	}
	if metric == MetricCosine && data.norm == nil {
		panic("ops: Pairwise cosine over data prepared without norms")
	}
	return &Pairwise{pairBlocks: b, Metric: metric}
}

// WriteFull makes a symmetric run's blocks go straight into full, the
// whole (N, N) float32 matrix, where the CPU runs its dot products on the
// packed matrix product (AVX-512): each block's rows from the diagonal
// on, and their transposes into the rows below it, each tile's copied by
// the core that computed it while the tile is in its cache, so that the
// copies (and the first writes to the matrix's pages) overlap the other
// cores' products. The op's own output is then not written. It needs
// Upper, RowsFromData and the dot metric; it asks the kernel to back full
// with huge pages.
func (op *Pairwise) WriteFull(full []float32) bool {
	d := op.Data
	if !op.Upper || !op.RowsFromData || op.Metric != MetricDot || d.Dtype != tensor.Float32 || !cpukern.GEMM() ||
		len(full) != d.N*d.N {
		return false
	}
	op.matrix = full
	sysmem.AdviseHugePagesOf(full)
	return true
}

// Do computes the block's affinities into the op's own buffer, or with
// WriteFull into the matrix.
func (op *Pairwise) Do(in ...G.Value) (G.Value, error) {
	rows, lo, m, c0, err := op.block(in)
	if err != nil {
		return nil, err
	}
	if op.matrix != nil { // the rows lo… from the diagonal on, and their mirror images
		d := op.Data
		if !op.tiles.run(d.X32[lo*d.D:], d.X32[c0*d.D:], m, d.N-c0, d.D, nil, op.matrix[c0*d.N+c0:], d.N, true, d.N-c0, op.Stopped) && d.packChecked {
			d.packedNonFinite(lo, m)
		}
		if op.Stopped() {
			return nil, ops.ErrStopped
		}
		return nil, nil
	}
	d, out := op.Data, op.output()
	// With the rows read from the images, an upper block is the images
	// c0, c0+1, …: symmetric about its diagonal.
	upper := op.Upper && rows == nil
	// With the rows read from the images, row r is image lo+r, its own
	// column lo+r; from a rows input, none is known.
	self := -1
	if rows == nil {
		self = lo
	}
	switch d.Dtype {
	case tensor.Float32:
		if !pairBlock(op, c0, m, upper, self, blockRows(rows, d.X32, lo, m, d.D), d.X32, out.Data().([]float32), cpukern.PairDist32) &&
			d.packChecked && rows == nil {
			d.packedNonFinite(lo, m)
		}
	case tensor.Float64:
		pairBlock(op, c0, m, upper, self, blockRows(rows, d.X64, lo, m, d.D), d.X64, out.Data().([]float64), cpukern.PairDist64)
	}
	return op.finish()
}

// rowNorm is ‖row‖, summed in float64 in order, as PairData's norms.
func rowNorm[T float32 | float64](row []T) float64 {
	var ss float64
	for _, v := range row {
		ss += float64(v) * float64(v)
	}
	return math.Sqrt(ss)
}

// pairBlock fills columns [c0, N) of the block's first b rows. With
// upper, the rows are images c0, c0+1, … (the upper block of a symmetric
// matrix), and a pair below the diagonal, (c0+r, c0+j) with j < r, is
// (c0+j, c0+r) of an earlier row of the block. self ≥ 0 says the rows
// are images self, self+1, … (read from the data); −1, rows given. finite
// is false where the packed matrix product found a NaN or ±Inf among the
// rows it packed.
func pairBlock[T float32 | float64](op *Pairwise, c0, b int, upper bool, self int, rows, x, out []T,
	kernel func(m, n, d int, a []T, lda int, b []T, ldb int, out []T, ldo int, k cpukern.Kernel)) (finite bool) {
	n, dd := op.Data.N, op.Data.D
	nc := n - c0
	x = x[c0*dd:]
	k := cpukern.Dot
	switch op.Metric {
	case MetricL1:
		k = cpukern.L1
	case MetricL2:
		k = cpukern.L2
	}
	cosine := op.Metric == MetricCosine
	norm := op.Data.norm
	// Float32 l2 on the packed matrix product, as FAISS and BLAS-based
	// tools do, −(‖x_i‖² + ‖x_j‖² − 2·x_i·x_j) with the norms in float64,
	// but of the images less their mean mu (PairData.centre), subtracted
	// as the product packs them: the distances are the same, and the
	// products no longer carry the images' common offset, whose digits
	// the difference would lose.
	var zero T
	_, f32 := any(zero).(float32)
	l2 := k == cpukern.L2 && f32 && cpukern.GEMM() && op.Data.mu != nil
	var mu []float32
	if l2 {
		k = cpukern.Dot
		op.Data.ensureCentred()
		mu = op.Data.mu
	}
	chunk := rowChunk
	if k == cpukern.Dot {
		chunk = dotChunk
	}
	gemm := k == cpukern.Dot && f32 && cpukern.GEMM()
	finite = true
	if gemm && !op.Stopped() {
		// The packed matrix product; with upper, the upper triangle only,
		// and the pairs below the diagonal within the block copied from
		// their mirror images as each tile is done.
		r32, x32, o32 := any(rows).([]float32), any(x).([]float32), any(out).([]float32)
		finite = op.tiles.run(r32, x32, b, nc, dd, mu, o32[c0:], n, upper, min(b, nc), op.Stopped)
	}
	if gemm && !l2 && !cosine {
		return finite // the matrix product did it all
	}
	parallel.For(b, 4, func(lo, hi int) {
		if !gemm {
			byRows(lo, hi, chunk, op.Stopped, func(r, m int) {
				kernel(m, nc, dd, rows[r*dd:], dd, x, dd, out[r*n+c0:], n, k)
			})
		}
		if l2 {
			// Clamped at 0 (a squared distance, rounded), and exactly 0,
			// +0 as the direct kernels give it, for the image's own
			// column and for any image identical to the row's (same
			// norm, then the same values): a pair is computed the same
			// way whether its two images are one image or two copies,
			// as when a batch is compared with column images that repeat
			// it.
			sq := op.Data.sq[c0:]
			r32, x32 := any(rows).([]float32), any(x).([]float32)
			for i := lo; i < hi; i++ {
				var si float64
				diag := -1
				if self >= 0 {
					si, diag = op.Data.sq[self+i], self+i-c0
				} else {
					si = centredSq(r32[i*dd:(i+1)*dd], mu)
				}
				row := r32[i*dd : (i+1)*dd]
				o := out[i*n+c0 : (i+1)*n]
				for j := range o {
					if v := si + sq[j] - 2*float64(o[j]); v > 0 && j != diag &&
						(sq[j] != si || !slices.Equal(row, x32[j*dd:(j+1)*dd])) {
						o[j] = T(-v)
					} else {
						o[j] = 0
					}
				}
			}
			return
		}
		if !cosine {
			return
		}
		// dot/(‖x_i‖·‖x_j‖): the same bits for (i, j) and (j, i), the
		// dot products being symmetric, so that a pair mirrored in a
		// symmetric run is the pair computed in a shard's rows; and the
		// same for copies of an image, wherever they are.
		for i := lo; i < hi; i++ {
			ni := rowNorm(rows[i*dd : (i+1)*dd]) // padding rows are zero: NaN, discarded
			o := out[i*n+c0 : (i+1)*n]
			for j := range o {
				o[j] = T(float64(o[j]) / (ni * norm[c0+j]))
			}
		}
	})
	return finite
}

// upperSplit cuts columns [0, nc) of an upper block of b rows (column j
// holds the pairs of rows 0…min(j, b−1)) into w ranges of about equal
// pairs, at multiples of 32 (the matrix product's panel): cut[i] to
// cut[i+1] for i < w, cut[0] = 0, cut[w] = nc; ranges may be empty.
func upperSplit(nc, b, w int) []int {
	pairs := func(c int) float64 { // Σ_{j<c} min(j+1, b)
		t := min(c, b)
		return float64(t)*float64(t+1)/2 + float64(c-t)*float64(b)
	}
	total := pairs(nc)
	cut := make([]int, w+1)
	c := 0
	for i := 1; i < w; i++ {
		for c < nc && pairs(c) < total*float64(i)/float64(w) {
			c++
		}
		cut[i] = min(c+16, nc) / 32 * 32
		cut[i] = max(cut[i], cut[i-1])
	}
	cut[w] = nc
	return cut
}

// ResidentBytes is the size of the images the op compares against, and
// where it runs them (float32 dot products on AVX-512) the packed matrix
// product's buffers.
func (op *Pairwise) ResidentBytes() int64 {
	d := op.Data
	if d.Dtype == tensor.Float32 && d.U8 == nil && cpukern.GEMM() && op.Metric != MetricL1 {
		return d.Bytes() + op.tiles.bytes(op.Batch, d.D)
	}
	return d.Bytes()
}

// WriteHash writes every parameter of the op.
func (op *Pairwise) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "pairwise(%s,metric=%v,tf32=%v)", op.params(), op.Metric, op.TF32)
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *Pairwise) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *Pairwise) String() string {
	if op.Upper {
		return fmt.Sprintf("Pairwise{%v, N=%d, D=%d, upper}", op.Metric, op.Data.N, op.Data.D)
	}
	return fmt.Sprintf("Pairwise{%v, N=%d, D=%d}", op.Metric, op.Data.N, op.Data.D)
}
