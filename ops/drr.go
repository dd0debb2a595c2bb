package ops

import (
	"fmt"
	"hash"
	"math"
	"unsafe"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/parallel"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// DRR is the Gorgonia op that renders digitally reconstructed radiographs:
// for a batch of poses (Batch, PoseWidth) it casts one ray from the source
// to every pixel centre of a Rows×Cols detector through a voxel volume and
// returns the line integrals, (Batch, Rows, Cols) float32. Poses are in
// world mm, the frame of the volume's Origin and Direction; each is mapped
// into the volume's own frame (turned by Directionᵀ about Origin, which
// keeps lengths), where the volume is an axis-aligned box, so an oblique or
// flipped volume is cast as it is stored, without resampling. Step ≤ 0 is the
// exact radiological path (Siddon). Step > 0 samples trilinearly at the
// same fractions (k + ½)·Step/L of every ray of a pose, L being the length
// of the pose's longest ray (the one to a detector corner): samples are
// Step mm apart on that ray and closer on shorter ones, and each weighs its
// own ray's spacing.
type DRR struct {
	owned
	stoppable

	Vol        *volume.Volume
	Rows, Cols int
	Step       float64
	Batch      int
	// Mu names the formula that made the volume's attenuation from its
	// values, for the graph's label ("": the values as they are).
	Mu string

	out   *tensor.Dense
	valid int            // poses of the next batch to render (0: all)
	fans  []cpukern.Fan  // this batch's work, reused
	kvol  *volume.Volume // Vol in its own frame, padded for trilinear
	kgrid *cpukern.Grid  // kvol as the C kernels take it
	local []float64      // the batch's poses in that frame, for an oblique volume
}

// toLocal returns the poses pd in the volume's own frame (volume.Local):
// source and pixel (0, 0) turned by Directionᵀ about Origin, the pixel
// steps by Directionᵀ. For an axis-aligned volume that is pd itself.
func (op *DRR) toLocal(pd []float64) []float64 {
	v := op.Vol
	if v.Aligned() {
		return pd
	}
	if len(op.local) != len(pd) {
		op.local = make([]float64, len(pd))
	}
	for b := 0; b+PoseWidth <= len(pd); b += PoseWidth {
		p, q := pd[b:b+PoseWidth], op.local[b:b+PoseWidth]
		*(*[3]float64)(q[0:3]) = v.ToLocal([3]float64(p[0:3]))
		*(*[3]float64)(q[3:6]) = v.ToLocal([3]float64(p[3:6]))
		*(*[3]float64)(q[6:9]) = v.VecToLocal([3]float64(p[6:9]))
		*(*[3]float64)(q[9:12]) = v.VecToLocal([3]float64(p[9:12]))
	}
	return op.local
}

// kernelVolume is Vol in its own frame, padded for trilinear sampling.
func (op *DRR) kernelVolume() *volume.Volume {
	v := op.Vol
	if !v.Aligned() {
		v = v.Local()
	}
	if op.Step > 0 {
		v = volume.Pad(v) // trilinear: no boundary tests
	}
	return v
}

// alongZ says whether a pixel step d runs along z, to a relative 1e-9: the
// rays to the pixels it steps through share their x and y at every
// fraction, which the fan paths exploit. Snapping the tiny x and y moves a
// pixel by at most 1e-9 of its distance from the first.
func alongZ(d []float64) bool {
	n := math.Sqrt(d[0]*d[0] + d[1]*d[1] + d[2]*d[2])
	return n > 0 && math.Abs(d[0]) <= 1e-9*n && math.Abs(d[1]) <= 1e-9*n
}

// plan lists the fans of a batch: a pose's columns, or its rows when those
// and not its columns step along z. Fans along z, as every pose of an
// orbit about z has, take the fan paths of both methods; the others are
// cast ray by ray, a column at a time (faster than tiles of 32 rows, for a
// tilted detector: BENCHMARKS.md).
func (op *DRR) plan(pd []float64) {
	op.fans = op.fans[:0]
	per := op.Rows * op.Cols
	n := op.Batch
	if op.valid > 0 {
		n = min(op.valid, op.Batch)
	}
	for b := range n {
		p := pd[b*PoseWidth:][:PoseWidth]
		f := cpukern.Fan{LRef: LongestRay(p, op.Rows, op.Cols)}
		copy(f.Src[:], p[:3])
		du, dv := p[6:9], p[9:12]
		if alongZ(du) && !alongZ(dv) { // one fan per row
			f.DD = [3]float64{0, 0, du[2]}
			f.N, f.Stride = op.Cols, 1
			for r := range op.Rows {
				for a := range 3 {
					f.Dst0[a] = p[3+a] + float64(r)*dv[a]
				}
				f.Off = b*per + r*op.Cols
				op.fans = append(op.fans, f)
			}
			continue
		}
		copy(f.DD[:], dv) // one fan per column
		if alongZ(dv) {
			f.DD = [3]float64{0, 0, dv[2]} // exactly along z, for the fan paths
		}
		f.N, f.Stride = op.Rows, op.Cols
		for c := range op.Cols {
			for a := range 3 {
				f.Dst0[a] = p[3+a] + float64(c)*du[a]
			}
			f.Off = b*per + c
			op.fans = append(op.fans, f)
		}
	}
}

// SetValidRows sets how many leading poses of the next batch are real:
// only those are rendered (the other images keep what they held).
func (op *DRR) SetValidRows(n int) { op.valid = n }

// NewDRR returns the op for batches of batch poses.
func NewDRR(vol *volume.Volume, rows, cols int, step float64, batch int) *DRR {
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
	if op.out == nil {
		op.out = opkit.NewOwned(tensor.Float32, op.Batch, op.Rows, op.Cols)
		op.fans = make([]cpukern.Fan, 0, op.Batch*max(op.Rows, op.Cols))
		op.kvol = op.kernelVolume()
		op.kgrid = kernelGrid(op.kvol)
	}
	op.plan(op.toLocal(poses.Data().([]float64)))
	out := op.out.Data().([]float32)
	// Eight fans per hand-out keep neighbouring columns, which read many of
	// the same voxels, on one core (8 beats 1 and 32).
	parallel.Dynamic(len(op.fans), 8, func(lo, hi int) {
		if !op.Stopped() {
			cpukern.DRRFans(op.kgrid, op.fans[lo:hi], out, op.Step)
		}
	})
	if op.Stopped() {
		return nil, ErrStopped
	}
	return op.out, nil
}

// ResidentBytes counts the volume (and its padded copy for trilinear) and
// the list of fans.
func (op *DRR) ResidentBytes() int64 {
	fans := int64(op.Batch * max(op.Rows, op.Cols))
	b := int64(4*len(op.Vol.V)) + int64(unsafe.Sizeof(cpukern.Fan{}))*fans
	if op.Step > 0 && !op.Vol.Padded {
		b += 4 * (op.Vol.N[0] + 2) * (op.Vol.N[1] + 2) * (op.Vol.N[2] + 2)
	}
	if !op.Vol.Aligned() {
		b += 8 * PoseWidth * int64(op.Batch)
	}
	return b
}

// WriteHash writes every parameter of the op.
func (op *DRR) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "drr(vol=%p,N=%v,rows=%d,cols=%d,step=%g,batch=%d,mu=%q)", op.Vol, op.Vol.N, op.Rows, op.Cols, op.Step, op.Batch, op.Mu)
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *DRR) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *DRR) String() string {
	method := "siddon"
	if op.Step > 0 {
		method = fmt.Sprintf("trilinear step=%gmm", op.Step)
	}
	if op.Mu != "" {
		method += ", μ(h) = " + op.Mu
	}
	return fmt.Sprintf("DRR{%dx%dx%d volume, %dx%d detector, %s}", op.Vol.N[0], op.Vol.N[1], op.Vol.N[2], op.Rows, op.Cols, method)
}
