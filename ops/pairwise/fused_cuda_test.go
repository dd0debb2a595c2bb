//go:build tapeloop_cuda || tapeloop_cudaemu

package pairwise

import (
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/ops"
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

// TestFusedPairwiseCUDA: PairwiseTopK's columns are TopKRow's over the
// same device's whole rows and its values those rows' values, for whole
// and short blocks; PairwiseMatrix's output is the whole matrix, exactly
// symmetric and equal to the CPU's full rows; both report the twin's
// device memory and its host block; FuseMatrix refuses a block without
// Upper, FuseTopK an upper one.
func TestFusedPairwiseCUDA(t *testing.T) {
	dev := opstest.Device(t)
	rng := rand.New(rand.NewPCG(51, 52))
	const n, d, batch = 150, 23, 40
	x := opstest.Normals32(rng, n*d)
	for _, metric := range []Metric{MetricL1, MetricDot, MetricCosine} {
		data, err := NewPairData(x, n, d, metric)
		if err != nil {
			t.Fatal(err)
		}
		twin := func(upper bool) *pairwiseCUDA {
			pw := NewPairwise(data, metric, batch)
			pw.RowsFromData, pw.Upper = true, upper
			op, err := ops.OnDevice(pw, dev)
			if err != nil {
				t.Fatal(err)
			}
			return op.(*pairwiseCUDA)
		}
		if _, ok := FuseMatrix(twin(false), make([]float32, n*n)); ok {
			t.Errorf("%v: FuseMatrix fused rows without Upper", metric)
		}
		if _, ok := FuseTopK(twin(true), 3); ok {
			t.Errorf("%v: FuseTopK fused an upper block", metric)
		}
		const k = 5
		whole := twin(false)
		top, ok := FuseTopK(twin(false), k)
		if !ok {
			t.Fatalf("%v: FuseTopK refused", metric)
		}
		full := make([]float32, n*n)
		for i := range full {
			full[i] = float32(math.NaN())
		}
		mat, ok := FuseMatrix(twin(true), full)
		if !ok {
			t.Fatalf("%v: FuseMatrix refused", metric)
		}
		ref := NewPairwise(data, metric, batch) // full rows on the CPU
		ref.RowsFromData = true
		var want []float32
		for lo := 0; lo < n; lo += batch {
			m := min(batch, n-lo)
			idx := make([]float64, batch)
			for i := range m {
				idx[i] = float64(lo + i)
			}
			in := tensor.New(tensor.WithShape(batch), tensor.WithBacking(idx))
			wv, err := whole.Do(in)
			if err != nil {
				t.Fatal(err)
			}
			block := wv.Data().([]float32)
			tv, err := top.Do(in)
			if err != nil {
				t.Fatal(err)
			}
			if s := tv.Shape(); len(s) != 3 || s[0] != 2 || s[1] != batch || s[2] != k {
				t.Fatalf("%v: PairwiseTopK output %v", metric, s)
			}
			got := tv.Data().([]float64)
			cols, vals := got[:batch*k], got[batch*k:]
			for r := range m {
				for q, j := range TopKRow(block[r*n:(r+1)*n], lo+r, k, nil) {
					if int(cols[r*k+q]) != j || vals[r*k+q] != float64(block[r*n+j]) {
						t.Fatalf("%v row %d pick %d: column %v value %v, want %d and %v", metric, lo+r, q, cols[r*k+q], vals[r*k+q], j, block[r*n+j])
					}
				}
			}
			mv, err := mat.Do(in)
			if err != nil {
				t.Fatal(err)
			}
			if s := mv.Shape(); len(s) != 2 || s[0] != n || s[1] != n || &mv.Data().([]float32)[0] != &full[0] {
				t.Fatalf("%v: PairwiseMatrix output %v is not the matrix", metric, s)
			}
			w, err := ref.Do(in)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, w.Data().([]float32)[:m*n]...)
		}
		for i := range n {
			for j := range n {
				if g := full[i*n+j]; g != full[j*n+i] || g != g {
					t.Fatalf("%v: (%d, %d) = %v, (%d, %d) = %v", metric, i, j, g, j, i, full[j*n+i])
				}
			}
		}
		if e := opstest.RelErr(full, want); !(e <= 1e-5) {
			t.Errorf("%v: relative error %.3g", metric, e)
		}
		host := int64(batch) * n * 4
		for _, c := range []struct {
			name string
			op   interface {
				DeviceBytes() int64
				ResidentBytes() int64
			}
			inner *pairwiseCUDA
		}{{"top-k", top, top.inner.(*pairwiseCUDA)}, {"matrix", mat, mat.inner.(*pairwiseCUDA)}} {
			if c.op.DeviceBytes() != c.inner.DeviceBytes() || c.op.ResidentBytes() != c.inner.ResidentBytes()+host {
				t.Errorf("%v %s: device %d resident %d, the twin's %d and %d + %d", metric, c.name, c.op.DeviceBytes(), c.op.ResidentBytes(),
					c.inner.DeviceBytes(), c.inner.ResidentBytes(), host)
			}
		}
	}
}
