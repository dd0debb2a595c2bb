package main

/*
#include <stdint.h>
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/tapeloop/tapeloop/graphs/interp"
	"github.com/tapeloop/tapeloop/internal/engine"
)

// interpConfig is the JSON config of tl_interp_create: the engine's
// fields and the interpolation's Config; the table comes as an argument.
type interpConfig struct {
	engineFields
	interp.Config
}

func init() { configs["interp"] = interpConfig{} }

// tl_interp_create compiles an interpolation of the (m, g) float64 table f
// (copied); *handle receives the object.
//
//export tl_interp_create
func tl_interp_create(config *C.char, f *C.double, m, g C.int64_t, handle *C.int64_t) *C.char {
	return create(config, handle, func(c interpConfig, dev *engine.Device) (program, error) {
		if f == nil || m < 1 || g < 1 {
			return nil, fmt.Errorf("--f: need an (M, G) table, got M = %d, G = %d", m, g)
		}
		tab := unsafe.Slice((*float64)(unsafe.Pointer(f)), int(m)*int(g)) // copied by interp.Compile
		return interp.Compile(c.Config, tab, int(m), int(g), dev)
	})
}

// tl_interp_shape reports the compiled block, the result's columns (M
// for the reduction "none", else 0) and the element size (4 or 8).
//
//export tl_interp_shape
func tl_interp_shape(h C.int64_t, batch, cols, size *C.int64_t) *C.char {
	return guard(func() error {
		return call(h, "an interpolation", 0, func(p *interp.Program) error {
			*batch, *cols, *size = C.int64_t(p.Batch), C.int64_t(p.Cols), C.int64_t(p.Dtype.Size())
			return nil
		})
	})
}

// tl_interp_run evaluates n queries x into out (outLen values): x of the
// element size size (4: float32, 8: float64), out of the program's
// (tl_interp_shape). A float32 program takes float64 x too, placed on the
// grid in float64 before anything is rounded: the way to keep the digits
// of queries far from zero. Both are used only during the call.
//
//export tl_interp_run
func tl_interp_run(h C.int64_t, x unsafe.Pointer, n C.int64_t, out unsafe.Pointer, outLen C.int64_t, size C.int64_t, interruptible C.int) *C.char {
	return guard(func() error {
		return call(h, "an interpolation", interruptible, func(p *interp.Program) error {
			if int(size) != int(p.Dtype.Size()) && size != 8 {
				return fmt.Errorf("interp: x has %d-byte values, the program is %v", size, p.Dtype)
			}
			if n < 1 || int(outLen) != p.OutLen(int(n)) || x == nil || out == nil {
				return fmt.Errorf("interp: x has %d queries and out %d values: want at least one query and %d values", n, outLen, p.OutLen(int(n)))
			}
			var dst any = unsafe.Slice((*float64)(out), int(outLen))
			if p.Dtype.Size() == 4 {
				dst = unsafe.Slice((*float32)(out), int(outLen))
			}
			if size == 4 {
				return p.Run(unsafe.Slice((*float32)(x), int(n)), dst)
			}
			return p.Run(unsafe.Slice((*float64)(x), int(n)), dst)
		})
	})
}
