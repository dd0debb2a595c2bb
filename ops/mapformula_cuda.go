//go:build tapeloop_cuda || tapeloop_cudaemu

package ops

import (
	"errors"
	"fmt"
	"hash"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/cuda"
	"github.com/tapeloop/tapeloop/internal/formula"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// mapImagesCUDA is MapImages on a GPU: the formula's elementwise kernel
// (formula.CUDAMap), compiled for the device when the op is placed on it,
// one thread per pixel over the batch's valid images at once. The images
// go up and the results come back per batch.
//
// A formula that reduces over the whole image (p / max(p)) has no such
// kernel: OnDevice then keeps the CPU op, which computes on the images as
// they come back from the device. The emulator build does not run kernels
// compiled at run time: there the twin computes on the CPU, as MapImages
// does, and DeviceBytes is 0.
type mapImagesCUDA struct {
	*MapImages
	dev    *cuda.Device
	kernel *formula.CUDAKernel
	cpu    bool // the emulator: the CPU op computes

	arena     *cuda.Arena
	din, dout cuda.DevicePtr
}

func newMapImagesCUDA(op *MapImages, dev *cuda.Device) (G.Op, error) {
	g, err := op.F.F.Graph(op.F.N)
	if err != nil {
		return nil, err
	}
	k, err := formula.CUDAMap(g, []int{0})
	if errors.Is(err, formula.ErrNoKernel) {
		return op, nil // the whole image first: the CPU op, on the images copied back
	}
	if err != nil {
		return nil, fmt.Errorf("mapimages: %w", err)
	}
	t := &mapImagesCUDA{MapImages: op, dev: dev, kernel: k}
	if _, err := dev.LoadKernels(k.Src, formula.CUDAOptions); errors.Is(err, cuda.ErrNotEmulated) {
		t.cpu = true
	} else if err != nil {
		return nil, fmt.Errorf("mapimages: the formula's kernel: %w", err)
	}
	return t, nil
}

// DeviceBytes is what the arena holds: a batch of images in and out
// (nothing in the emulator, where the CPU computes).
func (op *mapImagesCUDA) DeviceBytes() int64 {
	if op.cpu {
		return 0
	}
	return 2 * (4*int64(op.Batch)*int64(op.Rows*op.Cols) + 256)
}

func (op *mapImagesCUDA) setup() error {
	a, err := op.dev.NewArena(op.DeviceBytes())
	if err != nil {
		return err
	}
	op.arena = a
	n := 4 * int64(op.Batch) * int64(op.Rows*op.Cols)
	if op.din, err = a.Alloc(n); err != nil {
		return err
	}
	if op.dout, err = a.Alloc(n); err != nil {
		return err
	}
	host, err := cuda.HostFloat32(op.dev, op.Batch*op.Rows*op.Cols) // pinned: fast copies back
	if err != nil {
		return err
	}
	op.out = tensor.New(tensor.WithShape(op.Batch, op.Rows, op.Cols), tensor.WithBacking(host))
	return nil
}

// Do applies the formula to each valid image on the GPU.
func (op *mapImagesCUDA) Do(in ...G.Value) (G.Value, error) {
	if op.cpu {
		return op.MapImages.Do(in...)
	}
	per := op.Rows * op.Cols
	x, ok := in[0].(*tensor.Dense)
	if len(in) != 1 || !ok || x.Dtype() != tensor.Float32 || x.Shape().TotalSize() != op.Batch*per {
		return nil, fmt.Errorf("mapimages: want float32 (%d, %d, %d)", op.Batch, op.Rows, op.Cols)
	}
	if op.arena == nil {
		if err := op.setup(); err != nil {
			return nil, err
		}
	}
	n := min(op.valid, op.Batch) * per
	if n == 0 {
		return op.out, nil
	}
	if err := cuda.Upload(op.dev, op.din, x.Data().([]float32)[:n]); err != nil {
		return nil, err
	}
	if err := opkit.Run(op.dev, mapFormulaLaunch(op.kernel, n, op.din, op.dout)); err != nil {
		return nil, err
	}
	dst := op.out.Data().([]float32)[:n]
	if err := cuda.Download(op.dev, dst, op.dout); err != nil {
		return nil, err
	}
	op.F.bad.Add(opkit.CountBad(dst))
	return op.out, nil
}

// WriteHash adds the device to the CPU op's parameters.
func (op *mapImagesCUDA) WriteHash(h hash.Hash) { opkit.WriteTwinHash(h, op.MapImages, op.dev) }

// Hashcode is the FNV-1a hash of WriteHash.
func (op *mapImagesCUDA) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *mapImagesCUDA) String() string { return opkit.TwinString(op.MapImages, op.dev, op.cpu) }
