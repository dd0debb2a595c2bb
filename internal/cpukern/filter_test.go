package cpukern

import (
	"math"
	"math/rand/v2"
	"testing"
)

// refExt is the boundary's index, written out: reflect by walking the
// mirrored line one step at a time.
func refExt(i, n int, mode FilterMode) int {
	if mode == FilterNearest {
		return min(max(i, 0), n-1)
	}
	for i < 0 || i >= n {
		if i < 0 {
			i = -1 - i
		} else {
			i = 2*n - 1 - i
		}
	}
	return i
}

// TestFilterPassesMatchDefinition: both passes on every instruction set
// the CPU has, against the correlation in float64, for kernels shorter
// than, as long as and longer than the lines (no interior: every pixel on
// the edge path), odd and even tap counts, both boundaries.
func TestFilterPassesMatchDefinition(t *testing.T) {
	for isa := isaBase; isa <= isaAVX512; isa++ {
		name := levelName(isa)
		if limitISA(isa) < isa {
			limitISA(isaAVX512)
			t.Logf("%s: not on this CPU", name)
			continue
		}
		t.Run(name, testFilterPasses)
		limitISA(isaAVX512)
	}
}

func testFilterPasses(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const p, rows, cols = 2, 13, 41
	src := make([]float32, p*rows*cols)
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	for _, nw := range []int{1, 2, 3, 8, 13, 41, 90} {
		w := make([]float32, nw)
		for i := range w {
			w[i] = float32(rng.NormFloat64())
		}
		for _, mode := range []FilterMode{FilterReflect, FilterNearest} {
			h := nw / 2
			got := make([]float32, len(src))
			FilterRows(got, src, cols, 1, p*rows, w, mode) // line 0 left alone
			for l := range p * rows {
				for c := range cols {
					var want float64
					for k := range nw {
						want += float64(w[k]) * float64(src[l*cols+refExt(c+k-h, cols, mode)])
					}
					if l == 0 {
						want = 0
					}
					if g := float64(got[l*cols+c]); !(math.Abs(g-want) <= 1e-5*(1+math.Abs(want))) {
						t.Fatalf("rows, %d taps, mode %d: line %d col %d: %v, want %v", nw, mode, l, c, g, want)
					}
				}
			}
			got = make([]float32, len(src))
			FilterCols(got, src, rows, cols, 0, p*rows-1, w, mode) // the last row left alone
			for g := range p * rows {
				img, r := g/rows, g%rows
				for c := range cols {
					var want float64
					for k := range nw {
						want += float64(w[k]) * float64(src[(img*rows+refExt(r+k-h, rows, mode))*cols+c])
					}
					if g == p*rows-1 {
						want = 0
					}
					if v := float64(got[g*cols+c]); !(math.Abs(v-want) <= 1e-5*(1+math.Abs(want))) {
						t.Fatalf("cols, %d taps, mode %d: row %d col %d: %v, want %v", nw, mode, g, c, v, want)
					}
				}
			}
		}
	}
}
