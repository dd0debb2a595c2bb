//go:build tapeloop_cuda

package pairwise

// On a real GPU the formula twins compute on the device (the emulator
// build computes them on the CPU): the kernel compiled at run time runs,
// its time counted, and its results are the CPU op's.

import (
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/formula"
	"github.com/tapeloop/tapeloop/ops"
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

func TestCUDAFormulaOnDevice(t *testing.T) {
	dev := opstest.Device(t)
	rng := rand.New(rand.NewPCG(71, 72))
	const n, d, batch = 300, 333, 64
	data, err := NewPairData(opstest.Normals32(rng, n*d), n, d, MetricDot)
	if err != nil {
		t.Fatal(err)
	}
	f, err := formula.Parse("max(abs(a-b-mean(a-b))) - sum(abs(a-b))/norm(a)", formula.Env{Flag: "--formula", Vars: formula.PairVars, Reduce: true})
	if err != nil {
		t.Fatal(err)
	}
	pf, err := NewPairFormula(f, data, true)
	if err != nil {
		t.Fatal(err)
	}
	idx := make([]float64, batch)
	for i := range idx {
		idx[i] = float64(100 + i)
	}
	in := tensor.New(tensor.WithShape(batch), tensor.WithBacking(idx))
	cpu := NewPairwiseFormula(pf, data, batch)
	cpu.RowsFromData = true
	want, err := cpu.Do(in)
	if err != nil {
		t.Fatal(err)
	}
	pw := NewPairwiseFormula(pf, data, batch)
	pw.RowsFromData = true
	op, err := ops.OnDevice(pw, dev)
	if err != nil {
		t.Fatal(err)
	}
	twin, ok := op.(*pairFormulaCUDA)
	if !ok || twin.cpu {
		t.Fatalf("%v: not computed on the device", op)
	}
	t.Cleanup(func() { releaseTwin(op) })
	before := dev.BusySeconds()
	got, err := op.Do(in)
	if err != nil {
		t.Fatal(err)
	}
	if !(dev.BusySeconds() > before) {
		t.Error("no GPU time counted: the kernel did not run on the device")
	}
	if e := opstest.RelErr(got.(*tensor.Dense).Data().([]float32), want.(*tensor.Dense).Data().([]float32)); !(e <= 1e-5) {
		t.Errorf("relative error %.3g against the CPU", e)
	}
}
