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

// filter2DCUDA is Filter2D on a GPU: the batch's valid images go up, the
// row pass (filter_rows, one thread per pixel) writes a scratch batch on
// the device, the column pass (filter_cols) writes the images back over
// the uploaded ones, in place, and they come back to the op's pinned host
// buffer. The taps are uploaded at the first run and again whenever the
// kernel's Set replaced them.
type filter2DCUDA struct {
	*Filter2D
	dev   *cuda.Device
	arena *cuda.Arena
	gen   uint64 // the kernel's taps on the device: SepKernel.gen when uploaded

	dimg, dtmp, drow, dcol cuda.DevicePtr
}

func newFilter2DCUDA(op *Filter2D, dev *cuda.Device) G.Op {
	return &filter2DCUDA{Filter2D: op, dev: dev}
}

// DeviceBytes is what the arena holds: two batches of images and room for
// the longest taps along each axis.
func (op *filter2DCUDA) DeviceBytes() int64 {
	return 2*(4*int64(op.Batch)*int64(op.Rows*op.Cols)+256) + 2*(4*MaxFilterTaps+256)
}

// ResidentBytes is nothing on the host beyond the output: the scratch
// batch is on the device.
func (op *filter2DCUDA) ResidentBytes() int64 { return 0 }

func (op *filter2DCUDA) setup() error {
	a, err := op.dev.NewArena(op.DeviceBytes())
	if err != nil {
		return err
	}
	op.arena = a
	n := 4 * int64(op.Batch) * int64(op.Rows*op.Cols)
	for _, p := range []*cuda.DevicePtr{&op.dimg, &op.dtmp} {
		if *p, err = a.Alloc(n); err != nil {
			return err
		}
	}
	for _, p := range []*cuda.DevicePtr{&op.drow, &op.dcol} {
		if *p, err = a.Alloc(4 * MaxFilterTaps); err != nil {
			return err
		}
	}
	host, err := cuda.HostFloat32(op.dev, op.Batch*op.Rows*op.Cols) // pinned: fast copies back
	if err != nil {
		return err
	}
	op.out = tensor.New(tensor.WithShape(op.Batch, op.Rows, op.Cols), tensor.WithBacking(host))
	return nil
}

// Do filters each valid image on the GPU into the op's host output.
func (op *filter2DCUDA) Do(in ...G.Value) (G.Value, error) {
	src, err := op.images(in)
	if err != nil {
		return nil, err
	}
	if op.arena == nil {
		if err := op.setup(); err != nil {
			return nil, err
		}
	}
	k := op.K
	if op.gen != k.gen {
		if err := cuda.Upload(op.dev, op.drow, k.Row); err != nil {
			return nil, err
		}
		if err := cuda.Upload(op.dev, op.dcol, k.Col); err != nil {
			return nil, err
		}
		op.gen = k.gen
	}
	imgs := min(op.valid, op.Batch)
	n := imgs * op.Rows * op.Cols
	if n == 0 {
		return op.out, nil
	}
	if err := cuda.Upload(op.dev, op.dimg, src[:n]); err != nil {
		return nil, err
	}
	if err := opkit.Run(op.dev, filterRowsLaunch(op.dimg, op.dtmp, imgs*op.Rows, op.Cols, op.drow, len(k.Row), k.Mode)); err != nil {
		return nil, fmt.Errorf("filter2d: %w", err)
	}
	if err := opkit.Run(op.dev, filterColsLaunch(op.dtmp, op.dimg, imgs, op.Rows, op.Cols, op.dcol, len(k.Col), k.Mode)); err != nil {
		return nil, fmt.Errorf("filter2d: %w", err)
	}
	if err := cuda.Download(op.dev, op.out.Data().([]float32)[:n], op.dimg); err != nil {
		return nil, err
	}
	return op.out, nil
}

// WriteHash adds the device to the CPU op's parameters.
func (op *filter2DCUDA) WriteHash(h hash.Hash) { opkit.WriteTwinHash(h, op.Filter2D, op.dev) }

// Hashcode is the FNV-1a hash of WriteHash.
func (op *filter2DCUDA) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *filter2DCUDA) String() string { return opkit.TwinString(op.Filter2D, op.dev, false) }
