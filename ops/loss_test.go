package ops

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// lossCase is one loss on one batch size.
type lossCase struct {
	kind                     LossKind
	views, rows, cols, patch int
}

func (c lossCase) String() string {
	return fmt.Sprintf("%s_%dx%dx%d_patch%d", c.kind, c.views, c.rows, c.cols, c.patch)
}

// lossCases: every kind, whole views and two odd patches that leave
// partial tiles on the right and at the bottom (37 = 7·5 + 2, 29 = 5·5 + 4;
// gncc's 35×27 gradients: 35 = 3·11 + 2, 27 = 2·11 + 5).
func lossCases() []lossCase {
	var cs []lossCase
	for _, k := range []LossKind{LossNCC, LossGradNCC} {
		for _, p := range []int{0, 5, 11} {
			cs = append(cs, lossCase{k, 2, 37, 29, p})
		}
	}
	return append(cs,
		lossCase{LossMSE, 2, 37, 29, 0},
		lossCase{LossNCC, 1, 9, 13, 3},
		lossCase{LossGradNCC, 3, 8, 11, 3},
		lossCase{LossMSE, 3, 8, 11, 0},
	)
}

// lossImages returns a random image and a target that resembles it (so
// every NCC is far from 0), both with no two pixels equal.
func lossImages(rng *rand.Rand, n int) (a, b []float64) {
	a, b = make([]float64, n), make([]float64, n)
	for i := range a {
		a[i] = rng.Float64() + 0.3*math.Sin(float64(i)*0.05)
		b[i] = 0.6*a[i] + 0.4*rng.Float64() + 0.25
	}
	return a, b
}

func dense(c lossCase, x []float64) *tensor.Dense {
	return tensor.New(tensor.WithShape(c.views, c.rows, c.cols), tensor.WithBacking(x))
}

func mustLoss(t testing.TB, c lossCase) *ImageLoss {
	t.Helper()
	op, err := NewImageLoss(c.kind, c.views, c.rows, c.cols, c.patch)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// lossOf runs op on a and b and returns the loss.
func lossOf(t testing.TB, op *ImageLoss, c lossCase, a, b []float64) float64 {
	t.Helper()
	v, err := op.Do(dense(c, a), dense(c, b))
	if err != nil {
		t.Fatal(err)
	}
	return float64(*v.(*G.F64))
}

// gradOf runs the gradient op with upstream gradient g and returns its
// buffer.
func gradOf(t testing.TB, c lossCase, a, b []float64, g float64) []float64 {
	t.Helper()
	op := &imageLossGrad{lossShape: mustLoss(t, c).lossShape}
	up := G.F64(g)
	v, err := op.Do(dense(c, a), dense(c, b), &up)
	if err != nil {
		t.Fatal(err)
	}
	return v.(*tensor.Dense).Data().([]float64)
}

// refNCC is the normalised cross-correlation of two regions as its
// formula reads; 0 where either region is constant.
func refNCC(a, b []float64) float64 {
	constant := func(x []float64) bool {
		for _, v := range x {
			if v != x[0] {
				return false
			}
		}
		return true
	}
	if constant(a) || constant(b) {
		return 0
	}
	mean := func(x []float64) float64 {
		s := 0.0
		for _, v := range x {
			s += v
		}
		return s / float64(len(x))
	}
	ma, mb := mean(a), mean(b)
	var sab, saa, sbb float64
	for i := range a {
		sab += (a[i] - ma) * (b[i] - mb)
		saa += (a[i] - ma) * (a[i] - ma)
		sbb += (b[i] - mb) * (b[i] - mb)
	}
	return sab / math.Sqrt(saa*sbb)
}

// refSobel correlates x with the 3×3 Sobel kernels over the valid region.
func refSobel(x [][]float64) (gx, gy [][]float64) {
	kx := [3][3]float64{{-1, 0, 1}, {-2, 0, 2}, {-1, 0, 1}}
	ky := [3][3]float64{{-1, -2, -1}, {0, 0, 0}, {1, 2, 1}}
	for i := 0; i+3 <= len(x); i++ {
		var rx, ry []float64
		for j := 0; j+3 <= len(x[0]); j++ {
			var sx, sy float64
			for di := range 3 {
				for dj := range 3 {
					sx += kx[di][dj] * x[i+di][j+dj]
					sy += ky[di][dj] * x[i+di][j+dj]
				}
			}
			rx, ry = append(rx, sx), append(ry, sy)
		}
		gx, gy = append(gx, rx), append(gy, ry)
	}
	return gx, gy
}

// refLoss is the loss as ImageLoss's doc comment defines it, pixel by
// pixel.
func refLoss(c lossCase, a, b []float64) float64 {
	if c.kind == LossMSE {
		s := 0.0
		for i := range a {
			s += (a[i] - b[i]) * (a[i] - b[i])
		}
		return s / float64(len(a))
	}
	image := func(x []float64, v int) [][]float64 {
		var m [][]float64
		for r := range c.rows {
			m = append(m, x[(v*c.rows+r)*c.cols:][:c.cols])
		}
		return m
	}
	var pairs [][2][][]float64 // the images whose regions are compared
	for v := range c.views {
		av, bv := image(a, v), image(b, v)
		if c.kind == LossGradNCC {
			ax, ay := refSobel(av)
			bx, by := refSobel(bv)
			pairs = append(pairs, [2][][]float64{ax, bx}, [2][][]float64{ay, by})
		} else {
			pairs = append(pairs, [2][][]float64{av, bv})
		}
	}
	sum, n := 0.0, 0
	for _, p := range pairs {
		h, w := len(p[0]), len(p[0][0])
		th, tw := h, w
		if c.patch > 0 {
			th, tw = c.patch, c.patch
		}
		for y0 := 0; y0+th <= h; y0 += th {
			for x0 := 0; x0+tw <= w; x0 += tw {
				ra, rb := make([]float64, 0, th*tw), make([]float64, 0, th*tw)
				for y := y0; y < y0+th; y++ {
					for x := x0; x < x0+tw; x++ {
						ra, rb = append(ra, p[0][y][x]), append(rb, p[1][y][x])
					}
				}
				sum += refNCC(ra, rb)
				n++
			}
		}
	}
	return 1 - sum/float64(n)
}

// checkLossAndGradient compares the op's loss with refLoss and its
// gradient (upstream 1.7) with central differences of refLoss, and
// returns the gradient.
func checkLossAndGradient(t *testing.T, c lossCase, a, b []float64) []float64 {
	t.Helper()
	got, want := lossOf(t, mustLoss(t, c), c, a, b), refLoss(c, a, b)
	if math.IsNaN(got) || math.Abs(got-want) > 1e-12*math.Max(1, math.Abs(want)) {
		t.Errorf("%v: loss %.17g, reference %.17g", c, got, want)
	}
	const up, h = 1.7, 1e-5
	grad := gradOf(t, c, a, b, up)
	x := append([]float64(nil), a...)
	var worst, scale float64
	worstAt := 0
	// Every pixel of a small batch; every 7th of a larger one (7 is prime
	// to both sides, so the pixels checked fall on every row and column).
	step := 1
	if len(x) > 1000 {
		step = 7
	}
	for i := 0; i < len(x); i += step {
		x[i] = a[i] + h
		lp := refLoss(c, x, b)
		x[i] = a[i] - h
		lm := refLoss(c, x, b)
		x[i] = a[i]
		fd := up * (lp - lm) / (2 * h)
		if d := math.Abs(fd - grad[i]); d > worst || math.IsNaN(d) {
			worst, worstAt = d, i
		}
		scale = math.Max(scale, math.Abs(fd))
	}
	if scale == 0 {
		t.Fatalf("%v: the loss does not depend on the image", c)
	}
	t.Logf("%v: loss %.6f, gradient within %.2g of the largest (%.3g) of central differences", c, got, worst/scale, scale)
	if worst > 1e-6*scale || math.IsNaN(worst) {
		t.Errorf("%v: gradient off by %.3g at pixel %d (%.3g of the largest, %.3g)", c, worst, worstAt, worst/scale, scale)
	}
	return grad
}

func TestImageLossMatchesReferenceAndFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, c := range lossCases() {
		a, b := lossImages(rng, c.views*c.rows*c.cols)
		grad := checkLossAndGradient(t, c, a, b)
		// A second run over buffers left full of NaN writes every pixel.
		gop := &imageLossGrad{lossShape: mustLoss(t, c).lossShape}
		up := G.F64(1.7)
		if _, err := gop.Do(dense(c, a), dense(c, b), &up); err != nil {
			t.Fatal(err)
		}
		for _, buf := range [][]float64{gop.out.Data().([]float64), gop.perView, gop.sobel, gop.dsobel} {
			for i := range buf {
				buf[i] = math.NaN()
			}
		}
		if _, err := gop.Do(dense(c, a), dense(c, b), &up); err != nil {
			t.Fatal(err)
		}
		for i, g := range gop.out.Data().([]float64) {
			if g != grad[i] {
				t.Fatalf("%v: gradient[%d] %g over a dirty buffer, %g over a fresh one", c, i, g, grad[i])
			}
		}
		if c.patch == 0 || c.kind == LossMSE {
			continue
		}
		// The pixels of the dropped partial tiles pass no gradient.
		h, w := c.rows, c.cols
		margin := 0
		if c.kind == LossGradNCC {
			h, w, margin = h-2, w-2, 2
		}
		lastRow, lastCol := h/c.patch*c.patch+margin, w/c.patch*c.patch+margin
		for v := range c.views {
			for r := range c.rows {
				for col := range c.cols {
					if (r >= lastRow || col >= lastCol) && grad[(v*c.rows+r)*c.cols+col] != 0 {
						t.Fatalf("%v: pixel (%d, %d, %d) outside every tile has gradient %g", c, v, r, col, grad[(v*c.rows+r)*c.cols+col])
					}
				}
			}
		}
	}
}

// TestImageLossFlatRegion: a region where the target is constant counts
// in the mean with NCC 0 and passes no gradient.
func TestImageLossFlatRegion(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, tc := range []struct {
		c        lossCase
		value    float64
		r0, r1   int // rows of view 1 made constant
		c0, c1   int // and columns
		tr0, tr1 int // the rows and columns of view 1's tile that must get no gradient
		tc0, tc1 int // (for gncc: of its Sobel gradients)
	}{
		// ncc, patch 5: tile (1, 2) of view 1, rows 5-9, columns 10-14;
		// 0.1 repeated 25 times does not average to exactly 0.1.
		{c: lossCase{LossNCC, 2, 37, 29, 5}, value: 0.1, r0: 5, r1: 10, c0: 10, c1: 15, tr0: 5, tr1: 10, tc0: 10, tc1: 15},
		// ncc, whole views: view 1 constant.
		{c: lossCase{LossNCC, 2, 37, 29, 0}, value: 0.1, r0: 0, r1: 37, c0: 0, c1: 29, tr0: 0, tr1: 37, tc0: 0, tc1: 29},
		// gncc, patch 5: gradient tile (1, 2) is rows 5-9, columns 10-14
		// of the gradient image, fed by image rows 5-11, columns 10-16.
		// 0.75 keeps the reference's Sobel sums exact.
		{c: lossCase{LossGradNCC, 2, 37, 29, 5}, value: 0.75, r0: 5, r1: 12, c0: 10, c1: 17, tr0: 5, tr1: 10, tc0: 10, tc1: 15},
		// gncc, whole views: view 1 constant, all its gradient is 0.
		{c: lossCase{LossGradNCC, 2, 37, 29, 0}, value: 0.75, r0: 0, r1: 37, c0: 0, c1: 29, tr0: 0, tr1: 35, tc0: 0, tc1: 27},
	} {
		c := tc.c
		a, b := lossImages(rng, c.views*c.rows*c.cols)
		for r := tc.r0; r < tc.r1; r++ {
			for col := tc.c0; col < tc.c1; col++ {
				b[(c.rows+r)*c.cols+col] = tc.value
			}
		}
		grad := checkLossAndGradient(t, c, a, b)
		w := c.cols
		if c.kind == LossGradNCC {
			// The tile's image pixels also feed the neighbouring tiles'
			// Sobel values: the gradient that must be 0 is the one
			// with respect to the tile's own Sobel values.
			gop := &imageLossGrad{lossShape: mustLoss(t, c).lossShape}
			up := G.F64(1)
			if _, err := gop.Do(dense(c, a), dense(c, b), &up); err != nil {
				t.Fatal(err)
			}
			w = c.cols - 2
			p := (c.rows - 2) * w
			grad = append([]float64(nil), gop.dsobel[2*p:3*p]...) // view 1's ∂L/∂gx
			grad = append(grad, gop.dsobel[3*p:]...)              // then ∂L/∂gy
		}
		at := func(r, col int) []float64 {
			if c.kind == LossGradNCC {
				p := (c.rows - 2) * w
				return []float64{grad[r*w+col], grad[p+r*w+col]}
			}
			return []float64{grad[(c.rows+r)*w+col]}
		}
		for r := tc.tr0; r < tc.tr1; r++ {
			for col := tc.tc0; col < tc.tc1; col++ {
				for _, g := range at(r, col) {
					if g != 0 {
						t.Fatalf("%v: (1, %d, %d) of a constant target region has gradient %g", c, r, col, g)
					}
				}
			}
		}
		// The flat region counts with NCC 0: the loss is 1 − (the other
		// regions' NCCs)/R with R counting it.
		full := refLoss(c, a, b)
		if c.patch == 0 && c.kind == LossNCC {
			want := 1 - refNCC(a[:c.rows*c.cols], b[:c.rows*c.cols])/2
			if got := lossOf(t, mustLoss(t, c), c, a, b); math.Abs(got-want) > 1e-12 || math.Abs(full-want) > 1e-12 {
				t.Errorf("%v: loss %.17g (reference %.17g), want 1 − NCC(view 0)/2 = %.17g", c, got, full, want)
			}
		}
	}
}

// TestImageLossUnderflow: a view whose centred squares underflow to 0
// (pixels ~1e-200 apart) counts as flat, not as 0/0.
func TestImageLossUnderflow(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	c := lossCase{LossNCC, 2, 37, 29, 0}
	a, b := lossImages(rng, c.views*c.rows*c.cols)
	per := c.rows * c.cols
	for i := per; i < 2*per; i++ {
		a[i] = 1e-200 * rng.Float64()
	}
	want := 1 - refNCC(a[:per], b[:per])/2
	if got := lossOf(t, mustLoss(t, c), c, a, b); math.IsNaN(got) || math.Abs(got-want) > 1e-12 {
		t.Errorf("loss %.17g, want 1 − NCC(view 0)/2 = %.17g", got, want)
	}
	for i, g := range gradOf(t, c, a, b, 1)[per:] {
		if g != 0 {
			t.Fatalf("pixel %d of the underflowing view has gradient %g", i, g)
		}
	}
}

// TestImageLossGradThroughTapeMachine: G.Grad builds the gradient from
// SymDiff; a TapeMachine replays it on new images, in the same buffers,
// giving what the ops give when called directly.
func TestImageLossGradThroughTapeMachine(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, c := range []lossCase{
		{LossNCC, 2, 37, 29, 5}, {LossGradNCC, 2, 37, 29, 11}, {LossMSE, 2, 37, 29, 0}, {LossGradNCC, 2, 37, 29, 0},
	} {
		for _, target := range []string{"constant", "input", "constant, cost 2.5·loss"} {
			n := c.views * c.rows * c.cols
			_, b := lossImages(rng, n)
			g := G.NewGraph()
			x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(c.views, c.rows, c.cols), G.WithName("x"))
			var tn *G.Node
			tb := dense(c, b)
			if target == "input" {
				tn = G.NewTensor(g, tensor.Float64, 3, G.WithShape(c.views, c.rows, c.cols), G.WithName("target"))
			} else {
				tn = G.NewConstant(tb, G.WithName("target"))
			}
			loss, err := G.ApplyOp(mustLoss(t, c), x, tn)
			if err != nil {
				t.Fatal(err)
			}
			cost, up := loss, 1.0
			if strings.Contains(target, "2.5") {
				up = 2.5
				if cost, err = G.Mul(loss, G.NewConstant(up)); err != nil {
					t.Fatal(err)
				}
			}
			grads, err := G.Grad(cost, x)
			if err != nil {
				t.Fatalf("%v, %s target: %v", c, target, err)
			}
			vm := G.NewTapeMachine(g)
			xt := dense(c, make([]float64, n))
			if err := G.Let(x, xt); err != nil {
				t.Fatal(err)
			}
			if target == "input" {
				if err := G.Let(tn, tb); err != nil {
					t.Fatal(err)
				}
			}
			var first *tensor.Dense
			for run := range 4 {
				a, _ := lossImages(rng, n)
				copy(xt.Data().([]float64), a)
				if err := vm.RunAll(); err != nil {
					t.Fatalf("%v, %s target, run %d: %v", c, target, run, err)
				}
				gv := grads[0].Value().(*tensor.Dense)
				if first == nil {
					first = gv
				} else if gv != first {
					t.Errorf("%v, %s target, run %d: the gradient is in another buffer", c, target, run)
				}
				wantLoss := lossOf(t, mustLoss(t, c), c, a, b)
				if got := float64(*loss.Value().(*G.F64)); got != wantLoss {
					t.Errorf("%v, %s target, run %d: loss %.17g, the op alone %.17g", c, target, run, got, wantLoss)
				}
				want := gradOf(t, c, a, b, up)
				got := gv.Data().([]float64)
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%v, %s target, run %d: gradient[%d] %.17g, the op alone %.17g", c, target, run, i, got[i], want[i])
					}
				}
				vm.Reset()
			}
			vm.Close()
		}
	}
}

// TestImageLossReplayAllocations: a replay of loss and gradient allocates
// nothing that grows with the image: the same few hundred bytes (the
// machine's own run) at 2×16×16 as at 2×128×128, whose gradient alone is
// 256 KiB.
func TestImageLossReplayAllocations(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	perRun := map[int]float64{}
	for _, c := range []lossCase{{LossGradNCC, 2, 16, 16, 7}, {LossGradNCC, 2, 128, 128, 13}, {LossNCC, 2, 128, 128, 13}, {LossMSE, 2, 128, 128, 0}} {
		n := c.views * c.rows * c.cols
		a, b := lossImages(rng, n)
		g := G.NewGraph()
		x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(c.views, c.rows, c.cols), G.WithName("x"))
		loss, err := G.ApplyOp(mustLoss(t, c), x, G.NewConstant(dense(c, b)))
		if err != nil {
			t.Fatal(err)
		}
		grads, err := G.Grad(loss, x)
		if err != nil {
			t.Fatal(err)
		}
		vm := G.NewTapeMachine(g)
		xt := dense(c, make([]float64, n))
		if err := G.Let(x, xt); err != nil {
			t.Fatal(err)
		}
		replay := func() {
			copy(xt.Data().([]float64), a)
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			vm.Reset()
		}
		replay()
		gv := grads[0].Value()
		allocs := testing.AllocsPerRun(50, replay)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const runs = 50
		for range runs {
			replay()
		}
		runtime.ReadMemStats(&after)
		bytes := float64(after.TotalAlloc-before.TotalAlloc) / runs
		t.Logf("%v: %.0f allocations, %.0f bytes per replay", c, allocs, bytes)
		if grads[0].Value() != gv {
			t.Errorf("%v: the gradient moved to another buffer", c)
		}
		if bytes > 4<<10 {
			t.Errorf("%v: %.0f bytes allocated per replay, want ≤ 4 KiB", c, bytes)
		}
		perRun[c.rows] = max(perRun[c.rows], bytes)
		vm.Close()
	}
	if perRun[128] > perRun[16]+512 {
		t.Errorf("a replay at 128×128 allocates %.0f bytes, at 16×16 %.0f: it grows with the image", perRun[128], perRun[16])
	}
}

// TestImageLossThreadCountIndependent: the views are spread over
// goroutines (3×128×97 is above lossParallelPixels), yet the loss and the
// gradient are the same bits on 1 thread as on 4.
func TestImageLossThreadCountIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	for _, c := range []lossCase{{LossNCC, 3, 128, 97, 9}, {LossGradNCC, 3, 128, 97, 0}, {LossMSE, 3, 128, 97, 0}} {
		if c.views*c.rows*c.cols < lossParallelPixels {
			t.Fatalf("%v is too small to run in parallel", c)
		}
		a, b := lossImages(rng, c.views*c.rows*c.cols)
		var loss [2]float64
		var grad [2][]float64
		for i, procs := range []int{1, 4} {
			runtime.GOMAXPROCS(procs)
			loss[i] = lossOf(t, mustLoss(t, c), c, a, b)
			grad[i] = append([]float64(nil), gradOf(t, c, a, b, 1)...)
		}
		if loss[0] != loss[1] {
			t.Errorf("%v: loss %.17g on 1 thread, %.17g on 4", c, loss[0], loss[1])
		}
		for i := range grad[0] {
			if grad[0][i] != grad[1][i] {
				t.Fatalf("%v: gradient[%d] %.17g on 1 thread, %.17g on 4", c, i, grad[0][i], grad[1][i])
			}
		}
	}
}

func TestImageLossErrors(t *testing.T) {
	checkErr := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: no error", what)
			return
		}
		if !errors.Is(err, ErrLoss) {
			t.Errorf("%s: %v does not wrap ErrLoss", what, err)
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || msg != strings.ToLower(msg[:1])+msg[1:] {
			t.Errorf("%s: %q: want one lowercase line", what, msg)
		}
	}
	for _, tc := range []struct {
		kind                     LossKind
		views, rows, cols, patch int
	}{
		{LossNCC, 2, 37, 29, 30}, {LossNCC, 2, 37, 29, 38}, {LossNCC, 2, 37, 29, 1}, {LossNCC, 2, 37, 29, -1},
		{LossGradNCC, 2, 37, 29, 28}, {LossGradNCC, 2, 2, 29, 0}, {LossMSE, 2, 37, 29, 5},
		{LossNCC, 0, 37, 29, 0}, {LossNCC, 2, 0, 29, 0}, {LossKind(7), 2, 37, 29, 0},
	} {
		_, err := NewImageLoss(tc.kind, tc.views, tc.rows, tc.cols, tc.patch)
		checkErr(fmt.Sprintf("NewImageLoss%v", tc), err)
	}
	for _, s := range []string{"ncc", "gncc", "mse"} {
		if k, err := ParseLossKind(s); err != nil || k.String() != s {
			t.Errorf("ParseLossKind(%q) = %v, %v", s, k, err)
		}
	}
	_, err := ParseLossKind("ssim")
	checkErr("ParseLossKind(ssim)", err)
	if err != nil && !strings.Contains(err.Error(), "ncc, gncc or mse") {
		t.Errorf("%q does not list the kinds", err)
	}

	c := lossCase{LossGradNCC, 2, 37, 29, 5}
	rng := rand.New(rand.NewPCG(21, 22))
	a, b := lossImages(rng, c.views*c.rows*c.cols)
	good := dense(c, a)
	short := tensor.New(tensor.WithShape(2, 37, 28), tensor.WithBacking(a[:2*37*28]))
	flat := tensor.New(tensor.WithShape(2*37*29), tensor.WithBacking(b))
	f32 := tensor.New(tensor.WithShape(2, 37, 29), tensor.Of(tensor.Float32))
	scalar := G.F64(1)
	op := mustLoss(t, c)
	for name, in := range map[string][]G.Value{
		"short target":   {good, short},
		"short image":    {short, good},
		"flat target":    {good, flat},
		"float32 target": {good, f32},
		"scalar image":   {&scalar, good},
		"one input":      {good},
	} {
		_, err := op.Do(in...)
		checkErr("Do with a "+name, err)
		gop := &imageLossGrad{lossShape: op.lossShape}
		_, err = gop.Do(append(in, &scalar)...)
		checkErr("gradient Do with a "+name, err)
	}
	gop := &imageLossGrad{lossShape: op.lossShape}
	_, err = gop.Do(good, dense(c, b), tensor.New(tensor.WithShape(2), tensor.WithBacking([]float64{1, 2})))
	checkErr("gradient Do with a vector upstream gradient", err)

	// Building a graph with mismatched shapes fails at ApplyOp.
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(2, 37, 29), G.WithName("x"))
	y := G.NewTensor(g, tensor.Float64, 3, G.WithShape(2, 37, 28), G.WithName("y"))
	if _, err := G.ApplyOp(mustLoss(t, c), x, y); err == nil {
		t.Error("ApplyOp with a 2×37×28 target: no error")
	}
	z := G.NewTensor(g, tensor.Float64, 3, G.WithShape(2, 36, 29), G.WithName("z"))
	if _, err := G.ApplyOp(mustLoss(t, c), z, x); err == nil {
		t.Error("ApplyOp with a 2×36×29 image: no error")
	}
}

// TestImageLossHashes: every parameter changes the hash, and the
// gradient op hashes apart from the loss.
func TestImageLossHashes(t *testing.T) {
	base := lossCase{LossNCC, 2, 37, 29, 5}
	seen := map[uint32]string{}
	add := func(name string, h uint32) {
		if prev, ok := seen[h]; ok {
			t.Errorf("%s hashes as %s", name, prev)
		}
		seen[h] = name
	}
	for _, c := range []lossCase{base, {LossGradNCC, 2, 37, 29, 5}, {LossNCC, 3, 37, 29, 5}, {LossNCC, 2, 36, 29, 5}, {LossNCC, 2, 37, 28, 5}, {LossNCC, 2, 37, 29, 7}} {
		op := mustLoss(t, c)
		add(c.String(), op.Hashcode())
		add("∂"+c.String(), (&imageLossGrad{lossShape: op.lossShape}).Hashcode())
	}
}

// benchmarkImageLoss runs the loss and its gradient, as one optimiser
// step does.
func benchmarkImageLoss(b *testing.B, c lossCase) {
	rng := rand.New(rand.NewPCG(23, 24))
	x, y := lossImages(rng, c.views*c.rows*c.cols)
	op := mustLoss(b, c)
	gop := &imageLossGrad{lossShape: op.lossShape}
	xt, yt := dense(c, x), dense(c, y)
	up := G.F64(1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := op.Do(xt, yt); err != nil {
			b.Fatal(err)
		}
		if _, err := gop.Do(xt, yt, &up); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkImageLoss(b *testing.B) {
	for _, c := range []lossCase{
		{LossNCC, 2, 128, 128, 0}, {LossNCC, 2, 128, 128, 13},
		{LossGradNCC, 2, 128, 128, 0}, {LossGradNCC, 2, 128, 128, 13},
		{LossMSE, 2, 128, 128, 0},
		{LossNCC, 2, 64, 64, 13}, {LossGradNCC, 2, 64, 64, 13},
	} {
		b.Run(c.String(), func(b *testing.B) { benchmarkImageLoss(b, c) })
	}
}

// BenchmarkImageLossTape replays loss and gradient built by G.Grad in a
// TapeMachine, with the image copied in first: one optimiser step's loss.
func BenchmarkImageLossTape(b *testing.B) {
	for _, c := range []lossCase{{LossNCC, 2, 128, 128, 13}, {LossGradNCC, 2, 128, 128, 13}} {
		b.Run(c.String(), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(27, 28))
			x, y := lossImages(rng, c.views*c.rows*c.cols)
			g := G.NewGraph()
			xn := G.NewTensor(g, tensor.Float64, 3, G.WithShape(c.views, c.rows, c.cols), G.WithName("x"))
			loss, err := G.ApplyOp(mustLoss(b, c), xn, G.NewConstant(dense(c, y)))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := G.Grad(loss, xn); err != nil {
				b.Fatal(err)
			}
			vm := G.NewTapeMachine(g)
			defer vm.Close()
			xt := dense(c, make([]float64, len(x)))
			if err := G.Let(xn, xt); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				copy(xt.Data().([]float64), x)
				if err := vm.RunAll(); err != nil {
					b.Fatal(err)
				}
				vm.Reset()
			}
		})
	}
}
