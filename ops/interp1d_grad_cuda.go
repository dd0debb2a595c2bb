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

// interp1DGradCUDA is Interp1DGrad on a GPU: the queries' gradient one
// thread per query, the values' one thread per interpolant (each summing
// its own column over the queries in order, as the CPU op does). A
// constant table is uploaded at the first run; values given as an input
// are padded and transposed on the host and uploaded at every run.
type interp1DGradCUDA struct {
	*Interp1DGrad
	dev                                 *cuda.Device
	arena                               *cuda.Arena
	gram, colsum, fpT, x, up, acc, dout cuda.DevicePtr
	host                                []float32 // the values input, padded and transposed
}

func newInterp1DGradCUDA(op *Interp1DGrad, dev *cuda.Device) (G.Op, error) {
	if op.Fwd.Dtype != tensor.Float32 {
		return nil, fmt.Errorf("interp1d grad: the GPU path is float32, got %v", op.Fwd.Dtype)
	}
	return &interp1DGradCUDA{Interp1DGrad: op, dev: dev}, nil
}

// upLen is the upstream gradient's length.
func (op *interp1DGradCUDA) upLen() int {
	if op.Fwd.Reduce == ReduceNone {
		return op.Fwd.Batch * op.Fwd.Table.M
	}
	return op.Fwd.Batch
}

// outLen is the gradient's length.
func (op *interp1DGradCUDA) outLen() int { return op.outShape().TotalSize() }

func (op *interp1DGradCUDA) setup() error {
	t, fwd := op.Fwd.Table, op.Fwd
	p := (t.G + 2) * t.M
	gram, colsum, fpT := len(t.gram), len(t.colsum), len(t.fpT32)
	if fwd.valuesIn {
		gram, colsum, fpT = 0, 0, p
	}
	acc := 0
	if op.WRT == WRTValues {
		acc = p
	}
	bytes := 8*int64(gram+colsum+acc) + 4*int64(fpT+fwd.Batch+op.upLen()+op.outLen()) + 7*256
	a, err := op.dev.NewArena(bytes)
	if err != nil {
		return err
	}
	op.arena = a
	alloc := func(bytes int) cuda.DevicePtr {
		if err != nil || bytes == 0 {
			return 0
		}
		var ptr cuda.DevicePtr
		ptr, err = a.Alloc(int64(bytes))
		return ptr
	}
	op.gram, op.colsum, op.fpT, op.acc = alloc(8*gram), alloc(8*colsum), alloc(4*fpT), alloc(8*acc)
	op.x, op.up, op.dout = alloc(4*fwd.Batch), alloc(4*op.upLen()), alloc(4*op.outLen())
	if err != nil {
		return err
	}
	if fwd.valuesIn {
		op.host = make([]float32, p)
		return nil
	}
	for _, up := range []error{cuda.Upload(op.dev, op.gram, t.gram), cuda.Upload(op.dev, op.colsum, t.colsum),
		cuda.Upload(op.dev, op.fpT, t.fpT32)} {
		if up != nil {
			return up
		}
	}
	return nil
}

// Do computes the gradient on the GPU and copies it into the op's host
// output.
func (op *interp1DGradCUDA) Do(in ...G.Value) (G.Value, error) {
	fwd := op.Fwd
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("interp1d grad: want %d inputs, got %d", op.Arity(), len(in))
	}
	x, ok := in[0].(*tensor.Dense)
	if !ok || x.Dtype() != tensor.Float32 || x.Shape().TotalSize() != fwd.Batch {
		return nil, fmt.Errorf("interp1d grad: queries %v, want float32 (%d)", in[0].Shape(), fwd.Batch)
	}
	up, ok := in[len(in)-1].(*tensor.Dense)
	if !ok || up.Dtype() != tensor.Float32 || !up.Shape().Eq(fwd.outShape()) {
		return nil, fmt.Errorf("interp1d grad: upstream %v, want float32 %v", in[len(in)-1].Shape(), fwd.outShape())
	}
	if op.arena == nil {
		if err := op.setup(); err != nil {
			return nil, err
		}
		host, err := cuda.HostFloat32(op.dev, op.outLen())
		if err != nil {
			return nil, err
		}
		op.out = tensor.New(tensor.WithShape(op.outShape()...), tensor.WithBacking(host))
	}
	if fwd.valuesIn {
		f, err := fwd.values(in[1])
		if err != nil {
			return nil, err
		}
		fillPadded(op.host, f.Data().([]float32), fwd.Table.M, fwd.Table.G)
		if err := cuda.Upload(op.dev, op.fpT, op.host); err != nil {
			return nil, err
		}
	}
	if err := cuda.Upload(op.dev, op.x, x.Data().([]float32)); err != nil {
		return nil, err
	}
	if err := cuda.Upload(op.dev, op.up, up.Data().([]float32)); err != nil {
		return nil, err
	}
	l := interpGradXLaunch(op.Interp1DGrad, op.x, op.up, op.gram, op.colsum, op.fpT, op.dout)
	if op.WRT == WRTValues {
		l = interpGradFLaunch(op.Interp1DGrad, op.x, op.up, op.fpT, op.acc, op.dout)
	}
	if err := opkit.Run(op.dev, l); err != nil {
		return nil, err
	}
	if err := cuda.Download(op.dev, op.out.Data().([]float32), op.dout); err != nil {
		return nil, err
	}
	return op.out, nil
}

// WriteHash adds the device to the CPU op's parameters.
func (op *interp1DGradCUDA) WriteHash(h hash.Hash) { opkit.WriteTwinHash(h, op.Interp1DGrad, op.dev) }

// Hashcode is the FNV-1a hash of WriteHash.
func (op *interp1DGradCUDA) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *interp1DGradCUDA) String() string { return opkit.TwinString(op.Interp1DGrad, op.dev, false) }
