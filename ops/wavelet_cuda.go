//go:build tapeloop_cuda || tapeloop_cudaemu

package ops

import (
	"fmt"
	"hash"

	G "gorgonia.org/gorgonia"

	"github.com/tapeloop/tapeloop/cuda"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// waveletCUDA is WaveletResponse on a GPU: per combination the volume's
// spectrum is multiplied by the hat's, computed in closed form (or, for a
// hat wider than the volume, the kernel is evaluated and wrapped into a
// zeroed array, transformed (cuFFT R2C) and multiplied), transformed back (C2R)
// and reduced over the output block, the partial sums finished, all on the
// device. A batch's combinations are queued back to back on the device's
// stream (in order, so they share the arrays) and waited for once; the
// four sums per combination come back (WaveletMoments turns them into the
// statistics on the host, as after the CPU op). The volume goes up once;
// its spectrum is made on the device too, once per padding (reflect mode:
// extended by reflection, then R2C), queued in the same way. Volume,
// spectra, arrays and cuFFT's work area live in one arena.
type waveletCUDA struct {
	*WaveletResponse
	dev                                             *cuda.Device
	arena                                           *cuda.Arena
	fft                                             *cuda.FFT3
	cur                                             *deviceVolume
	vol, spec, half, kern, resp, work, dparts, dres cuda.DevicePtr
	workCap                                         int64
	res                                             []float64   // four per combination
	rows                                            [][]float64 // the batch's queued combinations' outputs
}

// deviceVolume is the volume extended for one padding: its spectrum is at
// the op's spec.
type deviceVolume struct {
	pad, dims [3]int
}

func (v *deviceVolume) len() int     { return v.dims[0] * v.dims[1] * v.dims[2] }
func (v *deviceVolume) halfLen() int { return v.dims[0] * v.dims[1] * (v.dims[2]/2 + 1) }

func newWaveletCUDA(op *WaveletResponse, dev *cuda.Device) *waveletCUDA {
	return &waveletCUDA{WaveletResponse: op, dev: dev}
}

// sizes are the arena's buffers: the volume (float32), its spectrum, the
// kernel's, the kernel array, the response (and the extended volume before
// its transform), cuFFT's work area, the reductions' partial sums, and
// four results per combination of the batch.
func (op *waveletCUDA) sizes(work int64) []int64 {
	half, n := int64(op.Src.maxHalf()), int64(op.Src.maxLen())
	return []int64{4 * int64(len(op.Src.V)), 8 * half, 8 * half, 4 * n, 4 * n, work, 8 * 4 * wvBlocks, 8 * 4 * int64(op.Batch)}
}

// DeviceBytes is what the arena holds, cuFFT's work area included (as its
// plans report it; when they cannot be made, the first run says why).
func (op *waveletCUDA) DeviceBytes() int64 {
	d := op.Src.maxDims()
	work, _ := op.dev.FFTWork(d[0], d[1], d[2])
	var total int64
	for _, s := range op.sizes(work) {
		total += s + 256
	}
	return total
}

func (op *waveletCUDA) setup() error {
	d := op.Src.maxDims()
	f, err := op.dev.NewFFT3(d[0], d[1], d[2])
	if err != nil {
		return err
	}
	op.fft, op.workCap = f, f.Work
	sizes := op.sizes(f.Work)
	var total int64
	for _, s := range sizes {
		total += s + 256
	}
	if op.arena, err = op.dev.NewArena(total); err != nil {
		return err
	}
	for i, p := range []*cuda.DevicePtr{&op.vol, &op.spec, &op.half, &op.kern, &op.resp, &op.work, &op.dparts, &op.dres} {
		if *p, err = op.arena.Alloc(sizes[i]); err != nil {
			return err
		}
	}
	op.res = make([]float64, WaveletSums*op.Batch)
	if err := cuda.Upload(op.dev, op.vol, op.Src.V); err != nil {
		return err
	}
	return f.SetWorkArea(op.work)
}

// volume returns the volume extended for pad, its spectrum queued to be
// made on the device at spec when the padding changes.
func (op *waveletCUDA) volume(pad [3]int) (*deviceVolume, error) {
	src := op.Src
	w := &deviceVolume{dims: src.N}
	if src.Boundary == Reflect {
		w.pad, w.dims = pad, reflectDims(src.N, pad)
	}
	if op.cur != nil && *op.cur == *w {
		return op.cur, nil
	}
	if w.len() > src.maxLen() {
		return nil, fmt.Errorf("wavelet: padding %v is beyond the largest planned, %v", pad, src.MaxPad)
	}
	if w.dims != op.fft.Dims {
		// Combinations queued earlier still use the plans: let them finish
		// before the plans go.
		if err := op.dev.Default().Sync(); err != nil {
			return nil, err
		}
		if err := op.fft.Close(); err != nil {
			return nil, err
		}
		f, err := op.dev.NewFFT3(w.dims[0], w.dims[1], w.dims[2])
		if err != nil {
			return nil, err
		}
		if f.Work > op.workCap {
			return nil, fmt.Errorf("wavelet: cuFFT wants %d bytes of work area for %v, more than the %d planned", f.Work, w.dims, op.workCap)
		}
		if err := f.SetWorkArea(op.work); err != nil {
			return nil, err
		}
		op.fft = f
	}
	// Queued behind the earlier combinations, which still read the old
	// spectrum: the stream runs them first.
	op.cur = nil
	if err := opkit.Enqueue(op.dev, reflectExtendLaunch(op.vol, src.N, op.resp, w.dims, w.pad)); err != nil {
		return nil, err
	}
	if err := op.fft.Forward(op.resp, op.spec); err != nil {
		return nil, err
	}
	op.cur = w
	return w, nil
}

// Do queues every combination of the batch, waits once, and copies each
// one's four sums back.
func (op *waveletCUDA) Do(in ...G.Value) (G.Value, error) {
	op.rows = op.rows[:0]
	begun := false
	out, err := op.eachRow(in, op.setup, func(r []float64, pad [3]int, dst []float64) error {
		if !begun {
			if err := op.dev.Begin(); err != nil {
				return err
			}
			begun = true
		}
		w, err := op.volume(pad)
		if err != nil {
			return err
		}
		if err := op.queue(w, len(op.rows), r[0], r[1], r[2]); err != nil {
			return err
		}
		op.rows = append(op.rows, dst)
		return nil
	})
	if begun { // waits for what was queued, also after an error
		if e := op.dev.End(); err == nil {
			err = e
		}
	}
	if err != nil || len(op.rows) == 0 {
		return out, err
	}
	res := op.res[:WaveletSums*len(op.rows)]
	if err := cuda.Download(op.dev, res, op.dres); err != nil {
		return nil, err
	}
	for i, dst := range op.rows {
		copy(dst, res[WaveletSums*i:WaveletSums*(i+1)])
	}
	return out, nil
}

// queue queues one combination's work, its four sums to slot of the
// results.
func (op *waveletCUDA) queue(w *deviceVolume, slot int, theta, phi, xi float64) error {
	a, n := op.Src.A, op.Src.N
	h := HatSupport(a, theta, phi, xi)
	if op.Src.Boundary == Reflect && (h[0] > w.pad[0] || h[1] > w.pad[1] || h[2] > w.pad[2]) {
		return fmt.Errorf("wavelet: kernel half-widths %v exceed the volume's reflect padding %v", h, w.pad)
	}
	d := w.dims
	p0, p1, p2 := int64(d[0]), int64(d[1]), int64(d[2])
	// The statistics' partial sums at dparts, the kernel's ψ² sums after
	// them: reused by every combination, in stream order.
	hatParts := op.dparts + cuda.DevicePtr(8*3*wvBlocks)
	sl := statsLaunch(op.resp, d, w.pad, n, 1/float64(w.len()), op.dparts)
	// The hat's spectrum in closed form, as on the CPU, unless its support
	// box is wider than the transform (the kernel would overlap itself) or
	// it is too narrow (HatClosedForm): then sampled, transformed and
	// multiplied.
	hl := hatSpectrumLaunch(a, theta, phi, xi, d, op.half, op.spec, hatParts)
	steps := []func() error{func() error { return opkit.Enqueue(op.dev, hl) }}
	if !HatClosedForm(a, theta, phi, xi, d) {
		hl = hatLaunch(a, theta, phi, xi, d, op.kern, hatParts)
		steps = []func() error{
			func() error { return cuda.Zero(op.dev, op.kern, p0*p1*p2) },
			func() error { return opkit.Enqueue(op.dev, hl) },
			func() error { return op.fft.Forward(op.kern, op.half) },
			func() error { return opkit.Enqueue(op.dev, cmulLaunch(op.half, op.spec, w.halfLen())) },
		}
	}
	for _, step := range append(steps, []func() error{
		func() error { return op.fft.Inverse(op.half, op.resp) },
		func() error { return opkit.Enqueue(op.dev, sl) },
		func() error {
			return opkit.Enqueue(op.dev, finishLaunch(op.dparts, sl.GX, hatParts, hl.GX, op.dres+cuda.DevicePtr(8*4*slot)))
		},
	}...) {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// WriteHash adds the device to the CPU op's parameters.
func (op *waveletCUDA) WriteHash(h hash.Hash) { opkit.WriteTwinHash(h, op.WaveletResponse, op.dev) }

// Hashcode is the FNV-1a hash of WriteHash.
func (op *waveletCUDA) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *waveletCUDA) String() string { return opkit.TwinString(op.WaveletResponse, op.dev, false) }
