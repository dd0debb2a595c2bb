package ops

import (
	"fmt"
	"math"
)

// Reload replaces the images with x, of the same dtype and N·D values,
// copied into the buffers p already holds, and recomputes the norms its
// metric keeps, allocating nothing. It refuses NaN and Inf, and for cosine
// an all-zero image, as NewPairData does. Only for images in process
// memory on the CPU (not 8-bit, not mapped, not uploaded to a GPU).
func (p *PairData) Reload(x any) error {
	if p.U8 != nil || p.Mapped {
		return fmt.Errorf("%w: these images cannot be replaced", ErrPairInput)
	}
	switch v := x.(type) {
	case []float32:
		if p.X32 == nil || len(v) != len(p.X32) {
			return fmt.Errorf("%w: %d float32 values, the images are %d %v values", ErrPairInput, len(v), p.N*p.D, p.Dtype)
		}
		return reload(p, v, p.X32)
	case []float64:
		if p.X64 == nil || len(v) != len(p.X64) {
			return fmt.Errorf("%w: %d float64 values, the images are %d %v values", ErrPairInput, len(v), p.N*p.D, p.Dtype)
		}
		return reload(p, v, p.X64)
	}
	return fmt.Errorf("%w: images of type %T", ErrPairInput, x)
}

func reload[T float32 | float64](p *PairData, src, dst []T) error {
	d := p.D
	for i := range p.N {
		var ss float64
		for k, v := range src[i*d : (i+1)*d] {
			f := float64(v)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Errorf("%w: image %d, value %d is %g", ErrPairInput, i, k, f)
			}
			ss += f * f
		}
		if p.norm != nil && ss == 0 {
			return fmt.Errorf("%w: image %d is all zeros: its cosine affinity is undefined", ErrPairInput, i)
		}
		if p.sq != nil {
			p.sq[i] = ss
		}
		if p.norm != nil {
			p.norm[i] = math.Sqrt(ss)
		}
	}
	copy(dst, src)
	return nil
}

// Reload recomputes the per-image values of the formula after
// data.Reload, in place.
func (pf *PairFormula) Reload(data *PairData) {
	nr := pf.Plan.NRow()
	switch data.Dtype.Name() {
	case "float32":
		rowValues(pf, data.X32, data.N, data.D)
		refill(pf.cols32, pf.rowVals, data.N, nr)
	default:
		rowValues(pf, data.X64, data.N, data.D)
		refill(pf.cols64, pf.rowVals, data.N, nr)
	}
}

func refill[T float32 | float64](cols [][]T, vals []float64, n, nr int) {
	for k := range cols {
		for i := range n {
			cols[k][i] = T(vals[i*nr+k])
		}
	}
}
