package wavelet

import (
	"errors"
	"fmt"
	"go/token"
	"strings"

	"github.com/tapeloop/tapeloop/graphs/option"
	"github.com/tapeloop/tapeloop/internal/formula"
	"github.com/tapeloop/tapeloop/ops"
)

// Config is a wavelet sweep's options: what it computes, not what it
// computes on (the volume) nor over which angles and stretches (the
// sweep, given with each run). DefaultConfig holds the defaults.
type Config struct {
	// A is the kernel's scale a, in voxels: the hat's width across its
	// stretched axis and along it before the stretch ξ. Positive.
	A float64 `flag:"a" json:"a"`
	// Boundary is how the convolution extends the volume past its edges,
	// as scipy.ndimage.convolve: "reflect" (half-sample symmetric, also
	// when empty) or "wrap" (periodic).
	Boundary string `flag:"boundary" json:"boundary"`
	// Kernel is your own kernel, a formula over the offset x, y, z from
	// its centre, the offset u, v, w in the kernel's frame, q and theta,
	// phi, xi, a, sampled over its own reach (where it falls below 10⁻⁷
	// of its largest value; it must within the volume) or over Reach;
	// "": the hat, (3 - q)*exp(-q/2) with q = (v/a)^2 + (u/(a*xi))^2 +
	// (w/a)^2.
	Kernel string `flag:"kernel" json:"kernel"`
	// Reach, when positive, is the half-width in voxels, along every
	// axis, of the box Kernel is sampled over, in place of its own reach:
	// the volume's half size, say, for a kernel made on a grid the size of
	// the volume.
	Reach int `flag:"reach" json:"reach"`
	// Stats are your own statistics of each response g, each
	// "name=formula" reducing to one number, e.g. "l1=sum(abs(g))": extra
	// columns after the built-in ones (a statistic named like a built-in
	// column fills that column instead).
	Stats []string `flag:"stat" json:"stats"`
	// Params are the values of the names the formulas use as parameters
	// (--param s=2.5 on the command line); each must be used.
	Params map[string]float64 `flag:"param" json:"params"`
	// FailOnNonFinite makes a NaN or infinite value of a formula (Kernel or
	// Stats), or a combination without a kernel (ξ = 0), an error rather
	// than a warning.
	FailOnNonFinite bool `flag:"fail-on-nonfinite" json:"fail_on_nonfinite"`
}

// maxReach bounds Reach, far past any volume that fits in memory.
const maxReach = 1 << 20

// DefaultConfig is the hat of scale 1 with reflecting boundaries.
func DefaultConfig() Config { return Config{A: 1, Boundary: "reflect"} }

// Validate checks the options: the boundary's name, the scale, and the
// formulas with their parameters.
func (c Config) Validate() error {
	_, err := c.Parse()
	return err
}

// ParseBoundary reads a boundary's name as Config.Boundary holds it
// ("": reflect); its error names --boundary.
func ParseBoundary(name string) (ops.Boundary, error) {
	b, err := ops.ParseBoundary(option.OrDefault(name, "reflect"))
	if err != nil {
		return b, fmt.Errorf("--boundary: %w", err)
	}
	return b, nil
}

// Parsed is a Config checked, its boundary and formulas parsed.
type Parsed struct {
	Boundary  ops.Boundary
	kernel    *formula.Formula
	reach     int
	stats     []*formula.Formula
	statNames []string
}

// Parse checks c as Validate and returns it parsed.
func (c Config) Parse() (*Parsed, error) {
	p := &Parsed{}
	var err error
	if p.Boundary, err = ParseBoundary(c.Boundary); err != nil {
		return nil, err
	}
	if err := ops.CheckHat(c.A, 0, 0, 1); err != nil {
		return nil, fmt.Errorf("--a %g: %w", c.A, err)
	}
	fl := []option.Formula{{Flag: "--kernel", Src: c.Kernel, Vars: ops.KernelVars, Pointwise: true}}
	// A statistic may take the name of a built-in column (energy=sum(g^2)):
	// its value then fills that column. Not a parameter's column, nor
	// twice the same name.
	seen := map[string]bool{"theta": true, "phi": true, "xi": true}
	for _, st := range c.Stats {
		name, src, ok := strings.Cut(st, "=")
		name = strings.TrimSpace(name)
		switch {
		case !ok || strings.TrimSpace(src) == "":
			return nil, fmt.Errorf("--stat %q: want name=formula, e.g. l1=sum(abs(g))", st)
		case !token.IsIdentifier(name):
			return nil, fmt.Errorf("--stat %q: the name %q is not a name (letters, digits, _)", st, name)
		case seen[name]:
			return nil, fmt.Errorf("--stat %q: there is already a column %s", st, name)
		}
		seen[name] = true
		p.statNames = append(p.statNames, name)
		fl = append(fl, option.Formula{Flag: "--stat " + name, Src: src, Vars: ops.StatVars, Reduce: true})
	}
	fs, err := option.ParseFormulas(c.Params, fl...)
	if err != nil {
		return nil, err
	}
	p.kernel, p.stats = fs[0], fs[1:]
	switch {
	case c.Reach < 0:
		return nil, fmt.Errorf("--reach %d: want a half-width in voxels, at least 1", c.Reach)
	case c.Reach > 0 && p.kernel == nil:
		return nil, fmt.Errorf("--reach: it is for --kernel (the built-in hat's box is its own)")
	case c.Reach > maxReach:
		return nil, fmt.Errorf("--reach %d: at most %d voxels", c.Reach, maxReach)
	}
	p.reach = c.Reach
	return p, nil
}

// Formulas compiles the kernel and statistics for responses over a volume
// of n (nil: neither given); they run on the CPU only, so gpu refuses
// them.
func (p *Parsed) Formulas(n [3]int, gpu bool) (*ops.WaveletFormulas, error) {
	if p.kernel == nil && len(p.stats) == 0 {
		return nil, nil
	}
	if gpu {
		return nil, errors.New("--kernel and --stat: formulas in wavelet run on the CPU only; use --device cpu")
	}
	f := &ops.WaveletFormulas{}
	if p.kernel != nil {
		var err error
		if f.Kernel, err = ops.NewKernelFormula(p.kernel, p.reach, n); err != nil {
			return nil, err
		}
	}
	for i, st := range p.stats {
		ws, err := ops.NewWaveletStat(p.statNames[i], st, n[0]*n[1]*n[2])
		if err != nil {
			return nil, err
		}
		f.Stats = append(f.Stats, ws)
	}
	return f, nil
}

// Canonical is the formulas in canonical form, what their results depend
// on: the kernel's (if given), then each statistic's as name=formula.
func (p *Parsed) Canonical() []string {
	var out []string
	if p.kernel != nil {
		out = append(out, p.kernel.Canonical())
		if p.reach > 0 {
			out = append(out, fmt.Sprintf("reach=%d", p.reach))
		}
	}
	for i, st := range p.stats {
		out = append(out, p.statNames[i]+"="+st.Canonical())
	}
	return out
}
