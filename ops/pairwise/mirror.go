package pairwise

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/parallel"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// Mirror is the Gorgonia op that assembles a symmetric (N, N) matrix from
// upper blocks: given a (Batch, N) block of Pairwise with Upper (rows lo…
// of the matrix, columns from lo on) and the block's row indices, it
// stores the block's valid rows, columns lo on, into the matrix and their
// transposes into the rows below the block. Once every block has passed,
// every element of the matrix is written, each pair computed once.
//
// Its output is the matrix itself, given to NewMirror and held for the
// life of the op: the Programs of several devices share one matrix (the
// blocks write disjoint parts of it). The engine tells it how many of the
// block's rows are valid (RowCounter).
type Mirror struct {
	owned

	N, Batch int
	full     *tensor.Dense
	valid    int
}

// NewMirror returns the op for blocks of batch rows that fill full, the
// (n, n) matrix in row-major order ([]float32 or []float64, matching the
// blocks' dtype).
func NewMirror(full any, n, batch int) *Mirror {
	if n < 1 || batch < 1 {
		panic("ops: Mirror needs N ≥ 1 and batch ≥ 1")
	}
	var t *tensor.Dense
	switch f := full.(type) {
	case []float32:
		if len(f) == n*n {
			t = tensor.New(tensor.WithShape(n, n), tensor.WithBacking(f))
		}
	case []float64:
		if len(f) == n*n {
			t = tensor.New(tensor.WithShape(n, n), tensor.WithBacking(f))
		}
	}
	if t == nil {
		panic("ops: Mirror needs an (N, N) float32 or float64 matrix")
	}
	return &Mirror{N: n, Batch: batch, full: t, valid: batch}
}

// SetValidRows sets how many leading rows of the next block are valid.
func (op *Mirror) SetValidRows(n int) { op.valid = min(max(n, 0), op.Batch) }

// Arity is 2: the upper block and its row indices.
func (op *Mirror) Arity() int { return 2 }

// Type is (Matrix a, Vector float64) → Matrix a.
func (op *Mirror) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(G.TensorType{Dims: 2, Of: a}, G.TensorType{Dims: 1, Of: tensor.Float64}, G.TensorType{Dims: 2, Of: a})
}

// InferShape checks the block is (Batch, N) and returns (N, N).
func (op *Mirror) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("mirror: want 2 inputs, got %d", len(in))
	}
	if s, ok := in[0].(tensor.Shape); ok && (len(s) != 2 || s[0] != op.Batch || s[1] != op.N) {
		return nil, fmt.Errorf("mirror: block shape %v, want (%d, %d)", s, op.Batch, op.N)
	}
	return tensor.Shape{op.N, op.N}, nil
}

// Do stores the block's valid rows and their transposes into the matrix.
func (op *Mirror) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("mirror: want 2 inputs, got %d", len(in))
	}
	block, ok1 := in[0].(*tensor.Dense)
	index, ok2 := in[1].(*tensor.Dense)
	if !ok1 || !ok2 || block.Dtype() != op.full.Dtype() || block.Shape().TotalSize() != op.Batch*op.N ||
		index.Dtype() != tensor.Float64 || index.Shape().TotalSize() != op.Batch {
		return nil, fmt.Errorf("mirror: inputs %v %v, %v; want %v (%d, %d) and float64 (%d)", in[0].Dtype(), in[0].Shape(), in[1].Shape(),
			op.full.Dtype(), op.Batch, op.N, op.Batch)
	}
	idx := index.Data().([]float64)
	lo, m := int(idx[0]), op.valid
	if float64(lo) != idx[0] || lo < 0 || lo+m > op.N {
		return nil, fmt.Errorf("mirror: rows [%v, %v) outside [0, %d)", idx[0], idx[0]+float64(m), op.N)
	}
	switch f := op.full.Data().(type) {
	case []float32:
		mirror(f, block.Data().([]float32), op.N, lo, m)
	case []float64:
		mirror(f, block.Data().([]float64), op.N, lo, m)
	}
	return op.full, nil
}

// mirror stores rows [r0, r0+n) of an upper block, columns r0 on, into
// full and their transposes into the rows below, in parallel over the
// destination rows, transposing 16×16 tiles so that both the reads and the
// writes use whole cache lines.
func mirror[T float32 | float64](full, blk []T, nn, r0, n int) {
	parallel.For(n, 16, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			i := r0 + r
			copy(full[i*nn+r0:(i+1)*nn], blk[r*nn+r0:(r+1)*nn])
		}
	})
	// The transpose of the block's columns below it, in blocks of
	// outer×outer that stay in L2 (each row of either side read or written
	// as a run of outer values), each moved in inner×inner tiles.
	const outer, inner = 256, 16
	below := nn - (r0 + n)
	parallel.Dynamic((below+outer-1)/outer, 1, func(lo, hi int) {
		for jb := r0 + n + lo*outer; jb < min(r0+n+hi*outer, nn); jb += outer {
			je := min(jb+outer, nn)
			for rb := 0; rb < n; rb += outer {
				re := min(rb+outer, n)
				for j0 := jb; j0 < je; j0 += inner {
					j1 := min(j0+inner, je)
					for r0t := rb; r0t < re; r0t += inner {
						r1t := min(r0t+inner, re)
						for j := j0; j < j1; j++ {
							dst := full[j*nn+r0+r0t : j*nn+r0+r1t]
							for r := range dst {
								dst[r] = blk[(r0t+r)*nn+j]
							}
						}
					}
				}
			}
		}
	})
}

// WriteHash writes every parameter of the op, the matrix by address.
func (op *Mirror) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "mirror(N=%d,batch=%d,dtype=%v,full=%p)", op.N, op.Batch, op.full.Dtype(), op.full)
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *Mirror) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *Mirror) String() string {
	return fmt.Sprintf("Mirror{upper blocks → the (%d, %d) matrix}", op.N, op.N)
}
