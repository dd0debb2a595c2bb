package ops

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// BatchStats is the Gorgonia op that reduces the valid rows of a batch to
// two float64 numbers: the sum of their elements in float64, added in a
// fixed order (sumMax), and their maximum. Its input is (Batch, …) of either float type; the rows
// past the batch's valid count (a short last batch's padding) are left
// out. The engine sets that count before each run (RowCounter).
type BatchStats struct {
	owned

	Batch, Dims int
	valid       int
	src         StatsSource
	out         *tensor.Dense
}

// A StatsSource is an op that can reduce its own output as BatchStats does
// while it computes it, so that BatchStats need not read the output again:
// a pass fused into the op, where the op's work can hide it.
type StatsSource interface {
	// KeepStats makes the op compute the figures in its following runs.
	KeepStats()
	// TakeStats returns the sum, added in float64 in sumMax's order, and
	// the maximum of the first n elements of the output of the op's last run,
	// and true: once after a run that computed them for n elements, else
	// false.
	TakeStats(n int) (sum, max float64, ok bool)
}

// RowCounter is implemented by ops whose result depends on how many of the
// batch's rows are valid; the engine calls SetValidRows before every run.
type RowCounter interface {
	SetValidRows(n int)
}

// NewBatchStats returns the op for batches of batch rows of a dims-
// dimensional input.
func NewBatchStats(batch, dims int) *BatchStats {
	if batch < 1 || dims < 1 {
		panic("ops: BatchStats needs batch ≥ 1 and dims ≥ 1")
	}
	return &BatchStats{Batch: batch, Dims: dims, valid: batch}
}

// SetValidRows sets how many leading rows the next run reduces.
func (op *BatchStats) SetValidRows(n int) { op.valid = min(max(n, 0), op.Batch) }

// Fuse makes op take its figures from src, the op whose output is op's
// input, which then computes them as it computes its output; op reads its
// input itself only after a run of src that has none for it (a path of
// src's that does not keep them).
func (op *BatchStats) Fuse(src StatsSource) {
	src.KeepStats()
	op.src = src
}

// Arity is 1.
func (op *BatchStats) Arity() int { return 1 }

// Type is Tensor a → Vector float64.
func (op *BatchStats) Type() hm.Type {
	return hm.NewFnType(G.TensorType{Dims: op.Dims, Of: hm.TypeVariable('a')}, G.TensorType{Dims: 1, Of: tensor.Float64})
}

// InferShape is (2): the sum and the maximum.
func (op *BatchStats) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("batchstats: want 1 input, got %d", len(in))
	}
	return tensor.Shape{2}, nil
}

// Do reduces the valid rows into the op's own buffer.
func (op *BatchStats) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("batchstats: want 1 input, got %d", len(in))
	}
	x, ok := in[0].(*tensor.Dense)
	if !ok || x.Shape().TotalSize()%op.Batch != 0 {
		return nil, fmt.Errorf("batchstats: input %v is not %d rows", in[0].Shape(), op.Batch)
	}
	if op.out == nil {
		op.out = tensor.New(tensor.WithShape(2), tensor.Of(tensor.Float64))
	}
	n := op.valid * (x.Shape().TotalSize() / op.Batch)
	dst := op.out.Data().([]float64)
	if op.src != nil {
		if sum, mx, ok := op.src.TakeStats(n); ok {
			dst[0], dst[1] = sum, mx
			return op.out, nil
		}
	}
	switch v := x.Data().(type) {
	case []float32:
		dst[0], dst[1] = sumMax(v[:n])
	case []float64:
		dst[0], dst[1] = sumMax(v[:n])
	default:
		return nil, fmt.Errorf("batchstats: dtype %v", x.Dtype())
	}
	return op.out, nil
}

// statsRun is the length of the runs sumMax adds up on their own: the
// interpolation's chunk of queries, so that the op evaluating a chunk can
// add it up while it is in cache (Interp1D.KeepStats).
const statsRun = grain

// sumMax is Σ x in float64 and max x (−Inf when empty; NaNs are passed
// over). The order of the additions is fixed by len(x) alone: x in runs
// of statsRun elements from its start, each run added up by runSumMax,
// and the runs' sums added in order.
func sumMax[T float32 | float64](x []T) (sum, mx float64) {
	mx = math.Inf(-1)
	for lo := 0; lo < len(x); lo += statsRun {
		s, m := runSumMax(x[lo:min(lo+statsRun, len(x))])
		sum += s
		if m > mx {
			mx = m
		}
	}
	return sum, mx
}

// runSumMax is Σ x in float64 and max x, one run of sumMax's: eight
// independent chains of additions (cpukern.SumMax).
func runSumMax[T float32 | float64](x []T) (sum, mx float64) { return cpukern.SumMax(x) }

// WriteHash writes every parameter of the op.
func (op *BatchStats) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "BatchStats %d %d", op.Batch, op.Dims)
	if op.src != nil {
		fmt.Fprint(h, " fused")
	}
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *BatchStats) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *BatchStats) String() string { return "BatchStats{Σ, max over valid rows}" }
