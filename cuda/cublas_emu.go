//go:build tapeloop_cudaemu && !tapeloop_cuda

package cuda

import (
	"fmt"
	"math"
	"unsafe"
)

// cublasInvalidValue is CUBLAS_STATUS_INVALID_VALUE.
const cublasInvalidValue = 7

// NewBLAS makes an emulated cuBLAS handle. The workspace, when given,
// must lie in one allocation.
func (d *Device) NewBLAS(tf32 bool, ws DevicePtr, wsBytes int64) (*BLAS, error) {
	b := &BLAS{dev: d, tf32: tf32}
	if ws == 0 {
		return b, nil
	}
	return b, d.Do(func() error {
		if _, err := d.drv.span("cublasSetWorkspace", ws, wsBytes); err != nil {
			return fmt.Errorf("%w: %v", ErrDevice, err)
		}
		return nil
	})
}

// GemmTN is cublasSgemm(CUBLAS_OP_T, CUBLAS_OP_N) with α = 1, β = 0 as a
// reference loop: C (m×n, ldc) = Aᵀ·B for A (k×m, lda) and B (k×n, ldb),
// column-major. Arguments cuBLAS rejects are rejected with its status; the
// operands must lie in allocations; TF32 rounds A and B to TF32 (10
// mantissa bits) and sums in float32, as tensor cores do.
func (b *BLAS) GemmTN(m, n, k int, a DevicePtr, lda int, bb DevicePtr, ldb int, c DevicePtr, ldc int) error {
	return b.dev.timed(func() error { return b.gemmTN(b.dev.def, m, n, k, a, lda, bb, ldb, c, ldc) })
}

// GemmTNOn queues GemmTN's product on stream s.
func (b *BLAS) GemmTNOn(s *Stream, m, n, k int, a DevicePtr, lda int, bb DevicePtr, ldb int, c DevicePtr, ldc int) error {
	return b.dev.Do(func() error { return b.gemmTN(s, m, n, k, a, lda, bb, ldb, c, ldc) })
}

// gemmTN checks the arguments now, as cuBLAS does, and queues the product
// on s (the operands are looked up when it runs).
func (b *BLAS) gemmTN(s *Stream, m, n, k int, a DevicePtr, lda int, bb DevicePtr, ldb int, c DevicePtr, ldc int) error {
	if m < 0 || n < 0 || k < 0 || lda < max(1, k) || ldb < max(1, k) || ldc < max(1, m) {
		return fmt.Errorf("%w: cublasSgemm: status %d", ErrDevice, cublasInvalidValue)
	}
	if m == 0 || n == 0 {
		return nil
	}
	drv := b.dev.drv
	extent := func(ld, cols, rows int) int64 { return 4 * (int64(ld)*int64(cols-1) + int64(rows)) }
	return s.s.enqueue(func() error {
		var ops [3][]float32
		for i, o := range []struct {
			name string
			p    DevicePtr
			n    int64
		}{{"A", a, extent(lda, m, k)}, {"B", bb, extent(ldb, n, k)}, {"C", c, extent(ldc, n, m)}} {
			if o.n <= 0 {
				continue // k = 0: A and B are not read
			}
			h, err := drv.span("cublasSgemm operand "+o.name, o.p, o.n)
			if err != nil {
				return fmt.Errorf("%w: %v", ErrDevice, err)
			}
			ops[i] = unsafe.Slice((*float32)(h), o.n/4)
		}
		av, bv, cv := ops[0], ops[1], ops[2]
		for j := range n {
			for i := range m {
				ac, bc := av[i*lda:i*lda+k], bv[j*ldb:j*ldb+k]
				if b.tf32 {
					var s float32
					for l := range k {
						s += tf32(ac[l]) * tf32(bc[l])
					}
					cv[i+j*ldc] = s
					continue
				}
				var s float64
				for l := range k {
					s += float64(ac[l]) * float64(bc[l])
				}
				cv[i+j*ldc] = float32(s)
			}
		}
		return nil
	})
}

// tf32 rounds v to TF32's 10 mantissa bits, to nearest, ties to even.
func tf32(v float32) float32 {
	if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
		return v
	}
	u := math.Float32bits(v)
	u += 0xfff + (u>>13)&1
	return math.Float32frombits(u &^ 0x1fff)
}
