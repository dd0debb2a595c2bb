package finite

import "math"

// First is the index of the first NaN or ±Inf in x, or −1. It adds v − v
// over blocks (0 for a finite v, NaN otherwise), four sums at a time, and
// looks for the value only in a block whose sum is not 0.
func First[T float32 | float64](x []T) int {
	const block = 256
	for b := 0; b < len(x); b += block {
		blk := x[b:min(b+block, len(x))]
		var s0, s1, s2, s3 T
		i := 0
		for ; i+4 <= len(blk); i += 4 {
			s0 += blk[i] - blk[i]
			s1 += blk[i+1] - blk[i+1]
			s2 += blk[i+2] - blk[i+2]
			s3 += blk[i+3] - blk[i+3]
		}
		for ; i < len(blk); i++ {
			s0 += blk[i] - blk[i]
		}
		if s0+s1+s2+s3 == 0 {
			continue
		}
		for i, v := range blk {
			if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
				return b + i
			}
		}
	}
	return -1
}
