//go:build tapeloop_cuda || tapeloop_cudaemu

package ops

import (
	"fmt"

	"github.com/tapeloop/tapeloop/cuda"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// raysCUDA casts RigidDRR's and Project's rays on a GPU (drr_grad and
// drr_backproject, cuda/kernels/drrgrad.cu), one thread per ray, a launch
// per view (each has its own lref). The kernels' volume, the rays, the
// images (with the derivatives, for RigidDRR; with the images' gradient
// and the volume's, for Project) live in one device arena made at the
// first call; the volume and the rays are uploaded again only when they
// changed.
type raysCUDA struct {
	dev                                        *cuda.Device
	grads, back                                bool // derivative buffers; back-projection buffers
	arena                                      *cuda.Arena
	dv, dsrc, ddst, dout, dgs, dgd, dup, dgrad cuda.DevicePtr
	volGen, rayGen                             uint64 // of the copies on the device
	nvol                                       int64  // values in the kernels' volume
}

func (r *raysCUDA) device() string { return r.dev.String() }

// deviceBytes is what the arena holds for g.
func (r *raysCUDA) deviceBytes(g *rayGeom) int64 {
	n, v := int64(g.rays()), int64(len(g.kvol.V))
	b := 4*v + 48*n + 8*n + 8*256
	if r.grads {
		b += 48 * n
	}
	if r.back {
		b += 8*n + 8*v
	}
	return b
}

func (r *raysCUDA) setup(g *rayGeom) error {
	if r.arena != nil {
		return nil
	}
	a, err := r.dev.NewArena(r.deviceBytes(g))
	if err != nil {
		return err
	}
	n, v := int64(g.rays()), int64(len(g.kvol.V))
	for _, b := range []struct {
		p     *cuda.DevicePtr
		bytes int64
		want  bool
	}{{&r.dv, 4 * v, true}, {&r.dsrc, 24 * n, true}, {&r.ddst, 24 * n, true}, {&r.dout, 8 * n, true},
		{&r.dgs, 24 * n, r.grads}, {&r.dgd, 24 * n, r.grads}, {&r.dup, 8 * n, r.back}, {&r.dgrad, 8 * v, r.back}} {
		if !b.want {
			continue
		}
		if *b.p, err = a.Alloc(b.bytes); err != nil {
			a.Free()
			return err
		}
	}
	r.arena, r.nvol = a, v
	return nil
}

// upload refreshes the device's rays (and volume, when vol) if they
// changed.
func (r *raysCUDA) upload(g *rayGeom, vol bool) error {
	if err := r.setup(g); err != nil {
		return err
	}
	if vol && r.volGen != g.volGen {
		if err := cuda.Upload(r.dev, r.dv, g.kvol.V); err != nil {
			return err
		}
		r.volGen = g.volGen
	}
	if r.rayGen != g.rayGen {
		if err := cuda.Upload(r.dev, r.dsrc, g.src); err != nil {
			return err
		}
		if err := cuda.Upload(r.dev, r.ddst, g.dst); err != nil {
			return err
		}
		r.rayGen = g.rayGen
	}
	return nil
}

func (r *raysCUDA) cast(g *rayGeom, out, gsrc, gdst []float64, _ func() bool) error {
	if gsrc != nil && !r.grads {
		return fmt.Errorf("ops: %v: derivatives asked of a twin without their buffers", r.dev)
	}
	if err := r.upload(g, true); err != nil {
		return err
	}
	per := int64(g.perView())
	for b := range int64(g.views) {
		o := b * per
		gs, gd := cuda.DevicePtr(0), cuda.DevicePtr(0)
		if gsrc != nil {
			gs, gd = r.dgs+cuda.DevicePtr(24*o), r.dgd+cuda.DevicePtr(24*o)
		}
		l := drrGradLaunch(g.kvol, int(per), g.step, g.lref[b], r.dv, r.dsrc+cuda.DevicePtr(24*o), r.ddst+cuda.DevicePtr(24*o),
			r.dout+cuda.DevicePtr(8*o), gs, gd)
		if err := opkit.Run(r.dev, l); err != nil {
			return err
		}
	}
	if err := cuda.Download(r.dev, out, r.dout); err != nil {
		return err
	}
	if gsrc != nil {
		if err := cuda.Download(r.dev, gsrc, r.dgs); err != nil {
			return err
		}
		return cuda.Download(r.dev, gdst, r.dgd)
	}
	return nil
}

func (r *raysCUDA) backProject(g *rayGeom, up, grad []float64) error {
	if !r.back {
		return fmt.Errorf("ops: %v: back-projection asked of a twin without its buffers", r.dev)
	}
	if err := r.upload(g, false); err != nil {
		return err
	}
	if err := cuda.Upload(r.dev, r.dup, up); err != nil {
		return err
	}
	if err := cuda.Zero(r.dev, r.dgrad, 2*int64(len(grad))); err != nil { // float64: two float32 each
		return err
	}
	per := int64(g.perView())
	for b := range int64(g.views) {
		o := b * per
		l := drrBackLaunch(g.kvol, int(per), g.step, g.lref[b], r.dsrc+cuda.DevicePtr(24*o), r.ddst+cuda.DevicePtr(24*o),
			r.dup+cuda.DevicePtr(8*o), r.dgrad)
		if err := opkit.Run(r.dev, l); err != nil {
			return err
		}
	}
	return cuda.Download(r.dev, grad, r.dgrad)
}
