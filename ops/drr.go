package ops

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/parallel"
)

// PoseWidth is the length of an encoded pose: the source (3), the centre of
// pixel (0, 0) (3), and the steps from one pixel centre to the next along a
// row (du·û, 3) and down a column (dv·v̂, 3), all in mm.
const PoseWidth = 12

// DRR is the Gorgonia op that renders digitally reconstructed radiographs:
// for a batch of poses (Batch, PoseWidth) it casts one ray from the source
// to every pixel centre of a Rows×Cols detector through a voxel volume and
// returns the line integrals, (Batch, Rows, Cols) float32. Step ≤ 0 is the
// exact radiological path (Siddon); Step > 0 samples trilinearly every Step
// mm.
type DRR struct {
	owned

	Vol        *cpukern.Volume
	Rows, Cols int
	Step       float64
	Batch      int

	out      *tensor.Dense
	src, dst []float64 // per-ray end points, reused
	val      []float32 // per-ray results, in ray order
	order    []int32   // ray order within one image: pixel indices tile by tile
	padded   *cpukern.Volume
}

// tile is the side of the square blocks of pixels whose rays are cast
// together: neighbouring rays cross the same voxels, so casting them in a
// row reuses the cache lines the first one brought in.
const tile = 32

// tileOrder lists the pixels of a rows×cols image tile by tile.
func tileOrder(rows, cols int) []int32 {
	order := make([]int32, 0, rows*cols)
	for r0 := 0; r0 < rows; r0 += tile {
		for c0 := 0; c0 < cols; c0 += tile {
			for c := c0; c < min(c0+tile, cols); c++ {
				for r := r0; r < min(r0+tile, rows); r++ {
					order = append(order, int32(r*cols+c))
				}
			}
		}
	}
	return order
}

// NewDRR returns the op for batches of batch poses.
func NewDRR(vol *cpukern.Volume, rows, cols int, step float64, batch int) *DRR {
	if rows < 1 || cols < 1 || batch < 1 {
		panic("ops: DRR needs rows, cols and batch ≥ 1")
	}
	return &DRR{Vol: vol, Rows: rows, Cols: cols, Step: step, Batch: batch}
}

// Arity is 1: the poses.
func (op *DRR) Arity() int { return 1 }

// Type is Matrix float64 → Tensor3 float32.
func (op *DRR) Type() hm.Type {
	return hm.NewFnType(G.TensorType{Dims: 2, Of: tensor.Float64}, G.TensorType{Dims: 3, Of: tensor.Float32})
}

// InferShape is (Batch, Rows, Cols).
func (op *DRR) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("drr: want 1 input, got %d", len(in))
	}
	if s, ok := in[0].(tensor.Shape); ok && (len(s) != 2 || s[0] != op.Batch || s[1] != PoseWidth) {
		return nil, fmt.Errorf("drr: poses of shape %v, want (%d, %d)", s, op.Batch, PoseWidth)
	}
	return tensor.Shape{op.Batch, op.Rows, op.Cols}, nil
}

// Do renders the batch into the op's own buffer.
func (op *DRR) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("drr: want 1 input, got %d", len(in))
	}
	poses, ok := in[0].(*tensor.Dense)
	if !ok || poses.Dtype() != tensor.Float64 || poses.Shape().TotalSize() != op.Batch*PoseWidth {
		return nil, fmt.Errorf("drr: poses %v, want float64 (%d, %d)", in[0].Shape(), op.Batch, PoseWidth)
	}
	rays := op.Batch * op.Rows * op.Cols
	if op.out == nil {
		op.out = newOwned(tensor.Float32, op.Batch, op.Rows, op.Cols)
		op.src = make([]float64, 3*rays)
		op.dst = make([]float64, 3*rays)
		op.val = make([]float32, rays)
		op.order = tileOrder(op.Rows, op.Cols)
		op.padded = op.Vol
		if op.Step > 0 {
			op.padded = cpukern.PadVolume(op.Vol) // trilinear: no boundary tests
		}
	}
	pd := poses.Data().([]float64)
	out := op.out.Data().([]float32)
	per := op.Rows * op.Cols
	parallel.Dynamic(rays, 1024, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			p := pd[(r/per)*PoseWidth:][:PoseWidth]
			pix := int(op.order[r%per])
			row, col := float64(pix/op.Cols), float64(pix%op.Cols)
			for a := range 3 {
				op.src[3*r+a] = p[a]
				op.dst[3*r+a] = p[3+a] + col*p[6+a] + row*p[9+a]
			}
		}
		cpukern.DRR(op.padded, op.src[3*lo:3*hi], op.dst[3*lo:3*hi], op.val[lo:hi], op.Step)
		for r := lo; r < hi; r++ {
			out[(r/per)*per+int(op.order[r%per])] = op.val[r]
		}
	})
	return op.out, nil
}

// ResidentBytes counts the volume and the per-ray scratch.
func (op *DRR) ResidentBytes() int64 {
	rays := int64(op.Batch * op.Rows * op.Cols)
	b := int64(4*len(op.Vol.V)) + 2*3*8*rays + 4*rays + 4*int64(op.Rows*op.Cols)
	if op.Step > 0 && !op.Vol.Padded {
		b += 4 * (op.Vol.N[0] + 2) * (op.Vol.N[1] + 2) * (op.Vol.N[2] + 2)
	}
	return b
}

// WriteHash writes every parameter of the op.
func (op *DRR) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "drr(vol=%p,N=%v,rows=%d,cols=%d,step=%g,batch=%d)", op.Vol, op.Vol.N, op.Rows, op.Cols, op.Step, op.Batch)
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *DRR) Hashcode() uint32 { return hashcode(op) }

func (op *DRR) String() string {
	method := "siddon"
	if op.Step > 0 {
		method = fmt.Sprintf("trilinear step=%gmm", op.Step)
	}
	return fmt.Sprintf("DRR{%dx%dx%d volume, %dx%d detector, %s}", op.Vol.N[0], op.Vol.N[1], op.Vol.N[2], op.Rows, op.Cols, method)
}
