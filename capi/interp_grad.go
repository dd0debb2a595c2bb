package main

/*
#include <stdint.h>
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/tapeloop/tapeloop/graphs/interp"
)

// tl_interp_grad computes the gradients of a cost with respect to n
// queries x and to the table's values, given up, the cost's gradient with
// respect to the output tl_interp_run gives for x (upLen values of the
// program's element size): dx (n values of the program's) and df (valuesLen
// = M·G float64, row-major) receive them (interp.Program.Grad). x is of
// the element size size, as in tl_interp_run. All are used only during
// the call.
//
//export tl_interp_grad
func tl_interp_grad(h C.int64_t, x unsafe.Pointer, n C.int64_t, up unsafe.Pointer, upLen C.int64_t, dx unsafe.Pointer, df *C.double, valuesLen C.int64_t, size C.int64_t) *C.char {
	return guard(func() error {
		return call(h, "an interpolation", 0, func(p *interp.Program) error {
			if int(size) != int(p.Dtype.Size()) && size != 8 {
				return fmt.Errorf("interp: x has %d-byte values, the program is %v", size, p.Dtype)
			}
			if n < 1 || int(upLen) != p.OutLen(int(n)) || x == nil || up == nil || dx == nil || df == nil || valuesLen < 1 {
				return fmt.Errorf("interp: x has %d queries and the upstream gradient %d values: want at least one query and %d values", n, upLen, p.OutLen(int(n)))
			}
			var u, d any = unsafe.Slice((*float64)(up), int(upLen)), unsafe.Slice((*float64)(dx), int(n))
			if p.Dtype.Size() == 4 {
				u, d = unsafe.Slice((*float32)(up), int(upLen)), unsafe.Slice((*float32)(dx), int(n))
			}
			f := unsafe.Slice((*float64)(unsafe.Pointer(df)), int(valuesLen))
			if size == 4 {
				return p.Grad(unsafe.Slice((*float32)(x), int(n)), u, d, f)
			}
			return p.Grad(unsafe.Slice((*float64)(x), int(n)), u, d, f)
		})
	})
}
