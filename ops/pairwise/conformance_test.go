package pairwise

// Conformance of the pairwise ops, as package ops's suites (see its
// conformance_test.go): each case run unchanged on every backend the build
// has, the CPU always and the GPU twins (ops.OnDevice) in builds with
// tapeloop_cuda or tapeloop_cudaemu. TestConformancePairwise includes
// top-k: the fused PairwiseTopK where the device offers it, else TopK, as
// graphs/affinity selects. The backend harness is opstest.Backend, as in
// package ops.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/ops"
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

// backend is one place the ops run (see opstest.Backend).
type backend = opstest.Backend[ops.Device]

// cpuBackend runs the ops as they are.
var cpuBackend = backend{Name: "cpu", OnDevice: ops.OnDevice}

// ---- Pairwise and TopK ----

// pairFixture is n images of d values (float32 values, so both dtypes see
// the same images) and the block size.
type pairFixture struct {
	name        string
	n, d, batch int
	x           []float64
}

// pairLayout is a block: its first image lo and the rows it holds (the
// others are padding: zero rows, index 0), where its rows come from,
// whether it is an upper block, the GPU's rows per chunk (0: its choice),
// or an index the op must refuse.
type pairLayout struct {
	name            string
	lo, rows        int
	upper, fromData bool
	chunk           int
	bad             []float64 // the index of a block the op refuses
}

// input is the op's input for block c of x's images of d values: its
// rows as a batch×d tensor of dt (padding: zero rows) and its index
// (padding: image 0; c.bad where set), or the index alone where the rows
// come from the data.
func (c pairLayout) input(x []float64, batch, d int, dt tensor.Dtype) []G.Value {
	rows := make([]float64, batch*d)
	for i := range c.rows {
		copy(rows[i*d:(i+1)*d], x[(c.lo+i)*d:(c.lo+i+1)*d])
	}
	in := []G.Value{opstest.DenseOf(dt, rows, batch, d), opstest.DenseOf(tensor.Float64, c.index(batch))}
	if c.fromData {
		return in[1:]
	}
	return in
}

// index is block c's index: its images from lo on, then image 0 for the
// padding rows; c.bad where set.
func (c pairLayout) index(batch int) []float64 {
	if c.bad != nil {
		return c.bad
	}
	index := make([]float64, batch)
	for i := range c.rows {
		index[i] = float64(c.lo + i)
	}
	return index
}

// refused: where block c has a bad index, op must refuse in (else t
// fails); true then, and the case is done.
func (c pairLayout) refused(t *testing.T, op G.Op, in []G.Value) bool {
	t.Helper()
	if c.bad == nil {
		return false
	}
	if _, err := op.Do(in...); err == nil {
		t.Fatalf("index %v accepted", c.bad)
	}
	return true
}

// firstCol is the first column block c's rows owe: lo in an upper block,
// else 0.
func (c pairLayout) firstCol() int {
	if c.upper {
		return c.lo
	}
	return 0
}

func pairLayouts(n, batch int) []pairLayout {
	mid, short := n/3, batch/2+1
	seq := func(from float64) []float64 {
		s := make([]float64, batch)
		for i := range s {
			s[i] = from + float64(i)
		}
		return s
	}
	return []pairLayout{
		{name: "rows", lo: mid, rows: batch},
		{name: "rows upper", lo: mid, rows: batch, upper: true},
		{name: "rows short", lo: n - short, rows: short},
		{name: "rows short upper", lo: n - short, rows: short, upper: true},
		{name: "data", lo: mid, rows: batch, fromData: true},
		{name: "data upper", lo: mid, rows: batch, fromData: true, upper: true},
		{name: "data upper at 0", lo: 0, rows: batch, fromData: true, upper: true},
		{name: "data end", lo: n - short, rows: short, fromData: true},
		{name: "data end upper", lo: n - short, rows: short, fromData: true, upper: true},
		{name: "data padded upper", lo: mid, rows: 3, fromData: true, upper: true},
		{name: "rows chunk 16", lo: mid, rows: batch, chunk: 16},
		{name: "data upper chunk 16", lo: mid, rows: batch, fromData: true, upper: true, chunk: 16},
		{name: "data end upper chunk 16", lo: n - short, rows: short, fromData: true, upper: true, chunk: 16},
		{name: "data end chunk 7", lo: n - short, rows: short, fromData: true, chunk: 7},
		{name: "data negative", fromData: true, bad: seq(-1)},
		{name: "data upper past N", fromData: true, upper: true, bad: seq(float64(n))},
		{name: "data fraction", fromData: true, bad: seq(2.5)},
	}
}

// pairMetrics are the metrics, and TF32 for the GEMM ones (float32 only).
var pairMetrics = []struct {
	metric Metric
	tf32   bool
}{{MetricDot, false}, {MetricCosine, false}, {MetricL1, false}, {MetricL2, false}, {MetricDot, true}, {MetricCosine, true}}

// pairTol is the norm-wise tolerance of a block: float64 and the CPU's
// float32 against the definition as before; a GPU's float32 (1e-5) and
// TF32 (3e-4) as its twin against the CPU.
func pairTol(b backend, dt tensor.Dtype, tf32 bool) float64 {
	switch {
	case dt == tensor.Float64:
		return 1e-14
	case !b.GPU:
		return 1e-6
	case tf32:
		return 3e-4
	}
	return 1e-5
}

// refMatrix is refAffinity for every pair.
func refMatrix(x []float64, n, d int, m Metric) []float64 {
	ref := make([]float64, n*n)
	for i := range n {
		for j := range n {
			ref[i*n+j] = refAffinity(x, n, d, m, i, j)
		}
	}
	return ref
}

// topkFixture is a pairFixture whose images 9, 77 and 230 are copies of
// image 5: every row ties at their columns. With integer values in
// [-3, 3] every backend's float32 sums of dot, l1 and l2 are exact (TF32
// holds such integers exactly too): ties abound, and the picks must equal
// the reference's to the index.
type topkFixture struct {
	pairFixture
	integers bool
}

func topkFixtures() []topkFixture {
	const n, d, batch = 301, 23, 40
	rng := rand.New(rand.NewPCG(45, 46))
	ints := make([]float64, n*d)
	for i := range ints {
		ints[i] = float64(rng.IntN(7) - 3)
	}
	norms := opstest.Widen(opstest.Normals32(rng, n*d))
	for _, x := range [][]float64{ints, norms} {
		for _, c := range []int{9, 77, 230} {
			copy(x[c*d:(c+1)*d], x[5*d:6*d])
		}
	}
	return []topkFixture{{pairFixture{"integers", n, d, batch, ints}, true}, {pairFixture{"normals", n, d, batch, norms}, false}}
}

func TestConformancePairwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	var fixtures []pairFixture
	for _, s := range []struct{ n, d, batch int }{{41, 19, 8}, {151, 77, 40}} {
		x := opstest.Widen(opstest.Normals32(rng, s.n*s.d))
		for i := range x {
			x[i] = float64(float32(x[i] + 0.2))
		}
		fixtures = append(fixtures, pairFixture{fmt.Sprintf("N%d_D%d_B%d", s.n, s.d, s.batch), s.n, s.d, s.batch, x})
	}
	tops := topkFixtures()
	opstest.OnEveryBackend(t, backends(t), func(t *testing.T, b backend) {
		b.RefusesFloat64(t, func(t *testing.T) G.Op {
			fx := fixtures[0]
			return NewPairwise(pairData(t, tensor.Float64, fx.x, fx.n, fx.d, MetricL1), MetricL1, fx.batch)
		})
		for _, fx := range fixtures {
			runPairwiseConformance(t, b, fx)
		}
		for _, fx := range tops {
			runTopKConformance(t, b, fx)
		}
	})
}

// pairData prepares the float32 or the float64 images for m.
func pairData(t *testing.T, dt tensor.Dtype, x []float64, n, d int, m Metric) *PairData {
	t.Helper()
	var data *PairData
	var err error
	if dt == tensor.Float32 {
		data, err = NewPairData(opstest.Narrow(x), n, d, m)
	} else {
		data, err = NewPairData(x, n, d, m)
	}
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// runPairwiseConformance: every layout of block, from given rows or read
// from the data, against the definition: the rows it holds, from the
// block's first row on in upper blocks; after the second run the columns
// before that, and the padding rows of a block read from the data, still
// hold the mark (777).
func runPairwiseConformance(t *testing.T, b backend, fx pairFixture) {
	n, d, batch := fx.n, fx.d, fx.batch
	for _, mc := range pairMetrics {
		ref := refMatrix(fx.x, n, d, mc.metric)
		for _, dt := range b.Dtypes() {
			if mc.tf32 && dt == tensor.Float64 {
				continue
			}
			data := pairData(t, dt, fx.x, n, d, mc.metric)
			tol := pairTol(b, dt, mc.tf32)
			for _, c := range pairLayouts(n, batch) {
				t.Run(fmt.Sprintf("%s/%v/tf32=%v/%v/%s", fx.name, mc.metric, mc.tf32, dt, c.name), func(t *testing.T) {
					pw := NewPairwise(data, mc.metric, batch)
					pw.Upper, pw.RowsFromData, pw.TF32 = c.upper, c.fromData, mc.tf32
					op := b.Place(t, pw)
					if b.Chunk != nil {
						b.Chunk(op, c.chunk)
					}
					in := c.input(fx.x, batch, d, dt)
					if c.refused(t, op, in) {
						return
					}
					c0 := c.firstCol()
					opstest.RunTwice(t, b, op, 777, func(run string, out *tensor.Dense) {
						got := opstest.ValuesOf(out)
						var gs, ws []float64
						for i := range c.rows {
							gs = append(gs, got[i*n+c0:(i+1)*n]...)
							ws = append(ws, ref[(c.lo+i)*n+c0:(c.lo+i+1)*n]...)
						}
						if e := opstest.RelErr(gs, ws); !(e <= tol) {
							t.Errorf("%s: relative error %.3g > %g", run, e, tol)
						}
						if run != opstest.SecondRun {
							return
						}
						for i := range batch {
							for j := range n {
								padding := i >= c.rows // from given rows: computed, of zero rows
								if (j < c0 || padding && c.fromData) && got[i*n+j] != 777 {
									t.Fatalf("(%d, %d) = %v: written", i, j, got[i*n+j])
								}
							}
						}
					}, in...)
				})
			}
		}
	}
}

// runTopKConformance: blocks of whole rows read from the data, the top k
// of each selected as graphs/affinity does (the fused PairwiseTopK where
// FuseTopK offers it, the device selecting them itself; else Pairwise then
// TopK), whole and short blocks, k from 1 to past the GPU's largest (its
// host fallback: Pairwise then TopK there too), against refTopK of the
// definition.
// Over integers the picks of dot, l1 and l2 are the reference's exactly,
// ties by the smaller index; cosine's, and over normals, near-ties may go
// either way (topkAgrees). Each pick's value (PairwiseTopK's own, or the
// block's at the pick) is the definition's.
func runTopKConformance(t *testing.T, b backend, fx topkFixture) {
	n, d, batch := fx.n, fx.d, fx.batch
	metrics := pairMetrics
	if !fx.integers {
		metrics = metrics[:0:0]
		for _, mc := range pairMetrics {
			if mc.metric == MetricCosine {
				metrics = append(metrics, mc)
			}
		}
	}
	for _, mc := range metrics {
		ref := refMatrix(fx.x, n, d, mc.metric)
		exact := fx.integers && mc.metric != MetricCosine
		for _, dt := range b.Dtypes() {
			if mc.tf32 && dt == tensor.Float64 || !fx.integers && dt == tensor.Float64 {
				continue
			}
			data := pairData(t, dt, fx.x, n, d, mc.metric)
			tol := pairTol(b, dt, mc.tf32)
			for _, k := range []int{1, 4, 32, 33, 100, topkMax + 1} {
				for _, lo := range []int{0, n - batch/2 - 1} { // whole, and short: the data ends
					t.Run(fmt.Sprintf("topk/%s/%v/tf32=%v/%v/k=%d/lo=%d", fx.name, mc.metric, mc.tf32, dt, k, lo), func(t *testing.T) {
						pw := NewPairwise(data, mc.metric, batch)
						pw.RowsFromData, pw.TF32 = true, mc.tf32
						op := b.Place(t, pw)
						idx := make([]float64, batch)
						for i := range idx {
							idx[i] = float64(min(lo+i, n-1))
						}
						index := opstest.DenseOf(tensor.Float64, idx)
						// A GPU selects up to topkMax itself; past that, and on the CPU, TopK does.
						picks, vals := selectTopK(t, op, k, n, batch, index, b.GPU && k <= topkMax)
						for r := range min(batch, n-lo) {
							row := ref[(lo+r)*n : (lo+r+1)*n]
							want := refTopK(row, lo+r, k)
							got := make([]int, k)
							for q := range k {
								got[q] = int(picks[r*k+q])
							}
							if exact && !slices.Equal(got, want) || !exact && !topkAgrees(got, want, row, lo+r, tol) {
								t.Fatalf("row %d: picks %v, want %v", lo+r, got, want)
							}
							for q, j := range got {
								if v := vals[r*k+q]; exact && v != row[j] || !(math.Abs(v-row[j]) <= tol*(1+math.Abs(row[j]))) {
									t.Fatalf("row %d column %d: value %v, want %v", lo+r, j, v, row[j])
								}
							}
						}
					})
				}
			}
		}
	}
}

// selectTopK runs a pairwise op placed on its backend on a block's index
// and selects the top k of each row as graphs/affinity does: in one pass
// where FuseTopK fuses the selection into the op (PairwiseTopK), else the
// block then TopK; fused says which the backend must offer. It returns
// the picks, (batch, k) column indices best first, and their values.
func selectTopK(t *testing.T, op G.Op, k, n, batch int, index *tensor.Dense, fused bool) (picks, vals []float64) {
	t.Helper()
	f, ok := FuseTopK(op, k)
	if ok != fused {
		t.Fatalf("FuseTopK(%v, %d) fused: %v, want %v", op, k, ok, fused)
	}
	if ok {
		out, err := f.Do(index)
		if err != nil {
			t.Fatal(err)
		}
		if s := out.Shape(); len(s) != 3 || s[0] != 2 || s[1] != batch || s[2] != k {
			t.Fatalf("PairwiseTopK output %v, want (2, %d, %d)", s, batch, k)
		}
		both := out.(*tensor.Dense).Data().([]float64)
		return both[:batch*k], both[batch*k:]
	}
	blk, err := op.Do(index)
	if err != nil {
		t.Fatal(err)
	}
	top, err := NewTopK(k, n, batch).Do(blk, index)
	if err != nil {
		t.Fatal(err)
	}
	block := opstest.ValuesOf(blk.(*tensor.Dense))
	picks = top.(*tensor.Dense).Data().([]float64)
	vals = make([]float64, len(picks))
	for i, j := range picks {
		vals[i] = block[i/k*n+int(j)]
	}
	return picks, vals
}

// topkAgrees says whether got is a right top k of row, self skipped,
// allowing for rounding: k distinct columns other than self; the q-th
// pick's value within tol of the reference's q-th best (want's); and
// columns of equal value (copies of an image) picked smallest first, as
// the reference does.
func topkAgrees(got, want []int, row []float64, self int, tol float64) bool {
	seen := map[int]int{}
	for q, j := range got {
		if j < 0 || j >= len(row) || j == self {
			return false
		}
		if _, dup := seen[j]; dup {
			return false
		}
		seen[j] = q
		if w := row[want[q]]; !(math.Abs(row[j]-w) <= tol*(1+math.Abs(w))) {
			return false
		}
	}
	for q, j := range got {
		for i := range j { // a smaller column of the same value: picked, and before j
			if i != self && row[i] == row[j] {
				if p, ok := seen[i]; !ok || p > q {
					return false
				}
			}
		}
	}
	return true
}
