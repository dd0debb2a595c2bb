// Package opstest holds what the tests of package ops and package
// ops/pairwise share: errors, random data, conversions, and the CUDA
// emulator's runs of a kernel launch.
package opstest

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/cuda/kernels"
	"github.com/tapeloop/tapeloop/internal/kernelemu"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// RelErr is the norm-wise relative error ‖got − want‖ / ‖want‖, summed in
// float64. A NaN anywhere in got (a poisoned element left unwritten) makes
// it NaN, which fails every `!(e <= tol)`.
func RelErr[T float32 | float64](got, want []T) float64 {
	var num, den float64
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}

// Normals32 is n standard-normal float32s from rng.
func Normals32(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// Normals64 is n standard-normal float64s from rng.
func Normals64(rng *rand.Rand, n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	return x
}

// Uniform32 is n float32s uniform on [0, 1) from rng.
func Uniform32(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = rng.Float32()
	}
	return x
}

// Widen is x in float64.
func Widen[T float32 | float64](x []T) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// Narrow is x rounded to float32.
func Narrow(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(v)
	}
	return y
}

// DenseOf is x as a tensor of dtype dt (float32: rounded), shaped shape
// (default: a vector).
func DenseOf(dt tensor.Dtype, x []float64, shape ...int) *tensor.Dense {
	if len(shape) == 0 {
		shape = []int{len(x)}
	}
	if dt == tensor.Float32 {
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(Narrow(x)))
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]float64(nil), x...)))
}

// ValuesOf is a float32 or float64 tensor's data in float64.
func ValuesOf(d *tensor.Dense) []float64 { return Floats(d.Data()) }

// Floats is a []float32 or []float64 in float64 (a copy).
func Floats(x any) []float64 {
	switch v := x.(type) {
	case []float32:
		return Widen(v)
	case []float64:
		return Widen(v)
	}
	panic("opstest: not a float slice")
}

// Fill sets every element of a float32 or float64 tensor to v.
func Fill(d *tensor.Dense, v float64) {
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
		panic("opstest: not a float tensor")
	}
}

// Emulator is the emulator's Program of cuda/kernels/*.cu.
func Emulator(t testing.TB) *kernelemu.Program {
	t.Helper()
	p, err := kernelemu.Kernels(kernels.Sources)
	if errors.Is(err, kernelemu.ErrNoCompiler) {
		t.Skip(err.Error() + ": the CUDA emulator tests need it")
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Emulate runs l under the emulator. Its buffers are host slices standing
// for device pointers: copied in, and back out after the kernel.
func Emulate(t testing.TB, l opkit.Launch) {
	t.Helper()
	if err := Emulator(t).Run(l.Kernel, l.GX, l.GY, l.Block, l.Args...); err != nil {
		t.Fatal(err)
	}
}

// Buf32 is n NaN: unwritten elements show.
func Buf32(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(math.NaN())
	}
	return s
}
