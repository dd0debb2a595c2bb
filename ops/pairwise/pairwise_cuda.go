//go:build tapeloop_cuda || tapeloop_cudaemu

package pairwise

import (
	"fmt"
	"hash"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/cuda"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// pairwiseCUDA is Pairwise on a GPU: the N images resident on the device;
// per block of rows, l1 and l2 are a tiled kernel (128×128 output tiles,
// 8×8 per thread), dot and cosine a cuBLAS GEMM (TF32 tensor cores with the
// op's TF32). With RowsFromData the block's rows are read where they
// already are, among the resident images: nothing goes up per block. With
// Upper it computes the columns from the block's first row on, like the
// CPU op, and copies only those back (cuMemcpy2D); the host output keeps
// the other columns' earlier values, as the CPU op's does.
//
// The block is computed in chunks of rows on one stream and copied back on
// another, each chunk's copy ordered after its computation: the copy of
// one chunk overlaps the computation of the next, so the bus and the
// arithmetic units work at once. Two modes spare the host its share:
// WriteFull (a symmetric run's blocks go straight into the whole matrix,
// transposes included) and SelectTopK (the top k of each row selected on
// the device, only they come back).
type pairwiseCUDA struct {
	*Pairwise
	dev                       *cuda.Device
	arena                     *cuda.Arena
	blas                      *cuda.BLAS   // dot and cosine: cuBLAS GEMM
	comp, copy                *cuda.Stream // computation, and the copies back
	chunk                     int          // rows per chunk; 0: chunkRows's choice
	x, norm, rows, rinv, dout cuda.DevicePtr
	ws                        cuda.DevicePtr // cuBLAS workspace, in the arena
	full                      []float32      // WriteFull's matrix, or nil
	dT                        cuda.DevicePtr // with full: the transpose of a block's columns below it
	topK                      int            // SelectTopK's k, or 0
	dvals, didx               cuda.DevicePtr // with topK: k values and columns per row
	vals                      []float64
	top                       *tensor.Dense // with topK: (Batch, k) columns, as TopK's output
	rinvHost                  []float64
	pinned                    cuda.Pinned
	uploaded                  uint64 // the Data.Version() on the device
}

// SelectTopK makes the twin select the top k of each row on the device
// (topk_rows, k ≤ 128, whole rows read from the data: a row's own column
// is its index): k values and columns per row come
// back instead of the row. The block output then holds each row's k
// values at their columns, and TopIndices the columns.
func (op *pairwiseCUDA) SelectTopK(k int) bool {
	if op.Upper || !op.RowsFromData || k < 1 || k > topkMax || k >= op.Data.N || op.Data.N > 1<<31-1 || op.arena != nil {
		return false
	}
	op.topK = k
	return true
}

// TopIndices is the (Batch, k) float64 column indices of the last block.
func (op *pairwiseCUDA) TopIndices() *tensor.Dense { return op.top }

// WriteFull makes a symmetric run's blocks go straight into full, the
// whole (N, N) matrix (pinned at the first block): each block's rows from
// the diagonal on, and, transposed on the device, their columns beyond the
// block into the rows below it (cuMemcpy2D writes those as a column strip).
// The host then has nothing to mirror. It needs Upper and RowsFromData.
func (op *pairwiseCUDA) WriteFull(full []float32) bool {
	if !op.Upper || !op.RowsFromData || len(full) != op.Data.N*op.Data.N || op.arena != nil {
		return false
	}
	op.full = full
	return true
}

// chunkRows splits a block of m rows into up to four chunks, each a whole
// number of the kernel's 64-row tiles: few enough that each GEMM or launch
// fills the GPU, enough that all but one chunk's copy overlaps work.
func chunkRows(m int) int { return max(64, (m+4*64-1)/(4*64)*64) }

func newPairwiseCUDA(op *Pairwise, dev *cuda.Device) (G.Op, error) {
	if op.Data.Dtype != tensor.Float32 {
		return nil, fmt.Errorf("pairwise: the GPU path is float32, got %v", op.Data.Dtype)
	}
	return &pairwiseCUDA{Pairwise: op, dev: dev}, nil
}

// buffers lists the arena's buffers: the images, their norms, a block of
// rows (none with RowsFromData), the rows' reciprocal norms (cosine: of
// every image with RowsFromData, else of the block's), the block's
// (Batch, N) output, for dot and cosine cuBLAS's workspace, with
// WriteFull the transposed strip, and with SelectTopK the selections.
func (op *pairwiseCUDA) buffers() []int64 {
	d := op.Data
	rows, rinv := 4*int64(op.Batch)*int64(d.D), 8*int64(op.Batch)
	if op.RowsFromData {
		rows, rinv = 0, 8*int64(len(d.norm))
	}
	if op.Metric != MetricCosine {
		rinv = 0
	}
	var t int64
	if op.full != nil {
		t = 4 * int64(op.Batch) * int64(d.N)
	}
	top := 8 * int64(op.Batch) * int64(op.topK)
	return []int64{4 * int64(d.N) * int64(d.D), 8 * int64(len(d.norm)), rows, rinv, 4 * int64(op.Batch) * int64(d.N), op.workspaceBytes(), t, top, top}
}

// DeviceBytes is what the arena holds.
func (op *pairwiseCUDA) DeviceBytes() int64 {
	var total int64
	for _, b := range op.buffers() {
		total += b + 256 // each allocation's alignment
	}
	return total
}

// workspaceBytes is the cuBLAS workspace the GEMM metrics take from the arena.
func (op *pairwiseCUDA) workspaceBytes() int64 {
	if op.Metric == MetricDot || op.Metric == MetricCosine {
		return cuda.BLASWorkspace
	}
	return 0
}

func (op *pairwiseCUDA) setup() error {
	a, err := op.dev.NewArena(op.DeviceBytes())
	if err != nil {
		return err
	}
	op.arena = a
	sizes := op.buffers()
	for i, p := range []*cuda.DevicePtr{&op.x, &op.norm, &op.rows, &op.rinv, &op.dout, &op.ws, &op.dT, &op.dvals, &op.didx} {
		if b := sizes[i]; b > 0 {
			if *p, err = a.Alloc(b); err != nil {
				return err
			}
		}
	}
	if op.full != nil {
		cuda.Register(op.dev, &op.pinned, op.full) // the copies go straight into it
	}
	if op.topK > 0 {
		op.vals = make([]float64, op.Batch*op.topK)
		op.top = tensor.New(tensor.WithShape(op.Batch, op.topK), tensor.Of(tensor.Float64))
	}
	op.rinvHost = make([]float64, op.Batch)
	return op.upload()
}

// upload copies the images, and what the metric keeps of them, to the
// device: at setup, and again after each Reload of the images.
func (op *pairwiseCUDA) upload() error {
	d := op.Data
	if err := cuda.Upload(op.dev, op.x, d.X32); err != nil {
		return err
	}
	if err := cuda.Upload(op.dev, op.norm, d.norm); err != nil {
		return err
	}
	if op.RowsFromData && op.Metric == MetricCosine {
		rn := make([]float64, len(d.norm))
		for i, v := range d.norm {
			rn[i] = 1 / v
		}
		if err := cuda.Upload(op.dev, op.rinv, rn); err != nil {
			return err
		}
	}
	op.uploaded = d.Version()
	return nil
}

// Do computes the block on the GPU into the op's host output.
func (op *pairwiseCUDA) Do(in ...G.Value) (G.Value, error) {
	rows, lo, m, c0, err := op.block(in)
	if err != nil {
		return nil, err
	}
	d := op.Data
	if op.arena == nil {
		if err := op.setup(); err != nil {
			return nil, err
		}
		host, err := cuda.HostFloat32(op.dev, op.Batch*d.N) // pinned: fast copies back
		if err != nil {
			return nil, err
		}
		op.out = tensor.New(tensor.WithShape(op.Batch, d.N), tensor.WithBacking(host))
	}
	if op.uploaded != d.Version() { // the images were replaced
		if err := op.upload(); err != nil {
			return nil, err
		}
	}
	a, rinv := op.rows, op.rinv // the block's rows and their reciprocal norms
	if op.RowsFromData {
		a = op.x + cuda.DevicePtr(4*int64(lo)*int64(d.D))
		if rinv != 0 {
			rinv += cuda.DevicePtr(8 * int64(lo))
		}
	} else {
		r := rows.Data().([]float32)
		cuda.Register(op.dev, &op.pinned, r) // the Program's input: pinned once
		if err := cuda.Upload(op.dev, op.rows, r); err != nil {
			return nil, err
		}
		if op.Metric == MetricCosine {
			for i := range op.Batch {
				op.rinvHost[i] = 1 / rowNorm(r[i*d.D:(i+1)*d.D]) // padding rows are zero: Inf, discarded
			}
			if err := cuda.Upload(op.dev, op.rinv, op.rinvHost); err != nil {
				return nil, err
			}
		}
	}
	if op.comp == nil {
		if op.comp, err = op.dev.NewStream(); err != nil {
			return nil, err
		}
		if op.copy, err = op.dev.NewStream(); err != nil {
			return nil, err
		}
	}
	if (op.Metric == MetricDot || op.Metric == MetricCosine) && op.blas == nil {
		if op.blas, err = op.dev.NewBLAS(op.TF32, op.ws, op.workspaceBytes()); err != nil {
			return nil, err
		}
	}
	// The copies to the device went on the default stream, which the
	// streams do not wait for by themselves: a synchronous copy from
	// pageable memory may return before its data has landed.
	if err := op.comp.After(op.dev.Default()); err != nil {
		return nil, err
	}
	if err := op.comp.Begin(); err != nil {
		return nil, err
	}
	chunk := op.chunk
	if chunk <= 0 {
		chunk = chunkRows(m)
	}
	host, base := op.out.Data().([]float32), 0 // where row 0 of the block goes
	if op.full != nil {
		host, base = op.full, lo
	}
	for r0 := 0; r0 < m; r0 += chunk {
		r1 := min(r0+chunk, m)
		ri := rinv // cosine only
		if ri != 0 {
			ri += cuda.DevicePtr(8 * int64(r0))
		}
		if err := op.compute(c0, r1-r0, a+cuda.DevicePtr(4*int64(r0)*int64(d.D)), ri,
			op.dout+cuda.DevicePtr(4*(int64(r0)*int64(d.N)+int64(c0)))); err != nil {
			return nil, err
		}
		if op.topK > 0 {
			continue // selected below: the rows stay on the device
		}
		if err := op.copy.After(op.comp); err != nil {
			return nil, err
		}
		if err := cuda.Download2DAsync(op.copy, host[(base+r0)*d.N+c0:], d.N, op.dout+cuda.DevicePtr(4*(int64(r0)*int64(d.N)+int64(c0))),
			d.N, r1-r0, d.N-c0); err != nil {
			return nil, err
		}
	}
	if op.topK > 0 {
		return op.selectTop(lo, m)
	}
	if tail := d.N - c0 - m; op.full != nil && tail > 0 { // the columns beyond the block, into the rows below it
		if err := opkit.EnqueueOn(op.comp, transposeLaunch(op.dout+cuda.DevicePtr(4*(c0+m)), d.N, m, tail, op.dT, m)); err != nil {
			return nil, err
		}
		if err := op.copy.After(op.comp); err != nil {
			return nil, err
		}
		if err := cuda.Download2DAsync(op.copy, op.full[(c0+m)*d.N+c0:], d.N, op.dT, m, tail, m); err != nil {
			return nil, err
		}
	}
	if err := op.comp.End(); err != nil {
		return nil, err
	}
	if err := op.copy.Sync(); err != nil {
		return nil, err
	}
	return op.out, nil
}

// selectTop queues the selection of the top k of the block's m rows after
// their computation, waits, and puts each row's k values at their columns
// of the host output and the columns in TopIndices.
func (op *pairwiseCUDA) selectTop(lo, m int) (G.Value, error) {
	d, k := op.Data, op.topK
	if err := opkit.EnqueueOn(op.comp, topkLaunch(op.dout, d.N, m, d.N, k, lo, op.dvals, op.didx)); err != nil {
		return nil, err
	}
	if err := op.comp.End(); err != nil {
		return nil, err
	}
	top := op.top.Data().([]float64)
	if err := cuda.Download(op.dev, op.vals[:m*k], op.dvals); err != nil {
		return nil, err
	}
	if err := cuda.Download(op.dev, top[:m*k], op.didx); err != nil {
		return nil, err
	}
	host := op.out.Data().([]float32)
	for i, j := range top[:m*k] {
		host[i/k*d.N+int(j)] = float32(op.vals[i])
	}
	return op.out, nil
}

// compute queues on the computation stream the affinities of m rows (at
// a, their reciprocal norms at rinv) with the images c0… into out.
func (op *pairwiseCUDA) compute(c0, m int, a, rinv, out cuda.DevicePtr) error {
	d := op.Data
	b := op.x + cuda.DevicePtr(4*int64(c0)*int64(d.D))
	norm := op.norm + cuda.DevicePtr(8*int64(c0))
	if len(d.norm) == 0 {
		norm = 0
	}
	if op.Metric != MetricDot && op.Metric != MetricCosine {
		return opkit.EnqueueOn(op.comp, pairwiseLaunch(op.Pairwise, c0, m, a, b, out, rinv, norm))
	}
	// Column-major, the rows' columns c0… are Xᵀ·rows.
	if err := op.blas.GemmTNOn(op.comp, d.N-c0, m, d.D, b, d.D, a, d.D, out, d.N); err != nil {
		return err
	}
	if op.Metric == MetricCosine {
		return opkit.EnqueueOn(op.comp, cosineScaleLaunch(op.Pairwise, c0, m, out, rinv, norm))
	}
	return nil
}

// WriteHash adds the device to the CPU op's parameters.
func (op *pairwiseCUDA) WriteHash(h hash.Hash) { opkit.WriteTwinHash(h, op.Pairwise, op.dev) }

// Hashcode is the FNV-1a hash of WriteHash.
func (op *pairwiseCUDA) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *pairwiseCUDA) String() string { return opkit.TwinString(op.Pairwise, op.dev, false) }
