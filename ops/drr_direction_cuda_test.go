//go:build tapeloop_cuda || tapeloop_cudaemu

package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tapeloop/tapeloop/cuda"
)

// TestDRRObliqueCUDAMatchesCPU: the GPU twin maps the poses into an
// oblique volume's frame as the CPU op does.
func TestDRRObliqueCUDAMatchesCPU(t *testing.T) {
	dev := device(t)
	const rows, cols, batch = 24, 20, 3
	vol, in := drrFixture(rand.New(rand.NewPCG(83, 84)), [3]int64{30, 24, 18}, 400, 150, 1.3, rows, cols, batch)
	c, s := math.Cos(0.6), math.Sin(0.6)
	centre := vol.Centre()
	vol.Direction = [3][3]float64{{c, 0, s}, {0, -1, 0}, {s, 0, -c}} // a turn about y, flipped
	moved := vol.Centre()
	for a := range 3 { // about the same centre, in the poses' view
		vol.Origin[a] += centre[a] - moved[a]
	}
	for _, step := range []float64{0, 0.5} {
		want, err := NewDRR(vol, rows, cols, step, batch).Do(in)
		if err != nil {
			t.Fatal(err)
		}
		gop, err := OnDevice(NewDRR(vol, rows, cols, step, batch), dev)
		if err != nil {
			t.Fatal(err)
		}
		op := gop.(*drrCUDA)
		got := twice(t, op, func() error { return cuda.Poison(dev, op.dimg, int64(batch*rows*cols)) }, in)
		w := want.Data().([]float32)
		hit := 0
		for _, x := range w {
			if x != 0 {
				hit++
			}
		}
		if hit < len(w)/3 {
			t.Fatalf("only %d of %d rays hit: the test geometry is off", hit, len(w))
		}
		if e := normRel(got, w); !(e <= 1e-5) {
			t.Errorf("step %g: relative error %.3g", step, e)
		}
	}
}
