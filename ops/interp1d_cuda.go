//go:build tapeloop_cuda || tapeloop_cudaemu

package ops

import (
	"fmt"
	"hash"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/cuda"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// interp1DCUDA is Interp1D on a GPU: one launch per batch, one thread per
// query, the query's weights shared by its M interpolants. The prepared
// table and the batch's buffers live in one device arena made at the first
// batch.
type interp1DCUDA struct {
	*Interp1D
	dev                     *cuda.Device
	arena                   *cuda.Arena
	gram, colsum, fpT, x, y cuda.DevicePtr
	pinned                  cuda.Pinned
}

func newInterp1DCUDA(op *Interp1D, dev *cuda.Device) (G.Op, error) {
	if op.Dtype != tensor.Float32 {
		return nil, fmt.Errorf("interp1d: the GPU path is float32, got %v", op.Dtype)
	}
	if op.valuesIn {
		return nil, fmt.Errorf("interp1d: the GPU path takes constant values, not values as an input")
	}
	return &interp1DCUDA{Interp1D: op, dev: dev}, nil
}

// DeviceBytes is what the arena holds: the table and one batch in and out.
func (op *interp1DCUDA) DeviceBytes() int64 {
	return op.Table.Bytes() + 4*int64(op.Batch)*(1+int64(op.outLen())) + 6*256 // 256: each allocation's alignment
}

func (op *interp1DCUDA) outLen() int {
	if op.Reduce == ReduceNone {
		return op.Table.M
	}
	return 1
}

func (op *interp1DCUDA) setup() error {
	a, err := op.dev.NewArena(op.DeviceBytes())
	if err != nil {
		return err
	}
	op.arena = a
	t := op.Table
	alloc := func(bytes int) cuda.DevicePtr {
		if err != nil || bytes == 0 {
			return 0
		}
		var p cuda.DevicePtr
		p, err = a.Alloc(int64(bytes))
		return p
	}
	op.gram, op.colsum, op.fpT = alloc(8*len(t.gram)), alloc(8*len(t.colsum)), alloc(4*len(t.fpT32))
	op.x, op.y = alloc(4*op.Batch), alloc(4*op.Batch*op.outLen())
	if err != nil {
		return err
	}
	for _, up := range []error{cuda.Upload(op.dev, op.gram, t.gram), cuda.Upload(op.dev, op.colsum, t.colsum),
		cuda.Upload(op.dev, op.fpT, t.fpT32)} {
		if up != nil {
			return up
		}
	}
	return nil
}

// Do evaluates the batch on the GPU and copies the results into the op's
// host output.
func (op *interp1DCUDA) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("interp1d: want 1 input, got %d", len(in))
	}
	x, ok := in[0].(*tensor.Dense)
	if !ok || x.Dtype() != tensor.Float32 || x.Shape().TotalSize() != op.Batch {
		return nil, fmt.Errorf("interp1d: input %v, want float32 (%d)", in[0].Shape(), op.Batch)
	}
	if op.arena == nil {
		if err := op.setup(); err != nil {
			return nil, err
		}
		host, err := cuda.HostFloat32(op.dev, op.Batch*op.outLen()) // pinned: fast copies back
		if err != nil {
			return nil, err
		}
		op.out = tensor.New(tensor.WithShape(op.outShape()...), tensor.WithBacking(host))
	}
	cuda.Register(op.dev, &op.pinned, x.Data().([]float32)) // the Program's input: pinned once
	if err := cuda.Upload(op.dev, op.x, x.Data().([]float32)); err != nil {
		return nil, err
	}
	if err := opkit.Run(op.dev, interpLaunch(op.Interp1D, op.x, op.gram, op.colsum, op.fpT, op.y)); err != nil {
		return nil, err
	}
	if err := cuda.Download(op.dev, op.out.Data().([]float32), op.y); err != nil {
		return nil, err
	}
	return op.out, nil
}

// WriteHash adds the device to the CPU op's parameters.
func (op *interp1DCUDA) WriteHash(h hash.Hash) { opkit.WriteTwinHash(h, op.Interp1D, op.dev) }

// Hashcode is the FNV-1a hash of WriteHash.
func (op *interp1DCUDA) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *interp1DCUDA) String() string { return opkit.TwinString(op.Interp1D, op.dev, false) }
