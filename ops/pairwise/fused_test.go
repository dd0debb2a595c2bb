package pairwise

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

// TestFuseOnTheCPU: the CPU's Pairwise never selects the top k itself (the
// graph keeps TopK), and writes a symmetric run's blocks into the matrix
// itself exactly where its float32 dot products run on the packed matrix
// product: not for other metrics, float64 or without Upper.
func TestFuseOnTheCPU(t *testing.T) {
	rng := rand.New(rand.NewPCG(49, 50))
	const n, d = 30, 4
	x := opstest.Normals32(rng, n*d)
	data, err := NewPairData(x, n, d, MetricDot)
	if err != nil {
		t.Fatal(err)
	}
	pw := NewPairwise(data, MetricDot, 8)
	pw.RowsFromData = true
	if op, ok := FuseTopK(pw, 3); ok || op != nil {
		t.Error("FuseTopK fused the CPU op")
	}
	if _, ok := FuseMatrix(pw, make([]float32, n*n)); ok {
		t.Error("FuseMatrix fused an op without Upper")
	}
	pw.Upper = true
	if op, ok := FuseMatrix(pw, make([]float32, n*n)); ok != cpukern.GEMM() || (op != nil) != ok {
		t.Errorf("FuseMatrix of float32 dot gave %v, %v; want fused exactly when GEMM() (%v)", op, ok, cpukern.GEMM())
	}
	l1, err := NewPairData(x, n, d, MetricL1)
	if err != nil {
		t.Fatal(err)
	}
	other := NewPairwise(l1, MetricL1, 8)
	other.Upper, other.RowsFromData = true, true
	if _, ok := FuseMatrix(other, make([]float32, n*n)); ok {
		t.Error("FuseMatrix fused l1")
	}
	d64 := pairData(t, tensor.Float64, opstest.Widen(x), n, d, MetricDot)
	other = NewPairwise(d64, MetricDot, 8)
	other.Upper, other.RowsFromData = true, true
	if _, ok := FuseMatrix(other, make([]float32, n*n)); ok {
		t.Error("FuseMatrix fused float64")
	}
}

// TestCPUFusedMatrix: on the packed matrix product, the fused op's blocks
// (the last one short) fill every element of the matrix (it starts as
// NaN) with the float64 definition's value to float32 accuracy, exactly
// symmetric, and bit for bit the matrix Pairwise with Upper and Mirror
// assemble and the rows Pairwise computes whole, on one core and on
// several (column tiles shared out), for D across the k slices and tiles
// that cut the diagonal.
func TestCPUFusedMatrix(t *testing.T) {
	if !cpukern.GEMM() {
		t.Skip("no AVX-512: the CPU op does not fuse")
	}
	rng := rand.New(rand.NewPCG(51, 52))
	const n, d, batch = 603, 777, 250
	x := opstest.Normals32(rng, n*d)
	data, err := NewPairData(x, n, d, MetricDot)
	if err != nil {
		t.Fatal(err)
	}
	ref := func(i, j int) float64 {
		var s float64
		for k := range d {
			s += float64(x[i*d+k]) * float64(x[j*d+k])
		}
		return s
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 3} {
		runtime.GOMAXPROCS(procs)
		nan := func() []float32 {
			f := make([]float32, n*n)
			for i := range f {
				f[i] = float32(math.NaN())
			}
			return f
		}
		fusedM, mirrorM := nan(), nan()
		pw := NewPairwise(data, MetricDot, batch)
		pw.Upper, pw.RowsFromData = true, true
		fused, ok := FuseMatrix(pw, fusedM)
		if !ok {
			t.Fatal("FuseMatrix refused")
		}
		up := NewPairwise(data, MetricDot, batch)
		up.Upper, up.RowsFromData = true, true
		mir := NewMirror(mirrorM, n, batch)
		rows := NewPairwise(data, MetricDot, batch)
		rows.RowsFromData = true
		var whole []float32
		for lo := 0; lo < n; lo += batch {
			m := min(batch, n-lo)
			idx := make([]float64, batch)
			for i := range m {
				idx[i] = float64(lo + i)
			}
			index := tensor.New(tensor.WithShape(batch), tensor.WithBacking(idx))
			if v, err := fused.Do(index); err != nil || v.Shape()[0] != n {
				t.Fatalf("fused block at %d: %v %v", lo, v, err)
			}
			blk, err := up.Do(index)
			if err != nil {
				t.Fatal(err)
			}
			mir.SetValidRows(m)
			if _, err := mir.Do(blk, index); err != nil {
				t.Fatal(err)
			}
			w, err := rows.Do(index)
			if err != nil {
				t.Fatal(err)
			}
			whole = append(whole, w.Data().([]float32)[:m*n]...)
		}
		var e2, w2 float64
		for i := range n {
			for j := range n {
				g := fusedM[i*n+j]
				if g != mirrorM[i*n+j] || g != whole[i*n+j] || g != fusedM[j*n+i] {
					t.Fatalf("procs %d: (%d, %d) = %v fused, %v with Mirror, %v in whole rows, %v transposed",
						procs, i, j, g, mirrorM[i*n+j], whole[i*n+j], fusedM[j*n+i])
				}
				if (i*7+j)%11 == 0 { // a sample of the pairs against float64
					r := ref(i, j)
					e2 += (float64(g) - r) * (float64(g) - r)
					w2 += r * r
				}
			}
		}
		if r := math.Sqrt(e2 / w2); r > 1e-6 {
			t.Errorf("procs %d: relative error %.3g against float64", procs, r)
		}
	}
}
