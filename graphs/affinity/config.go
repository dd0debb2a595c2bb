package affinity

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs/option"
	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/formula"
	"github.com/tapeloop/tapeloop/ops/pairwise"
)

// Config is an affinity as the user chooses it, the same for the command
// line, the C ABI and Python. The zero value is dot products, all of
// each row. Each field's flag tag is its command-line flag, its json tag
// its JSON key and Python keyword.
type Config struct {
	// Metric is the affinity of two flattened images x_i and x_j: "dot"
	// (Σ x_i·x_j, the default), "cosine" (dot/(‖x_i‖·‖x_j‖)), "l1"
	// (−Σ|x_i − x_j|) or "l2" (−Σ(x_i − x_j)²). Not given with Formula.
	Metric string `flag:"metric" json:"metric" help:"dot, cosine, l1 (−Σ|xi−xj|) or l2 (−Σ(xi−xj)²)" default:"dot"`
	// Formula is your own affinity of the flattened images a and b,
	// reduced to one number per pair, e.g. "-sum(abs(a-b))" or
	// "exp(-sum((a-b)^2)/(2*s^2))" (see docs/formulas.md); it replaces
	// Metric.
	Formula string `flag:"formula" json:"formula" help:"your own affinity of the flattened images a and b, reduced to one number, e.g. '-sum(abs(a-b))' or 'exp(-sum((a-b)^2)/(2*s^2))' (see docs/formulas.md)"`
	// Params are the formula's parameters by name, e.g. s=40.
	Params map[string]float64 `flag:"param" json:"params"`
	// Method, with a formula: "auto" (the default: a formula made of dot
	// products, sums of squares and per-image values runs on the
	// dot-product kernel) or "direct" (every sum over both images
	// evaluated as written).
	Method string `flag:"method" json:"method" help:"with --formula: auto (run a formula of dot products, sums of squares and per-image values on the dot-product kernel) or direct (every sum over both images as written)" default:"auto"`
	// FailOnNonFinite stops with an error when the formula gives NaN or
	// ±Inf (otherwise such values are counted and reported).
	FailOnNonFinite bool `flag:"fail-on-nonfinite" json:"fail_on_nonfinite" fingerprint:"-"`
	// TopK keeps only the K largest affinities of each row, self
	// excluded; nil keeps all of them. Given, it must be at least 1.
	TopK *int `flag:"topk" json:"topk" help:"keep the K largest affinities per row, self excluded: OUT.npz with indices and values"`
	// TF32 lets a GPU's dot products (dot and cosine) use TF32 tensor
	// cores, about 1e-3 relative per product; it needs a GPU device.
	TF32 bool `flag:"tf32" json:"tf32" help:"with --device cuda, dot and cosine: let the GPU use TF32 tensor cores (about 1e-3 relative per product)"`
	// Dtype is the element type of the affinities: "float32", "float64"
	// (each also the type computed in, for images that are not 8-bit),
	// "int32" or "int64" (exact: 8-bit images with dot, l1 or l2 on the
	// CPU; int32 only where every value provably fits it). "": the
	// engine's dtype (float32 unless it says otherwise).
	Dtype string `flag:"dtype" json:"dtype" help:"element type of the affinities: float32 or float64 (also the type computed in), or, exact for a uint8 --images file with dot, l1 or l2, int32 (refused where a value could overflow it) or int64"`
}

// Plan is what a Config asks for, parsed.
type Plan struct {
	Metric  pairwise.Metric
	Formula *formula.Formula // nil: Metric
	// Builtin is the user's formula, in canonical form, when it is the
	// built-in Metric written out (Formula is then nil).
	Builtin string
	Direct  bool // the method "direct"
	TopK    int  // 0: all of each row
	// Int is the integer type of the affinities (tensor.Int32 or
	// tensor.Int64), zero for a float type.
	Int tensor.Dtype
}

// Compute is the type the affinities are computed in on dev (nil: the
// engine's default): Dtype's float type, or the engine's when Dtype is
// empty; for an integer Dtype float64, which holds every 8-bit integer
// affinity exactly (the whole matrix in memory is held in the integer type
// itself).
func (c Config) Compute(dev *engine.Device) tensor.Dtype {
	switch c.Dtype {
	case "float32":
		return tensor.Float32
	case "float64", "int32", "int64":
		return tensor.Float64
	}
	if dev != nil {
		return dev.Dtype()
	}
	return tensor.Float32
}

// IntDtype is the integer type dtype names ("int32" or "int64"), or false.
func IntDtype(dtype string) (tensor.Dtype, bool) {
	switch dtype {
	case "int32":
		return tensor.Int32, true
	case "int64":
		return tensor.Int64, true
	}
	return tensor.Dtype{}, false
}

// errInt is the one-line refusal of an integer --dtype that cannot be
// exact.
func errInt(dtype, why string) error {
	return fmt.Errorf("--dtype %s: %s; integer affinities are exact only for 8-bit images (a uint8 --images file) with --metric dot, l1 or l2 on the CPU", dtype, why)
}

// CheckInt checks an integer Dtype against the run: 8-bit images (u8), a
// built-in dot, l1 or l2 (no formula), on the CPU, and for int32 images of
// d values whose every affinity provably fits: |value| ≤ d·255² for dot
// and l2 (−Σ(x_i − x_j)², the negated squared distance), d·255 for l1. It
// is nil for a float Dtype.
func (p Plan) CheckInt(dtype string, u8 bool, d int, gpu bool) error {
	if p.Int == (tensor.Dtype{}) {
		return nil
	}
	switch {
	case p.Formula != nil:
		return errInt(dtype, "not with --formula")
	case p.Metric == pairwise.MetricCosine:
		return errInt(dtype, "cosine is not an integer")
	case gpu:
		return errInt(dtype, "not on a GPU")
	case !u8:
		return errInt(dtype, "the images are not 8-bit")
	}
	if p.Int == tensor.Int32 {
		k := map[pairwise.Metric]cpukern.U8Metric{pairwise.MetricDot: cpukern.U8Dot, pairwise.MetricL1: cpukern.U8L1, pairwise.MetricL2: cpukern.U8L2}[p.Metric]
		if v, ok := cpukern.U8MaxAbs(k, d); !ok || v > math.MaxInt32 {
			what := "255²"
			if k == cpukern.U8L1 {
				what = "255"
			}
			return fmt.Errorf("--dtype int32: %s of %d values can reach %d·%s, more than an int32 holds: use --dtype int64", p.Metric, d, d, what)
		}
	}
	return nil
}

// Validate checks what can be checked without the images and the device.
func (c Config) Validate() error {
	p, err := c.Parse()
	if err == nil {
		err = c.CheckRun(&p, nil)
	}
	return err
}

// Parse checks and reads the metric, the method and the formula with its
// parameters. CheckRun checks the rest.
func (c Config) Parse() (p Plan, err error) {
	if p.Metric, err = pairwise.ParseMetric(option.OrDefault(c.Metric, "dot")); err != nil {
		return p, fmt.Errorf("--metric: %w", err)
	}
	switch c.Dtype {
	case "", "float32", "float64":
	case "int32", "int64":
		p.Int, _ = IntDtype(c.Dtype)
	default:
		return p, fmt.Errorf("--dtype %q: want float32, float64, int32 or int64", c.Dtype)
	}
	switch option.OrDefault(c.Method, "auto") {
	case "auto":
	case "direct":
		p.Direct = true
	default:
		return p, fmt.Errorf("--method %q: want auto or direct", c.Method)
	}
	if c.Formula == "" {
		if err := option.NoParams(c.Params, "--formula"); err != nil {
			return p, err
		}
		if c.Method != "" || c.FailOnNonFinite {
			return p, errors.New("--method and --fail-on-nonfinite: they are for a --formula, and none is given")
		}
		return p, nil
	}
	if c.Metric != "" {
		return p, errors.New("--metric and --formula: give one")
	}
	if p.Int != (tensor.Dtype{}) {
		return p, errInt(c.Dtype, "not with --formula")
	}
	if p.Formula, err = option.ParseFormula("--formula", c.Formula, formula.PairVars, c.Params, true); err != nil {
		return p, err
	}
	if c.TF32 {
		return p, errors.New("--tf32: not used with --formula")
	}
	// A formula that is a built-in metric, as written, runs as the metric:
	// its kernel, its speed, its values (unless --method direct asks for
	// the formula evaluated as written).
	if m, ok := builtinOf(p.Formula); ok && !p.Direct {
		p.Metric, p.Builtin, p.Formula = m, p.Formula.Canonical(), nil
	}
	return p, nil
}

// builtins are the built-in metrics written as formulas: each spelling,
// parsed, is compared with a user's formula by canonical form.
var builtins = []struct {
	metric    pairwise.Metric
	spellings []string
}{
	{pairwise.MetricDot, []string{"sum(a*b)", "sum(b*a)"}},
	{pairwise.MetricL1, []string{"-sum(abs(a-b))", "-sum(abs(b-a))"}},
	{pairwise.MetricL2, []string{"-sum((a-b)^2)", "-sum((b-a)^2)", "-sum((a-b)*(a-b))", "-sum((b-a)*(b-a))"}},
	{pairwise.MetricCosine, []string{
		"sum(a*b)/sqrt(sum(a^2)*sum(b^2))", "sum(a*b)/(sqrt(sum(a^2))*sqrt(sum(b^2)))",
		"sum(a*b)/sqrt(sum(a*a)*sum(b*b))", "sum(a*b)/(sqrt(sum(a*a))*sqrt(sum(b*b)))",
	}},
}

// builtinOf is the built-in metric f is, as written up to spaces,
// parentheses and x^2 for x*x (the same nodes, in the same order), if any.
func builtinOf(f *formula.Formula) (pairwise.Metric, bool) {
	got := structure(f)
	for _, b := range builtins {
		for _, src := range b.spellings {
			g, err := formula.Parse(src, f.Env)
			if err == nil && got != "" && structure(g) == got {
				return b.metric, true
			}
		}
	}
	return 0, false
}

// structure is f's nodes (formula.Graph) written out, "" if it has none.
func structure(f *formula.Formula) string {
	g, err := f.Graph(1)
	if err != nil {
		return ""
	}
	var sb strings.Builder
	for _, n := range g.Nodes {
		fmt.Fprintf(&sb, "%d %x %d (", n.Op, math.Float64bits(n.Val), n.Var)
		for _, a := range n.Args {
			fmt.Fprintf(&sb, "%d ", a.ID())
		}
		sb.WriteString(");")
	}
	return sb.String()
}

// CheckRun checks the settings of the run that Parse leaves, into p: TF32
// needs a GPU device (not checked while dev is nil, the device not yet
// known), and a given TopK is at least 1.
func (c Config) CheckRun(p *Plan, dev *engine.Device) error {
	if c.TF32 && dev != nil && !dev.GPU() {
		return errors.New("--tf32: needs --device cuda")
	}
	if p.Int != (tensor.Dtype{}) {
		if p.Metric == pairwise.MetricCosine {
			return errInt(c.Dtype, "cosine is not an integer")
		}
		if dev != nil && dev.GPU() {
			return errInt(c.Dtype, "not on a GPU")
		}
	}
	if c.TopK != nil {
		if p.TopK = *c.TopK; p.TopK < 1 {
			return fmt.Errorf("--topk %d: must be at least 1", p.TopK)
		}
	}
	return nil
}
