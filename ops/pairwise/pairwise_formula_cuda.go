//go:build tapeloop_cuda || tapeloop_cudaemu

package pairwise

import (
	"errors"
	"fmt"
	"hash"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/cuda"
	"github.com/tapeloop/tapeloop/internal/formula"
	"github.com/tapeloop/tapeloop/ops"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// pairFormulaCUDA is PairwiseFormula on a GPU: the formula's
// per-pair kernel (formula.CUDAPair), compiled for the device when the op
// is placed on it, one thread per pair, each reduction summed in float64.
// The N images and their values (norms, means, … that the formula needs
// of each image, computed on the CPU once) stay on the device; per block,
// only the affinities come back, the columns from c0 on. With rows given
// (not RowsFromData) they go up per block, with the values of the images
// the index names.
//
// The emulator build does not run kernels compiled at run time: there the
// twin computes on the CPU, as the PairwiseFormula op does, and
// DeviceBytes is 0.
type pairFormulaCUDA struct {
	*PairwiseFormula
	dev    *cuda.Device
	kernel *formula.CUDAKernel
	cpu    bool // the emulator: the CPU op computes

	arena                   *cuda.Arena
	x, vals, rows, rv, dout cuda.DevicePtr
	rvHost                  []float64
	uploaded                uint64 // the Data.Version() on the device
}

func newPairFormulaCUDA(op *PairwiseFormula, dev *cuda.Device) (G.Op, error) {
	if op.Data.Dtype != tensor.Float32 {
		return nil, fmt.Errorf("pairwise: the GPU path is float32, got %v", op.Data.Dtype)
	}
	k, err := op.Formula.Plan.CUDAPair()
	if err != nil {
		return nil, fmt.Errorf("pairwise: %w", err)
	}
	t := &pairFormulaCUDA{PairwiseFormula: op, dev: dev, kernel: k}
	if _, err := dev.LoadKernels(k.Src, formula.CUDAOptions); errors.Is(err, cuda.ErrNotEmulated) {
		t.cpu = true
	} else if err != nil {
		return nil, fmt.Errorf("pairwise: the formula's kernel: %w", err)
	}
	return t, nil
}

// buffers lists the arena's buffers: the images, their values, a block
// of rows and their values (none with RowsFromData), the block's output.
func (op *pairFormulaCUDA) buffers() []int64 {
	d, nr := op.Data, int64(op.Formula.Plan.NRow())
	rows, rv := 4*int64(op.Batch)*int64(d.D), 8*int64(op.Batch)*nr
	if op.RowsFromData {
		rows, rv = 0, 0
	}
	return []int64{4 * int64(d.N) * int64(d.D), 8 * int64(d.N) * nr, rows, rv, 4 * int64(op.Batch) * int64(d.N)}
}

// DeviceBytes is what the arena holds (nothing in the emulator, where
// the CPU computes).
func (op *pairFormulaCUDA) DeviceBytes() int64 {
	if op.cpu {
		return 0
	}
	var total int64
	for _, b := range op.buffers() {
		total += b + 256
	}
	return total
}

func (op *pairFormulaCUDA) setup() error {
	a, err := op.dev.NewArena(op.DeviceBytes())
	if err != nil {
		return err
	}
	op.arena = a
	for i, p := range []*cuda.DevicePtr{&op.x, &op.vals, &op.rows, &op.rv, &op.dout} {
		if b := op.buffers()[i]; b > 0 {
			if *p, err = a.Alloc(b); err != nil {
				return err
			}
		}
	}
	host, err := cuda.HostFloat32(op.dev, op.Batch*op.Data.N) // pinned: fast copies back
	if err != nil {
		return err
	}
	op.out = tensor.New(tensor.WithShape(op.Batch, op.Data.N), tensor.WithBacking(host))
	op.rvHost = make([]float64, op.Batch*op.Formula.Plan.NRow())
	return op.upload()
}

// upload copies the images and the formula's values of each image to the
// device: at setup, and again after each Reload of the images.
func (op *pairFormulaCUDA) upload() error {
	if err := cuda.Upload(op.dev, op.x, op.Data.X32); err != nil {
		return err
	}
	if err := cuda.Upload(op.dev, op.vals, op.Formula.rowVals); err != nil {
		return err
	}
	op.uploaded = op.Data.Version()
	return nil
}

// Do computes the block's affinities on the GPU into the op's host output.
func (op *pairFormulaCUDA) Do(in ...G.Value) (G.Value, error) {
	if op.cpu {
		return op.PairwiseFormula.Do(in...)
	}
	rows, lo, m, c0, err := op.block(in)
	if err != nil {
		return nil, err
	}
	if op.arena == nil {
		if err := op.setup(); err != nil {
			return nil, err
		}
	}
	if op.uploaded != op.Data.Version() { // the images were replaced
		if err := op.upload(); err != nil {
			return nil, err
		}
	}
	d, pf := op.Data, op.Formula
	nr := pf.Plan.NRow()
	a, ra := op.x+cuda.DevicePtr(4*int64(lo)*int64(d.D)), op.vals+cuda.DevicePtr(8*int64(lo)*int64(nr))
	if !op.RowsFromData {
		// The rows are images idx[0], idx[1], …: their values are those
		// images', as on the CPU.
		idx := in[len(in)-1].Data().([]float64)
		for i := range m {
			img := int(idx[i])
			if float64(img) != idx[i] || img < 0 || img >= d.N {
				return nil, fmt.Errorf("pairwise: row index %v outside [0, %d)", idx[i], d.N)
			}
			copy(op.rvHost[i*nr:(i+1)*nr], pf.rowVals[img*nr:(img+1)*nr])
		}
		if err := cuda.Upload(op.dev, op.rows, rows.Data().([]float32)); err != nil {
			return nil, err
		}
		if err := cuda.Upload(op.dev, op.rv, op.rvHost[:m*nr]); err != nil {
			return nil, err
		}
		a, ra = op.rows, op.rv
	}
	if nr == 0 {
		ra = 0
	}
	rb := op.vals + cuda.DevicePtr(8*int64(c0)*int64(nr))
	if nr == 0 {
		rb = 0
	}
	if op.Stopped() {
		return nil, ops.ErrStopped
	}
	nc := d.N - c0
	l := pairFormulaLaunch(op.kernel, m, nc, d.D, d.N, a, op.x+cuda.DevicePtr(4*int64(c0)*int64(d.D)), ra, rb,
		op.dout+cuda.DevicePtr(4*int64(c0)))
	if err := opkit.Run(op.dev, l); err != nil {
		return nil, err
	}
	host := op.out.Data().([]float32)
	if err := cuda.Download2D(op.dev, host[c0:], d.N, op.dout+cuda.DevicePtr(4*int64(c0)), d.N, m, nc); err != nil {
		return nil, err
	}
	var bad int64
	idx := in[len(in)-1].Data().([]float64)
	for i := range m {
		img := lo + i
		if !op.RowsFromData {
			img = int(idx[i])
		}
		bad += countRow(host[i*d.N+c0:(i+1)*d.N], c0, img, op.Upper)
	}
	pf.bad.Add(bad)
	if op.Stopped() {
		return nil, ops.ErrStopped
	}
	return op.out, nil
}

// WriteHash adds the device to the CPU op's parameters.
func (op *pairFormulaCUDA) WriteHash(h hash.Hash) { opkit.WriteTwinHash(h, op.PairwiseFormula, op.dev) }

// Hashcode is the FNV-1a hash of WriteHash.
func (op *pairFormulaCUDA) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *pairFormulaCUDA) String() string {
	return opkit.TwinString(op.PairwiseFormula, op.dev, op.cpu)
}
