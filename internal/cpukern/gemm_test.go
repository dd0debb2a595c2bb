package cpukern

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func normals32(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// TestDotTile: DotTile32 on a pack of a's rows gives each pair the float64
// definition's value to float32 accuracy and PairDist32's value bit for
// bit, writes every pair on or above the shifted diagonal and nothing
// else (sentinels around and below), for tails in the rows, the columns
// and the k slices, row strides wider than d, and diagonals that cut the
// register tiles.
func TestDotTile(t *testing.T) {
	if !GEMM() {
		t.Skip("no AVX-512: the packed matrix product does not run here")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for _, sz := range [][4]int{ // m, n, d, lower (−1: every pair)
		{1, 1, 1, -1}, {15, 33, 7, -1}, {29, 256, 385, -1}, {70, 31, 1000, -1}, {14, 32, 384, -1},
		{29, 45, 777, 0}, {37, 64, 300, 5}, {101, 200, 400, 33}, {9, 20, 385, 100}, {64, 64, 64, 0}, {3, 256, 17, 0},
	} {
		m, n, d, lower := sz[0], sz[1], sz[2], sz[3]
		lda, ldb := d+3, d+1
		a, b := normals32(rng, m*lda), normals32(rng, n*ldb)
		const guard, sentinel = 5, 12345
		ldo := n + guard
		got := make([]float32, m*ldo+guard)
		for i := range got {
			got[i] = sentinel
		}
		p := NewDotPack(m+7, d) // room for more rows than it packs
		p.SetRows(m)
		p.Pack(a, lda, 0, 1) // panels in two calls, as cores would
		p.Pack(a, lda, 1, DotPanels(m))
		DotTile32(p, m, n, b, ldb, NewDotScratch(n, d), got, ldo, lower)
		want := make([]float32, m*n)
		PairDist32(m, n, d, a, lda, b, ldb, want, n, Dot)
		var e2, w2 float64
		for i := range m {
			for j := range ldo {
				g := got[i*ldo+j]
				if j >= n || lower >= 0 && j+lower < i {
					if g != sentinel {
						t.Fatalf("%v: (%d, %d) outside the pairs computed was written: %v", sz, i, j, g)
					}
					continue
				}
				if g != want[i*n+j] {
					t.Fatalf("%v: pair (%d, %d) is %v, PairDist32 gives %v", sz, i, j, g, want[i*n+j])
				}
				var ref float64
				for k := range d {
					ref += float64(a[i*lda+k]) * float64(b[j*ldb+k])
				}
				e2 += (float64(g) - ref) * (float64(g) - ref)
				w2 += ref * ref
			}
		}
		if r := math.Sqrt(e2 / w2); r > 1e-6 {
			t.Errorf("%v: relative error %.3g against float64", sz, r)
		}
		if got[m*ldo] != sentinel {
			t.Errorf("%v: guard after the last row written", sz)
		}
	}
}

// TestDotTileShift: with SetShift(mu), DotTile32 gives each pair the
// value PairDist32 (Dot) gives the rows less mu, each value rounded to
// float32 once, bit for bit, on the pack's rows and the tile's columns
// alike (rows of images 1000 + N(0, 1), mu their column means); a pack
// shifted then reset to nil packs the rows as they are; a NaN in a row is
// reported through the shift.
func TestDotTileShift(t *testing.T) {
	if !GEMM() {
		t.Skip("no AVX-512: the packed matrix product does not run here")
	}
	rng := rand.New(rand.NewPCG(15, 16))
	for _, sz := range [][4]int{{1, 1, 1, -1}, {15, 33, 7, -1}, {29, 256, 385, -1}, {37, 64, 300, 5}, {17, 255, 769, 0}} {
		m, n, d, lower := sz[0], sz[1], sz[2], sz[3]
		lda, ldb := d+3, d+1
		a, b := normals32(rng, m*lda), normals32(rng, n*ldb)
		for i := range a {
			a[i] += 1000
		}
		for i := range b {
			b[i] += 1000
		}
		mu := make([]float32, d)
		for k := range mu {
			var s float64
			for i := range n {
				s += float64(b[i*ldb+k])
			}
			mu[k] = float32(s / float64(n))
		}
		shift := func(x []float32, rows, ld int) []float32 {
			y := make([]float32, rows*d)
			for i := range rows {
				for k := range d {
					y[i*d+k] = x[i*ld+k] - mu[k]
				}
			}
			return y
		}
		want := make([]float32, m*n)
		PairDist32(m, n, d, shift(a, m, lda), d, shift(b, n, ldb), d, want, n, Dot)
		p := NewDotPack(m, d)
		p.SetRows(m)
		p.SetShift(mu)
		if !p.Pack(a, lda, 0, DotPanels(m)) {
			t.Fatalf("%v: finite rows reported otherwise", sz)
		}
		got := make([]float32, m*n)
		DotTile32(p, m, n, b, ldb, NewDotScratch(n, d), got, n, lower)
		for i := range m {
			for j := range n {
				if (lower < 0 || j+lower >= i) && got[i*n+j] != want[i*n+j] {
					t.Fatalf("%v: pair (%d, %d) is %v, PairDist32 of the shifted rows gives %v", sz, i, j, got[i*n+j], want[i*n+j])
				}
			}
		}
		p.SetShift(nil)
		p.Pack(a, lda, 0, DotPanels(m))
		DotTile32(p, m, n, b, ldb, NewDotScratch(n, d), got, n, -1)
		PairDist32(m, n, d, a, lda, b, ldb, want, n, Dot)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%v: after SetShift(nil), element %d is %v, want %v", sz, i, got[i], want[i])
			}
		}
		p.SetShift(mu)
		a[(m-1)*lda+d-1] = float32(math.NaN())
		if p.Pack(a, lda, 0, DotPanels(m)) {
			t.Errorf("%v: a NaN packed with a shift was not reported", sz)
		}
	}
}

// TestMirrorUpper: MirrorUpper32 copies exactly the pairs strictly above
// the shifted diagonal to their transposes and leaves every other element
// of t as it was, for tails of the 16×16 blocks and diagonals that cut
// them.
func TestMirrorUpper(t *testing.T) {
	if !GEMM() {
		t.Skip("no AVX-512")
	}
	rng := rand.New(rand.NewPCG(13, 14))
	for _, sz := range [][3]int{{1, 1, 0}, {1, 2, 0}, {17, 17, 0}, {40, 33, 0}, {40, 70, 9}, {100, 31, 64}, {5, 300, 2}} {
		m, n, lower := sz[0], sz[1], sz[2]
		ldo, ldt := n+3, m+5
		out := normals32(rng, m*ldo)
		const sentinel = -777
		tt := make([]float32, n*ldt)
		for i := range tt {
			tt[i] = sentinel
		}
		MirrorUpper32(m, n, out, ldo, lower, tt, ldt)
		for j := range n {
			for i := range ldt {
				g := tt[j*ldt+i]
				if i < m && j+lower > i {
					if g != out[i*ldo+j] {
						t.Fatalf("%v: t(%d, %d) = %v, want out(%d, %d) = %v", sz, j, i, g, i, j, out[i*ldo+j])
					}
				} else if g != sentinel {
					t.Fatalf("%v: t(%d, %d) = %v written, want untouched", sz, j, i, g)
				}
			}
		}
	}
}

// TestDotTilesShareAPack: tiles of one pack computed by several
// goroutines at once (columns handed out by an atomic counter, as the
// affinity op does) give the matrix PairDist32 gives, bit for bit.
// TestDotPackFinite: Pack reports a NaN or ±Inf anywhere among the rows
// of the panels it packs (the stride's gap and the panels it leaves to
// another call aside), and reports finite values as finite, the largest
// and the subnormal ones included.
func TestDotPackFinite(t *testing.T) {
	if !GEMM() {
		t.Skip("no AVX-512: the packed matrix product does not run here")
	}
	rng := rand.New(rand.NewPCG(13, 14))
	const m, d, lda = 47, 389, 393 // 4 panels, the last of 5 rows; a k tail; a gap after each row
	nonFinite := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
	panels := DotPanels(m)
	for trial := range 60 {
		a := normals32(rng, m*lda)
		a[rng.IntN(m*lda)] = math.MaxFloat32
		a[rng.IntN(m*lda)] = -math.SmallestNonzeroFloat32
		for r := range m { // the gaps hold non-finite values no pack reads
			for k := d; k < lda; k++ {
				a[r*lda+k] = nonFinite[k%3]
			}
		}
		p := NewDotPack(m, d)
		p.SetRows(m)
		for q := range panels {
			if !p.Pack(a, lda, q, q+1) {
				t.Fatalf("trial %d: panel %d of finite values reported non-finite", trial, q)
			}
		}
		i, k := rng.IntN(m), rng.IntN(d)
		a[i*lda+k] = nonFinite[trial%3]
		owner := i / dotPanelRows // the panel holding row i
		for q := range panels {
			if got := p.Pack(a, lda, q, q+1); got != (q != owner) {
				t.Fatalf("trial %d: %v at (%d, %d): panel %d reported finite %v", trial, a[i*lda+k], i, k, q, got)
			}
		}
		if p.Pack(a, lda, 0, panels) {
			t.Fatalf("trial %d: %v at (%d, %d): all panels at once reported finite", trial, a[i*lda+k], i, k)
		}
	}
}

func TestDotTilesShareAPack(t *testing.T) {
	if !GEMM() {
		t.Skip("no AVX-512")
	}
	rng := rand.New(rand.NewPCG(15, 16))
	const m, n, d = 45, 1111, 500
	a, b := normals32(rng, m*d), normals32(rng, n*d)
	want := make([]float32, m*n)
	PairDist32(m, n, d, a, d, b, d, want, n, Dot)
	p := NewDotPack(m, d)
	p.SetRows(m)
	p.Pack(a, d, 0, DotPanels(m))
	got := make([]float32, m*n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := NewDotScratch(100, d)
			for {
				j := int(next.Add(1)-1) * 100 // narrower than DotTileCols
				if j >= n {
					return
				}
				DotTile32(p, m, min(100, n-j), b[j*d:], d, s, got[j:], n, -1)
			}
		}()
	}
	wg.Wait()
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("pair (%d, %d) is %v, want %v", i/n, i%n, got[i], want[i])
		}
	}
}

// cpuSeconds is the CPU time this process has used.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// rates runs fn and returns its flops per wall second and per CPU second
// (per core: time another process took from a core is left out).
func rates(flops float64, fn func()) (wall, cpu float64) {
	c0, t0 := cpuSeconds(), time.Now()
	fn()
	return flops / time.Since(t0).Seconds(), flops / (cpuSeconds() - c0)
}

// fmaPeak runs the pure fused multiply-add loop on w cores at once for
// about 50 ms and returns the flops done per wall second and per CPU
// second: the peak of w cores, and of one.
func fmaPeak(w int) (wall, cpu float64) {
	const rounds = 2_000_000 // 1.5 Gflop a core
	return rates(float64(w)*rounds*768, func() {
		var wg sync.WaitGroup
		for range w {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				fmaLoop(rounds)
			}()
		}
		wg.Wait()
	})
}

// benchmarkDotTiles runs the packed matrix product on a block of 1022
// rows (73 panels) against 4096 columns of d = 4096, as the affinity op
// does: the rows packed once, column tiles handed out to w cores. Each
// round is followed by the pure-FMA loop on w cores (not timed), so that
// the kernel and the peak see the same machine. It reports GFLOP/s of
// both and the kernel's share of the peak, by the wall clock (w cores)
// and by CPU time (per core, blind to time other processes take from the
// cores: the kernel's own efficiency on a shared machine).
func benchmarkDotTiles(b *testing.B, w int) {
	if !GEMM() {
		b.Skip("no AVX-512")
	}
	const m, n, d = 1022, 4096, 4096
	rng := rand.New(rand.NewPCG(17, 18))
	a, x := normals32(rng, m*d), normals32(rng, n*d)
	out := make([]float32, m*n)
	p := NewDotPack(m, d)
	p.SetRows(m)
	scratch := make([]*DotScratch, w)
	for i := range scratch {
		scratch[i] = NewDotScratch(DotTileCols, d)
	}
	run := func() {
		p.Pack(a, d, 0, DotPanels(m))
		var next atomic.Int64
		var wg sync.WaitGroup
		for i := range w {
			wg.Add(1)
			go func(s *DotScratch) {
				defer wg.Done()
				for {
					j := int(next.Add(1)-1) * DotTileCols
					if j >= n {
						return
					}
					DotTile32(p, m, min(DotTileCols, n-j), x[j*d:], d, s, out[j:], n, -1)
				}
			}(scratch[i])
		}
		wg.Wait()
	}
	run() // the output's pages

	var kw, kc, pw, pc float64 // sums of the rates: kernel and peak, wall and CPU
	b.ResetTimer()
	for b.Loop() {
		wall, cpu := rates(2*float64(m)*n*d, run)
		b.StopTimer()
		fw, fc := fmaPeak(w)
		kw, kc, pw, pc = kw+wall, kc+cpu, pw+fw, pc+fc
		b.StartTimer()
	}
	b.ReportMetric(kw/float64(b.N)/1e9, "GFLOP/s")
	b.ReportMetric(pw/float64(b.N)/1e9, "peak-GFLOP/s")
	b.ReportMetric(100*kw/pw, "%peak")
	b.ReportMetric(kc/float64(b.N)/1e9, "GFLOP/cpu-s")
	b.ReportMetric(pc/float64(b.N)/1e9, "peak-GFLOP/cpu-s")
	b.ReportMetric(100*kc/pc, "%peak-cpu")
}

func BenchmarkDotTiles(b *testing.B) {
	for _, w := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("cores=%d", w), func(b *testing.B) { benchmarkDotTiles(b, w) })
	}
}
