package wavelet

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/workloadtest"
)

// TestCompileRefusesTheConfig: Compile checks the Config as Validate
// does, and its errors name the options as the command line's flags.
func TestCompileRefusesTheConfig(t *testing.T) {
	n := [3]int{6, 5, 4}
	v := make([]float32, 6*5*4)
	for _, c := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"a zero", func(c *Config) { c.A = 0 }, "--a 0: wavelet: scale a = 0 must be positive"},
		{"a NaN", func(c *Config) { c.A = math.NaN() }, "--a NaN: "},
		{"boundary", func(c *Config) { c.Boundary = "mirror" }, `--boundary: unknown boundary "mirror"`},
		{"stat", func(c *Config) { c.Stats = []string{"l1=sum(abs(h))"} }, `--stat l1 "sum(abs(h))"`},
		{"unused parameter", func(c *Config) { c.Params = map[string]float64{"s": 2} }, "--param s: not used by any formula"},
	} {
		cfg := DefaultConfig()
		c.edit(&cfg)
		verr := cfg.Validate()
		p, err := Compile(cfg, v, n, workloadtest.CPU(t, 0, ""))
		if err == nil {
			p.Close()
			t.Errorf("%s: compiled", c.name)
			continue
		}
		if !strings.HasPrefix(err.Error(), c.want) || verr == nil || verr.Error() != err.Error() {
			t.Errorf("%s: %q (Validate: %v), want it to begin %q", c.name, err, verr, c.want)
		}
	}
}

// TestCompileFailOnNonFinite: with FailOnNonFinite a statistic that is
// NaN fails the call, naming the option; without, it is the value.
func TestCompileFailOnNonFinite(t *testing.T) {
	n := [3]int{6, 5, 4}
	v := make([]float32, 6*5*4)
	for i := range v {
		v[i] = float32(i%3) - 1
	}
	cfg := DefaultConfig()
	cfg.Stats = []string{"s=log(min(g)-1e9)"}
	for _, fail := range []bool{false, true} {
		cfg.FailOnNonFinite = fail
		p, err := Compile(cfg, v, n, workloadtest.CPU(t, 0, ""))
		if err != nil {
			t.Fatal(err)
		}
		dst := make([]float64, 2*len(p.Columns()))
		err = p.Run([]float64{0}, []float64{0}, []float64{1, 2}, dst)
		p.Close()
		switch {
		case fail && (err == nil || !strings.Contains(err.Error(), "--kernel or --stat gave ") ||
			!strings.Contains(err.Error(), "--fail-on-nonfinite is set")):
			t.Errorf("fail_on_nonfinite: %v, want the non-finite values refused", err)
		case !fail && err != nil:
			t.Errorf("without FailOnNonFinite: %v", err)
		case !fail && !math.IsNaN(dst[len(dst)-1]):
			t.Errorf("without FailOnNonFinite: s = %v, want NaN", dst[len(dst)-1])
		}
	}
}

// TestWaveletInterruptEndsOnlyTheCall: Interrupt stops a long sweep (its
// first call recompiles the program on the way), and the next call runs.
func TestWaveletInterruptEndsOnlyTheCall(t *testing.T) {
	s := DefaultConfig()
	s.Kernel = "(3 - q)*exp(-q/2)" // every combination computed
	n := [3]int{40, 36, 32}
	v := make([]float32, n[0]*n[1]*n[2])
	for i := range v {
		v[i] = float32(i%7) - 3
	}
	p, err := Compile(s, v, n, workloadtest.CPU(t, 4, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	theta, phi, xi := make([]float64, 40), []float64{0, 0.5, 1}, []float64{1.5, 2}
	for i := range theta {
		theta[i] = float64(i) * 0.05
	}
	dst := make([]float64, len(theta)*len(phi)*len(xi)*len(p.Columns()))
	time.AfterFunc(30*time.Millisecond, p.Interrupt)
	if err := p.Run(theta, phi, xi, dst); !errors.Is(err, engine.ErrInterrupted) {
		t.Fatalf("interrupted call: %v, want ErrInterrupted", err)
	}
	if err := p.Run(theta[:2], phi, xi, dst[:2*len(phi)*len(xi)*len(p.Columns())]); err != nil {
		t.Fatalf("the call after an interrupted one: %v", err)
	}
	if r := p.Report(); r.Calls != 1 {
		t.Errorf("%d calls counted, want 1", r.Calls)
	}
}

// TestProgramPerCall: calls of one combination each give what one call
// of them all gives (to rounding: they may run on other paddings), and a
// program asked once for a wide kernel does not keep its padding: after
// shrinkAfter calls of narrow kernels its source is sized for them.
func TestProgramPerCall(t *testing.T) {
	n := [3]int{23, 18, 15}
	v := normalVolume(rand.New(rand.NewPCG(5, 6)), n)
	th, ph, xi := []float64{0, 0.7, 2.1}, []float64{0.4, 1.9}, []float64{1, 1.5, 3}
	p, err := Compile(DefaultConfig(), v, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	all := make([]float64, 7*len(th)*len(ph)*len(xi))
	if err := p.Run(th, ph, xi, all); err != nil {
		t.Fatal(err)
	}
	q, err := Compile(DefaultConfig(), v, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	one := make([]float64, 7)
	r := 0
	for _, a := range th {
		for _, b := range ph {
			for _, c := range xi {
				if err := q.Run([]float64{a}, []float64{b}, []float64{c}, one); err != nil {
					t.Fatal(err)
				}
				for j := 3; j < 7; j++ {
					if want := all[7*r+j]; !(math.Abs(one[j]-want) <= 1e-6*math.Abs(want)) {
						t.Errorf("θ = %v, φ = %v, ξ = %v: column %d is %v alone, %v in the sweep", a, b, c, j, one[j], want)
					}
				}
				r++
			}
		}
	}
	// A wide kernel, then narrow ones.
	if err := q.Run([]float64{0.3}, []float64{0.2}, []float64{12}, one); err != nil {
		t.Fatal(err)
	}
	wide := q.src.MaxPad
	for i := range shrinkAfter {
		if err := q.Run([]float64{float64(i) / 10}, []float64{0.5}, []float64{1.2}, one); err != nil {
			t.Fatal(err)
		}
	}
	if got := q.src.MaxPad; q.size(got) > q.size(wide)/2 {
		t.Errorf("after %d narrow calls the source holds padding %v, as for the wide kernel (%v)", shrinkAfter, got, wide)
	}
}

// TestProgramChooseRentsThenBuys: a call of one combination runs on the
// smallest transform held that covers its padding while the extra work
// the calls of that padding paid stays within what making a transform of
// its own size costs (the measured ratio), then makes its own; a held
// transform whose statistics of the combination are known serves it at
// any rent; nothing wider than reuseRatio times its own serves it.
func TestProgramChooseRentsThenBuys(t *testing.T) {
	n := [3]int{23, 18, 15}
	v := normalVolume(rand.New(rand.NewPCG(7, 8)), n)
	p, err := Compile(DefaultConfig(), v, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	first := Combo{0.4, 1.1, 2.5}
	if err := p.Run([]float64{first.Theta}, []float64{first.Phi}, []float64{first.Xi}, make([]float64, 7)); err != nil {
		t.Fatal(err)
	}
	held := p.cache.Paddings(n)
	if len(held) != 1 {
		t.Fatalf("the cache holds %v after one call, want one transform", held)
	}
	// q: a padding the held transform covers at less than twice its size.
	var q [3]int
	for k := 0; k < 3 && q == [3]int{}; k++ {
		for j := 1; j <= held[0][k]; j++ {
			c := held[0]
			c[k] -= j
			if c = p.full(c); p.size(c) < p.size(held[0]) {
				if p.size(held[0]) <= reuseRatio*p.size(c) {
					q = c
				}
				break
			}
		}
	}
	if q == [3]int{} {
		t.Fatalf("no padding narrower than %v within reuseRatio", held[0])
	}
	own, extra := p.size(q), p.size(held[0])-p.size(q)
	// Making a transform costs two and a half calls' extra work: two calls
	// rent, the third makes its own.
	p.costs = costs{work: 1e-9, build: 1e-9 * 2.5 * extra / own}
	for i, want := range [][3]int{held[0], held[0], q, held[0], held[0], q} {
		c := Combo{float64(i) / 7, 0.3, 3.5} // a kernel of its own each
		if got := p.choose(c, q); got != want {
			t.Errorf("call %d of padding %v (held: %v, extra %g of %g, ratio %g) runs on %v, want %v", i, q, held[0], extra, own, p.costs.ratio(), got, want)
		}
	}
	// Known statistics: no rent at all.
	p.rent[q] = p.costs.ratio() * own
	if got := p.choose(first, q); got != held[0] {
		t.Errorf("the first combination again runs on %v, want %v, where its statistics are known", got, held[0])
	}
	if got := p.choose(Combo{2, 0.3, 3.5}, q); got != q {
		t.Errorf("a call whose padding paid all its rent runs on %v, want its own %v", got, q)
	}
	// A narrow kernel: the held transform is beyond reuseRatio of its own.
	narrow := p.full([3]int{1, 1, 1})
	if p.size(held[0]) <= reuseRatio*p.size(narrow) {
		t.Fatalf("held transform %v not wide enough for the test", held[0])
	}
	p.costs = costs{work: 1e-9, build: 1}
	if got := p.choose(Combo{0, 0, 1}, narrow); got == held[0] || got[0] < narrow[0] || got[1] < narrow[1] || got[2] < narrow[2] || p.size(got) > reuseRatio*p.size(narrow) {
		t.Errorf("a narrow kernel (padding %v) runs on %v", narrow, got)
	}
}

// TestProgramPerCallAnyCosts: whatever the costs make the calls of one
// combination choose (their own transforms, or wider ones held), their
// statistics agree with one call of them all to rounding.
func TestProgramPerCallAnyCosts(t *testing.T) {
	n := [3]int{21, 17, 19}
	v := normalVolume(rand.New(rand.NewPCG(9, 10)), n)
	th, ph, xi := []float64{0.2, 1.3, 2.6}, []float64{0.1, 2.2}, []float64{1, 1.7, 2.9}
	all := make([]float64, 7*len(th)*len(ph)*len(xi))
	p, err := Compile(DefaultConfig(), v, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Run(th, ph, xi, all); err != nil {
		t.Fatal(err)
	}
	transforms := map[float64]int{}
	for _, ratio := range []float64{1e-3, 1, 1e6} {
		q, err := Compile(DefaultConfig(), v, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		one := make([]float64, 7)
		built := map[[3]int]bool{}
		r := 0
		for _, a := range th {
			for _, b := range ph {
				for _, c := range xi {
					q.costs = costs{work: 1e-9, build: 1e-9 * ratio}
					if err := q.Run([]float64{a}, []float64{b}, []float64{c}, one); err != nil {
						t.Fatal(err)
					}
					for _, d := range q.cache.Paddings(n) {
						built[d] = true
					}
					for j := 3; j < 7; j++ {
						if want := all[7*r+j]; !(math.Abs(one[j]-want) <= 1e-6*math.Abs(want)) {
							t.Errorf("ratio %g: θ = %v, φ = %v, ξ = %v: column %d is %v alone, %v in the sweep", ratio, a, b, c, j, one[j], want)
						}
					}
					r++
				}
			}
		}
		transforms[ratio] = len(built)
		q.Close()
	}
	if transforms[1e-3] <= transforms[1e6] {
		t.Errorf("transforms made: %v by ratio; cheap ones should make more than dear ones", transforms)
	}
}
