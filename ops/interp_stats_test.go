package ops

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"gorgonia.org/tensor"
)

// refStats is BatchStats' figures written out: the first n values of y
// in runs of 2048 (the op's chunk), each run summed in float64 as eight
// partial sums, element i of the run into sum i mod 8, added as
// ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)); the runs' sums added
// in order; and the maximum.
func refStats[T float32 | float64](y []T, n int) (sum, mx float64) {
	mx = math.Inf(-1)
	for lo := 0; lo < n; lo += 2048 {
		var s [8]float64
		for i := lo; i < min(lo+2048, n); i++ {
			s[(i-lo)%8] += float64(y[i])
			mx = math.Max(mx, float64(y[i]))
		}
		sum += ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
	}
	return sum, mx
}

// TestBatchStatsFused checks BatchStats fused into Interp1D against the
// figures of the op's output added up in a plain loop, bit for bit: sumsq
// and sum on per-cell tables (fused) and direct (BatchStats reads the
// output itself), float32 and float64, batches of one query, of one chunk
// less one, and of several chunks and a part, with every query or fewer
// valid, on 1, 2 and 3 threads. A second BatchStats run without a run of
// the op finds no figures to take and reads the output, to the same
// result; TakeStats gives a run's figures once, and only for their count.
func TestBatchStatsFused(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	rng := rand.New(rand.NewPCG(21, 22))
	const m, g, a, dx = 7, 37, -0.3, 0.05
	f := make([]float64, m*g)
	for i := range f {
		f[i] = 4*rng.Float64() - 2
	}
	for _, batch := range []int{1, grain - 1, 5*grain + 3} {
		x64 := make([]float64, batch)
		for i := range x64 { // the whole grid and beyond both ends
			x64[i] = a - dx + (g+2)*dx*rng.Float64()
		}
		x32 := make([]float32, batch)
		for i, v := range x64 {
			x32[i] = float32(v)
		}
		for _, r := range []Reduce{ReduceSumSq, ReduceSum} {
			for _, meth := range []Method{MethodAuto, MethodDirect} {
				for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
					tab, err := NewInterpTable(f, m, g, a, dx, r, meth, dt)
					if err != nil {
						t.Fatal(err)
					}
					in := tensor.New(tensor.WithShape(batch), tensor.WithBacking(x64))
					if dt == tensor.Float32 {
						in = tensor.New(tensor.WithShape(batch), tensor.WithBacking(x32))
					}
					for _, valid := range []int{batch, max(batch-grain/2, 1), 1} {
						for _, procs := range []int{1, 2, 3} {
							runtime.GOMAXPROCS(procs)
							op := NewInterp1D(tab, r, meth, dt, batch)
							bs := NewBatchStats(batch, 1)
							bs.Fuse(op)
							op.SetValidRows(valid)
							bs.SetValidRows(valid)
							y, err := op.Do(in)
							if err != nil {
								t.Fatal(err)
							}
							var wsum, wmax float64
							switch d := y.Data().(type) {
							case []float32:
								wsum, wmax = refStats(d, valid)
							case []float64:
								wsum, wmax = refStats(d, valid)
							}
							kept := op.stats.ok
							if want := meth == MethodAuto; kept != want {
								t.Errorf("%v %v %v: the op kept figures: %v, want %v", r, meth, dt, kept, want)
							}
							for run := range 2 { // the fused figures, then the output read again
								s, err := bs.Do(y)
								if err != nil {
									t.Fatal(err)
								}
								got := s.Data().([]float64)
								if math.Float64bits(got[0]) != math.Float64bits(wsum) || got[1] != wmax {
									t.Fatalf("%v %v %v, batch %d, %d valid, GOMAXPROCS %d, run %d: sum %v max %v, want %v and %v",
										r, meth, dt, batch, valid, procs, run, got[0], got[1], wsum, wmax)
								}
							}
							if kept {
								op.Do(in)
								if _, _, ok := op.TakeStats(valid + 1); ok {
									t.Errorf("TakeStats gave the figures of %d values for %d", valid, valid+1)
								}
								if _, _, ok := op.TakeStats(valid); ok {
									t.Errorf("TakeStats gave figures after a call that took none for their count")
								}
							}
						}
					}
				}
			}
		}
	}
}
