package pairwise

import (
	"fmt"
	"hash"
	"math"
	"runtime"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/parallel"
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

// Do computes the block's affinities into the op's own buffer.
func (op *Pairwise) Do(in ...G.Value) (G.Value, error) {
	rows, lo, m, c0, err := op.block(in)
	if err != nil {
		return nil, err
	}
	d, out := op.Data, op.output()
	// With the rows read from the images, an upper block is the images
	// c0, c0+1, …: symmetric about its diagonal.
	upper := op.Upper && rows == nil
	switch d.Dtype {
	case tensor.Float32:
		pairBlock(op, c0, m, upper, blockRows(rows, d.X32, lo, m, d.D), d.X32, out.Data().([]float32), cpukern.PairDist32)
	case tensor.Float64:
		pairBlock(op, c0, m, upper, blockRows(rows, d.X64, lo, m, d.D), d.X64, out.Data().([]float64), cpukern.PairDist64)
	}
	return op.finish()
}

// invNorm is 1/‖row‖, summed in float64.
func invNorm[T float32 | float64](row []T) float64 {
	var ss float64
	for _, v := range row {
		ss += float64(v) * float64(v)
	}
	return 1 / math.Sqrt(ss)
}

// minParallel is the work, in pair-dimensions, below which an upper block's
// matrix product runs on one core: about 0.1 ms there, less than what
// waking idle cores costs a caller that calls block after block from
// outside Go.
const minParallel = 1 << 22

// pairBlock fills columns [c0, N) of the block's first b rows. With
// upper, the rows are images c0, c0+1, … (the upper block of a symmetric
// matrix), and a pair below the diagonal, (c0+r, c0+j) with j < r, is
// (c0+j, c0+r) of an earlier row of the block.
func pairBlock[T float32 | float64](op *Pairwise, c0, b int, upper bool, rows, x, out []T,
	kernel func(m, n, d int, a []T, lda int, b []T, ldb int, out []T, ldo int, k cpukern.Kernel)) {
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
	// tools do: −(‖x_i‖² + ‖x_j‖² − 2·x_i·x_j), the norms in float64.
	var zero T
	_, f32 := any(zero).(float32)
	l2 := k == cpukern.L2 && f32 && cpukern.GEMM() && op.Data.sq != nil
	if l2 {
		k = cpukern.Dot
	}
	chunk := rowChunk
	if k == cpukern.Dot {
		chunk = dotChunk
	}
	gemm := k == cpukern.Dot && f32 && cpukern.GEMM()
	switch {
	case gemm && upper && !op.Stopped():
		// The upper triangle only, each core a range of columns holding
		// an equal share of its pairs, then the pairs below the diagonal
		// copied from their mirror images.
		r32, x32, o32 := any(rows).([]float32), any(x).([]float32), any(out).([]float32)
		workers := runtime.GOMAXPROCS(0)
		if float64(b)*float64(nc)*float64(dd)/2 < minParallel {
			workers = 1 // waking the other cores would cost more than it saves
		}
		cut := upperSplit(nc, b, workers)
		parallel.For(len(cut)-1, 1, func(w0, w1 int) {
			for w := w0; w < w1; w++ {
				for r := 0; r < min(b, cut[w+1]) && !op.Stopped(); r += dotChunk * 2 {
					clo, chi := max(cut[w], r), cut[w+1]
					m := min(dotChunk*2, b-r, chi-r)
					cpukern.DotUpper32(m, chi-clo, dd, r32[r*dd:], dd, x32[clo*dd:], dd, o32[r*n+c0+clo:], n, clo-r)
				}
			}
		})
		parallel.For(b, 64, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				o := out[r*n+c0 : r*n+c0+r]
				for j := range o {
					o[j] = out[j*n+c0+r]
				}
			}
		})
	case gemm && !op.Stopped():
		byColumns(b, nc, op.Stopped, func(clo, chi, r, m int) {
			kernel(m, chi-clo, dd, rows[r*dd:], dd, x[clo*dd:], dd, out[r*n+c0+clo:], n, k)
		})
	}
	if gemm && !l2 && !cosine {
		return // the matrix product did it all
	}
	parallel.For(b, 4, func(lo, hi int) {
		if !gemm {
			byRows(lo, hi, chunk, op.Stopped, func(r, m int) {
				kernel(m, nc, dd, rows[r*dd:], dd, x, dd, out[r*n+c0:], n, k)
			})
		}
		if l2 {
			sq := op.Data.sq[c0:]
			for i := lo; i < hi; i++ {
				var si float64
				for _, v := range rows[i*dd : (i+1)*dd] {
					si += float64(v) * float64(v)
				}
				o := out[i*n+c0 : (i+1)*n]
				for j := range o {
					o[j] = T(-(si + sq[j] - 2*float64(o[j])))
				}
			}
			return
		}
		if !cosine {
			return
		}
		for i := lo; i < hi; i++ {
			ri := invNorm(rows[i*dd : (i+1)*dd]) // padding rows are zero: Inf, discarded
			o := out[i*n+c0 : (i+1)*n]
			for j := range o {
				o[j] = T(float64(o[j]) * ri / norm[c0+j])
			}
		}
	})
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

// ResidentBytes is the size of the images the op compares against.
func (op *Pairwise) ResidentBytes() int64 { return op.Data.Bytes() }

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
