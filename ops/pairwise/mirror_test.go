package pairwise

import (
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

// TestMirrorAssemblesTheMatrix: upper blocks of Pairwise (the last one
// short, its padding rows left as the op left them) through Mirror give
// the matrix of full rows, every element written (the matrix starts as
// NaN), in both dtypes; a block past N is an error.
func TestMirrorAssemblesTheMatrix(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 48))
	const n, d, batch = 300, 13, 40 // blocks of 40: the transposes span two 256-row tiles
	x := opstest.Widen(opstest.Normals32(rng, n*d))
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		data := pairData(t, dt, x, n, d, MetricL1)
		up := NewPairwise(data, MetricL1, batch)
		up.Upper, up.RowsFromData = true, true
		rows := NewPairwise(data, MetricL1, batch)
		rows.RowsFromData = true
		var full any
		if dt == tensor.Float32 {
			f := make([]float32, n*n)
			for i := range f {
				f[i] = float32(math.NaN())
			}
			full = f
		} else {
			f := make([]float64, n*n)
			for i := range f {
				f[i] = math.NaN()
			}
			full = f
		}
		mir := NewMirror(full, n, batch)
		var want []float64
		for lo := 0; lo < n; lo += batch {
			m := min(batch, n-lo)
			idx := make([]float64, batch)
			for i := range m {
				idx[i] = float64(lo + i)
			}
			index := tensor.New(tensor.WithShape(batch), tensor.WithBacking(idx))
			blk, err := up.Do(index)
			if err != nil {
				t.Fatal(err)
			}
			mir.SetValidRows(m)
			v, err := mir.Do(blk, index)
			if err != nil {
				t.Fatal(err)
			}
			if s := v.Shape(); s[0] != n || s[1] != n {
				t.Fatalf("output shape %v", s)
			}
			w, err := rows.Do(index)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, opstest.ValuesOf(w.(*tensor.Dense))[:m*n]...)
		}
		got := opstest.Floats(full)
		for i := range got {
			if got[i] != got[i] || got[i] != got[(i%n)*n+i/n] {
				t.Fatalf("%v: (%d, %d) = %v, transposed %v", dt, i/n, i%n, got[i], got[(i%n)*n+i/n])
			}
			if math.Abs(got[i]-want[i]) > 1e-5*(1+math.Abs(want[i])) {
				t.Fatalf("%v: (%d, %d) = %v, full rows give %v", dt, i/n, i%n, got[i], want[i])
			}
		}
		idx := make([]float64, batch)
		for i := range idx {
			idx[i] = float64(n - 10 + i)
		}
		index := tensor.New(tensor.WithShape(batch), tensor.WithBacking(idx))
		blk, _ := up.Do(tensor.New(tensor.WithShape(batch), tensor.WithBacking(make([]float64, batch))))
		mir.SetValidRows(batch)
		if _, err := mir.Do(blk, index); err == nil {
			t.Errorf("%v: rows past N: no error", dt)
		}
	}
}

// BenchmarkMirror: the host's share of a symmetric affinity matrix of the
// original case's size (N = 10,000, blocks of 1000 rows): mirror's upper rows and
// transposes, against a plain copy of whole rows (what full-row blocks
// would cost instead).
func BenchmarkMirror(b *testing.B) {
	const n, blk = 10_000, 1000
	full := make([]float32, n*n)
	buf := make([]float32, blk*n)
	for i := range buf {
		buf[i] = float32(i % 977)
	}
	b.Run("mirror", func(b *testing.B) {
		for b.Loop() {
			for r0 := 0; r0 < n; r0 += blk {
				mirror(full, buf, n, r0, blk)
			}
		}
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e3, "ms/matrix")
	})
	b.Run("rows", func(b *testing.B) {
		for b.Loop() {
			for r0 := 0; r0 < n; r0 += blk {
				copy(full[r0*n:(r0+blk)*n], buf)
			}
		}
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e3, "ms/matrix")
	})
}
