package pairwise

import (
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

// l2Ref is −‖x_i − x_j‖² of every pair, in float64, one value at a time:
// the definition, nothing shared with the op.
func l2Ref(x []float32, n, d int) []float64 {
	ref := make([]float64, n*n)
	for i := range n {
		for j := range n {
			var s float64
			for k := range d {
				diff := float64(x[i*d+k]) - float64(x[j*d+k])
				s += diff * diff
			}
			ref[i*n+j] = -s
		}
	}
	return ref
}

// l2Matrix runs float32 l2 over x's n images in blocks of batch rows read
// from the data, as `tapeloop affinity` does: with upper, each block from
// its diagonal on, the pairs below mirrored from earlier blocks (the
// in-memory matrix); else every row whole (streamed rows, shards, top-k).
func l2Matrix(t *testing.T, b backend, data *PairData, batch int, upper bool) []float32 {
	t.Helper()
	n := data.N
	pw := NewPairwise(data, MetricL2, batch)
	pw.Upper, pw.RowsFromData = upper, true
	op := b.Place(t, pw)
	index := make([]float64, batch)
	in := tensor.New(tensor.WithShape(batch), tensor.WithBacking(index))
	a := make([]float32, n*n)
	for lo := 0; lo < n; lo += batch {
		for i := range index {
			index[i] = float64(min(lo+i, n-1))
		}
		out, err := op.Do(in)
		if err != nil {
			t.Fatal(err)
		}
		blk := out.(*tensor.Dense).Data().([]float32)
		for i := 0; i < batch && lo+i < n; i++ {
			c0 := 0
			if upper {
				c0 = lo + i
			}
			for j := c0; j < n; j++ {
				a[(lo+i)*n+j] = blk[i*n+j]
				if upper {
					a[j*n+lo+i] = blk[i*n+j]
				}
			}
		}
	}
	return a
}

// l2Images are the cases: images sharing a large common offset.
func l2Images() []struct {
	name string
	n, d int
	x    []float32
	// whole: the images are whole numbers whose centred sums fit float32's
	// 24 bits, so every distance is exact.
	whole bool
} {
	rng := rand.New(rand.NewPCG(71, 72))
	normals := func(n, d int, offset, sigma float64) []float32 {
		x := make([]float32, n*d)
		for i := range x {
			x[i] = float32(offset + sigma*rng.NormFloat64())
		}
		return x
	}
	u16 := func(n, d int) []float32 { // uint16 images around 1000, as read into float32
		x := make([]float32, n*d)
		for i := range x {
			x[i] = float32(uint16(math.Round(1000 + 10*rng.NormFloat64())))
		}
		return x
	}
	bytes := func(n, d int) []float32 {
		x := make([]float32, n*d)
		for i := range x {
			x[i] = float32(rng.IntN(256))
		}
		return x
	}
	return []struct {
		name  string
		n, d  int
		x     []float32
		whole bool
	}{
		{"1e4+N(0,1)", 37, 301, normals(37, 301, 1e4, 1), false},
		{"1e4+N(0,1) D=1001", 29, 1001, normals(29, 1001, 1e4, 1), false}, // three k slices of the product
		{"-3e5+N(0,40)", 33, 257, normals(33, 257, -3e5, 40), false},
		{"uint16 1000±10", 45, 333, u16(45, 333), true},
		{"0…255", 41, 199, bytes(41, 199), true}, // 8-bit values as float32: sums exact unshifted too
	}
}

// l2Tol is the relative error allowed each distance: float32's, about 80
// of its 1.2e-7 steps, what a plain float32 sum of a thousand terms (the
// GPU's) may lose.
const l2Tol = 1e-5

// checkL2 compares a float32 l2 matrix with the float64 definition: each
// distance to l2Tol of itself (exactly, for whole-number images), the
// diagonal exactly zero, no positive value.
func checkL2(t *testing.T, what string, got []float32, ref []float64, n int, whole bool) {
	t.Helper()
	worst, at := 0.0, [2]int{}
	for i := range n {
		for j := range n {
			g, r := float64(got[i*n+j]), ref[i*n+j]
			if i == j {
				if g != 0 {
					t.Fatalf("%s: the distance of image %d to itself is %v, want 0", what, i, g)
				}
				continue
			}
			if g > 0 {
				t.Fatalf("%s: (%d, %d) = %v: a negated squared distance above 0", what, i, j, g)
			}
			if whole && g != r {
				t.Fatalf("%s: (%d, %d) = %v, want exactly %v", what, i, j, g, r)
			}
			if e := math.Abs(g-r) / math.Abs(r); !(e <= worst) {
				worst, at = e, [2]int{i, j}
			}
		}
	}
	if !(worst <= l2Tol) {
		i, j := at[0], at[1]
		t.Fatalf("%s: (%d, %d) = %v, want %v: relative error %.3g > %g", what, i, j, got[i*n+j], ref[i*n+j], worst, l2Tol)
	}
	t.Logf("%s: largest relative error %.3g", what, worst)
}

// TestConformanceL2CommonOffset: float32 l2 of images sharing a large
// common offset (1e4 + N(0, 1), −3e5 + N(0, 40), uint16 images around
// 1000) is right to float32 accuracy relative to each distance, not to
// the offset (and images of whole numbers, those and 8-bit values,
// exactly): every pair against a float64 double loop, in blocks of the
// in-memory matrix (upper, mirrored) and of streamed rows, which agree
// bit for bit; the diagonal exactly 0. On every backend (the CPU, and the
// GPU twin where the build has one); on the CPU, the direct kernel (what
// CPUs without AVX-512 run) meets the same bound. The top 5 of each row
// are the definition's, up to near-ties.
func TestConformanceL2CommonOffset(t *testing.T) {
	opstest.OnEveryBackend(t, backends(t), func(t *testing.T, b backend) {
		for _, c := range l2Images() {
			t.Run(c.name, func(t *testing.T) { runL2CommonOffset(t, b, c.n, c.d, c.x, c.whole) })
		}
	})
}

// runL2CommonOffset is TestConformanceL2CommonOffset's case x (n images
// of d values; whole: whole numbers, every distance exact) on backend b.
func runL2CommonOffset(t *testing.T, b backend, n, d int, x []float32, whole bool) {
	ref := l2Ref(x, n, d)
	data, err := NewPairData(x, n, d, MetricL2)
	if err != nil {
		t.Fatal(err)
	}
	rows := l2Matrix(t, b, data, 8, false)
	checkL2(t, "rows", rows, ref, n, whole)
	upper := l2Matrix(t, b, data, 8, true)
	for i := range rows {
		if math.Float32bits(rows[i]) != math.Float32bits(upper[i]) {
			t.Fatalf("(%d, %d): streamed rows give %v, the symmetric blocks %v", i/n, i%n, rows[i], upper[i])
		}
	}
	if !b.GPU {
		direct := make([]float32, n*n)
		cpukern.PairDist32(n, n, d, x, d, x, d, direct, n, cpukern.L2)
		checkL2(t, "direct kernel", direct, ref, n, whole)
		for i := range n { // +0, as the direct kernel's
			if g, w := math.Float32bits(rows[i*n+i]), math.Float32bits(direct[i*n+i]); g != w {
				t.Fatalf("(%d, %d): bits %#x, the direct kernel's %#x", i, i, g, w)
			}
		}
	}

	const k = 5
	for i := range n {
		got := TopKRow(rows[i*n:(i+1)*n], i, k, nil)
		want := refTopK(ref[i*n:(i+1)*n], i, k)
		for p := range k {
			if got[p] != want[p] && math.Abs(ref[i*n+got[p]]-ref[i*n+want[p]]) > 2*l2Tol*math.Abs(ref[i*n+want[p]]) {
				t.Fatalf("row %d: top %d %v, want %v", i, k, got, want)
			}
		}
	}
}

// TestL2ReloadRecentres: images reloaded with another offset (whole, and
// in two parts as a compiled program reloads its rows and its column
// images) are centred on their own mean at the next block.
func TestL2ReloadRecentres(t *testing.T) {
	c := l2Images()[0]
	n, d := c.n, c.d
	data, err := NewPairData(make([]float32, n*d), n, d, MetricL2)
	if err != nil {
		t.Fatal(err)
	}
	l2Matrix(t, cpuBackend, data, 8, true) // centred on the zeros
	if err := data.Reload(c.x); err != nil {
		t.Fatal(err)
	}
	ref := l2Ref(c.x, n, d)
	checkL2(t, "reloaded", l2Matrix(t, cpuBackend, data, 8, true), ref, n, false)

	y := make([]float32, n*d)
	for i, v := range c.x {
		y[i] = v - 2e4 // −1e4 + N(0, 1)
	}
	if err := data.ReloadRows(y[:10*d], 0); err != nil {
		t.Fatal(err)
	}
	if err := data.ReloadRows(y[10*d:], 10); err != nil {
		t.Fatal(err)
	}
	checkL2(t, "reloaded in parts", l2Matrix(t, cpuBackend, data, 8, false), l2Ref(y, n, d), n, false)
}
