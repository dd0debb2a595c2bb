package wavelet

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

// TestProgramsClosedAreFreed: programs compiled, run and closed one after
// another, as a Python loop makes and closes objects, leave nothing
// behind: the heap after the last is what it was after the first few.
func TestProgramsClosedAreFreed(t *testing.T) {
	n := [3]int{17, 16, 15}
	v := normalVolume(rand.New(rand.NewPCG(31, 32)), n)
	heap := func() uint64 {
		var m runtime.MemStats
		for range 3 { // a finalizer frees its object a cycle later
			runtime.GC()
		}
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	out := make([]float64, 7*2*2)
	var base uint64
	for i := range 150 {
		p, err := Compile(DefaultConfig(), v, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Run([]float64{0, 1}, []float64{0.5}, []float64{1, 2}, out); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if i == 10 {
			base = heap()
		}
	}
	if grew := int64(heap()) - int64(base); grew > 8<<20 {
		t.Errorf("the heap grew by %.1f MiB over 139 programs compiled, run and closed", float64(grew)/(1<<20))
	}
}

// normalVolume is a volume of shape n of standard normals from rng.
func normalVolume(rng *rand.Rand, n [3]int) []float32 {
	v := make([]float32, n[0]*n[1]*n[2])
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}
