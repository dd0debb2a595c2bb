package wavelet

import (
	"fmt"
	"math"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

// benchSweep is a sweep of mixed kernels (ξ = 1, 2, 4 over nt θ and np
// φ) on a 96×80×64 volume.
func benchSweep(nt, np int) (v []float32, n [3]int, th, ph, xi []float64) {
	n = [3]int{96, 80, 64}
	rng := rand.New(rand.NewPCG(1, 2))
	v = make([]float32, n[0]*n[1]*n[2])
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	for i := range nt {
		th = append(th, float64(i)*math.Pi/float64(nt))
	}
	for i := range np {
		ph = append(ph, float64(i)*math.Pi/float64(np))
	}
	return v, n, th, ph, []float64{1, 2, 4}
}

// BenchmarkProgramSweep times, interleaved, one call of a fresh Program
// over the whole sweep and one call per combination (θ, φ, ξ innermost,
// as a NumPy loop makes them) of another, and reports both and their
// ratio (per_call/batched), and the ratio of the process's CPU time in
// each (per_call/batched-cpu, getrusage: what other processes take from
// the cores is left out): the two should cost about the same. Sweeps of
// 72 and 288 combinations: what a call of one combination pays once (the
// object growing for wider kernels) weighs less in a longer sweep.
func BenchmarkProgramSweep(b *testing.B) {
	for _, size := range [][2]int{{6, 4}, {12, 8}} {
		v, n, th, ph, xi := benchSweep(size[0], size[1])
		b.Run(fmt.Sprint(len(th)*len(ph)*len(xi)), func(b *testing.B) { benchProgramSweep(b, v, n, th, ph, xi) })
	}
}

func benchProgramSweep(b *testing.B, v []float32, n [3]int, th, ph, xi []float64) {
	dst := make([]float64, 7*len(th)*len(ph)*len(xi))
	one := make([]float64, 7)
	var batched, perCall time.Duration
	var batchedCPU, perCallCPU float64
	for b.Loop() {
		p, err := Compile(DefaultConfig(), v, n, nil)
		if err != nil {
			b.Fatal(err)
		}
		t0, c0 := time.Now(), cpuSeconds()
		if err := p.Run(th, ph, xi, dst); err != nil {
			b.Fatal(err)
		}
		batched += time.Since(t0)
		batchedCPU += cpuSeconds() - c0
		p.Close()
		if p, err = Compile(DefaultConfig(), v, n, nil); err != nil {
			b.Fatal(err)
		}
		t0, c0 = time.Now(), cpuSeconds()
		for _, t := range th {
			for _, f := range ph {
				for _, x := range xi {
					if err := p.Run([]float64{t}, []float64{f}, []float64{x}, one); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		perCall += time.Since(t0)
		perCallCPU += cpuSeconds() - c0
		p.Close()
	}
	b.ReportMetric(batched.Seconds()*1e3/float64(b.N), "batched-ms/op")
	b.ReportMetric(perCall.Seconds()*1e3/float64(b.N), "per_call-ms/op")
	b.ReportMetric(perCall.Seconds()/batched.Seconds(), "per_call/batched")
	b.ReportMetric(perCallCPU/batchedCPU, "per_call/batched-cpu")
}

// cpuSeconds is the CPU time this process has used.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
