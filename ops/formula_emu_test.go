package ops

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

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/formula"
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

func TestEmuMapFormulaKernel(t *testing.T) {
	const batch, rows, cols, valid = 4, 30, 50, 3 // more values than the kernel's threads: its grid stride
	rng := rand.New(rand.NewPCG(63, 64))
	x := make([]float32, batch*rows*cols)
	for i := range x {
		x[i] = float32(rng.Float64()*4 - 1)
	}
	f, err := formula.Parse("where(p < 0, 0, 1-exp(-p)) + clamp(p, 0.5, 2)", formula.Env{Flag: "--post", Vars: PostVars})
	if err != nil {
		t.Fatal(err)
	}
	mf, err := NewMapFormula(f, rows*cols)
	if err != nil {
		t.Fatal(err)
	}
	g, err := f.Graph(rows * cols)
	if err != nil {
		t.Fatal(err)
	}
	k, err := formula.CUDAMap(g, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	e := opstest.CompileKernels(t, k)
	op := NewMapImages(mf, batch, rows, cols)
	op.SetValidRows(valid)
	want, err := op.Do(G.Value(tensor.New(tensor.WithShape(batch, rows, cols), tensor.WithBacking(x))))
	if err != nil {
		t.Fatal(err)
	}
	nv := valid * rows * cols
	out := opstest.Buf32(batch * rows * cols)
	l := mapFormulaLaunch[any](k, nv, x, out)
	l.GX = 2 // fewer threads than values: the grid stride
	opstest.EmulateKernel(t, e, k, l)
	if e := opstest.RelErr(out[:nv], want.(*tensor.Dense).Data().([]float32)[:nv]); !(e <= 1e-7) {
		t.Errorf("relative error %.3g", e)
	}
	for i, v := range out[nv:] {
		if v == v {
			t.Fatalf("element %d past the valid images written", nv+i)
		}
	}
}
