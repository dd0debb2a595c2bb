package ops

import (
	"errors"
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/parallel"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// LossKind selects what ImageLoss measures.
type LossKind int

const (
	// LossNCC is 1 − the mean normalised cross-correlation of the images.
	LossNCC LossKind = iota
	// LossGradNCC is 1 − the mean normalised cross-correlation of the
	// images' Sobel gradients.
	LossGradNCC
	// LossMSE is the mean squared difference of the images.
	LossMSE
)

func (k LossKind) String() string {
	switch k {
	case LossNCC:
		return "ncc"
	case LossGradNCC:
		return "gncc"
	case LossMSE:
		return "mse"
	}
	return fmt.Sprintf("LossKind(%d)", int(k))
}

// ParseLossKind returns the kind named "ncc", "gncc" or "mse".
func ParseLossKind(s string) (LossKind, error) {
	for _, k := range []LossKind{LossNCC, LossGradNCC, LossMSE} {
		if s == k.String() {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown kind %q (want ncc, gncc or mse)", ErrLoss, s)
}

// ErrLoss is wrapped by every error of ImageLoss and of its gradient.
var ErrLoss = errors.New("loss")

// lossParallelPixels is the smallest batch (views × rows × cols) whose
// views are spread over goroutines; a smaller one runs on the caller's.
const lossParallelPixels = 1 << 15

// ImageLoss is the Gorgonia op that measures how far a batch of images is
// from its targets: (image, target), both (Views, Rows, Cols) float64, to
// a float64 scalar. It is differentiable with respect to the image only
// (the target is data): G.Grad through it adds the imageLossGrad op, which
// returns the gradient as (Views, Rows, Cols) float64 in its own buffer.
//
// With a, b the image and the target:
//
//   - mse:  L = (1/N) Σ (a − b)², over all N = Views·Rows·Cols pixels.
//   - ncc:  L = 1 − (1/R) Σ_r NCC(a_r, b_r), over the R regions of all
//     views, where NCC(a, b) = Σ (a − ā)(b − b̄) / √(Σ (a − ā)² · Σ (b − b̄)²)
//     and ā, b̄ are the region's means. Patch 0: a region is a whole view.
//     Patch p > 0: the regions are the non-overlapping p×p tiles of each
//     view from its top-left corner; a partial tile at the right or bottom
//     edge is dropped (its pixels get no gradient).
//   - gncc: L = 1 − (1/R) Σ_r [NCC(gx(a)_r, gx(b)_r) + NCC(gy(a)_r, gy(b)_r)] / 2,
//     the regions taken as for ncc on the (Rows−2)×(Cols−2) gradient images.
//     gx and gy are the 3×3 Sobel derivatives over the valid region (no
//     padding): with x the view and i, j the row and column of the gradient
//     pixel,
//     gx[i, j] = Σ_d w_d·x[i+d, j+2] − Σ_d w_d·x[i+d, j],
//     gy[i, j] = Σ_d w_d·x[i+2, j+d] − Σ_d w_d·x[i, j+d], w = (1, 2, 1).
//
// A region where either of its two images is constant (every pixel equal,
// or a centred sum of squares of 0) counts in R with NCC 0 and passes no
// gradient to its pixels. Each view is summed in a fixed order, region by
// region, and the views' sums are added in view order, so the result does
// not depend on how many goroutines share the views.
type ImageLoss struct {
	owned
	lossShape

	out *G.F64
}

// lossShape is what ImageLoss and its gradient share: the loss's
// parameters and the scratch each op keeps for itself.
type lossShape struct {
	Kind                     LossKind
	Views, Rows, Cols, Patch int

	perView []float64 // each view's sum of squares or of NCCs
	sobel   []float64 // gncc: per view, gx and gy of the image, then of the target
	dsobel  []float64 // gncc gradient: per view, ∂L/∂gx and ∂L/∂gy
}

// NewImageLoss returns the loss of the given kind for batches of views
// rows×cols images. patch is the side of the NCC tiles (0: whole views):
// at least 2 (a 1×1 tile is always constant) and at most the smaller side
// of a view, for gncc of its (rows−2)×(cols−2) gradient; mse takes none.
func NewImageLoss(kind LossKind, views, rows, cols, patch int) (*ImageLoss, error) {
	s := lossShape{Kind: kind, Views: views, Rows: rows, Cols: cols, Patch: patch}
	if views < 1 || rows < 1 || cols < 1 {
		return nil, fmt.Errorf("%w: %d views of %d×%d pixels: want at least 1 of each", ErrLoss, views, rows, cols)
	}
	if patch < 0 {
		return nil, fmt.Errorf("%w: a patch of %d pixels: want 0 (whole views) or more", ErrLoss, patch)
	}
	switch kind {
	case LossMSE:
		if patch != 0 {
			return nil, fmt.Errorf("%w: mse takes no patch, got %d", ErrLoss, patch)
		}
	case LossNCC, LossGradNCC:
		h, w := s.grid()
		if h < 1 || w < 1 {
			return nil, fmt.Errorf("%w: gncc needs views of at least 3×3 pixels, got %d×%d", ErrLoss, rows, cols)
		}
		if patch == 1 || patch > h || patch > w {
			return nil, fmt.Errorf("%w: %s on %d×%d pixels: a patch of %d does not fit (want 0, or 2 to %d)", ErrLoss, kind, h, w, patch, min(h, w))
		}
	default:
		return nil, fmt.Errorf("%w: unknown kind %d", ErrLoss, int(kind))
	}
	return &ImageLoss{lossShape: s}, nil
}

// grid is the size of the images the regions tile: the views, or for
// gncc their valid Sobel gradients.
func (s *lossShape) grid() (h, w int) {
	if s.Kind == LossGradNCC {
		return s.Rows - 2, s.Cols - 2
	}
	return s.Rows, s.Cols
}

// tiles is the side of a region and how many there are down and across a
// grid of h×w.
func (s *lossShape) tiles(h, w int) (th, tw, ny, nx int) {
	if s.Patch == 0 {
		return h, w, 1, 1
	}
	return s.Patch, s.Patch, h / s.Patch, w / s.Patch
}

// regions is R, the number of NCCs the loss averages.
func (s *lossShape) regions() int {
	_, _, ny, nx := s.tiles(s.grid())
	r := s.Views * ny * nx
	if s.Kind == LossGradNCC {
		r *= 2
	}
	return r
}

// images checks the first two inputs: float64 (Views, Rows, Cols), stored
// contiguously.
func (s *lossShape) images(name string, in []G.Value) (a, b []float64, err error) {
	want := tensor.Shape{s.Views, s.Rows, s.Cols}
	for i, what := range []string{"image", "target"} {
		d, ok := in[i].(*tensor.Dense)
		if !ok {
			return nil, nil, fmt.Errorf("%w: %s: the %s is a %T, want a float64 tensor of shape %v", ErrLoss, name, what, in[i], want)
		}
		if d.Dtype() != tensor.Float64 || !d.Shape().Eq(want) {
			return nil, nil, fmt.Errorf("%w: %s: the %s is %v of shape %v, want float64 of shape %v", ErrLoss, name, what, d.Dtype(), d.Shape(), want)
		}
		if d.RequiresIterator() {
			return nil, nil, fmt.Errorf("%w: %s: the %s is not stored contiguously", ErrLoss, name, what)
		}
		if i == 0 {
			a = d.Data().([]float64)
		} else {
			b = d.Data().([]float64)
		}
	}
	return a, b, nil
}

// alloc makes the scratch on the first run.
func (s *lossShape) alloc(grad bool) {
	if s.perView != nil {
		return
	}
	s.perView = make([]float64, s.Views)
	if s.Kind == LossGradNCC {
		h, w := s.grid()
		s.sobel = make([]float64, s.Views*4*h*w)
		if grad {
			s.dsobel = make([]float64, s.Views*2*h*w)
		}
	}
}

// scratchBytes is the memory alloc keeps.
func (s *lossShape) scratchBytes(grad bool) int64 {
	h, w := s.grid()
	n := s.Views
	if s.Kind == LossGradNCC {
		n += s.Views * 4 * h * w
		if grad {
			n += s.Views * 2 * h * w
		}
	}
	return 8 * int64(n)
}

// eachView calls fn for every view, spread over goroutines when the batch
// is large. Each view is one call, so its sums never depend on the split.
func (s *lossShape) eachView(fn func(v int)) {
	if s.Views == 1 || s.Views*s.Rows*s.Cols < lossParallelPixels {
		for v := range s.Views {
			fn(v)
		}
		return
	}
	parallel.For(s.Views, 1, func(lo, hi int) {
		for v := lo; v < hi; v++ {
			fn(v)
		}
	})
}

// view returns view v of a batch.
func (s *lossShape) view(x []float64, v int) []float64 {
	per := s.Rows * s.Cols
	return x[v*per : (v+1)*per]
}

// sobelPlanes returns view v's four gradient images in s.sobel: gx and gy
// of the image, gx and gy of the target.
func (s *lossShape) sobelPlanes(v int) (gxa, gya, gxb, gyb []float64) {
	h, w := s.grid()
	p := h * w
	q := s.sobel[v*4*p : (v+1)*4*p]
	return q[:p], q[p : 2*p], q[2*p : 3*p], q[3*p:]
}

// forward returns the loss, each view's sum in s.perView.
func (s *lossShape) forward(a, b []float64) float64 {
	s.eachView(func(v int) {
		av, bv := s.view(a, v), s.view(b, v)
		switch s.Kind {
		case LossMSE:
			var sum float64
			for i, x := range av {
				d := x - bv[i]
				sum += d * d
			}
			s.perView[v] = sum
		case LossNCC:
			s.perView[v] = s.tileNCCs(av, bv, s.Rows, s.Cols)
		case LossGradNCC:
			h, w := s.grid()
			gxa, gya, gxb, gyb := s.sobelPlanes(v)
			sobel3(gxa, gya, av, s.Rows, s.Cols)
			sobel3(gxb, gyb, bv, s.Rows, s.Cols)
			s.perView[v] = s.tileNCCs(gxa, gxb, h, w) + s.tileNCCs(gya, gyb, h, w)
		}
	})
	var sum float64
	for _, x := range s.perView {
		sum += x
	}
	if s.Kind == LossMSE {
		return sum / float64(s.Views*s.Rows*s.Cols)
	}
	return 1 - sum/float64(s.regions())
}

// backward writes ∂L/∂a, scaled by the upstream gradient g, into dst.
func (s *lossShape) backward(dst, a, b []float64, g float64) {
	s.eachView(func(v int) {
		av, bv, dv := s.view(a, v), s.view(b, v), s.view(dst, v)
		switch s.Kind {
		case LossMSE:
			c := 2 * g / float64(s.Views*s.Rows*s.Cols)
			for i, x := range av {
				dv[i] = c * (x - bv[i])
			}
		case LossNCC:
			s.tileGrads(dv, av, bv, s.Rows, s.Cols, -g/float64(s.regions()))
		case LossGradNCC:
			h, w := s.grid()
			p := h * w
			gxa, gya, gxb, gyb := s.sobelPlanes(v)
			sobel3(gxa, gya, av, s.Rows, s.Cols)
			sobel3(gxb, gyb, bv, s.Rows, s.Cols)
			d := s.dsobel[v*2*p : (v+1)*2*p]
			dgx, dgy := d[:p], d[p:]
			scale := -g / float64(s.regions())
			s.tileGrads(dgx, gxa, gxb, h, w, scale)
			s.tileGrads(dgy, gya, gyb, h, w, scale)
			sobel3T(dv, dgx, dgy, s.Rows, s.Cols)
		}
	})
}

// tileNCCs sums the NCCs of the regions of two h×w images, tile by tile
// in row-major order.
func (s *lossShape) tileNCCs(a, b []float64, h, w int) float64 {
	th, tw, ny, nx := s.tiles(h, w)
	var sum float64
	for ty := range ny {
		for tx := range nx {
			sum += nccStats(a, b, ty*th*w+tx*tw, w, th, tw).ncc()
		}
	}
	return sum
}

// tileGrads writes scale·∂NCC/∂a of every region into dst (h×w, as a),
// and 0 to the pixels of the partial tiles no region holds.
func (s *lossShape) tileGrads(dst, a, b []float64, h, w int, scale float64) {
	th, tw, ny, nx := s.tiles(h, w)
	for ty := range ny {
		for tx := range nx {
			off := ty*th*w + tx*tw
			nccStats(a, b, off, w, th, tw).grad(dst, a, b, off, w, th, tw, scale)
		}
		if rest := w - nx*tw; rest > 0 {
			for y := ty * th; y < (ty+1)*th; y++ {
				clear(dst[y*w+nx*tw : (y+1)*w])
			}
		}
	}
	clear(dst[ny*th*w : h*w])
}

// nccRegion holds one region's means, its centred sums of squares and of
// products, and whether either image is constant over it.
type nccRegion struct {
	ma, mb, saa, sbb, sab float64
	flat                  bool
}

// nccStats measures the th×tw region at off of two images stride wide:
// its means first, then its centred sums. The sums of a row run in
// independent partial sums (four for the means, two for the centred sums,
// a row's last pixels going to the first), added in a fixed order at the
// end.
func nccStats(a, b []float64, off, stride, th, tw int) nccRegion {
	var sa, sb [4]float64
	a0, b0 := math.Float64bits(a[off]), math.Float64bits(b[off])
	var diffA, diffB uint64 // bits in which some pixel differs from the first
	for y := range th {
		ra := a[off+y*stride:][:tw]
		rb := b[off+y*stride:][:tw]
		for len(ra) >= 4 && len(rb) >= 4 {
			sa[0] += ra[0]
			sa[1] += ra[1]
			sa[2] += ra[2]
			sa[3] += ra[3]
			sb[0] += rb[0]
			sb[1] += rb[1]
			sb[2] += rb[2]
			sb[3] += rb[3]
			diffA |= (math.Float64bits(ra[0]) ^ a0) | (math.Float64bits(ra[1]) ^ a0) | (math.Float64bits(ra[2]) ^ a0) | (math.Float64bits(ra[3]) ^ a0)
			diffB |= (math.Float64bits(rb[0]) ^ b0) | (math.Float64bits(rb[1]) ^ b0) | (math.Float64bits(rb[2]) ^ b0) | (math.Float64bits(rb[3]) ^ b0)
			ra, rb = ra[4:], rb[4:]
		}
		rb = rb[:len(ra)]
		for i, x := range ra {
			sa[0] += x
			sb[0] += rb[i]
			diffA |= math.Float64bits(x) ^ a0
			diffB |= math.Float64bits(rb[i]) ^ b0
		}
	}
	n := float64(th * tw)
	ma := ((sa[0] + sa[1]) + (sa[2] + sa[3])) / n
	mb := ((sb[0] + sb[1]) + (sb[2] + sb[3])) / n
	// Every pixel the same bits: constant, unless that value is a NaN,
	// which the sums carry on.
	r := nccRegion{ma: ma, mb: mb, flat: (diffA == 0 && !math.IsNaN(ma)) || (diffB == 0 && !math.IsNaN(mb))}
	if r.flat {
		return r
	}
	var saa, sbb, sab [2]float64
	for y := range th {
		ra := a[off+y*stride:][:tw]
		rb := b[off+y*stride:][:tw]
		for len(ra) >= 2 && len(rb) >= 2 {
			da0, db0 := ra[0]-ma, rb[0]-mb
			da1, db1 := ra[1]-ma, rb[1]-mb
			saa[0] += da0 * da0
			sbb[0] += db0 * db0
			sab[0] += da0 * db0
			saa[1] += da1 * da1
			sbb[1] += db1 * db1
			sab[1] += da1 * db1
			ra, rb = ra[2:], rb[2:]
		}
		rb = rb[:len(ra)]
		for i := range ra {
			da, db := ra[i]-ma, rb[i]-mb
			saa[0] += da * da
			sbb[0] += db * db
			sab[0] += da * db
		}
	}
	r.saa, r.sbb, r.sab = saa[0]+saa[1], sbb[0]+sbb[1], sab[0]+sab[1]
	r.flat = r.saa == 0 || r.sbb == 0
	return r
}

// ncc is the region's NCC, 0 where flat.
func (r nccRegion) ncc() float64 {
	if r.flat {
		return 0
	}
	return r.sab / (math.Sqrt(r.saa) * math.Sqrt(r.sbb))
}

// grad writes scale·∂NCC/∂a over the region into dst:
// ∂NCC/∂aᵢ = (bᵢ − b̄)/√(Saa·Sbb) − NCC·(aᵢ − ā)/Saa (the means' own
// derivatives cancel, as the centred values sum to 0); 0 where flat.
func (r nccRegion) grad(dst, a, b []float64, off, stride, th, tw int, scale float64) {
	if r.flat {
		for y := range th {
			clear(dst[off+y*stride:][:tw])
		}
		return
	}
	den := math.Sqrt(r.saa) * math.Sqrt(r.sbb)
	cb := scale / den
	ca := -scale * (r.sab / den) / r.saa
	for y := range th {
		o := off + y*stride
		ra, rb, rd := a[o:][:tw], b[o:][:tw], dst[o:][:tw]
		for i, x := range ra {
			rd[i] = cb*(rb[i]-r.mb) + ca*(x-r.ma)
		}
	}
}

// sobel3 writes the valid-region Sobel derivatives of the rows×cols image
// x: gx along the columns, gy down the rows, each (rows−2)×(cols−2). It
// runs along each row with the column sums s = x[i] + 2x[i+1] + x[i+2] and
// differences d = x[i+2] − x[i] of the last three columns:
// gx[i, j] = s[j+2] − s[j], gy[i, j] = d[j] + 2d[j+1] + d[j+2]. A
// constant neighbourhood gives equal s and zero d, so exactly 0.
func sobel3(gx, gy, x []float64, rows, cols int) {
	w := cols - 2
	for i := range rows - 2 {
		r0, r1, r2 := x[i*cols:][:cols], x[(i+1)*cols:][:cols], x[(i+2)*cols:][:cols]
		ox, oy := gx[i*w:][:w], gy[i*w:][:w]
		s0, s1 := r0[0]+2*r1[0]+r2[0], r0[1]+2*r1[1]+r2[1]
		d0, d1 := r2[0]-r0[0], r2[1]-r0[1]
		r0 = r0[2:]
		r1, r2, ox, oy = r1[2:][:len(r0)], r2[2:][:len(r0)], ox[:len(r0)], oy[:len(r0)]
		for j := range r0 {
			s2 := r0[j] + 2*r1[j] + r2[j]
			d2 := r2[j] - r0[j]
			ox[j] = s2 - s0
			oy[j] = d0 + 2*d1 + d2
			s0, s1 = s1, s2
			d0, d1 = d1, d2
		}
	}
}

// sobel3T is sobel3's transpose: it writes into dst (rows×cols) the
// gradient of Σ dgx·gx + dgy·gy with respect to the image, each gradient
// pixel adding its 3×3 taps in row-major order.
func sobel3T(dst, dgx, dgy []float64, rows, cols int) {
	clear(dst)
	w := cols - 2
	for i := range rows - 2 {
		r0, r1, r2 := dst[i*cols:][:cols], dst[(i+1)*cols:][:cols], dst[(i+2)*cols:][:cols]
		dx, dy := dgx[i*w:][:w], dgy[i*w:][:w]
		for j := range w {
			x, y := dx[j], dy[j]
			r0[j] -= x + y
			r0[j+1] -= 2 * y
			r0[j+2] += x - y
			r1[j] -= 2 * x
			r1[j+2] += 2 * x
			r2[j] += y - x
			r2[j+1] += 2 * y
			r2[j+2] += x + y
		}
	}
}

// Arity is 2: the image and the target.
func (op *ImageLoss) Arity() int { return 2 }

// Type is Tensor3 float64 → Tensor3 float64 → float64.
func (op *ImageLoss) Type() hm.Type {
	t := G.TensorType{Dims: 3, Of: tensor.Float64}
	return hm.NewFnType(t, t, tensor.Float64)
}

// InferShape is a scalar's.
func (op *ImageLoss) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if err := op.checkShapes("imageloss", in, 2); err != nil {
		return nil, err
	}
	return tensor.ScalarShape(), nil
}

// checkShapes checks the shapes of the first two of n inputs, where known.
func (s *lossShape) checkShapes(name string, in []G.DimSizer, n int) error {
	if len(in) != n {
		return fmt.Errorf("%w: %s: want %d inputs, got %d", ErrLoss, name, n, len(in))
	}
	want := tensor.Shape{s.Views, s.Rows, s.Cols}
	for i, what := range []string{"image", "target"} {
		if sh, ok := in[i].(tensor.Shape); ok && !sh.Eq(want) {
			return fmt.Errorf("%w: %s: the %s has shape %v, want %v", ErrLoss, name, what, sh, want)
		}
	}
	return nil
}

// Do measures the batch; the scalar it returns is the op's own.
func (op *ImageLoss) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("%w: imageloss: want 2 inputs, got %d", ErrLoss, len(in))
	}
	a, b, err := op.images("imageloss", in)
	if err != nil {
		return nil, err
	}
	if op.out == nil {
		op.out = new(G.F64)
		op.alloc(false)
	}
	*op.out = G.F64(op.forward(a, b))
	return op.out, nil
}

// DiffWRT is [true, false]: the image, not the target.
func (op *ImageLoss) DiffWRT(inputs int) []bool { return []bool{true, false} }

// SymDiff returns the node of the image's gradient (an imageLossGrad of
// the image, the target and grad) and nil for the target.
func (op *ImageLoss) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if len(inputs) != 2 {
		return nil, fmt.Errorf("%w: imageloss: want 2 inputs, got %d", ErrLoss, len(inputs))
	}
	g := &imageLossGrad{lossShape: lossShape{Kind: op.Kind, Views: op.Views, Rows: op.Rows, Cols: op.Cols, Patch: op.Patch}}
	n, err := G.ApplyOp(g, inputs[0], inputs[1], grad)
	if err != nil {
		return nil, fmt.Errorf("%w: imageloss: the gradient: %w", ErrLoss, err)
	}
	return G.Nodes{n, nil}, nil
}

// ResidentBytes counts the scratch: the views' sums, and for gncc the
// four Sobel images of each view.
func (op *ImageLoss) ResidentBytes() int64 { return op.scratchBytes(false) }

// WriteHash writes every parameter of the op.
func (op *ImageLoss) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "ImageLoss(%s,views=%d,rows=%d,cols=%d,patch=%d)", op.Kind, op.Views, op.Rows, op.Cols, op.Patch)
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *ImageLoss) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *ImageLoss) String() string { return "ImageLoss{" + op.describe() + "}" }

func (s *lossShape) describe() string {
	d := fmt.Sprintf("%s, %d×%d×%d", s.Kind, s.Views, s.Rows, s.Cols)
	if s.Patch > 0 {
		d += fmt.Sprintf(", patch %d", s.Patch)
	}
	return d
}

// imageLossGrad is ImageLoss's gradient with respect to the image:
// (image, target, upstream scalar gradient) → (Views, Rows, Cols) float64
// in its own buffer. It recomputes what it needs from its inputs (the
// Sobel images and each region's sums) rather than reading ImageLoss's
// scratch, so it is right whatever ran before it.
type imageLossGrad struct {
	owned
	lossShape

	out *tensor.Dense
}

// Arity is 3: the image, the target and the loss's upstream gradient.
func (op *imageLossGrad) Arity() int { return 3 }

// Type is Tensor3 float64 → Tensor3 float64 → float64 → Tensor3 float64.
func (op *imageLossGrad) Type() hm.Type {
	t := G.TensorType{Dims: 3, Of: tensor.Float64}
	return hm.NewFnType(t, t, tensor.Float64, t)
}

// InferShape is the image's, (Views, Rows, Cols).
func (op *imageLossGrad) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if err := op.checkShapes("imageloss gradient", in, 3); err != nil {
		return nil, err
	}
	return tensor.Shape{op.Views, op.Rows, op.Cols}, nil
}

// Do writes ∂L/∂image times the upstream gradient into the op's buffer.
func (op *imageLossGrad) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 3 {
		return nil, fmt.Errorf("%w: imageloss gradient: want 3 inputs, got %d", ErrLoss, len(in))
	}
	a, b, err := op.images("imageloss gradient", in)
	if err != nil {
		return nil, err
	}
	var g float64
	switch d := in[2].Data().(type) {
	case float64:
		g = d
	case []float64:
		if len(d) != 1 {
			return nil, fmt.Errorf("%w: imageloss gradient: the upstream gradient holds %d values, want a scalar", ErrLoss, len(d))
		}
		g = d[0]
	default:
		return nil, fmt.Errorf("%w: imageloss gradient: the upstream gradient is %v, want a float64 scalar", ErrLoss, in[2].Dtype())
	}
	if op.out == nil {
		op.out = opkit.NewOwned(tensor.Float64, op.Views, op.Rows, op.Cols)
		op.alloc(true)
	}
	op.backward(op.out.Data().([]float64), a, b, g)
	return op.out, nil
}

// ResidentBytes counts the scratch: for gncc the four Sobel images of
// each view and their two gradients.
func (op *imageLossGrad) ResidentBytes() int64 { return op.scratchBytes(true) }

// WriteHash writes every parameter of the op.
func (op *imageLossGrad) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "ImageLossGrad(%s,views=%d,rows=%d,cols=%d,patch=%d)", op.Kind, op.Views, op.Rows, op.Cols, op.Patch)
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *imageLossGrad) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *imageLossGrad) String() string { return "∂ImageLoss{" + op.describe() + "}" }
