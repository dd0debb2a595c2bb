package wavelet

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tapeloop/tapeloop/graphs/engine"
	"github.com/tapeloop/tapeloop/graphs/internal/graphstest"
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
		p, err := Compile(cfg, v, n, graphstest.CPU(t, 0, ""))
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
		p, err := Compile(cfg, v, n, graphstest.CPU(t, 0, ""))
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
	p, err := Compile(s, v, n, graphstest.CPU(t, 4, ""))
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
	rng := rand.New(rand.NewPCG(5, 6))
	v := make([]float32, n[0]*n[1]*n[2])
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
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
