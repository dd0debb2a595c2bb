package graphs

import "testing"

// BenchmarkMirror: the host's share of a symmetric affinity matrix of the
// seed's size (N = 10,000, blocks of 1000 rows): mirror's upper rows and
// transposes, against a plain copy of whole rows (what full-row blocks
// would cost instead).
func BenchmarkMirror(b *testing.B) {
	const n, blk = 10_000, 1000
	full := make([]float32, n*n)
	buf := make([]float32, blk*n)
	for i := range buf {
		buf[i] = float32(i % 977)
	}
	b.Run("mirror", func(b *testing.B) {
		for b.Loop() {
			for r0 := 0; r0 < n; r0 += blk {
				mirror(full, buf, n, r0, blk)
			}
		}
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e3, "ms/matrix")
	})
	b.Run("rows", func(b *testing.B) {
		for b.Loop() {
			for r0 := 0; r0 < n; r0 += blk {
				copy(full[r0*n:(r0+blk)*n], buf)
			}
		}
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e3, "ms/matrix")
	})
}
