//go:build tapeloop_cuda

package ops

// On a real GPU the formula twins compute on the device (the emulator
// build computes them on the CPU): the kernel compiled at run time runs,
// its time counted, and its results are the CPU op's.

import (
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/formula"
)

func TestCUDAFormulaOnDevice(t *testing.T) {
	dev := device(t)
	rng := rand.New(rand.NewPCG(71, 72))
	const n, d, batch = 300, 333, 64
	data, err := NewPairData(normals32(rng, n*d), n, d, MetricDot)
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
	op, err := OnDevice(pw, dev)
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
	if e := relErr(got.(*tensor.Dense).Data().([]float32), want.(*tensor.Dense).Data().([]float32)); !(e <= 1e-5) {
		t.Errorf("relative error %.3g against the CPU", e)
	}

	// MapImages: the kernel over the valid images.
	pf2, err := formula.Parse("where(p < 0, 0, 1-exp(-p))", formula.Env{Flag: "--post", Vars: PostVars})
	if err != nil {
		t.Fatal(err)
	}
	mf, err := NewMapFormula(pf2, 40*50)
	if err != nil {
		t.Fatal(err)
	}
	x := normals32(rng, 3*40*50)
	img := tensor.New(tensor.WithShape(3, 40, 50), tensor.WithBacking(x))
	wantImg, err := NewMapImages(mf, 3, 40, 50).Do(img)
	if err != nil {
		t.Fatal(err)
	}
	mop, err := OnDevice(NewMapImages(mf, 3, 40, 50), dev)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := mop.(*mapImagesCUDA); !ok || m.cpu {
		t.Fatalf("%v: not computed on the device", mop)
	}
	t.Cleanup(func() { releaseTwin(mop) })
	gotImg, err := mop.Do(img)
	if err != nil {
		t.Fatal(err)
	}
	if e := relErr(gotImg.(*tensor.Dense).Data().([]float32), wantImg.(*tensor.Dense).Data().([]float32)); !(e <= 1e-6) {
		t.Errorf("MapImages: relative error %.3g against the CPU", e)
	}
}
