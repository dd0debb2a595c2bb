//go:build tapeloop_cudaemu && !tapeloop_cuda

package cuda

// The emulator checks what it claims to check, and its cuBLAS and cuFFT
// stand-ins follow the libraries' definitions (direct sums in the test).

import (
	"errors"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"strings"
	"testing"
)

func openEmu(t *testing.T) *Device {
	t.Helper()
	d, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestEmulatorCatchesMisuse(t *testing.T) {
	d := openEmu(t)
	a, err := d.NewArena(4096)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := a.Alloc(64 * 4)
	q, _ := a.Alloc(64 * 4)
	fresh := make([]float32, 64)
	if err := Download(d, fresh, p); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(float64(fresh[0])) || !math.IsNaN(float64(fresh[63])) {
		t.Errorf("fresh device memory reads %v, %v; want NaN", fresh[0], fresh[63])
	}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"copy past the arena", Upload(d, p, make([]float32, 2000)), "not inside one allocation"},
		{"fill past the arena", Zero(d, q, 2000), "not inside one allocation"},
		{"grid too tall", d.Run("cmul", 1, 70000, 32, p, q, int64(1)), "outside the GPU's limits"},
		{"block too large", d.Run("cmul", 1, 1, 2048, p, q, int64(1)), "outside the GPU's limits"},
		{"unknown kernel", d.Run("nope", 1, 1, 32, p), "no kernel"},
		{"argument count", d.Run("cmul", 1, 1, 32, p, q), "do not match"},
		{"argument type", d.Run("cmul", 1, 1, 32, p, q, 3), "is a int"},
		{"arena over the limit", func() error { d.SetLimit(8192); _, err := d.NewArena(8192); d.SetLimit(0); return err }(), "over the limit"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: error %v, want one with %q", c.name, c.err, c.want)
		}
	}
	// A kernel writing past its buffer, into the guard zone (which
	// catches overruns shorter than itself): cmul over 520 complex values
	// of a 4096-byte arena writes 64 bytes past it.
	if err := Zero(d, p, 1024); err != nil {
		t.Fatal(err)
	}
	if err := d.Run("cmul", 3, 1, 256, p, p, int64(520)); err == nil || !strings.Contains(err.Error(), "out-of-bounds write") {
		t.Errorf("writing past the arena: %v", err)
	}
}

func TestEmulatedGemmTN(t *testing.T) {
	d := openEmu(t)
	rng := rand.New(rand.NewPCG(1, 2))
	const m, n, k, lda, ldb, ldc = 7, 5, 11, 13, 12, 9
	av, bv := make([]float32, lda*m), make([]float32, ldb*n)
	for i := range av {
		av[i] = float32(rng.NormFloat64())
	}
	for i := range bv {
		bv[i] = float32(rng.NormFloat64())
	}
	ar, _ := d.NewArena(1 << 16)
	pa, _ := ar.Alloc(int64(4 * len(av)))
	pb, _ := ar.Alloc(int64(4 * len(bv)))
	pc, _ := ar.Alloc(4 * ldc * n)
	Upload(d, pa, av)
	Upload(d, pb, bv)
	Zero(d, pc, ldc*n)
	for _, tf := range []bool{false, true} {
		b, err := d.NewBLAS(tf, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.GemmTN(m, n, k, pa, lda, pb, ldb, pc, ldc); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, ldc*n)
		Download(d, got, pc)
		for j := range n {
			for i := range m {
				var want float64
				for l := range k {
					want += float64(av[i*lda+l]) * float64(bv[j*ldb+l])
				}
				tol := 1e-5
				if tf {
					tol = 3e-3 * math.Sqrt(k) // TF32: 10 mantissa bits per operand
				}
				if g := float64(got[i+j*ldc]); math.Abs(g-want) > tol {
					t.Errorf("tf32 %v: C[%d, %d] = %v, want %v", tf, i, j, g, want)
				}
			}
		}
		if err := b.GemmTN(m, n, k, pa, k-1, pb, ldb, pc, ldc); err == nil || !strings.Contains(err.Error(), "status 7") {
			t.Errorf("lda < k: %v, want CUBLAS_STATUS_INVALID_VALUE", err)
		}
	}
	for _, c := range []struct{ in, want float32 }{
		{1 + 1.0/4096, 1}, {1 + 1.0/1024, 1 + 1.0/1024}, {1 + 3.0/2048, 1 + 2.0/1024}, {1 + 1.0/2048, 1}, {-3, -3},
	} {
		if g := tf32(c.in); g != c.want {
			t.Errorf("tf32(%v) = %v, want %v", c.in, g, c.want)
		}
	}
}

func TestEmulatedFFT(t *testing.T) {
	d := openEmu(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, dims := range [][3]int{{3, 4, 5}, {2, 3, 6}, {4, 1, 8}} {
		n0, n1, n2 := dims[0], dims[1], dims[2]
		h, n := n2/2+1, n0*n1*n2
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		f, err := d.NewFFT3(n0, n1, n2)
		if err != nil {
			t.Fatal(err)
		}
		ar, _ := d.NewArena(int64(4*n + 8*n0*n1*h + 3*256 + int(f.Work)))
		px, _ := ar.Alloc(int64(4 * n))
		ps, _ := ar.Alloc(int64(8 * n0 * n1 * h))
		pw, _ := ar.Alloc(f.Work)
		Upload(d, px, x)
		if err := f.Forward(px, ps); err == nil {
			t.Error("a plan without its work area ran")
		}
		if err := f.SetWorkArea(pw); err != nil {
			t.Fatal(err)
		}
		if err := f.Forward(px, ps); err != nil {
			t.Fatal(err)
		}
		spec := make([]complex64, n0*n1*h)
		Download(d, spec, ps)
		for k0 := range n0 {
			for k1 := range n1 {
				for k2 := range h {
					var want complex128
					for j0 := range n0 {
						for j1 := range n1 {
							for j2 := range n2 {
								ph := -2 * math.Pi * (float64(k0*j0)/float64(n0) + float64(k1*j1)/float64(n1) + float64(k2*j2)/float64(n2))
								want += complex(float64(x[(j0*n1+j1)*n2+j2]), 0) * cmplx.Exp(complex(0, ph))
							}
						}
					}
					if g := complex128(spec[(k0*n1+k1)*h+k2]); cmplx.Abs(g-want) > 1e-4*math.Sqrt(float64(n)) {
						t.Fatalf("%v: X[%d, %d, %d] = %v, want %v", dims, k0, k1, k2, g, want)
					}
				}
			}
		}
		// C2R is unnormalised and ignores the imaginary parts a real
		// array's spectrum cannot have (DC, and Nyquist for even n2).
		spec[0] += complex(0, 5)
		if n2%2 == 0 {
			spec[h-1] += complex(0, 7)
		}
		Upload(d, ps, spec)
		if err := f.Inverse(ps, px); err != nil {
			t.Fatal(err)
		}
		back := make([]float32, n)
		Download(d, back, px)
		for i := range x {
			if math.Abs(float64(back[i])-float64(n)*float64(x[i])) > 1e-4*float64(n) {
				t.Fatalf("%v: C2R(R2C(x))[%d] = %v, want %v", dims, i, back[i], float64(n)*float64(x[i]))
			}
		}
	}
}

// TestEmulatedStreams: the emulator runs a stream's work in the order
// least favourable to code that forgets After or Sync (stream_emu.go), so
// each omission below gives stale results, and the correct sequence the
// right ones.
func TestEmulatedStreams(t *testing.T) {
	d := openEmu(t)
	a, err := d.NewArena(4096)
	if err != nil {
		t.Fatal(err)
	}
	const n = 8 // complex values
	p, _ := a.Alloc(8 * n)
	q, _ := a.Alloc(8 * n)
	fill := func(at DevicePtr, re float32) {
		v := make([]float32, 2*n)
		for i := 0; i < 2*n; i += 2 {
			v[i] = re
		}
		if err := Upload(d, at, v); err != nil {
			t.Fatal(err)
		}
	}
	comp, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	cp, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	// run: p = 2, q = qv (through the default stream, after which the
	// streams wait for it or not), p *= q on comp, p copied back on cp
	// after comp or not, waited for or not; it returns p's first value as
	// the host sees it (−1 if the copy has not landed).
	run := func(qv float32, afterDefault, after, sync bool) float32 {
		fill(p, 2)
		fill(q, qv)
		if afterDefault {
			if err := comp.After(d.Default()); err != nil {
				t.Fatal(err)
			}
		}
		if err := comp.Launch("cmul", 1, 1, 32, p, q, int64(n)); err != nil {
			t.Fatal(err)
		}
		if after {
			if err := cp.After(comp); err != nil {
				t.Fatal(err)
			}
		}
		host := make([]float32, 2*n)
		host[0] = -1
		if err := Download2DAsync(cp, host, 2*n, p, 2*n, 1, 2*n); err != nil {
			t.Fatal(err)
		}
		seen := host[0]
		if sync {
			if err := cp.Sync(); err != nil {
				t.Fatal(err)
			}
			seen = host[0]
		}
		if err := comp.Sync(); err != nil { // before the next run's copies
			t.Fatal(err)
		}
		return seen
	}
	for _, c := range []struct {
		name                      string
		q                         float32
		afterDefault, after, sync bool
		want                      float32
	}{
		{"ordered and waited for", 3, true, true, true, 6},
		{"copy not ordered after the kernel", 3, true, false, true, 2},
		{"copy not waited for", 3, true, true, false, -1},
		{"kernel not ordered after the uploads", 5, false, true, true, 2 * 3}, // q of the run before
		{"ordered and waited for", 5, true, true, true, 10},
	} {
		if got := run(c.q, c.afterDefault, c.after, c.sync); got != c.want {
			t.Errorf("%s (q = %v): the host sees %v, want %v", c.name, c.q, got, c.want)
		}
	}
}

// Kernels compiled at run time are not emulated: LoadKernels says so, in
// a way ops can tell from a failure.
func TestEmulatorRuntimeKernels(t *testing.T) {
	d := openEmu(t)
	_, err := d.LoadKernels(`extern "C" __global__ void k(float *x) { x[0] = 1; }`, nil)
	if !errors.Is(err, ErrNotEmulated) || !errors.Is(err, ErrDevice) {
		t.Errorf("LoadKernels: %v, want ErrNotEmulated", err)
	}
}
