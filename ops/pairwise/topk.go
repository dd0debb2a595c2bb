package pairwise

import (
	"fmt"
	"hash"
	"slices"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/parallel"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// TopK is the Gorgonia op that selects, in each row of a (Batch, N) block
// of affinities, the K largest entries, excluding the row's own column
// (given by a second input, the rows' absolute indices as float64), ties
// going to the smaller column index. Its output is (Batch, K) float64
// column indices, best first; the values stay in the block. (A GPU that
// selects them as it computes the block does so in one op: PairwiseTopK.)
type TopK struct {
	owned

	K, N, Batch int

	out *tensor.Dense
}

// NewTopK returns the op for blocks of batch rows of n columns.
func NewTopK(k, n, batch int) *TopK {
	if k < 1 || k >= n || batch < 1 {
		panic("ops: TopK needs 1 ≤ K < N and batch ≥ 1")
	}
	return &TopK{K: k, N: n, Batch: batch}
}

// Arity is 2: the block and the rows' indices.
func (op *TopK) Arity() int { return 2 }

// Type is (Matrix a, Vector c) → Matrix c.
func (op *TopK) Type() hm.Type {
	a, c := hm.TypeVariable('a'), hm.TypeVariable('c')
	return hm.NewFnType(G.TensorType{Dims: 2, Of: a}, G.TensorType{Dims: 1, Of: c}, G.TensorType{Dims: 2, Of: c})
}

// InferShape is (Batch, K).
func (op *TopK) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("topk: want 2 inputs, got %d", len(in))
	}
	return tensor.Shape{op.Batch, op.K}, nil
}

// Do selects the top K of every row into the op's own buffer.
func (op *TopK) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("topk: want 2 inputs, got %d", len(in))
	}
	block, ok1 := in[0].(*tensor.Dense)
	index, ok2 := in[1].(*tensor.Dense)
	if !ok1 || !ok2 || block.Shape().TotalSize() != op.Batch*op.N || index.Dtype() != tensor.Float64 || index.Shape().TotalSize() != op.Batch {
		return nil, fmt.Errorf("topk: inputs %v, %v; want (%d, %d) and float64 (%d)", in[0].Shape(), in[1].Shape(), op.Batch, op.N, op.Batch)
	}
	if op.out == nil {
		op.out = tensor.New(tensor.WithShape(op.Batch, op.K), tensor.Of(tensor.Float64))
	}
	idx := index.Data().([]float64)
	dst := op.out.Data().([]float64)
	switch v := block.Data().(type) {
	case []float32:
		selectRows(op, v, idx, dst)
	case []float64:
		selectRows(op, v, idx, dst)
	default:
		return nil, fmt.Errorf("topk: block dtype %v", block.Dtype())
	}
	return op.out, nil
}

func selectRows[T float32 | float64](op *TopK, block []T, self, dst []float64) {
	parallel.For(op.Batch, 16, func(lo, hi int) {
		h := make([]int, 0, op.K)
		for i := lo; i < hi; i++ {
			h = TopKRow(block[i*op.N:(i+1)*op.N], int(self[i]), op.K, h)
			for r, j := range h {
				dst[i*op.K+r] = float64(j)
			}
		}
	})
}

// TopKRow returns in h (reused) the indices of the k largest values of row,
// skipping index self, best first; equal values rank the smaller index
// first. It is O(len(row)·log k).
func TopKRow[T float32 | float64](row []T, self, k int, h []int) []int {
	// worse(a, b): a ranks below b.
	worse := func(a, b int) bool { return row[a] < row[b] || (row[a] == row[b] && a > b) }
	h = h[:0]
	down := func(i int) {
		for {
			l, m := 2*i+1, i
			if l < len(h) && worse(h[l], h[m]) {
				m = l
			}
			if r := l + 1; r < len(h) && worse(h[r], h[m]) {
				m = r
			}
			if m == i {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for j := range row {
		if j == self {
			continue
		}
		if len(h) < k {
			h = append(h, j)
			for c := len(h) - 1; c > 0; {
				p := (c - 1) / 2
				if !worse(h[c], h[p]) {
					break
				}
				h[c], h[p] = h[p], h[c]
				c = p
			}
			continue
		}
		if worse(h[0], j) {
			h[0] = j
			down(0)
		}
	}
	slices.SortFunc(h, func(a, b int) int {
		switch {
		case worse(b, a):
			return -1
		case worse(a, b):
			return 1
		}
		return 0
	})
	return h
}

// WriteHash writes every parameter of the op.
func (op *TopK) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "topk(K=%d,N=%d,batch=%d)", op.K, op.N, op.Batch)
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *TopK) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *TopK) String() string { return fmt.Sprintf("TopK{K=%d, N=%d}", op.K, op.N) }
