//go:build tapeloop_cuda || tapeloop_cudaemu

package ops

import (
	"fmt"
	"hash"
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/cuda"
)

// pairwiseCUDA is Pairwise on a GPU: the N images resident on the device;
// per block of rows, l1 and l2 are one launch of a tiled kernel (64×64
// output tiles, 4×4 per thread), dot and cosine a cuBLAS GEMM (TF32 tensor
// cores with the op's TF32). With
// Upper it computes the columns from the block's first row on, like the
// CPU op; the device output keeps the earlier blocks' values elsewhere, as
// the host output does.
type pairwiseCUDA struct {
	*Pairwise
	dev                       *cuda.Device
	arena                     *cuda.Arena
	blas                      *cuda.BLAS // dot and cosine: cuBLAS GEMM
	x, norm, rows, rinv, dout cuda.DevicePtr
	ws                        cuda.DevicePtr // cuBLAS workspace, in the arena
	rinvHost                  []float64
	pinned                    cuda.Pinned
}

func newPairwiseCUDA(op *Pairwise, dev *cuda.Device) (G.Op, error) {
	if op.Data.Dtype != tensor.Float32 {
		return nil, fmt.Errorf("pairwise: the GPU path is float32, got %v", op.Data.Dtype)
	}
	return &pairwiseCUDA{Pairwise: op, dev: dev}, nil
}

// DeviceBytes is what the arena holds: the images (and their norms), one
// block of rows and the block's (Batch, N) output, and for dot and cosine
// cuBLAS's workspace.
func (op *pairwiseCUDA) DeviceBytes() int64 {
	d := op.Data
	return 4*int64(d.N)*int64(d.D) + 8*int64(len(d.norm)) + 4*int64(op.Batch)*int64(d.D) + 8*int64(op.Batch) +
		4*int64(op.Batch)*int64(d.N) + op.workspaceBytes() + 6*256
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
	d := op.Data
	for _, p := range []struct {
		dst   *cuda.DevicePtr
		bytes int64
	}{{&op.x, 4 * int64(d.N) * int64(d.D)}, {&op.norm, 8 * int64(len(d.norm))}, {&op.rows, 4 * int64(op.Batch) * int64(d.D)},
		{&op.rinv, 8 * int64(op.Batch)}, {&op.dout, 4 * int64(op.Batch) * int64(d.N)}, {&op.ws, op.workspaceBytes()}} {
		if *p.dst, err = a.Alloc(p.bytes); err != nil {
			return err
		}
	}
	if err := cuda.Upload(op.dev, op.x, d.X32); err != nil {
		return err
	}
	op.rinvHost = make([]float64, op.Batch)
	return cuda.Upload(op.dev, op.norm, d.norm)
}

// Do computes the block on the GPU into the op's host output.
func (op *pairwiseCUDA) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("pairwise: want 2 inputs, got %d", len(in))
	}
	rows, ok := in[0].(*tensor.Dense)
	index, ok2 := in[1].(*tensor.Dense)
	d := op.Data
	if !ok || !ok2 || rows.Dtype() != tensor.Float32 || rows.Shape().TotalSize() != op.Batch*d.D ||
		index.Dtype() != tensor.Float64 || index.Shape().TotalSize() != op.Batch {
		return nil, fmt.Errorf("pairwise: inputs %v, %v; want float32 (%d, %d) and float64 (%d)", in[0].Shape(), in[1].Shape(), op.Batch, d.D, op.Batch)
	}
	c0 := 0
	if op.Upper {
		c0 = int(index.Data().([]float64)[0])
		if c0 < 0 || c0 >= d.N {
			return nil, fmt.Errorf("pairwise: first row index %d outside [0, %d)", c0, d.N)
		}
	}
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
	r := rows.Data().([]float32)
	cuda.Register(op.dev, &op.pinned, r) // the Program's input: pinned once
	if err := cuda.Upload(op.dev, op.rows, r); err != nil {
		return nil, err
	}
	if op.Metric == MetricCosine {
		for i := range op.Batch {
			var ss float64
			for _, v := range r[i*d.D : (i+1)*d.D] {
				ss += float64(v) * float64(v)
			}
			op.rinvHost[i] = 1 / math.Sqrt(ss) // padding rows are zero: Inf, discarded
		}
		if err := cuda.Upload(op.dev, op.rinv, op.rinvHost); err != nil {
			return nil, err
		}
	}
	b := op.x + cuda.DevicePtr(4*int64(c0)*int64(d.D))
	out := op.dout + cuda.DevicePtr(4*int64(c0))
	norm := op.norm + cuda.DevicePtr(8*int64(c0))
	if len(d.norm) == 0 {
		norm = 0
	}
	if op.Metric == MetricDot || op.Metric == MetricCosine {
		if op.blas == nil {
			var err error
			if op.blas, err = op.dev.NewBLAS(op.TF32, op.ws, op.workspaceBytes()); err != nil {
				return nil, err
			}
		}
		// Column-major, the block's columns c0… of every row are Xᵀ·rows.
		if err := op.blas.GemmTN(d.N-c0, op.Batch, d.D, b, d.D, op.rows, d.D, out, d.N); err != nil {
			return nil, err
		}
		if op.Metric == MetricCosine {
			if err := run(op.dev, cosineScaleLaunch(op.Pairwise, c0, out, op.rinv, norm)); err != nil {
				return nil, err
			}
		}
	} else if err := run(op.dev, pairwiseLaunch(op.Pairwise, c0, op.rows, b, out, op.rinv, norm)); err != nil {
		return nil, err
	}
	if err := cuda.Download(op.dev, op.out.Data().([]float32), op.dout); err != nil {
		return nil, err
	}
	return op.out, nil
}

// WriteHash adds the device to the CPU op's parameters.
func (op *pairwiseCUDA) WriteHash(h hash.Hash) {
	op.Pairwise.WriteHash(h)
	fmt.Fprintf(h, "@%v", op.dev)
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *pairwiseCUDA) Hashcode() uint32 { return hashcode(op) }

func (op *pairwiseCUDA) String() string { return op.Pairwise.String() + "@" + op.dev.String() }
