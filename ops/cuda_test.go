//go:build tapeloop_cuda || tapeloop_cudaemu

package ops

// The GPU twins against the CPU ops on fresh random inputs. These need a
// GPU: build the binary with `go test -c -tags tapeloop_cuda ./ops` and run
// it with -test.run CUDA -test.bench CUDA (scripts/gpu-check.sh does).

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/cuda"
	"github.com/tapeloop/tapeloop/internal/volume"
)

var (
	gpuOnce sync.Once
	gpu     *cuda.Device
	gpuErr  error
)

func device(tb testing.TB) *cuda.Device {
	gpuOnce.Do(func() { gpu, gpuErr = cuda.Open(0) })
	if gpuErr != nil {
		tb.Fatalf("opening GPU 0: %v", gpuErr)
	}
	return gpu
}

// normRel is ‖got − want‖ / ‖want‖; NaN anywhere in got (a poisoned,
// unwritten element) makes it NaN.
func normRel(got, want []float32) float64 {
	var num, den float64
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}

// twice runs a GPU op once (its arena is made), poisons its device output,
// and runs it again: elements the kernel does not write stay NaN.
func twice(t *testing.T, op G.Op, poison func() error, in *tensor.Dense) []float32 {
	if _, err := op.Do(in); err != nil {
		t.Fatal(err)
	}
	if err := poison(); err != nil {
		t.Fatal(err)
	}
	v, err := op.Do(in)
	if err != nil {
		t.Fatal(err)
	}
	return append([]float32(nil), v.Data().([]float32)...)
}

func TestInterpCUDAMatchesCPU(t *testing.T) {
	dev := device(t)
	rng := rand.New(rand.NewPCG(31, 32))
	const m, g, batch = 37, 300, 1000
	f, x := interpFixture(rng, m, g, batch)
	in := tensor.New(tensor.WithShape(batch), tensor.WithBacking(x))
	for _, c := range interpCases {
		tab, want := interpReference(t, f, m, g, batch, c.r, c.me, in)
		gop, err := OnDevice(NewInterp1D(tab, c.r, c.me, tensor.Float32, batch), dev)
		if err != nil {
			t.Fatal(err)
		}
		op := gop.(*interp1DCUDA)
		got := twice(t, op, func() error { return cuda.Poison(dev, op.y, int64(batch*op.outLen())) }, in)
		if e := normRel(got, want.Data().([]float32)); !(e <= 1e-5) {
			t.Errorf("%v/%v: relative error %.3g", c.r, c.me, e)
		}
	}
}

func TestDRRCUDAMatchesCPU(t *testing.T) {
	dev := device(t)
	const rows, cols, batch = 48, 40, 3
	vol, in := drrFixture(rand.New(rand.NewPCG(33, 34)), [3]int64{40, 32, 24}, 400, 150, 1.3, rows, cols, batch)
	for _, step := range []float64{0, 0.5} {
		want, err := NewDRR(vol, rows, cols, step, batch).Do(in)
		if err != nil {
			t.Fatal(err)
		}
		gop, err := OnDevice(NewDRR(vol, rows, cols, step, batch), dev)
		if err != nil {
			t.Fatal(err)
		}
		op := gop.(*drrCUDA)
		got := twice(t, op, func() error { return cuda.Poison(dev, op.dimg, int64(batch*rows*cols)) }, in)
		if e := normRel(got, want.Data().([]float32)); !(e <= 1e-5) {
			t.Errorf("step %g: relative error %.3g", step, e)
		}
	}
	// A step so fine that rays through the volume take more than 2^24
	// samples: the kernel's general loop (64-bit counts and offsets, q
	// converted), not the one for ordinary sizes.
	const fine = 1e-6
	vol, in = drrFixture(rand.New(rand.NewPCG(35, 36)), [3]int64{40, 32, 24}, 400, 150, 40, 2, 2, 1)
	want, err := NewDRR(vol, 2, 2, fine, 1).Do(in)
	if err != nil {
		t.Fatal(err)
	}
	gop, err := OnDevice(NewDRR(vol, 2, 2, fine, 1), dev)
	if err != nil {
		t.Fatal(err)
	}
	got, err := gop.Do(in)
	if err != nil {
		t.Fatal(err)
	}
	if e := normRel(got.Data().([]float32), want.Data().([]float32)); !(e <= 1e-5) {
		t.Errorf("step %g: relative error %.3g", fine, e)
	}
}

// BenchmarkInterpCUDASeed: the seed case, 10⁶ queries per launch, M = 300,
// G = 4096, sumsq (Gram path), copies in and out included.
func BenchmarkInterpCUDASeed(b *testing.B) {
	dev := device(b)
	const m, g, n = 300, 4096, 1_000_000
	f := make([]float64, m*g)
	for i := range f {
		f[i] = float64(i%g) * float64(i%g) / (g * g)
	}
	tab, err := NewInterpTable(f, m, g, 0, 1.0/(g-1), ReduceSumSq, MethodAuto, tensor.Float32)
	if err != nil {
		b.Fatal(err)
	}
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i) / n
	}
	in := tensor.New(tensor.WithShape(n), tensor.WithBacking(x))
	op, err := OnDevice(NewInterp1D(tab, ReduceSumSq, MethodAuto, tensor.Float32, n), dev)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := op.Do(in); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := op.Do(in); err != nil { // synchronised: Launch waits, the copy back blocks
			b.Fatal(err)
		}
	}
}

// BenchmarkDRRCUDA: 256³, 200×200, 64 poses per launch, trilinear at
// 0.5 mm (~500 samples per ray) and Siddon.
func BenchmarkDRRCUDA(b *testing.B) {
	dev := device(b)
	const n, rows, cols, batch = 256, 200, 200, 64
	rng := rand.New(rand.NewPCG(35, 36))
	vol := &volume.Volume{N: [3]int64{n, n, n}, Origin: [3]float64{-128, -128, -128}, Spacing: [3]float64{1, 1, 1}}
	vol.V = make([]float32, n*n*n)
	for i := range vol.V {
		vol.V[i] = rng.Float32()
	}
	var poses []float64
	for k := range batch {
		poses = append(poses, orbitPose([3]float64{}, float64(k)*2*math.Pi/batch, 1020, 510, rows, cols, 2)...)
	}
	in := tensor.New(tensor.WithShape(batch, PoseWidth), tensor.WithBacking(poses))
	for _, c := range []struct {
		name string
		step float64
	}{{"trilinear", 0.5}, {"siddon", 0}} {
		b.Run(c.name, func(b *testing.B) {
			op, err := OnDevice(NewDRR(vol, rows, cols, c.step, batch), dev)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := op.Do(in); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := op.Do(in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "DRR/s")
		})
	}
}

func TestPairwiseCUDAMatchesCPU(t *testing.T) {
	dev := device(t)
	rng := rand.New(rand.NewPCG(37, 38))
	const n, d, batch = 150, 77, 40
	x := normals32(rng, n*d)
	for _, mc := range []struct {
		metric Metric
		tf32   bool
	}{{MetricL1, false}, {MetricL2, false}, {MetricDot, false}, {MetricCosine, false}, {MetricDot, true}, {MetricCosine, true}} {
		metric := mc.metric
		data, err := NewPairData(x, n, d, metric)
		if err != nil {
			t.Fatal(err)
		}
		tol := 1e-5
		if mc.tf32 {
			tol = 3e-4
		}
		for _, c := range []struct {
			upper, fromData bool
			lo, rows        int // the block's first row, and the rows it holds
			chunk           int // rows per chunk (0: the op's choice, one chunk here)
		}{{false, false, 60, batch, 0}, {true, false, 60, batch, 0}, {false, true, 60, batch, 0}, {true, true, 60, batch, 0},
			{true, true, 130, 20, 0}, {false, true, 135, 15, 0},
			{false, false, 60, batch, 16}, {true, true, 60, batch, 16}, {true, true, 130, 20, 16}, {false, true, 135, 15, 7}} {
			name := fmt.Sprintf("%v tf32=%v upper=%v fromData=%v rows %d…%d chunk %d", metric, mc.tf32, c.upper, c.fromData, c.lo, c.lo+c.rows-1, c.chunk)
			idx := make([]float64, batch) // a short block's index is padded with zeros
			rowsIn := make([]float32, batch*d)
			for i := range c.rows {
				idx[i] = float64(c.lo + i)
				copy(rowsIn[i*d:(i+1)*d], x[(c.lo+i)*d:(c.lo+i+1)*d])
			}
			in := []G.Value{tensor.New(tensor.WithShape(batch, d), tensor.WithBacking(rowsIn)), tensor.New(tensor.WithShape(batch), tensor.WithBacking(idx))}
			if c.fromData {
				in = in[1:]
			}
			mk := func() *Pairwise {
				p := NewPairwise(data, metric, batch)
				p.Upper, p.RowsFromData, p.TF32 = c.upper, c.fromData, mc.tf32
				return p
			}
			want, err := mk().Do(in...)
			if err != nil {
				t.Fatal(err)
			}
			gop, err := OnDevice(mk(), dev)
			if err != nil {
				t.Fatal(err)
			}
			op := gop.(*pairwiseCUDA)
			op.chunk = c.chunk
			ref := want.Data().([]float32)
			c0 := 0
			if c.upper {
				c0 = c.lo
			}
			// check compares the rows the block holds, the columns both
			// compute; with marked, what the GPU must not copy back must
			// still read 777.
			check := func(got []float32, run string, marked bool) {
				var gs, ws []float32
				for i := range c.rows {
					for j := c0; j < n; j++ {
						gs, ws = append(gs, got[i*n+j]), append(ws, ref[i*n+j])
					}
				}
				if e := normRel(gs, ws); !(e <= tol) {
					t.Errorf("%s, %s: relative error %.3g", name, run, e)
				}
				for i := range batch {
					for j := range n {
						if marked && (i >= c.rows && c.fromData || j < c0) && got[i*n+j] != 777 {
							t.Fatalf("%s: (%d, %d) = %v, copied back", name, i, j, got[i*n+j])
						}
					}
				}
			}
			v, err := op.Do(in...) // the first block: the images go up
			if err != nil {
				t.Fatal(err)
			}
			check(v.Data().([]float32), "first block", false)
			// Poison the device output and mark the host's: what the GPU
			// does not compute stays NaN, what it must not copy back 777.
			if err := cuda.Poison(dev, op.dout, int64(batch*n)); err != nil {
				t.Fatal(err)
			}
			got := v.Data().([]float32)
			for i := range got {
				got[i] = 777
			}
			if _, err := op.Do(in...); err != nil {
				t.Fatal(err)
			}
			check(got, "second block", true)
		}
	}
}

// TestPairwiseCUDAWritesFull: with WriteFull, a symmetric run's blocks
// (the last one short) go straight into the whole matrix, poisoned with
// NaN first: every element written, the matrix exactly symmetric, and
// equal to the CPU's full rows.
func TestPairwiseCUDAWritesFull(t *testing.T) {
	dev := device(t)
	rng := rand.New(rand.NewPCG(43, 44))
	const n, d, batch = 150, 77, 40
	x := normals32(rng, n*d)
	for _, metric := range []Metric{MetricL1, MetricL2, MetricDot, MetricCosine} {
		data, err := NewPairData(x, n, d, metric)
		if err != nil {
			t.Fatal(err)
		}
		pw := NewPairwise(data, metric, batch)
		pw.Upper, pw.RowsFromData = true, true
		gop, err := OnDevice(pw, dev)
		if err != nil {
			t.Fatal(err)
		}
		op := gop.(*pairwiseCUDA)
		op.chunk = 16
		full := make([]float32, n*n)
		for i := range full {
			full[i] = float32(math.NaN())
		}
		if !op.WriteFull(full) {
			t.Fatal("WriteFull refused a symmetric run")
		}
		ref := NewPairwise(data, metric, batch) // full rows on the CPU
		ref.RowsFromData = true
		var want []float32
		for lo := 0; lo < n; lo += batch {
			idx := make([]float64, batch)
			for i := range idx {
				idx[i] = float64(min(lo+i, n-1))
			}
			in := tensor.New(tensor.WithShape(batch), tensor.WithBacking(idx))
			if _, err := op.Do(in); err != nil {
				t.Fatal(err)
			}
			w, err := ref.Do(in)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, w.Data().([]float32)[:min(batch, n-lo)*n]...)
		}
		for i := range n {
			for j := range n {
				if g := full[i*n+j]; g != full[j*n+i] || g != g {
					t.Fatalf("%v: (%d, %d) = %v, (%d, %d) = %v", metric, i, j, g, j, i, full[j*n+i])
				}
			}
		}
		if e := normRel(full, want); !(e <= 1e-5) {
			t.Errorf("%v: relative error %.3g", metric, e)
		}
	}
}

// TestPairwiseCUDATopK: the top k selected on the device (topk_rows) are
// exactly the ones TopKRow picks from the same block's values, ties
// included (three images are copies of one another, so every row has
// equal affinities at their columns), for k from 1 to 100 (both
// kernels), whole and short blocks.
func TestPairwiseCUDATopK(t *testing.T) {
	dev := device(t)
	rng := rand.New(rand.NewPCG(45, 46))
	const n, d, batch = 300, 23, 40
	x := normals32(rng, n*d)
	for _, c := range []int{9, 77, 230} {
		copy(x[c*d:(c+1)*d], x[5*d:6*d])
	}
	for _, metric := range []Metric{MetricL1, MetricDot, MetricCosine} {
		data, err := NewPairData(x, n, d, metric)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []int{1, 4, 32, 33, 100} {
			for _, lo := range []int{0, 280} { // 280: a short block of 20 rows
				idx := make([]float64, batch)
				for i := range idx {
					idx[i] = float64(min(lo+i, n-1))
				}
				in := tensor.New(tensor.WithShape(batch), tensor.WithBacking(idx))
				mk := func() *pairwiseCUDA {
					pw := NewPairwise(data, metric, batch)
					pw.RowsFromData = true
					gop, err := OnDevice(pw, dev)
					if err != nil {
						t.Fatal(err)
					}
					return gop.(*pairwiseCUDA)
				}
				whole, sel := mk(), mk()
				if !sel.SelectTopK(k) {
					t.Fatalf("SelectTopK(%d) refused", k)
				}
				wv, err := whole.Do(in)
				if err != nil {
					t.Fatal(err)
				}
				gv, err := sel.Do(in)
				if err != nil {
					t.Fatal(err)
				}
				rows, got, vals := min(batch, n-lo), sel.TopIndices().Data().([]float64), gv.Data().([]float32)
				block := wv.Data().([]float32)
				for r := range rows {
					want := TopKRow(block[r*n:(r+1)*n], lo+r, k, nil)
					for q, j := range want {
						g := int(got[r*k+q])
						if g != j {
							t.Fatalf("%v k=%d row %d: pick %d is column %d, want %d", metric, k, lo+r, q, g, j)
						}
						if vals[r*n+j] != block[r*n+j] {
							t.Fatalf("%v k=%d row %d column %d: value %v, want %v", metric, k, lo+r, j, vals[r*n+j], block[r*n+j])
						}
					}
				}
			}
		}
	}
}

// BenchmarkPairwiseCUDA: the seed's matrix, N = 10,000 images of D =
// 10,000 values, computed as the affinity command does in symmetric mode:
// blocks of 1000 rows read from the resident images, each from its
// diagonal on (the upper triangle), copied straight into the whole (N, N)
// matrix with the transposes of its columns beyond the block, each chunk's
// copy overlapping the next chunk's work (-serial: one chunk, no overlap;
// l1-r4: the 4×4-per-thread kernel; both for comparison; dot-tf32-top10:
// whole rows, the top 10 of each selected on the device, as --topk 10
// does). One iteration is
// the whole matrix: s/matrix is the seed's figure (dot with TF32 ≤ 15 ms,
// l1 ≤ 100 ms on an H200).
func BenchmarkPairwiseCUDA(b *testing.B) {
	dev := device(b)
	const n, d, batch = 10_000, 10_000, 1000
	rng := rand.New(rand.NewPCG(39, 40))
	x := normals32(rng, n*d)
	full := make([]float32, n*n) // the matrix the blocks go into, as the command's
	var index []*tensor.Dense
	for lo := 0; lo < n; lo += batch {
		idx := make([]float64, batch)
		for i := range idx {
			idx[i] = float64(lo + i)
		}
		index = append(index, tensor.New(tensor.WithShape(batch), tensor.WithBacking(idx)))
	}
	for _, mc := range []struct {
		name   string
		metric Metric
		tf32   bool
		serial bool // the block in one chunk: its copy back overlaps nothing
		r4     bool // l1 with the 4×4-per-thread kernel
		top    int  // --topk: whole rows, the top k selected on the device
	}{{"dot-tf32", MetricDot, true, false, false, 0}, {"dot-tf32-serial", MetricDot, true, true, false, 0},
		{"dot", MetricDot, false, false, false, 0}, {"l1", MetricL1, false, false, false, 0}, {"l1-r4", MetricL1, false, false, true, 0},
		{"dot-tf32-top10", MetricDot, true, false, false, 10}} {
		b.Run(mc.name, func(b *testing.B) {
			data, err := NewPairData(x, n, d, mc.metric)
			if err != nil {
				b.Fatal(err)
			}
			pw := NewPairwise(data, mc.metric, batch)
			pw.TF32, pw.Upper, pw.RowsFromData = mc.tf32, mc.top == 0, true
			op, err := OnDevice(pw, dev)
			if err != nil {
				b.Fatal(err)
			}
			if mc.serial {
				op.(*pairwiseCUDA).chunk = batch
			}
			op.(*pairwiseCUDA).r4 = mc.r4
			if mc.top > 0 && !op.(*pairwiseCUDA).SelectTopK(mc.top) || mc.top == 0 && !op.(*pairwiseCUDA).WriteFull(full) {
				b.Fatal("SelectTopK or WriteFull refused")
			}
			if _, err := op.Do(index[0]); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				for _, idx := range index { // each Do waits for its copy back
					if _, err := op.Do(idx); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/matrix")
			pairs := float64(n) * float64(n+batch) / 2 // the upper triangle, diagonal blocks whole
			if mc.top > 0 {
				pairs = float64(n) * n
			}
			b.ReportMetric(pairs*d*float64(b.N)/b.Elapsed().Seconds(), "pair-dims/s")
		})
	}
}

func TestWaveletCUDAMatchesCPU(t *testing.T) {
	dev := device(t)
	rng := rand.New(rand.NewPCG(41, 42))
	n := [3]int{17, 20, 23}
	v := normals32(rng, n[0]*n[1]*n[2])
	combos := [][3]float64{{0, 0, 1}, {0.3, 1.1, 2}, {2.5, 0.4, 4}, {0.8, 2.9, 0.5}}
	for _, bnd := range []Boundary{Wrap, Reflect} {
		var pad [3]int
		for _, c := range combos {
			h := HatSupport(1, c[0], c[1], c[2])
			for i := range 3 {
				pad[i] = max(pad[i], h[i])
			}
		}
		// Each combination extended by the largest half-widths, then by
		// its own: the padding, the transform size and the volume's
		// spectrum change from row to row (the largest half-widths here
		// exceed the volume's sides: the reflection repeats).
		params := make([]float64, 0, 2*WaveletParams*len(combos))
		for _, own := range []bool{false, true} {
			for _, c := range combos {
				p := pad
				if own {
					p = HatSupport(1, c[0], c[1], c[2])
				}
				params = append(params, c[0], c[1], c[2], float64(p[0]), float64(p[1]), float64(p[2]))
			}
		}
		rows := len(params) / WaveletParams
		in := tensor.New(tensor.WithShape(rows, WaveletParams), tensor.WithBacking(params))
		src, err := NewWaveletSource(v, n, 1, bnd, pad)
		if err != nil {
			t.Fatal(err)
		}
		want, err := NewWaveletStats(src, rows).Do(in)
		if err != nil {
			t.Fatal(err)
		}
		src2, _ := NewWaveletSource(v, n, 1, bnd, pad)
		op, err := OnDevice(NewWaveletStats(src2, rows), dev)
		if err != nil {
			t.Fatal(err)
		}
		got, err := op.Do(in)
		if err != nil {
			t.Fatal(err)
		}
		g, w := got.Data().([]float64), want.Data().([]float64)
		for i := range w {
			if !(math.Abs(g[i]-w[i]) <= 1e-4*math.Abs(w[i])) {
				t.Errorf("%v: statistic %d of combination %d: %v, want %v", bnd, i%4, i/4, g[i], w[i])
			}
		}
	}
}

// BenchmarkWaveletCUDA200: 200³, wrap, ξ ∈ {1, 2, 4} at random
// orientations, one combination per Do; s/combination as reported.
func BenchmarkWaveletCUDA200(b *testing.B) {
	dev := device(b)
	const n = 200
	rng := rand.New(rand.NewPCG(43, 44))
	v := normals32(rng, n*n*n)
	src, err := NewWaveletSource(v, [3]int{n, n, n}, 1, Wrap, [3]int{})
	if err != nil {
		b.Fatal(err)
	}
	op, err := OnDevice(NewWaveletStats(src, 1), dev)
	if err != nil {
		b.Fatal(err)
	}
	params := []float64{0.3, 1.1, 1, 0, 0, 0}
	in := tensor.New(tensor.WithShape(1, WaveletParams), tensor.WithBacking(params))
	if _, err := op.Do(in); err != nil {
		b.Fatal(err)
	}
	xis := []float64{1, 2, 4}
	k := 0
	for b.Loop() {
		params[0], params[1], params[2] = rng.Float64()*math.Pi, rng.Float64()*math.Pi, xis[k%3]
		k++
		if _, err := op.Do(in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/combination")
}
