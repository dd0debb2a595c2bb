package pairwise

// The kernels the GPU twins of the formula ops compile at run time
// (formula.CUDAPair, formula.CUDAMap) run on the CPU under the CUDA
// emulator (internal/kernelemu), through the same launch specifications
// and with the same offsets as the twins (pairformula_cuda.go,
// mapformula_cuda.go), against the CPU ops. The emulator build of the
// twins does not run these kernels (it computes on the CPU): this is
// where their launches are checked without a GPU. Skipped without g++.

import (
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/formula"
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

func TestEmuPairFormulaKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	// 50 rows against 120 images: more than one block each way, and d
	// not a multiple of the 32 elements staged at a time.
	const n, d, batch, lo = 120, 45, 50, 30
	x := opstest.Normals32(rng, n*d)
	data, err := NewPairData(x, n, d, MetricDot)
	if err != nil {
		t.Fatal(err)
	}
	type setup struct {
		pf *PairFormula
		k  *formula.CUDAKernel
	}
	var setups []setup
	var ks []*formula.CUDAKernel
	for _, src := range []string{"-sum(abs(a-b))", "sum((a-mean(a))*(b-mean(b)))/(norm(a-mean(a))*norm(b-mean(b)))",
		"max(abs(a-b-mean(a-b)))", "d = a - b; sum(round(4*d) + mod(floor(3*a), 2.5)*mod(b, -0.7))"} {
		f, err := formula.Parse(src, formula.Env{Flag: "--formula", Vars: formula.PairVars, Reduce: true})
		if err != nil {
			t.Fatal(err)
		}
		pf, err := NewPairFormula(f, data, true)
		if err != nil {
			t.Fatal(err)
		}
		k, err := pf.Plan.CUDAPair()
		if err != nil {
			t.Fatal(err)
		}
		setups = append(setups, setup{pf, k})
		ks = append(ks, k)
	}
	e := opstest.CompileKernels(t, ks...)
	idx := make([]float64, batch)
	for i := range idx {
		idx[i] = float64(lo + i)
	}
	for _, s := range setups {
		nr := s.pf.Plan.NRow()
		for _, upper := range []bool{false, true} {
			op := NewPairwiseFormula(s.pf, data, batch)
			op.Upper, op.RowsFromData = upper, true
			want, err := op.Do(tensor.New(tensor.WithShape(batch), tensor.WithBacking(idx)))
			if err != nil {
				t.Fatal(err)
			}
			c0 := 0
			if upper {
				c0 = lo
			}
			m := min(batch, n-lo)
			// The twin's pointers: the rows at image lo, the columns and
			// their values at image c0, the output at column c0.
			out := opstest.Buf32(batch * n)
			vals := s.pf.rowVals
			ra, rb := vals[lo*nr:], vals[c0*nr:]
			if nr == 0 {
				ra, rb = []float64{0}, []float64{0}
			}
			opstest.EmulateKernel(t, e, s.k, pairFormulaLaunch[any](s.k, m, n-c0, d, n, x[lo*d:], x[c0*d:], ra, rb, out[c0:]))
			w := want.(*tensor.Dense).Data().([]float32)
			var gs, ws []float32
			for i := range m {
				gs = append(gs, out[i*n+c0:(i+1)*n]...)
				ws = append(ws, w[i*n+c0:(i+1)*n]...)
			}
			if e := opstest.RelErr(gs, ws); !(e <= 1e-5) {
				t.Errorf("%s, upper %v: relative error %.3g", s.pf.Formula, upper, e)
			}
			for i := range batch {
				for j := range n {
					if (i >= m || j < c0) && out[i*n+j] == out[i*n+j] {
						t.Fatalf("%s, upper %v: (%d, %d) written", s.pf.Formula, upper, i, j)
					}
				}
			}
		}
	}
}
