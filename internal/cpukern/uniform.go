package cpukern

// #include "uniform.h"
import "C"

import "unsafe"

// PCGUniform sets dst[i] to a + span·u_i converted to T, where u_i is the
// (i+1)-th Float64 of rand.New(rand.NewPCG(hi, lo)) (math/rand/v2): the
// generator's (i+1)-th output, its low 53 bits over 2⁵³. The multiply and
// the add round separately, as Go's a + span*u does on amd64. It reports
// false, without writing dst, on a CPU without AVX-512: the caller then
// generates the numbers itself.
func PCGUniform[T float32 | float64](dst []T, hi, lo uint64, a, span float64) bool {
	if len(dst) == 0 {
		return C.tl_pcg_uniform_f64(0, nil, 0, 0, 0, 0) == 0
	}
	n, h, l, ca, cs := C.int64_t(len(dst)), C.uint64_t(hi), C.uint64_t(lo), C.double(a), C.double(span)
	switch d := any(dst).(type) {
	case []float32:
		return C.tl_pcg_uniform_f32(n, (*C.float)(unsafe.Pointer(&d[0])), h, l, ca, cs) == 0
	case []float64:
		return C.tl_pcg_uniform_f64(n, (*C.double)(unsafe.Pointer(&d[0])), h, l, ca, cs) == 0
	}
	return false
}
