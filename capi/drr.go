package main

/*
#include <stdint.h>
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/tapeloop/tapeloop/graphs"
	"github.com/tapeloop/tapeloop/graphs/engine"
	"github.com/tapeloop/tapeloop/internal/volume"
)

// drrConfig is the JSON config of tl_drr_create: the CLI's drr flags
// (without the files and the poses), its engine flags, the detector and
// the volume's placement.
type drrConfig struct {
	engineFields
	Spacing         [3]float64         `json:"spacing"`
	Origin          [3]float64         `json:"origin"`
	Direction       *[3][3]float64     `json:"direction"`
	Rows            int                `json:"rows"`
	Cols            int                `json:"cols"`
	Method          string             `json:"method"`
	Step            *float64           `json:"step"`
	HU              bool               `json:"hu"`
	MuWater         *float64           `json:"mu_water"`
	Mu              string             `json:"mu"`
	Post            string             `json:"post"`
	Params          map[string]float64 `json:"params"`
	FailOnNonFinite bool               `json:"fail_on_nonfinite"`
}

func init() { configs["drr"] = drrConfig{} }

// tl_drr_create compiles the DRR of the (nx, ny, nz) float32 volume v (C
// order, copied); *handle receives the object.
//
//export tl_drr_create
func tl_drr_create(config *C.char, v *C.float, nx, ny, nz C.int64_t, handle *C.int64_t) *C.char {
	return create(config, handle, func(c drrConfig, dev *engine.Device) (program, error) {
		vals, err := volumeOf(v, nx, ny, nz)
		if err != nil {
			return nil, err
		}
		vol := &volume.Volume{V: vals, N: [3]int64{int64(nx), int64(ny), int64(nz)}, Spacing: c.Spacing, Origin: c.Origin} // V copied by CompileDRR
		if c.Direction != nil {
			vol.Direction = *c.Direction
		}
		s := graphs.DefaultDRRSpec()
		s.Method, s.Step, s.HU, s.Mu, s.Post, s.Params, s.FailOnNonFinite = orDefault(c.Method, s.Method), c.Step, c.HU, c.Mu, c.Post, c.Params, c.FailOnNonFinite
		if c.MuWater != nil {
			s.MuWater = *c.MuWater
		}
		return graphs.CompileDRR(s, vol, c.Rows, c.Cols, dev)
	})
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// tl_drr_orbit writes the CLI's --orbit n poses about the volume's centre
// into poses (n·14 values: source, center, u, v, pixel).
//
//export tl_drr_orbit
func tl_drr_orbit(h C.int64_t, n C.int64_t, sdd, sid, pixel C.double, poses *C.double, length C.int64_t) *C.char {
	return guard(func() error {
		return call(h, "a DRR", 0, func(p *graphs.DRRProgram) error {
			x, err := p.Orbit(int(n), float64(sdd), float64(sid), float64(pixel))
			if err != nil {
				return err
			}
			if poses == nil || int(length) != len(x) {
				return fmt.Errorf("orbit: poses of %d values, want %d", length, len(x))
			}
			copy(unsafe.Slice((*float64)(unsafe.Pointer(poses)), len(x)), x)
			return nil
		})
	})
}

// tl_drr_run renders the poses (n·14 values) into out (n·rows·cols
// float32 values); *missed is set to 1 when every ray missed the volume.
// Both arrays are used only during the call.
//
//export tl_drr_run
func tl_drr_run(h C.int64_t, poses *C.double, length C.int64_t, out *C.float, outLen C.int64_t, missed *C.int, interruptible C.int) *C.char {
	return guard(func() error {
		return call(h, "a DRR", interruptible, func(p *graphs.DRRProgram) error {
			if poses == nil || out == nil || length < 0 || outLen < 0 {
				return fmt.Errorf("drr: NULL or negative arrays")
			}
			err := p.Run(unsafe.Slice((*float64)(unsafe.Pointer(poses)), int(length)), unsafe.Slice((*float32)(unsafe.Pointer(out)), int(outLen)))
			if err == nil && missed != nil {
				*missed = 0
				if p.AllMissed {
					*missed = 1
				}
			}
			return err
		})
	})
}
