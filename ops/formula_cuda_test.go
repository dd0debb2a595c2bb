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
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

func TestCUDAFormulaOnDevice(t *testing.T) {
	dev := opstest.Device(t)
	rng := rand.New(rand.NewPCG(71, 72))
	// MapImages: the kernel over the valid images.
	pf2, err := formula.Parse("where(p < 0, 0, 1-exp(-p))", formula.Env{Flag: "--post", Vars: PostVars})
	if err != nil {
		t.Fatal(err)
	}
	mf, err := NewMapFormula(pf2, 40*50)
	if err != nil {
		t.Fatal(err)
	}
	x := opstest.Normals32(rng, 3*40*50)
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
	if e := opstest.RelErr(gotImg.(*tensor.Dense).Data().([]float32), wantImg.(*tensor.Dense).Data().([]float32)); !(e <= 1e-6) {
		t.Errorf("MapImages: relative error %.3g against the CPU", e)
	}
}
