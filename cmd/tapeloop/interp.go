package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/tapeloop/tapeloop/graphs/interp"
	"github.com/tapeloop/tapeloop/internal/filejob"
)

const catInterp = "INTERPOLATION"

var interpFlags = []cli.Flag{
	&cli.StringFlag{Name: "f", TakesFile: true, Category: catInterp, Usage: "interpolant values, an (M, G) .npy `FILE`"},
	configFlag(&cli.Float64Flag{Category: catInterp}, interp.Config{}, "a"),
	configFlag(&cli.Float64Flag{Category: catInterp}, interp.Config{}, "dx"),
	&cli.StringFlag{Name: "x", TakesFile: true, Category: catInterp, Usage: "query points, an (N,) .npy `FILE`"},
	configFlag(&cli.StringFlag{Category: catInterp}, interp.Config{}, "reduce"),
	paramFlag,
	failNonFiniteFlag,
	configFlag(&cli.StringFlag{Category: catInterp}, interp.Config{}, "method"),
	&cli.StringFlag{Name: "out", TakesFile: true, Category: catInterp, Usage: "write per-query results to an .npy `FILE`: (N,), or (N, M) for --reduce none"},
	&cli.IntFlag{Name: "interpolants", Category: catInterp, Value: 300, Usage: "M, without --f"},
	&cli.IntFlag{Name: "grid", Category: catInterp, Value: 4096, Usage: "G, without --f"},
	&cli.IntFlag{Name: "points", Category: catInterp, Value: 1_000_000, Usage: "N, without --x"},
	&cli.Uint64Flag{Name: "seed", Category: catInterp, Value: 1, Usage: "random seed of the built-in queries"},
}

var interpCommand = &cli.Command{
	Name:  "interp",
	Usage: "evaluate M cubic interpolants on a shared grid at N points",
	Description: `M interpolants share the uniform grid a + i·dx, i = 0…G−1, with values f[j, i];
each query is evaluated against all of them with a cubic scheme and
reduced: sumsq (default), sum, none, or your own formula over the M values v
at the point x (--reduce 'max(v)'; sum(v^2) is sumsq). Without --f and --x it runs the
built-in case: M = 300, G = 4096 on [0, 1] with f = x², N = 1,000,000
uniform queries. It prints the sum over all queries of the reduced value.`,
	Flags:  append(append([]cli.Flag{}, interpFlags...), engineFlags...),
	Action: runInterp,
}

// interpSpec reads the interpolation flags.
func interpSpec(c *cli.Context) (filejob.InterpSpec, error) {
	s := filejob.InterpSpec{
		F: c.String("f"), X: c.String("x"), Out: c.String("out"),
		Interpolants: c.Int("interpolants"), Grid: c.Int("grid"), Points: c.Int("points"), Seed: c.Uint64("seed"),
		Warn: os.Stderr,
	}
	readConfig(c, &s.Config) // all but --param's map, read here
	var err error
	s.Params, err = params(c)
	return s, err
}

func runInterp(c *cli.Context) error {
	spec, err := interpSpec(c)
	if err != nil {
		return err
	}
	e, dev, t, err := openTask(c, spec, filejob.OpenInterp)
	if err != nil {
		return err
	}
	defer t.Close()
	var r interp.Result
	if _, err := runTask(c.Context, e, dev, t, func() {
		r = t.Summary()
		what := r.Reduce
		if what == "none" { // every value kept: the sum is of them all
			what = "all M values"
		}
		fmt.Fprintf(stdout, "interp: sum of %s over %d queries (M = %d, G = %d, %s): %.17g\n",
			what, r.Queries, r.Interpolants, r.Grid, dev.Dtype(), r.Sum)
	}); err != nil {
		return err
	}
	warnNonFinite(e, "--reduce", r.NonFinite)
	return nil
}
