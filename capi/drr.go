package main

/*
#include <stdint.h>
*/
import "C"

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/tapeloop/tapeloop/graphs/drr"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/filejob"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops"
)

// drrConfig is the JSON config of tl_drr_create: the engine's fields,
// the DRR's Config (the CLI's drr options; its spacing and origin place
// the array, 1 mm and 0 when not given), and what only the in-process
// object takes: the array's direction and the detector.
type drrConfig struct {
	engineFields
	drr.Config
	// Direction is the world directions of the array's index axes, as
	// columns (a volume file's header says it; the CLI has no flag);
	// nil: the identity.
	Direction *[3][3]float64 `json:"direction"`
	// Rows and Cols are the detector's pixels (the CLI's --detector RxC,
	// or its geometry file's).
	Rows int `json:"rows"`
	Cols int `json:"cols"`
}

func init() {
	configs["drr"] = drrConfig{}
	defaultConfigs["drr"] = drrConfig{Config: drr.DefaultConfig()}
	// The orbit's and the detector's defaults are the CLI's.
	s := filejob.DefaultDRRSpec()
	var rows, cols int
	if _, err := fmt.Sscanf(s.Detector, "%dx%d", &rows, &cols); err != nil {
		panic("drr: the default detector " + s.Detector + ": " + err.Error())
	}
	extraDefaults["drr"] = map[string]any{"sdd": s.SDD, "sid": s.SID, "pixel": s.Pixel, "detector": []int{rows, cols}}
	limits["drr"] = map[string]any{"poses": ops.MaxPoses}
}

// tl_drr_create compiles the DRR of the (nx, ny, nz) float32 volume v (C
// order, copied); *handle receives the object.
//
//export tl_drr_create
func tl_drr_create(config *C.char, v *C.float, nx, ny, nz C.int64_t, handle *C.int64_t) *C.char {
	return create(config, handle, func(c drrConfig, dev *engine.Device) (program, error) {
		if c.Dtype != "" && c.Dtype != "float32" { // the CLI's drr has no engine --dtype
			return nil, fmt.Errorf("--dtype %q: a DRR renders float32 images", c.Dtype)
		}
		vals, err := volumeOf(v, nx, ny, nz)
		if err != nil {
			return nil, err
		}
		// An array's own voxel size is 1 mm, its origin 0: the Config's
		// spacing and origin replace them (V is copied by drr.Compile).
		vol := &volume.Volume{V: vals, N: [3]int64{int64(nx), int64(ny), int64(nz)}, Spacing: [3]float64{1, 1, 1}}
		if c.Direction != nil {
			if *c.Direction == ([3][3]float64{}) { // the volume's zero value, which reads as the identity
				return nil, fmt.Errorf("direction=: all zeros; want the world directions of the index axes as columns (leave it out for the identity)")
			}
			vol.Direction = *c.Direction
		}
		cfg := c.Config
		cfg.Method = orDefault(cfg.Method, drr.DefaultConfig().Method)
		return drr.Compile(cfg, vol, c.Rows, c.Cols, dev)
	})
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// tl_drr_orbit writes the CLI's --orbit n poses into poses (n·14 values:
// source, center, u, v, pixel): about axis (3 values; NULL: z) through iso
// (3 values; NULL: the volume's centre), from start degrees.
//
//export tl_drr_orbit
func tl_drr_orbit(h C.int64_t, n C.int64_t, sdd, sid, pixel C.double, iso *C.double, start C.double, axis *C.double, poses *C.double, length C.int64_t) *C.char {
	return guard(func() error {
		return call(h, "a DRR", 0, func(p *drr.Program) error {
			var c *[3]float64
			if iso != nil {
				c = (*[3]float64)(unsafe.Slice((*float64)(unsafe.Pointer(iso)), 3))
			}
			a := [3]float64{0, 0, 1}
			if axis != nil {
				a = [3]float64(unsafe.Slice((*float64)(unsafe.Pointer(axis)), 3))
			}
			x, err := p.OrbitAbout(int(n), c, a, float64(start), float64(sdd), float64(sid), float64(pixel))
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
// float32 values). *warnings receives this call's warnings, a line each,
// for the caller to free with tl_free, or NULL when it has none or fails:
// the faults of its geometry (a source or detector inside the volume, the
// volume behind the source, poses whose every ray missed it) and a
// trilinear step longer than the voxels, options named as the caller's
// keys (step=). Both arrays are used only during the call.
//
//export tl_drr_run
func tl_drr_run(h C.int64_t, poses *C.double, length C.int64_t, out *C.float, outLen C.int64_t, warnings **C.char, interruptible C.int) *C.char {
	return guard(func() error {
		if warnings != nil {
			*warnings = nil
		}
		err := call(h, "a DRR", interruptible, func(p *drr.Program) error {
			if poses == nil || out == nil || length < 0 || outLen < 0 {
				return fmt.Errorf("drr: NULL or negative arrays")
			}
			err := p.Run(unsafe.Slice((*float64)(unsafe.Pointer(poses)), int(length)), unsafe.Slice((*float32)(unsafe.Pointer(out)), int(outLen)))
			if err == nil && warnings != nil && len(p.Warnings) > 0 { // this run's, read in its turn
				*warnings = C.CString(keywords(strings.Join(p.Warnings, "\n")))
			}
			return err
		})
		if err != nil && warnings != nil && *warnings != nil { // a SIGINT as the run finished
			tl_free(*warnings)
			*warnings = nil
		}
		return err
	})
}
