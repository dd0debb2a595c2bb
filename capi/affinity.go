package main

/*
#include <stdint.h>
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/tapeloop/tapeloop/graphs"
)

// affinityConfig is the JSON config of tl_affinity_create: the CLI's
// affinity flags (without the files) and the images' shape and dtype.
type affinityConfig struct {
	Metric  string             `json:"metric"`
	Formula string             `json:"formula"`
	Params  map[string]float64 `json:"params"`
	Method  string             `json:"method"`
	N       int                `json:"n"`
	D       int                `json:"d"`
	Dtype   string             `json:"dtype"`
}

// tl_affinity_create compiles the (n, n) affinity of n images of d values
// against themselves; *handle receives the object.
//
//export tl_affinity_create
func tl_affinity_create(config *C.char, handle *C.int64_t) *C.char {
	return guard(func() error {
		var c affinityConfig
		if err := decode(config, &c); err != nil {
			return err
		}
		dt, err := parseDtype(c.Dtype)
		if err != nil {
			return err
		}
		if handle == nil {
			return fmt.Errorf("affinity: NULL handle")
		}
		s := graphs.AffinitySpec{Metric: c.Metric, Formula: c.Formula, Params: c.Params, Method: c.Method}
		p, err := graphs.CompileAffinity(s, c.N, c.D, dt)
		if err != nil {
			return err
		}
		*handle = C.int64_t(register(&object{affinity: p}))
		return nil
	})
}

// tl_affinity_run computes the (n, n) affinities of the images x (n·d
// values) into out (n·n values), both of element size size (4: float32,
// 8: float64). Both are used only during the call.
//
//export tl_affinity_run
func tl_affinity_run(h C.int64_t, x unsafe.Pointer, xLen C.int64_t, out unsafe.Pointer, outLen C.int64_t, size C.int64_t) *C.char {
	return guard(func() error {
		o, err := lookup(int64(h))
		if err != nil {
			return err
		}
		p := o.affinity
		if p == nil {
			return fmt.Errorf("handle %d: not an affinity", h)
		}
		if int(size) != int(p.Dtype.Size()) {
			return fmt.Errorf("affinity: x has %d-byte values, the program is %v", size, p.Dtype)
		}
		if int(xLen) != p.N*p.D || int(outLen) != p.N*p.N || x == nil || out == nil {
			return fmt.Errorf("affinity: x has %d values and out %d, the program wants %d and %d", xLen, outLen, p.N*p.D, p.N*p.N)
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.closed {
			return fmt.Errorf("handle %d: closed", h)
		}
		if size == 4 {
			return p.Run(unsafe.Slice((*float32)(x), int(xLen)), unsafe.Slice((*float32)(out), int(outLen)))
		}
		return p.Run(unsafe.Slice((*float64)(x), int(xLen)), unsafe.Slice((*float64)(out), int(outLen)))
	})
}
