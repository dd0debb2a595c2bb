package pairwise

// Helpers every ops test shares, one definition each: errors, random data,
// conversions, and the fixtures more than one test file builds on.

import (
	"math"
	"math/rand/v2"

	"gorgonia.org/tensor"
)

// relErr is the norm-wise relative error ‖got − want‖ / ‖want‖, summed in
// float64. A NaN anywhere in got (a poisoned element left unwritten) makes
// it NaN, which fails every `!(e <= tol)`.
func relErr[T float32 | float64](got, want []T) float64 {
	var num, den float64
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}

// normals32 is n standard-normal float32s from rng.
func normals32(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// normals64 is n standard-normal float64s from rng.
func normals64(rng *rand.Rand, n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	return x
}

// uniform32 is n float32s uniform on [0, 1) from rng.
func uniform32(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = rng.Float32()
	}
	return x
}

// widen is x in float64.
func widen[T float32 | float64](x []T) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// narrow is x rounded to float32.
func narrow(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(v)
	}
	return y
}

// denseOf is x as a tensor of dtype dt (float32: rounded), shaped shape
// (default: a vector).
func denseOf(dt tensor.Dtype, x []float64, shape ...int) *tensor.Dense {
	if len(shape) == 0 {
		shape = []int{len(x)}
	}
	if dt == tensor.Float32 {
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(narrow(x)))
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]float64(nil), x...)))
}

// valuesOf is a float32 or float64 tensor's data in float64.
func valuesOf(d *tensor.Dense) []float64 { return floats(d.Data()) }

// floats is a []float32 or []float64 in float64 (a copy).
func floats(x any) []float64 {
	switch v := x.(type) {
	case []float32:
		return widen(v)
	case []float64:
		return widen(v)
	}
	panic("ops test: not a float slice")
}

// fill sets every element of a float32 or float64 tensor to v.
func fill(d *tensor.Dense, v float64) {
	switch x := d.Data().(type) {
	case []float32:
		for i := range x {
			x[i] = float32(v)
		}
	case []float64:
		for i := range x {
			x[i] = v
		}
	default:
		panic("ops test: not a float tensor")
	}
}
