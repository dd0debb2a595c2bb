package wavelet

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/token"
	"slices"
	"strconv"
	"strings"

	"github.com/tapeloop/tapeloop/graphs/option"
	"github.com/tapeloop/tapeloop/internal/formula"
	"github.com/tapeloop/tapeloop/ops"
)

// Config is a wavelet sweep's options: what it computes, not what it
// computes on (the volume) nor over which angles and stretches (the
// sweep, given with each run). DefaultConfig holds the defaults. A field
// tagged fingerprint:"-" does not change the results (it only makes a
// warning an error), so shards and checkpoints need not record it.
type Config struct {
	// A is the kernel's scale a, in voxels: the hat's width across its
	// stretched axis and along it before the stretch ξ. Positive.
	A float64 `flag:"a" json:"a" help:"kernel scale a (voxels)"`
	// Boundary is how the convolution extends the volume past its edges,
	// as scipy.ndimage.convolve: "reflect" (half-sample symmetric, also
	// when empty) or "wrap" (periodic).
	Boundary string `flag:"boundary" json:"boundary" help:"reflect (half-sample symmetric) or wrap (periodic), as scipy.ndimage.convolve"`
	// Kernel is your own kernel, a formula over the offset x, y, z from
	// its centre, the offset u, v, w in the kernel's frame, q and theta,
	// phi, xi, a, sampled over its own reach (where it falls below 10⁻⁷
	// of its largest value; it must be within the volume) or over Reach;
	// "": the hat, (3 - q)*exp(-q/2) with q = (v/a)^2 + (u/(a*xi))^2 +
	// (w/a)^2.
	Kernel string `flag:"kernel" json:"kernel" help:"your own kernel over the offset x, y, z, the rotated offset u, v, w and theta, phi, xi, a, sampled over its own reach, where it falls below 1e-7 of its largest value, which must be within the volume (default: the hat, (3 - q)*exp(-q/2), q = (v/a)^2 + (u/(a*xi))^2 + (w/a)^2; see docs/formulas.md)"`
	// Reach is the box Kernel is sampled over in place of its own reach:
	// a number R of voxels from its centre along every axis, or "volume",
	// a grid the size of the volume centred as scipy.ndimage.convolve
	// centres a kernel (offsets −⌊n/2⌋ … n − 1 − ⌊n/2⌋ along an axis of n
	// voxels), as a NumPy program that makes its kernel with meshgrid over
	// the volume's shape; "" (or 0): the kernel's own reach.
	Reach KernelReach `flag:"reach" json:"reach" help:"sample --kernel over R voxels from its centre along every axis instead of its own reach, or over the volume's grid with R = volume (as a kernel made with meshgrid over the volume's shape, centred as scipy.ndimage centres it)" arg:"R"`
	// Indexing is which of the volume's axes the kernel's x and y run
	// along, as NumPy's meshgrid names it: "ij" (also when empty) x along
	// the first axis, y the second; "xy" (meshgrid's default, as in
	// np.meshgrid(x, y, z)) x along the second, y the first. z is the
	// third either way. It turns the built-in hat as well as a Kernel.
	Indexing string `flag:"indexing" json:"indexing" help:"the axes the kernel's x and y run along, as numpy.meshgrid's indexing: ij (x along the volume's first axis) or xy (x along its second, y its first: np.meshgrid(x, y, z)'s default)" default:"ij"`
	// Stats are your own statistics of each response g, each
	// "name=formula" reducing to one number, e.g. "l1=sum(abs(g))": extra
	// columns after the built-in ones, each named once and not like a
	// column of the sweep's (theta, phi, xi) or a built-in one
	// (BuiltinColumns).
	Stats []string `flag:"stat" json:"stats" help:"your own statistic of each response g, name=formula reducing to one number, e.g. l1=sum(abs(g)): a CSV column (repeat for each)" arg:"name=formula"`
	// Params are the values of the names the formulas use as parameters
	// (--param s=2.5 on the command line); each must be used.
	Params map[string]float64 `flag:"param" json:"params"`
	// FailOnNonFinite makes a NaN or infinite value of a formula (Kernel or
	// Stats), or a combination without a kernel (ξ = 0), an error rather
	// than a warning.
	FailOnNonFinite bool `flag:"fail-on-nonfinite" json:"fail_on_nonfinite" fingerprint:"-"`
	// Columns are the built-in statistics to write, some of energy, std,
	// max and wavelet_energy (BuiltinColumns), in that order whatever the
	// order given; nil: all four. theta, phi, xi and the user's Stats are
	// always written (their names are allowed here). What only the
	// columns left out need is not computed (ops.WaveletPasses).
	Columns []string `flag:"columns" json:"columns" help:"the built-in statistics to write, a comma-separated LIST of energy, std, max, wavelet_energy (default: all; theta, phi, xi and --stat columns are always written): what only the others need is not computed (with --boundary wrap, energy and std alone need no inverse transform); --verbose and --report say what runs" arg:"LIST"`
}

// BuiltinColumns are the built-in statistics' columns, in CSV order, after
// theta, phi and xi.
var BuiltinColumns = [4]string{"energy", "std", "max", "wavelet_energy"}

// ColumnSet says which of BuiltinColumns a sweep writes.
type ColumnSet [4]bool

// AllColumns writes every built-in column.
var AllColumns = ColumnSet{true, true, true, true}

// builtinColumn is the index of name in BuiltinColumns, or −1.
func builtinColumn(name string) int {
	for i, c := range BuiltinColumns {
		if c == name {
			return i
		}
	}
	return -1
}

// ParseColumns reads Config.Columns: nil is AllColumns; otherwise each
// name (spaces around it ignored) must be a built-in column, named once,
// or theta, phi, xi or one of stats (the names of the user's statistics),
// which are always written; at least one name.
func ParseColumns(names, stats []string) (ColumnSet, error) {
	if names == nil {
		return AllColumns, nil
	}
	want := fmt.Sprintf("want some of %s (theta, phi, xi and --stat columns are always written)", strings.Join(BuiltinColumns[:], ", "))
	if len(names) == 0 {
		return ColumnSet{}, fmt.Errorf("--columns: empty list; %s", want)
	}
	var set ColumnSet
	seen := map[string]bool{}
	for _, raw := range names {
		name := strings.TrimSpace(raw)
		switch {
		case name == "":
			return ColumnSet{}, fmt.Errorf("--columns: an empty name in the list; %s", want)
		case seen[name]:
			return ColumnSet{}, fmt.Errorf("--columns: %s is named twice", name)
		}
		seen[name] = true
		if i := builtinColumn(name); i >= 0 {
			set[i] = true
			continue
		}
		if name == "theta" || name == "phi" || name == "xi" || slices.Contains(stats, name) {
			continue
		}
		return ColumnSet{}, fmt.Errorf("--columns: unknown column %q; %s", name, want)
	}
	return set, nil
}

// Names is the set's columns in CSV order.
func (c ColumnSet) Names() []string {
	var out []string
	for i, on := range c {
		if on {
			out = append(out, BuiltinColumns[i])
		}
	}
	return out
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
	Boundary ops.Boundary
	kernel   *formula.Formula
	reach    int // the box's half-width (0: the kernel's own reach)
	// reachVolume samples the kernel over the volume's grid.
	reachVolume bool
	xy          bool // Indexing "xy"
	stats       []*formula.Formula
	statNames   []string
	// Columns are the built-in columns written (Config.Columns).
	Columns ColumnSet
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
	// A statistic's name is its column's: not one of the sweep's (theta,
	// phi, xi) nor a built-in statistic's, whether or not Columns writes
	// it, and not another statistic's.
	taken := map[string]bool{"theta": true, "phi": true, "xi": true}
	for _, col := range BuiltinColumns {
		taken[col] = true
	}
	seen := map[string]bool{}
	for _, st := range c.Stats {
		name, src, ok := strings.Cut(st, "=")
		name = strings.TrimSpace(name)
		switch {
		case !ok || strings.TrimSpace(src) == "":
			return nil, fmt.Errorf("--stat %q: want name=formula, e.g. l1=sum(abs(g))", st)
		case !token.IsIdentifier(name):
			return nil, fmt.Errorf("--stat %q: the name %q is not a name (letters, digits, _)", st, name)
		case taken[name]:
			return nil, fmt.Errorf("--stat %q: %s is taken by a built-in column; give the statistic another name", st, name)
		case seen[name]:
			return nil, fmt.Errorf("--stat %q: %s is taken by another statistic; give each statistic its own name", st, name)
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
	if p.Columns, err = ParseColumns(c.Columns, p.statNames); err != nil {
		return nil, err
	}
	switch {
	case c.Indexing != "" && c.Indexing != "ij" && c.Indexing != "xy":
		return nil, fmt.Errorf("--indexing %q: want ij (x along the volume's first axis) or xy (x along its second, as np.meshgrid(x, y, z))", c.Indexing)
	}
	p.xy = c.Indexing == "xy"
	if p.reach, p.reachVolume, err = c.Reach.parse(); err != nil {
		return nil, err
	}
	if (p.reach > 0 || p.reachVolume) && p.kernel == nil {
		return nil, fmt.Errorf("--reach: it is for --kernel (the built-in hat's box is its own)")
	}
	return p, nil
}

// KernelReach is the box a kernel formula is sampled over: "" its own
// reach, a number R ≥ 1 of voxels from its centre along every axis, or
// "volume", a grid the size of the volume (Config.Reach). In JSON it is a
// number or a string.
type KernelReach string

// UnmarshalJSON accepts a number or a string.
func (r *KernelReach) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err == nil {
		*r = KernelReach(n.String())
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("reach: want a number of voxels or \"volume\"")
	}
	*r = KernelReach(s)
	return nil
}

// parse reads r: a half-width in voxels, at least 1 (0: r is "", the
// kernel's own reach) or the volume's grid.
func (r KernelReach) parse() (reach int, volume bool, err error) {
	s := strings.TrimSpace(string(r))
	switch s {
	case "":
		return 0, false, nil
	case "volume":
		return 0, true, nil
	}
	n, err := strconv.Atoi(s)
	switch {
	case err != nil:
		return 0, false, fmt.Errorf("--reach %q: want a half-width in voxels, or volume (a grid the size of the volume)", s)
	case n < 1:
		return 0, false, fmt.Errorf("--reach %d: want a half-width in voxels, at least 1 (leave --reach out to sample the kernel over its own reach)", n)
	case n > maxReach:
		return 0, false, fmt.Errorf("--reach %d: at most %d voxels", n, maxReach)
	}
	return n, false, nil
}

// Arrange returns the volume v of shape n as the sweep computes on it:
// with Indexing "xy" its first two axes swapped (the kernel's x then runs
// along the volume's first axis, as it does with "ij"; every statistic
// is the same over the swapped response), else v itself. A volume that
// is square across those axes is swapped in place.
func (p *Parsed) Arrange(v []float32, n [3]int) ([]float32, [3]int) {
	if !p.xy {
		return v, n
	}
	return SwapXY(v, n, n[0] == n[1])
}

// SwapXY swaps the first two axes of v of shape n (C order), in place
// when inPlace (n[0] = n[1]), and returns the result and its shape.
func SwapXY[T any](v []T, n [3]int, inPlace bool) ([]T, [3]int) {
	m := [3]int{n[1], n[0], n[2]}
	if inPlace && n[0] == n[1] {
		for i := range n[0] {
			for j := i + 1; j < n[1]; j++ {
				a, b := v[(i*n[1]+j)*n[2]:][:n[2]], v[(j*n[1]+i)*n[2]:][:n[2]]
				for k := range a {
					a[k], b[k] = b[k], a[k]
				}
			}
		}
		return v, m
	}
	out := make([]T, len(v))
	for i := range n[0] {
		for j := range n[1] {
			copy(out[(j*n[0]+i)*n[2]:][:n[2]], v[(i*n[1]+j)*n[2]:][:n[2]])
		}
	}
	return out, m
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
		f.Kernel.OnGrid = p.reachVolume
		if p.xy { // the volume's first two axes are swapped (Arrange)
			f.Kernel.AxisNames = [3]string{"second (x)", "first (y)", "third (z)"}
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
		if p.reachVolume {
			out = append(out, "reach=volume")
		}
	}
	if p.xy {
		out = append(out, "indexing=xy")
	}
	for i, st := range p.stats {
		out = append(out, p.statNames[i]+"="+st.Canonical())
	}
	return out
}
