package main

import (
	"fmt"
	"os"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/tapeloop/tapeloop/graphs/affinity"
	"github.com/tapeloop/tapeloop/internal/filejob"
	"github.com/tapeloop/tapeloop/internal/proctime"
)

const catAffinity = "AFFINITY"

var affinityFlags = []cli.Flag{
	&cli.StringFlag{Name: "images", TakesFile: true, Category: catAffinity, Usage: "images, an (N, H, W) or (N, D) .npy `FILE` (uint8, uint16, int16, int32, float32, float64)"},
	&cli.IntFlag{Name: "n", Category: catAffinity, Value: 10_000, Usage: "N, without --images"},
	&cli.IntFlag{Name: "height", Category: catAffinity, Value: 100, Usage: "H, without --images"},
	&cli.IntFlag{Name: "width", Category: catAffinity, Value: 100, Usage: "W, without --images"},
	&cli.Uint64Flag{Name: "seed", Category: catAffinity, Value: 1, Usage: "random seed of the built-in images"},
	configFlag(&cli.StringFlag{Category: catAffinity}, affinity.Config{}, "metric"),
	configFlag(&cli.StringFlag{Category: catAffinity}, affinity.Config{}, "formula"),
	paramFlag,
	configFlag(&cli.StringFlag{Category: catAffinity}, affinity.Config{}, "method"),
	failNonFiniteFlag,
	&cli.StringFlag{Name: "out", TakesFile: true, Category: catAffinity, Usage: "write the (N, N) matrix to an .npy `FILE` (top-k or a shard: an .npz)"},
	configFlag(&cli.BoolFlag{Category: catAffinity}, affinity.Config{}, "tf32"),
	configFlag(&cli.IntFlag{Category: catAffinity}, affinity.Config{}, "topk"),
	&cli.IntFlag{Name: "block", Category: catAffinity, Usage: "rows per block (the batch), overriding the planner"},
	&cli.StringFlag{Name: "shard", Category: catAffinity, Usage: "compute only shard `i/n` of the rows into --out (merge with tapeloop merge)"},
	&cli.IntFlag{Name: "shards", Category: catAffinity, Usage: "split into `n` shards, this job's index from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX"},
	affinityDtypeFlag,
}

// affinityDtypeFlag replaces the engine's --dtype: the affinities may also
// be integers.
// Its default is given here, not as the field's default tag: the
// Config's "" is the engine's dtype.
var affinityDtypeFlag = configFlag(&cli.StringFlag{Category: catEngine, Value: "float32"}, affinity.Config{}, "dtype")

var affinityCommand = &cli.Command{
	Name:  "affinity",
	Usage: "pairwise affinities of N images in blocks of rows",
	Description: `A[i, j] between flattened images x_i and x_j: dot (Σ x_i·x_j), cosine
(dot/(‖x_i‖·‖x_j‖)), l1 (−Σ|x_i − x_j|), l2 (−Σ(x_i − x_j)²), or your own
--formula over a and b (e.g. 'exp(-sum((a-b)^2)/(2*s^2))' --param s=40), computed in
float32 (--dtype float64 for float64) one block of rows at a time against all N
images, so memory is O(block·N + N·D), never (N, N, D). The (N, N) matrix goes
to --out block by block. Without --images it makes the built-in case: N = 10,000
standard-normal images of 100×100.

A uint8 --images file with a built-in metric is computed exactly, in
integers; with --dtype int32 or int64 (dot, l1, or l2: −Σ(x_i − x_j)², the
negated squared distance) the affinities are written as those integers.
int32 is refused when D·255² (l1: D·255) exceeds it.`,
	Flags:  append(append([]cli.Flag{}, affinityFlags...), withoutDtype(engineFlags)...),
	Action: runAffinity,
}

// affinitySpec reads the affinity flags.
func affinitySpec(c *cli.Context) (filejob.AffinitySpec, error) {
	s := filejob.AffinitySpec{
		Images: c.String("images"), N: c.Int("n"), Height: c.Int("height"), Width: c.Int("width"), Seed: c.Uint64("seed"),
		Out: c.String("out"), Block: intIfSet(c, "block"), Shards: intIfSet(c, "shards"),
	}
	// Read here: --metric, its default only without --formula; --method,
	// "" unless given; --param's map.
	readConfig(c, &s.Config, "metric", "method")
	if c.IsSet("block") && c.IsSet("batch") && c.Int("block") != c.Int("batch") {
		return s, fmt.Errorf("--block %d and --batch %d: one setting (the rows per block) given twice with two values; give one",
			c.Int("block"), c.Int("batch"))
	}
	if c.IsSet("metric") || !c.IsSet("formula") {
		s.Metric = c.String("metric")
	}
	if c.IsSet("method") {
		s.Method = c.String("method")
	}
	if c.IsSet("shard") {
		v := c.String("shard")
		s.Shard = &v
	}
	var err error
	s.Params, err = params(c)
	return s, err
}

// intIfSet is the value of an integer flag given on the command line, or
// nil.
func intIfSet(c *cli.Context, name string) *int {
	if !c.IsSet(name) {
		return nil
	}
	v := c.Int(name)
	return &v
}

// floatIfSet is the flag's value, nil when it is not given.
func floatIfSet(c *cli.Context, name string) *float64 {
	if !c.IsSet(name) {
		return nil
	}
	v := c.Float64(name)
	return &v
}

func runAffinity(c *cli.Context) error {
	spec, err := affinitySpec(c)
	if err != nil {
		return err
	}
	e, _, t, err := openTask(c, spec, filejob.OpenAffinity)
	if err != nil {
		return err
	}
	defer t.Close()
	if at, ok := proctime.Started(); ok {
		t.SetStarted(at)
	}
	var r affinity.Result
	if _, err := runTask(c.Context, e, t.Device(), t, func() {
		r = t.Summary()
		what := "all affinities"
		if r.TopK > 0 {
			what = fmt.Sprintf("the top %d per row", r.TopK)
		}
		metric := r.Metric
		switch {
		case r.Formula != "":
			metric = fmt.Sprintf("f(a, b) = %s", shortFormula(r.Formula))
		case spec.Formula != "": // the formula is a built-in metric: its kernel ran
			metric = fmt.Sprintf("f(a, b) = %s (the built-in %s)", shortFormula(spec.Formula), r.Metric)
		}
		fmt.Fprintf(stdout, "affinity: %s over %d images of %d values, rows [%d, %d), %s: sum of %s %.17g\n",
			metric, r.N, r.D, r.Rows[0], r.Rows[1], r.Dtype, what, r.Checksum)
	}); err != nil {
		return err
	}
	if e.Verbose {
		fmt.Fprintf(os.Stderr, "affinity: phases: %s\n", t.Phases())
	}
	warnNonFinite(e, "--formula", r.NonFinite)
	return nil
}

// shortFormula is f, or its start and its length when f is too long to
// read in a result line.
func shortFormula(f string) string {
	const most = 160
	if len(f) <= most {
		return f
	}
	cut := 120
	for cut > 0 && !utf8.RuneStart(f[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d characters)", f[:cut], len(f))
}
