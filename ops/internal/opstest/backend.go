package opstest

import (
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Backend is one place the conformance suites run the ops: the CPU, or a
// GPU through the ops' CUDA twins. D is the device type of the package
// under test (ops.Device).
type Backend[D any] struct {
	Name string
	Dev  D // the zero D (nil): the CPU
	// OnDevice puts an op on dev (ops.OnDevice): the op itself for the
	// CPU, its twin for a GPU.
	OnDevice func(op G.Op, dev D) (G.Op, error)
	// GPU: float32 sums in another order than the CPU's (tiles, FMA,
	// cuBLAS, cuFFT) and TF32 where asked; the suites hold it to the
	// tolerances the GPU twins have always been held to.
	GPU bool
	// Float32Only: Interp1D and Pairwise run in float32 only; asked for
	// float64, OnDevice must refuse.
	Float32Only bool
	// Poison fills with NaN what an op computes into besides its host
	// output (which RunTwice marks itself): on a GPU, the twin's device
	// output. Nil: nothing more.
	Poison func(t *testing.T, op G.Op)
	// Chunk sets a pairwise op's rows per chunk (0: its own choice); nil
	// where blocks are not split.
	Chunk func(op G.Op, rows int)
	// Release frees what an op holds on the backend when its subtest ends
	// (on a GPU its arena; the emulator checks the arena's guard zone as it
	// frees it); nil: nothing to free.
	Release func(op G.Op) error
}

// OnEveryBackend runs suite once per backend, as a subtest named for it.
func OnEveryBackend[D any](t *testing.T, backends []Backend[D], suite func(t *testing.T, b Backend[D])) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) { suite(t, b) })
	}
}

// Place returns op on b: op itself on the CPU, its twin on a GPU, which
// is released when the subtest ends.
func (b Backend[D]) Place(t *testing.T, op G.Op) G.Op {
	t.Helper()
	o, err := b.OnDevice(op, b.Dev)
	if err != nil {
		t.Fatalf("%s: %v", b.Name, err)
	}
	if b.Release != nil {
		t.Cleanup(func() {
			if err := b.Release(o); err != nil {
				t.Errorf("releasing %v: %v", o, err)
			}
		})
	}
	return o
}

// Dtypes are the dtypes b runs Interp1D and Pairwise in.
func (b Backend[D]) Dtypes() []tensor.Dtype {
	if b.Float32Only {
		return []tensor.Dtype{tensor.Float32}
	}
	return []tensor.Dtype{tensor.Float32, tensor.Float64}
}

// RefusesFloat64 checks, on a float32-only backend, that OnDevice refuses
// the float64 op mk makes (a subtest says so).
func (b Backend[D]) RefusesFloat64(t *testing.T, mk func(t *testing.T) G.Op) {
	if !b.Float32Only {
		return
	}
	t.Run("float64 refused", func(t *testing.T) {
		if _, err := b.OnDevice(mk(t), b.Dev); err == nil {
			t.Errorf("%s accepted a float64 op", b.Name)
		}
	})
}

// SecondRun is the run RunTwice names second: the one after the output
// was marked.
const SecondRun = "second run"

// RunTwice runs op on in and hands its output to check; then fills that
// output with mark (and, on a GPU, the device's with NaN) and runs op
// again: the output must come back in the same buffer, and check sees it
// again, as SecondRun: what the op owes rewritten, what it does not
// still mark.
func RunTwice[D any](t *testing.T, b Backend[D], op G.Op, mark float64, check func(run string, out *tensor.Dense), in ...G.Value) {
	t.Helper()
	v, err := op.Do(in...)
	if err != nil {
		t.Fatal(err)
	}
	out := v.(*tensor.Dense)
	check("first run", out)
	Fill(out, mark)
	if b.Poison != nil {
		b.Poison(t, op)
	}
	v2, err := op.Do(in...)
	if err != nil {
		t.Fatal(err)
	}
	if v2 != v {
		t.Fatal("second run: the output came in another buffer")
	}
	check(SecondRun, out)
}
