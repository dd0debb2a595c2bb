package cpukern

// #include "stats.h"
import "C"

import (
	"math"
	"unsafe"
)

// SumMax is Σ x in float64 as eight interleaved partial sums (x[i] into
// s[i mod 8]), added as ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)),
// and max x (−Inf when x is empty; NaNs are passed over).
func SumMax[T float32 | float64](x []T) (sum, max float64) {
	if len(x) == 0 {
		return 0, math.Inf(-1)
	}
	var r C.tl_sum_max
	switch d := any(x).(type) {
	case []float32:
		r = C.tl_sum_max_f32((*C.float)(unsafe.Pointer(&d[0])), C.int64_t(len(d)))
	case []float64:
		r = C.tl_sum_max_f64((*C.double)(unsafe.Pointer(&d[0])), C.int64_t(len(d)))
	}
	return float64(r.sum), float64(r.max)
}
