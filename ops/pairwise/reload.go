package pairwise

import (
	"fmt"
	"math"

	"github.com/tapeloop/tapeloop/internal/finite"
)

// Reload replaces the images with x, of the same dtype and N·D values,
// copied into the buffers p already holds, and recomputes the norms its
// metric keeps (for float32 l2 on the packed matrix product, the images'
// mean and the norms about it, at the first block computed after it),
// allocating nothing. It refuses NaN and Inf, and for cosine an all-zero
// image, as NewPairData does. Only for images in process memory on the
// CPU (not 8-bit, not mapped, not uploaded to a GPU).
func (p *PairData) Reload(x any) error {
	if n := SliceLen(x); n != p.N*p.D {
		return fmt.Errorf("%w: %d values, the images are %d %v values", ErrPairInput, n, p.N*p.D, p.Dtype)
	}
	return p.ReloadRows(x, 0)
}

// ReloadRows replaces images [lo, lo + len(x)/D) with x as Reload does;
// len(x) must be a multiple of D.
func (p *PairData) ReloadRows(x any, lo int) error {
	if p.U8 != nil || p.Mapped {
		return fmt.Errorf("%w: these images cannot be replaced", ErrPairInput)
	}
	n := SliceLen(x)
	if n%p.D != 0 || lo < 0 || lo+n/p.D > p.N {
		return fmt.Errorf("%w: %d values from image %d: not whole images of %d values within the %d held", ErrPairInput, n, lo, p.D, p.N)
	}
	switch v := x.(type) {
	case []float32:
		if p.X32 == nil {
			return fmt.Errorf("%w: float32 values, the images are %v", ErrPairInput, p.Dtype)
		}
		return reload(p, v, p.X32, lo)
	case []float64:
		if p.X64 == nil {
			return fmt.Errorf("%w: float64 values, the images are %v", ErrPairInput, p.Dtype)
		}
		return reload(p, v, p.X64, lo)
	}
	return fmt.Errorf("%w: images of type %T", ErrPairInput, x)
}

// SliceLen is the length of x, a []float32 or []float64, or −1 for
// anything else.
func SliceLen(x any) int {
	switch v := x.(type) {
	case []float32:
		return len(v)
	case []float64:
		return len(v)
	}
	return -1
}

func reload[T float32 | float64](p *PairData, src, dst []T, lo int) error {
	if err := scan(p, src, lo); err != nil {
		return err
	}
	copy(dst[lo*p.D:], src)
	p.version++
	if p.mu != nil {
		p.centring.Lock()
		p.stale = true
		p.centring.Unlock()
	}
	return nil
}

// scan checks images src, images lo, lo+1, … of p, for NaN and ±Inf (and
// for cosine, an image of zeros), naming the first such image, and sets the
// norms cosine keeps (l2's are centre's).
func scan[T float32 | float64](p *PairData, src []T, lo int) error {
	d := p.D
	if p.norm == nil { // no norms to keep: only the check
		if i := finite.First(src); i >= 0 {
			return fmt.Errorf("%w: image %d, value %d is %g", ErrPairInput, lo+i/d, i%d, float64(src[i]))
		}
	} else {
		for r := range len(src) / d {
			i := lo + r
			var ss float64
			for k, v := range src[r*d : (r+1)*d] {
				f := float64(v)
				if math.IsNaN(f) || math.IsInf(f, 0) {
					return fmt.Errorf("%w: image %d, value %d is %g", ErrPairInput, i, k, f)
				}
				ss += f * f
			}
			if ss == 0 {
				return fmt.Errorf("%w: image %d is all zeros: its cosine affinity is undefined", ErrPairInput, i)
			}
			p.norm[i] = math.Sqrt(ss)
		}
	}
	return nil
}

// Version counts the Reloads of p: a device's copy of the images is
// current while it holds the same count.
func (p *PairData) Version() uint64 { return p.version }

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
