package cpukern

// The CUDA twins of DRRGrad and DRRBackProject (cuda/kernels/drrgrad.cu)
// run on the CPU under the CUDA emulator (internal/kernelemu) against the
// C kernels; the test skips where g++ is missing.

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tapeloop/tapeloop/cuda/kernels"
	"github.com/tapeloop/tapeloop/internal/kernelemu"
	"github.com/tapeloop/tapeloop/internal/volume"
)

// near fails unless every got[i] is want[i] to rel times |want[i]| plus
// the rms of want (an element near zero among large ones is held to the
// scale of the others).
func near(t *testing.T, what string, got, want []float64, rel float64) {
	t.Helper()
	var ss float64
	for _, w := range want {
		ss += w * w
	}
	rms := math.Sqrt(ss / float64(len(want)))
	if rms == 0 {
		t.Fatalf("%s: all zero", what)
	}
	for i := range want {
		if !(math.Abs(got[i]-want[i]) <= rel*(math.Abs(want[i])+rms)) {
			t.Fatalf("%s [%d]: %.17g, want %.17g", what, i, got[i], want[i])
		}
	}
}

func TestEmuDRRGradKernels(t *testing.T) {
	prog, err := kernelemu.Kernels(kernels.Sources)
	if errors.Is(err, kernelemu.ErrNoCompiler) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(107, 108))
	v := randomVolume(rng, 15, 8, 11)
	p := volume.Pad(v)
	src, dst := gradRays(rng, v)
	n := len(src) / 3
	g := make([]float64, n)
	for i := range g {
		g[i] = rng.NormFloat64()
	}
	const block = 128
	for _, c := range []struct {
		step, lref float64
		vol        *volume.Volume
	}{{0, 0, v}, {0, 0, p}, {0.37, 0, v}, {0.37, 0, p}, {1.1, 350, p}} {
		out, gs, gd := make([]float64, n), make([]float64, 3*n), make([]float64, 3*n)
		DRRGrad(gridOf(c.vol), src, dst, out, gs, gd, c.step, c.lref)
		grad := make([]float64, len(c.vol.V))
		DRRBackProject(gridOf(c.vol), src, dst, g, grad, c.step, c.lref)

		vv := append([]float32(nil), c.vol.V...)
		cr, s := c.vol.Corner(), c.vol.Spacing
		args := func(rest ...any) []any {
			return append([]any{c.vol.N[0], c.vol.N[1], c.vol.N[2], cr[0], cr[1], cr[2], s[0], s[1], s[2],
				int64(cbool(c.vol.Padded)), int64(n), append([]float64(nil), src...), append([]float64(nil), dst...),
				c.step, c.lref}, rest...)
		}
		eo, egs, egd := make([]float64, n), make([]float64, 3*n), make([]float64, 3*n)
		gx := (n + block - 1) / block
		if err := prog.Run("drr_grad", gx, 1, block, append([]any{vv}, args(eo, egs, egd)...)...); err != nil {
			t.Fatal(err)
		}
		bare := make([]float64, n)
		if err := prog.Run("drr_grad", gx, 1, block, append([]any{vv}, args(bare, int64(0), int64(0))...)...); err != nil {
			t.Fatal(err)
		}
		egrad := make([]float64, len(c.vol.V))
		if err := prog.Run("drr_backproject", gx, 1, block, args(g, egrad)...); err != nil {
			t.Fatal(err)
		}
		name := func(s string) string {
			return s + map[bool]string{false: "", true: " padded"}[c.vol.Padded] + map[bool]string{false: " siddon", true: " trilinear"}[c.step > 0]
		}
		near(t, name("out"), eo, out, 1e-12)
		near(t, name("out without gradients"), bare, out, 1e-12)
		near(t, name("gsrc"), egs, gs, 1e-12)
		near(t, name("gdst"), egd, gd, 1e-12)
		near(t, name("back-projection"), egrad, grad, 1e-12)
	}
}
