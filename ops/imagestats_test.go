package ops

import (
	"math"
	"testing"

	"gorgonia.org/tensor"
)

func TestImageStats(t *testing.T) {
	imgs := []float32{
		0, 0, 0, 0, 0, 0, // all zero
		1, -2, 0, 3.5, 0, 7, // mixed
		float32(math.NaN()), 1, 0, 0, 0, 0, // a NaN pixel
	}
	op := NewImageStats(3, 2, 3)
	in := tensor.New(tensor.WithShape(3, 2, 3), tensor.WithBacking(imgs))
	v, err := op.Do(in)
	if err != nil {
		t.Fatal(err)
	}
	got := v.Data().([]float64)
	want := []float64{0, 0, 0, -2, 7, 4}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("stats[%d] = %v, want %v", i, got[i], w)
		}
	}
	if !math.IsNaN(got[6]) || !math.IsNaN(got[7]) || got[8] != 2 {
		t.Errorf("NaN image: %v, want NaN, NaN, 2", got[6:])
	}
	again, err := op.Do(in)
	if err != nil || again != v {
		t.Errorf("second run: %p (%v), want the op's own buffer %p", again, err, v)
	}
	if _, err := op.Do(tensor.New(tensor.WithShape(2, 2, 3), tensor.Of(tensor.Float32))); err == nil {
		t.Error("a short batch accepted")
	}
	if _, err := op.Do(tensor.New(tensor.WithShape(3, 2, 3), tensor.Of(tensor.Float64))); err == nil {
		t.Error("float64 images accepted")
	}
	if s, err := op.InferShape(tensor.Shape{3, 2, 3}); err != nil || !s.Eq(tensor.Shape{3, ImageStatsWidth}) {
		t.Errorf("InferShape: %v, %v", s, err)
	}
	if _, err := op.InferShape(tensor.Shape{3, 3, 2}); err == nil {
		t.Error("InferShape took transposed images")
	}
}
