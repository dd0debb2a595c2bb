package ops

import (
	"errors"
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/parallel"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// FilterMode is how a filter extends an image past its edges.
type FilterMode = cpukern.FilterMode

const (
	// FilterReflect is half-sample symmetric reflection, d c b a | a b c d
	// | d c b a: scipy.ndimage's mode='reflect' (and the wavelet's
	// reflect boundary), repeated for kernels longer than the image.
	FilterReflect = cpukern.FilterReflect
	// FilterNearest repeats the edge pixel, a a a | a b c d | d d d:
	// scipy.ndimage's mode='nearest'.
	FilterNearest = cpukern.FilterNearest
)

// MaxFilterTaps is the most taps of either 1-D kernel of a SepKernel: a
// radius of 2¹⁴ pixels, far beyond any detector.
const MaxFilterTaps = 2<<14 + 1

// SepKernel is a separable 2-D kernel: Row holds the taps along each image
// row (across the columns, x), Col those down each column (y). The taps
// of a kernel of n are correlated with the image about their centre n/2,
// as scipy.ndimage.correlate1d with origin 0 does:
//
//	out[r, c] = Σ_i Σ_j Col[i]·Row[j]·in[ext(r + i − len(Col)/2), ext(c + j − len(Row)/2)]
//
// ext extending the image by Mode. Set replaces the taps between runs
// (a detector's pixel size, known with the poses); the ops filtering with
// the kernel read the taps at each run.
type SepKernel struct {
	Name     string // what labels and hashes call it, e.g. "gauss:sigma_mm=0.8"
	Row, Col []float32
	Mode     FilterMode
	gen      uint64 // counts Set calls: a GPU twin uploads the taps again when it changes
}

// ErrFilter is wrapped by every error about a filter's taps.
var ErrFilter = errors.New("filter")

// NewSepKernel checks the taps (1 to MaxFilterTaps each, finite) and
// returns the kernel; the slices are the kernel's own from now on.
func NewSepKernel(name string, row, col []float32, mode FilterMode) (*SepKernel, error) {
	k := &SepKernel{Name: name, Mode: mode}
	if mode != FilterReflect && mode != FilterNearest {
		return nil, fmt.Errorf("%w: %s: unknown boundary mode %d", ErrFilter, name, mode)
	}
	return k, k.Set(row, col)
}

// Set replaces the taps (checked as NewSepKernel checks them).
func (k *SepKernel) Set(row, col []float32) error {
	for _, t := range []struct {
		axis string
		w    []float32
	}{{"row", row}, {"column", col}} {
		if len(t.w) == 0 || len(t.w) > MaxFilterTaps {
			return fmt.Errorf("%w: %s: %d taps along a %s; want 1 to %d", ErrFilter, k.Name, len(t.w), t.axis, MaxFilterTaps)
		}
		for _, x := range t.w {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return fmt.Errorf("%w: %s: a tap along a %s is %v", ErrFilter, k.Name, t.axis, x)
			}
		}
	}
	k.Row, k.Col = row, col
	k.gen++
	return nil
}

// Filter2D is the Gorgonia op that filters each image of a batch (Batch,
// Rows, Cols) float32 with a separable kernel: a pass along the rows into
// a scratch batch, then a pass down the columns into its output, its own
// buffer; both made at the first run and reused. Only the batch's valid
// images are filtered (SetValidRows). Apply filters in place, or into any
// buffer, without the graph.
type Filter2D struct {
	owned

	K                 *SepKernel
	Batch, Rows, Cols int
	valid             int
	out               *tensor.Dense
	tmp               []float32
}

// NewFilter2D returns the op for batches of batch images of rows×cols.
func NewFilter2D(k *SepKernel, batch, rows, cols int) *Filter2D {
	if batch < 1 || rows < 1 || cols < 1 || k == nil {
		panic("ops: Filter2D needs a kernel, and batch, rows and cols ≥ 1")
	}
	return &Filter2D{K: k, Batch: batch, Rows: rows, Cols: cols, valid: batch}
}

// SetValidRows sets how many images of the next batch are real.
func (op *Filter2D) SetValidRows(n int) { op.valid = n }

// ResidentBytes is the scratch batch of the row pass.
func (op *Filter2D) ResidentBytes() int64 { return 4 * int64(op.Batch) * int64(op.Rows*op.Cols) }

// Arity is 1: the images.
func (op *Filter2D) Arity() int { return 1 }

// Type is Tensor3 float32 → Tensor3 float32.
func (op *Filter2D) Type() hm.Type {
	return hm.NewFnType(G.TensorType{Dims: 3, Of: tensor.Float32}, G.TensorType{Dims: 3, Of: tensor.Float32})
}

// InferShape checks the input is (Batch, Rows, Cols).
func (op *Filter2D) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("filter2d: want 1 input, got %d", len(in))
	}
	want := tensor.Shape{op.Batch, op.Rows, op.Cols}
	if s, ok := in[0].(tensor.Shape); ok && !s.Eq(want) {
		return nil, fmt.Errorf("filter2d: input shape %v, want %v", s, want)
	}
	return want, nil
}

// images checks the input of Do.
func (op *Filter2D) images(in []G.Value) ([]float32, error) {
	x, ok := in[0].(*tensor.Dense)
	if len(in) != 1 || !ok || x.Dtype() != tensor.Float32 || x.Shape().TotalSize() != op.Batch*op.Rows*op.Cols {
		return nil, fmt.Errorf("filter2d: want float32 (%d, %d, %d)", op.Batch, op.Rows, op.Cols)
	}
	return x.Data().([]float32), nil
}

// Do filters each valid image into the op's own buffer.
func (op *Filter2D) Do(in ...G.Value) (G.Value, error) {
	src, err := op.images(in)
	if err != nil {
		return nil, err
	}
	if op.out == nil {
		op.out = opkit.NewOwned(tensor.Float32, op.Batch, op.Rows, op.Cols)
	}
	op.Apply(op.out.Data().([]float32), src, min(op.valid, op.Batch))
	return op.out, nil
}

// Apply filters the first n images of src into dst, which may be src
// itself (in place), on every core; both hold at least n images. The
// scratch batch is made at the first call.
func (op *Filter2D) Apply(dst, src []float32, n int) {
	per := op.Rows * op.Cols
	if n < 0 || n > op.Batch || len(src) < n*per || len(dst) < n*per {
		panic(fmt.Sprintf("ops: Filter2D of %d images of %d×%d applied to %d of %d and %d values", op.Batch, op.Rows, op.Cols, n, len(src), len(dst)))
	}
	if n == 0 {
		return
	}
	if op.tmp == nil {
		op.tmp = make([]float32, op.Batch*per)
	}
	k, tmp, lines := op.K, op.tmp[:n*per], n*op.Rows
	// About 64 Ki multiply-adds a chunk: a goroutine's start is worth it.
	grain := func(taps int) int { return max(1, (1<<16)/(op.Cols*taps)) }
	parallel.For(lines, grain(len(k.Row)), func(lo, hi int) {
		cpukern.FilterRows(tmp, src[:n*per], op.Cols, lo, hi, k.Row, k.Mode)
	})
	parallel.For(lines, grain(len(k.Col)), func(lo, hi int) {
		cpukern.FilterCols(dst[:n*per], tmp, op.Rows, op.Cols, lo, hi, k.Col, k.Mode)
	})
}

// WriteHash writes every parameter of the op: its kernel's name, taps and
// mode, and the shape.
func (op *Filter2D) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "filter2d(%q,row=%v,col=%v,mode=%d,batch=%d,rows=%d,cols=%d)", op.K.Name, op.K.Row, op.K.Col, op.K.Mode, op.Batch, op.Rows, op.Cols)
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *Filter2D) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *Filter2D) String() string { return "filter " + op.K.Name }

// GaussianTaps is the 1-D Gaussian kernel of standard deviation sigma
// pixels as scipy.ndimage.gaussian_filter makes it: taps at the integers
// −r … r, r = ⌊truncate·sigma + ½⌋, exp(−x²/2σ²) normalised to sum 1 (in
// float64, then rounded). An error for sigma or truncate not positive and
// finite, or more than MaxFilterTaps taps.
func GaussianTaps(sigma, truncate float64) ([]float32, error) {
	if !(sigma > 0) || math.IsInf(sigma, 0) || !(truncate > 0) || math.IsInf(truncate, 0) {
		return nil, fmt.Errorf("%w: a Gaussian of σ %g pixels truncated at %g σ: both must be positive and finite", ErrFilter, sigma, truncate)
	}
	r := math.Floor(truncate*sigma + 0.5)
	if 2*r+1 > MaxFilterTaps {
		return nil, fmt.Errorf("%w: a Gaussian of σ %g pixels truncated at %g σ takes %g taps; at most %d", ErrFilter, sigma, truncate, 2*r+1, MaxFilterTaps)
	}
	n := int(r)
	if n == 0 { // one tap, 1 (σ so small that σ² is 0 would make it 0/0)
		return []float32{1}, nil
	}
	w := make([]float64, 2*n+1)
	var sum float64
	for i := range w {
		x := float64(i - n)
		w[i] = math.Exp(-0.5 * x * x / (sigma * sigma))
		sum += w[i]
	}
	out := make([]float32, len(w))
	for i, v := range w {
		out[i] = float32(v / sum)
	}
	return out, nil
}

// BoxTaps is the mean of n pixels, n taps of 1/n (scipy.ndimage's
// uniform_filter of size n: for even n the window reaches n/2 before the
// pixel and n/2 − 1 after).
func BoxTaps(n int) ([]float32, error) {
	if n < 1 || n > MaxFilterTaps {
		return nil, fmt.Errorf("%w: a box of %d pixels; want 1 to %d", ErrFilter, n, MaxFilterTaps)
	}
	w := make([]float32, n)
	for i := range w {
		w[i] = float32(1 / float64(n))
	}
	return w, nil
}

// DerivativeTaps is the central difference per unit length for pixels
// step apart: (x[i+1] − x[i−1]) / 2·step, taps −1/2step, 0, 1/2step.
func DerivativeTaps(step float64) ([]float32, error) {
	if !(step > 0) || math.IsInf(step, 0) {
		return nil, fmt.Errorf("%w: a derivative over pixels %g apart: want a positive, finite spacing", ErrFilter, step)
	}
	d := float32(0.5 / step)
	return []float32{-d, 0, d}, nil
}

// SmoothTaps is the binomial smoothing [1, 2, 1]/4 across a Sobel
// derivative.
func SmoothTaps() []float32 { return []float32{0.25, 0.5, 0.25} }
