package main

/*
#include <stdint.h>
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/tapeloop/tapeloop/graphs/affinity"
	"github.com/tapeloop/tapeloop/internal/engine"
)

// affinityConfig is the JSON config of tl_affinity_create: its engine
// flags (--block is the engine's batch), the affinity's Config (which
// holds the dtype, as the command's --dtype), and the arguments only the
// C ABI has: the images' shape (n, d), the column images' count (cols,
// 0: the batch against itself) and the shard (index, count) of the rows
// to compute (none: all of them).
type affinityConfig struct {
	deviceFields
	affinity.Config
	N     int     `json:"n"`
	D     int     `json:"d"`
	Cols  int     `json:"cols"`
	Shard *[2]int `json:"shard"`
}

func init() { configs["affinity"] = affinityConfig{} }

// tl_affinity_create compiles the affinity of n images of d values
// against themselves (or against cols others); *handle receives the
// object.
//
//export tl_affinity_create
func tl_affinity_create(config *C.char, handle *C.int64_t) *C.char {
	return create(config, handle, func(c affinityConfig, dev *engine.Device) (program, error) {
		if c.Shard != nil {
			if c.Cols != 0 {
				return nil, fmt.Errorf("shard=: a shard's rows are of a batch against itself, not against column images")
			}
			return affinity.CompileShard(c.Config, c.N, c.D, c.Shard[0], c.Shard[1], dev)
		}
		return affinity.Compile(c.Config, c.N, c.D, c.Cols, dev)
	})
}

// tl_affinity_run computes the affinities of the images x (xLen values)
// against themselves, or against y (yLen values; NULL and 0 without
// cols), of element size size (4: float32, 8: float64). Without top-k out
// (outLen values, the same element size) receives them; with top-k idx
// (int64) and vals (float64), outLen values each, receive each row's
// best columns and affinities. All are used only during the call.
//
//export tl_affinity_run
func tl_affinity_run(h C.int64_t, x unsafe.Pointer, xLen C.int64_t, y unsafe.Pointer, yLen C.int64_t,
	out unsafe.Pointer, idx *C.int64_t, vals *C.double, outLen C.int64_t, size C.int64_t, interruptible C.int) *C.char {
	return guard(func() error {
		return call(h, "an affinity", interruptible, func(p *affinity.Program) error {
			if int(size) != int(p.Dtype.Size()) {
				return fmt.Errorf("affinity: x has %d-byte values, the program is %v", size, p.Dtype)
			}
			if x == nil || xLen < 0 || yLen < 0 || outLen < 0 || (y == nil) != (yLen == 0) {
				return fmt.Errorf("affinity: NULL or negative arrays")
			}
			var iv []int64
			var vv []float64
			if p.TopK() > 0 {
				if idx == nil || vals == nil {
					return fmt.Errorf("affinity: top-k needs idx and vals")
				}
				iv = unsafe.Slice((*int64)(unsafe.Pointer(idx)), int(outLen))
				vv = unsafe.Slice((*float64)(unsafe.Pointer(vals)), int(outLen))
			} else if out == nil {
				return fmt.Errorf("affinity: NULL out")
			}
			if size == 4 {
				return p.Run(slice[float32](x, xLen), sliceOrNil[float32](y, yLen), outSlice[float32](out, outLen), iv, vv)
			}
			return p.Run(slice[float64](x, xLen), sliceOrNil[float64](y, yLen), outSlice[float64](out, outLen), iv, vv)
		})
	})
}

func slice[T any](p unsafe.Pointer, n C.int64_t) []T { return unsafe.Slice((*T)(p), int(n)) }

// sliceOrNil is nil (no array) for a NULL p.
func sliceOrNil[T any](p unsafe.Pointer, n C.int64_t) any {
	if p == nil {
		return nil
	}
	return slice[T](p, n)
}

// outSlice is like sliceOrNil, typed nil for no array.
func outSlice[T any](p unsafe.Pointer, n C.int64_t) any {
	if p == nil {
		return []T(nil)
	}
	return slice[T](p, n)
}
