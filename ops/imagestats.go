package ops

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// ImageStats is the Gorgonia op that summarises each image of a batch:
// for (Batch, Rows, Cols) float32 images it returns (Batch, ImageStatsWidth)
// float64, per image its smallest value, its largest value and how many of
// its pixels are nonzero. The extremes are taken in float32 with Go's min
// and max (a NaN pixel makes both NaN), so each is one of the image's own
// values. It runs on the CPU, on the images wherever their op ran.
type ImageStats struct {
	owned

	Batch, Rows, Cols int
	valid             int // images of the next batch to reduce (0: all)
	out               *tensor.Dense
}

// SetValidRows sets how many leading images of the next batch are real:
// the rows of the others keep what they held.
func (op *ImageStats) SetValidRows(n int) { op.valid = n }

// ImageStatsWidth is the length of an image's row of ImageStats: minimum,
// maximum, nonzero pixels.
const ImageStatsWidth = 3

// NewImageStats returns the op for batches of batch rows×cols images.
func NewImageStats(batch, rows, cols int) *ImageStats {
	if batch < 1 || rows < 1 || cols < 1 {
		panic("ops: ImageStats needs batch, rows and cols ≥ 1")
	}
	return &ImageStats{Batch: batch, Rows: rows, Cols: cols}
}

// Arity is 1: the images.
func (op *ImageStats) Arity() int { return 1 }

// Type is Tensor3 float32 → Matrix float64.
func (op *ImageStats) Type() hm.Type {
	return hm.NewFnType(G.TensorType{Dims: 3, Of: tensor.Float32}, G.TensorType{Dims: 2, Of: tensor.Float64})
}

// InferShape is (Batch, ImageStatsWidth).
func (op *ImageStats) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("imagestats: want 1 input, got %d", len(in))
	}
	if s, ok := in[0].(tensor.Shape); ok && (len(s) != 3 || s[0] != op.Batch || s[1] != op.Rows || s[2] != op.Cols) {
		return nil, fmt.Errorf("imagestats: images of shape %v, want (%d, %d, %d)", s, op.Batch, op.Rows, op.Cols)
	}
	return tensor.Shape{op.Batch, ImageStatsWidth}, nil
}

// Do summarises every image of the batch into the op's own buffer.
func (op *ImageStats) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("imagestats: want 1 input, got %d", len(in))
	}
	per := op.Rows * op.Cols
	x, ok := in[0].(*tensor.Dense)
	if !ok || x.Dtype() != tensor.Float32 || x.Shape().TotalSize() != op.Batch*per {
		return nil, fmt.Errorf("imagestats: images %v, want float32 (%d, %d, %d)", in[0].Shape(), op.Batch, op.Rows, op.Cols)
	}
	if op.out == nil {
		op.out = tensor.New(tensor.WithShape(op.Batch, ImageStatsWidth), tensor.Of(tensor.Float64))
	}
	imgs := x.Data().([]float32)
	dst := op.out.Data().([]float64)
	n := op.Batch
	if op.valid > 0 {
		n = min(op.valid, op.Batch)
	}
	for b := range n {
		lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
		nonzero := 0
		for _, v := range imgs[b*per : (b+1)*per] {
			lo, hi = min(lo, v), max(hi, v)
			if v != 0 {
				nonzero++
			}
		}
		d := dst[b*ImageStatsWidth:]
		d[0], d[1], d[2] = float64(lo), float64(hi), float64(nonzero)
	}
	return op.out, nil
}

// WriteHash writes every parameter of the op.
func (op *ImageStats) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "ImageStats %d %d %d", op.Batch, op.Rows, op.Cols)
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *ImageStats) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *ImageStats) String() string { return "ImageStats{per image: min, max, nonzero pixels}" }
