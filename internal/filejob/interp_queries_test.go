package filejob

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// refUniform is the built-in queries the obvious way, one after the other
// from math/rand/v2's own PCG: n of them, as float64 and as float32.
func refUniform(seed uint64, lo, hi float64, n int) ([]float64, []float32) {
	r := rand.New(rand.NewPCG(seed, 0x7a9e100b))
	x64, x32 := make([]float64, n), make([]float32, n)
	for i := range n {
		x64[i] = lo + float64((hi-lo)*r.Float64()) // rounded twice, on every architecture
		x32[i] = float32(x64[i])
	}
	return x64, x32
}

// uniformCases are the grids and seeds the tests draw queries for: the
// built-in grid, a shifted odd one, and seeds 0, 1 and large.
var uniformCases = []struct {
	seed   uint64
	lo, hi float64
}{
	{1, 0, 1},
	{0, -3.25, 17.5},
	{0xdeadbeefcafe1234, 1e-3, 1e-3 + 4095*7.3e-4},
}

// readAll reads n queries from u in batches of the sizes in turn.
func readAll[T float32 | float64](t *testing.T, u *UniformQueries, n int, batches []int) []T {
	t.Helper()
	got := make([]T, n)
	for off, k := 0, 0; off < n; k++ {
		b := min(batches[k%len(batches)], n-off)
		var err error
		switch d := any(got[off : off+b]).(type) {
		case []float32:
			err = u.Read32(d, off)
		case []float64:
			err = u.Read64(d, off)
		}
		if err != nil {
			t.Fatal(err)
		}
		off += b
	}
	return got
}

func firstDiff[T float32 | float64](a, b []T) int {
	for i := range a {
		if math.Float64bits(float64(a[i])) != math.Float64bits(float64(b[i])) {
			return i
		}
	}
	return -1
}

// TestUniformQueriesAreRandsStream checks the built-in queries bit for bit
// against math/rand/v2's generator run one query at a time, read in
// batches of odd sizes (single queries, fewer than a lane group, more than
// a goroutine's grain, the engine's largest batch and one over).
func TestUniformQueriesAreRandsStream(t *testing.T) {
	const n = 3*(1<<16) + 12345
	batches := []int{1, 3, 4097, 1 << 16, 7, 20011, 1<<16 + 1, 2}
	for _, c := range uniformCases {
		want64, want32 := refUniform(c.seed, c.lo, c.hi, n)
		q := func() *UniformQueries { return &UniformQueries{N: n, Lo: c.lo, Hi: c.hi, Seed: c.seed} }
		if i := firstDiff(readAll[float64](t, q(), n, batches), want64); i >= 0 {
			t.Errorf("seed %d, [%g, %g): float64 query %d differs from math/rand/v2's", c.seed, c.lo, c.hi, i)
		}
		if i := firstDiff(readAll[float32](t, q(), n, batches), want32); i >= 0 {
			t.Errorf("seed %d, [%g, %g): float32 query %d differs from math/rand/v2's", c.seed, c.lo, c.hi, i)
		}
		if i := firstDiff(readAll[float32](t, q(), n, []int{n}), want32); i >= 0 {
			t.Errorf("seed %d, [%g, %g): one read: float32 query %d differs from math/rand/v2's", c.seed, c.lo, c.hi, i)
		}
	}
}

// TestUniformQueriesThreads checks that the queries do not depend on how
// many threads generate them: GOMAXPROCS 1, 2 and 5 (more goroutines than
// this machine has cores) give the same values, which are rand's.
func TestUniformQueriesThreads(t *testing.T) {
	const n = 5*uniformChunk + 333 // 6 chunks in the first read
	batches := []int{n - 1000, 999, 1}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, c := range uniformCases {
		_, want := refUniform(c.seed, c.lo, c.hi, n)
		for _, procs := range []int{1, 2, 5} {
			runtime.GOMAXPROCS(procs)
			got := readAll[float32](t, &UniformQueries{N: n, Lo: c.lo, Hi: c.hi, Seed: c.seed}, n, batches)
			if i := firstDiff(got, want); i >= 0 {
				t.Errorf("seed %d, GOMAXPROCS %d: query %d is %g, want %g", c.seed, procs, i, got[i], want[i])
			}
		}
	}
}

// TestUniformFillIsRands checks the Go loop that generates the queries on
// CPUs without AVX-512 (this one may take the C kernel in
// UniformQueries) bit for bit against math/rand/v2, from random states,
// at lengths below, at and past its 4 lanes.
func TestUniformFillIsRands(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for _, n := range []int{1, 2, 3, 4, 5, 7, 1001} {
		for _, c := range uniformCases {
			s := pcg{rng.Uint64(), rng.Uint64()}
			ref := rand.New(rand.NewPCG(s.hi, s.lo))
			got64, got32 := make([]float64, n), make([]float32, n)
			uniformFill(got64, s, c.lo, c.hi-c.lo)
			uniformFill(got32, s, c.lo, c.hi-c.lo)
			for i := range n {
				w := c.lo + (c.hi-c.lo)*ref.Float64()
				if math.Float64bits(got64[i]) != math.Float64bits(w) || math.Float32bits(got32[i]) != math.Float32bits(float32(w)) {
					t.Fatalf("n %d, state %x, [%g, %g): %d is %g and %g, want %g", n, s, c.lo, c.hi, i, got64[i], got32[i], w)
				}
			}
		}
	}
}

// TestPCGJump checks the jump ahead against single steps of rand.PCG:
// every jump up to 300 steps and one of about 10⁶, from random states,
// and long jumps composed.
func TestPCGJump(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for range 20 {
		s := pcg{rng.Uint64(), rng.Uint64()}
		ref := rand.NewPCG(s.hi, s.lo)
		for n := range 300 {
			got := pcgStep.pow(uint64(n)).apply(s)
			// The (n+1)-th output of ref is the output of the state after
			// n+1 steps.
			if want := ref.Uint64(); dxsm(pcgStep.apply(got)) != want {
				t.Fatalf("state %x: output after a jump of %d is %x, want %x", s, n, dxsm(pcgStep.apply(got)), want)
			}
		}
		far := 1_000_003 + rng.IntN(1000)
		for range far - 301 {
			ref.Uint64()
		}
		if got, want := dxsm(pcgStep.pow(uint64(far)).apply(s)), ref.Uint64(); got != want {
			t.Fatalf("state %x: output after a jump of %d is %x, want %x", s, far, got, want)
		}
		a, b := rng.Uint64()>>20, rng.Uint64()>>20
		if x, y := pcgStep.pow(a).then(pcgStep.pow(b)).apply(s), pcgStep.pow(a+b).apply(s); x != y {
			t.Fatalf("state %x: jumps of %d then %d give %x, one of %d gives %x", s, a, b, x, a+b, y)
		}
	}
}

// TestUniformQueriesReadAllocs checks that a read of a whole batch
// allocates no buffer: at most the goroutines' bookkeeping of a parallel
// loop, a few hundred bytes, against the batch's 256 KiB.
func TestUniformQueriesReadAllocs(t *testing.T) {
	const batch = 1 << 16
	u := &UniformQueries{N: 1 << 40, Lo: 0, Hi: 1, Seed: 1}
	dst := make([]float32, batch)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		if err := u.Read32(dst, 0); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	perRead := (after.TotalAlloc - before.TotalAlloc) / 100
	allocs := testing.AllocsPerRun(20, func() { u.Read32(dst, 0) })
	t.Logf("%.0f allocations, %d bytes per read of %d queries", allocs, perRead, batch)
	if perRead > 1024 || allocs > 16 {
		t.Errorf("a read allocates %.0f objects, %d bytes: want at most 16 and 1024", allocs, perRead)
	}
}

// TestUniformQueriesSkip checks the queries the op makes itself (Skip,
// then Fill) bit for bit against math/rand/v2's stream: batches of odd sizes,
// each made in chunks of odd sizes in a shuffled order, float32 and
// float64, a read in between continuing the same stream.
func TestUniformQueriesSkip(t *testing.T) {
	const n = 2*(1<<18) + 4321
	batches := []int{1 << 18, 3, 2049, 1<<16 + 5, 1}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range uniformCases {
		want64, want32 := refUniform(c.seed, c.lo, c.hi, n)
		u32 := &UniformQueries{N: n, Lo: c.lo, Hi: c.hi, Seed: c.seed}
		u64 := &UniformQueries{N: n, Lo: c.lo, Hi: c.hi, Seed: c.seed}
		got32, got64 := make([]float32, n), make([]float64, n)
		for off, k := 0, 0; off < n; k++ {
			b := min(batches[k%len(batches)], n-off)
			if k%3 == 2 { // a read between the skips
				u32.Read32(got32[off:off+b], off)
				u64.Read64(got64[off:off+b], off)
				off += b
				continue
			}
			u32.Skip(b)
			u64.Skip(b)
			var chunks [][2]int
			for lo := 0; lo < b; {
				hi := min(b, lo+1+rng.IntN(3000))
				chunks = append(chunks, [2]int{lo, hi})
				lo = hi
			}
			rng.Shuffle(len(chunks), func(i, j int) { chunks[i], chunks[j] = chunks[j], chunks[i] })
			for _, ch := range chunks {
				u32.Fill(got32[off:off+b], ch[0], ch[1])
				u64.Fill(got64[off:off+b], ch[0], ch[1])
			}
			off += b
		}
		if i := firstDiff(got32, want32); i >= 0 {
			t.Errorf("seed %d, [%g, %g): float32 query %d differs from math/rand/v2's", c.seed, c.lo, c.hi, i)
		}
		if i := firstDiff(got64, want64); i >= 0 {
			t.Errorf("seed %d, [%g, %g): float64 query %d differs from math/rand/v2's", c.seed, c.lo, c.hi, i)
		}
	}
}
