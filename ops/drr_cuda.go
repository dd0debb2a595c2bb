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

// drrCUDA is DRR on a GPU: one thread per ray, every pose of the batch in
// one launch. The volume (zero-padded for trilinear, as on the CPU), the
// poses and the images live in one device arena made at the first batch.
type drrCUDA struct {
	*DRR
	dev             *cuda.Device
	arena           *cuda.Arena
	vol             *volumeView
	dv, dpose, dimg cuda.DevicePtr
}

// volumeView is the kernel's view of the volume in its own frame: shape,
// the centre of voxel 0 and spacing.
type volumeView struct {
	n    [3]int64
	o, s [3]float64
}

func newDRRCUDA(op *DRR, dev *cuda.Device) G.Op { return &drrCUDA{DRR: op, dev: dev} }

// DeviceBytes is what the arena holds: the (padded) volume, a batch of
// poses and of images.
func (op *drrCUDA) DeviceBytes() int64 {
	n := op.Vol.N
	if op.Step > 0 {
		n = [3]int64{n[0] + 2, n[1] + 2, n[2] + 2}
	}
	return 4*n[0]*n[1]*n[2] + 8*PoseWidth*int64(op.Batch) + 4*int64(op.Batch*op.Rows*op.Cols) + 3*256
}

func (op *drrCUDA) setup() error {
	v := op.kernelVolume()
	a, err := op.dev.NewArena(op.DeviceBytes())
	if err != nil {
		return err
	}
	op.arena = a
	if op.dv, err = a.Alloc(4 * int64(len(v.V))); err != nil {
		return err
	}
	if op.dpose, err = a.Alloc(8 * PoseWidth * int64(op.Batch)); err != nil {
		return err
	}
	if op.dimg, err = a.Alloc(4 * int64(op.Batch*op.Rows*op.Cols)); err != nil {
		return err
	}
	op.vol = &volumeView{n: v.N, o: v.Origin, s: v.Spacing}
	return cuda.Upload(op.dev, op.dv, v.V)
}

// Do renders the batch on the GPU into the op's host output.
func (op *drrCUDA) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("drr: want 1 input, got %d", len(in))
	}
	poses, ok := in[0].(*tensor.Dense)
	if !ok || poses.Dtype() != tensor.Float64 || poses.Shape().TotalSize() != op.Batch*PoseWidth {
		return nil, fmt.Errorf("drr: poses %v, want float64 (%d, %d)", in[0].Shape(), op.Batch, PoseWidth)
	}
	if op.arena == nil {
		if err := op.setup(); err != nil {
			return nil, err
		}
		host, err := cuda.HostFloat32(op.dev, op.Batch*op.Rows*op.Cols) // pinned: fast copies back
		if err != nil {
			return nil, err
		}
		op.out = tensor.New(tensor.WithShape(op.Batch, op.Rows, op.Cols), tensor.WithBacking(host))
	}
	if err := cuda.Upload(op.dev, op.dpose, op.toLocal(poses.Data().([]float64))); err != nil {
		return nil, err
	}
	w := op.vol
	if err := opkit.Run(op.dev, drrLaunch(op.DRR, w.n, w.o, w.s, op.dv, op.dpose, op.dimg)); err != nil {
		return nil, err
	}
	if err := cuda.Download(op.dev, op.out.Data().([]float32), op.dimg); err != nil {
		return nil, err
	}
	return op.out, nil
}

// WriteHash adds the device to the CPU op's parameters.
func (op *drrCUDA) WriteHash(h hash.Hash) { opkit.WriteTwinHash(h, op.DRR, op.dev) }

// Hashcode is the FNV-1a hash of WriteHash.
func (op *drrCUDA) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *drrCUDA) String() string { return opkit.TwinString(op.DRR, op.dev, false) }
