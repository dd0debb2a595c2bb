package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs"
	"github.com/tapeloop/tapeloop/internal/atomicfile"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/ops"
)

const catInterp = "INTERPOLATION"

var interpFlags = []cli.Flag{
	&cli.StringFlag{Name: "f", Category: catInterp, Usage: "interpolant values, an (M, G) .npy `FILE`"},
	&cli.Float64Flag{Name: "a", Category: catInterp, Usage: "grid origin"},
	&cli.Float64Flag{Name: "dx", Category: catInterp, Usage: "grid spacing (default 1/(G−1))"},
	&cli.StringFlag{Name: "x", Category: catInterp, Usage: "query points, an (N,) .npy `FILE`"},
	&cli.StringFlag{Name: "reduce", Category: catInterp, Value: "sumsq", Usage: "per query: sumsq (Σ value²), sum or none (all M values)"},
	&cli.StringFlag{Name: "method", Category: catInterp, Value: "auto", Usage: "auto (per-cell Gram/column-sum tables for sumsq/sum) or direct"},
	&cli.StringFlag{Name: "out", Category: catInterp, Usage: "write per-query results to an .npy `FILE`: (N,), or (N, M) for --reduce none"},
	&cli.IntFlag{Name: "interpolants", Category: catInterp, Value: 300, Usage: "M, without --f"},
	&cli.IntFlag{Name: "grid", Category: catInterp, Value: 4096, Usage: "G, without --f"},
	&cli.IntFlag{Name: "points", Category: catInterp, Value: 1_000_000, Usage: "N, without --x"},
	&cli.Uint64Flag{Name: "seed", Category: catInterp, Value: 1, Usage: "random seed of the built-in queries"},
}

var interpCommand = &cli.Command{
	Name:  "interp",
	Usage: "evaluate M cubic interpolants on a shared grid at N points (seed 001)",
	Description: `M interpolants share the uniform grid a + i·dx, i = 0…G−1, with values f[j, i];
each query is evaluated against all of them with the seed's cubic scheme and
reduced: sumsq (default), sum, or none. Without --f and --x it runs the seed's
case: M = 300, G = 4096 on [0, 1] with f = x², N = 1,000,000 uniform queries.
It prints the sum over all queries of the reduced value.`,
	Flags:  append(append([]cli.Flag{}, interpFlags...), engineFlags...),
	Action: runInterp,
}

// interpSetup is an interp job with the files it holds open.
type interpSetup struct {
	job    *graphs.Interp
	closer []io.Closer
	out    *atomicfile.File
	writer *npy.Writer
}

func (s *interpSetup) close() {
	for _, c := range s.closer {
		c.Close()
	}
	if s.out != nil {
		s.out.Abort()
	}
}

// setupInterp reads the flags and inputs into an interp job. With
// withOutput false (for dot), --out is ignored.
func setupInterp(c *cli.Context, e engine, withOutput bool) (_ *interpSetup, err error) {
	s := &interpSetup{}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	reduce, err := ops.ParseReduce(c.String("reduce"))
	if err != nil {
		return nil, fmt.Errorf("--reduce: %w", err)
	}
	method, err := ops.ParseMethod(c.String("method"))
	if err != nil {
		return nil, fmt.Errorf("--method: %w", err)
	}
	var f []float64
	var m, g int
	if path := c.String("f"); path != "" {
		h, data, err := npy.ReadAll64(path)
		if err != nil {
			return nil, fmt.Errorf("--f: %w", err)
		}
		if len(h.Shape) != 2 {
			return nil, fmt.Errorf("--f: %s has shape %s, want (M, G)", path, npy.ShapeString(h.Shape))
		}
		f, m, g = data, h.Shape[0], h.Shape[1]
		if m == 0 {
			return nil, fmt.Errorf("--f: %s holds no interpolants (M = 0)", path)
		}
	} else {
		m, g = c.Int("interpolants"), c.Int("grid")
		if m < 1 {
			return nil, fmt.Errorf("--interpolants %d: need at least 1", m)
		}
		if g < 4 {
			return nil, fmt.Errorf("--grid %d: need at least 4 grid points", g)
		}
		if int64(m)*int64(g) > 1<<31 {
			return nil, fmt.Errorf("--interpolants %d × --grid %d: table too large", m, g)
		}
		f = seedTable(m, g)
	}
	if g < 4 {
		return nil, fmt.Errorf("--f: the grid needs at least 4 points, got G = %d", g)
	}
	a := c.Float64("a")
	dx := 1 / float64(g-1)
	if c.IsSet("dx") {
		dx = c.Float64("dx")
	}
	tab, err := ops.NewInterpTable(f, m, g, a, dx, reduce, method, e.dtype)
	if err != nil {
		return nil, err
	}
	f = nil

	var q graphs.Queries
	if path := c.String("x"); path != "" {
		file, err := npy.Open(path)
		if err != nil {
			return nil, fmt.Errorf("--x: %w", err)
		}
		s.closer = append(s.closer, file)
		if q, err = graphs.NewNpyQueries(file.Reader, path); err != nil {
			return nil, fmt.Errorf("--x: %w", err)
		}
	} else {
		n := c.Int("points")
		if n < 1 {
			return nil, fmt.Errorf("--points %d: need at least 1", n)
		}
		q = &graphs.UniformQueries{N: n, Lo: a, Hi: a + float64(g-1)*dx, Seed: c.Uint64("seed")}
	}

	cfg := graphs.InterpConfig{Table: tab, Reduce: reduce, Method: method, Dtype: e.dtype, Queries: q, Device: e.dev}
	if path := c.String("out"); path != "" && withOutput {
		shape := []int{q.Len()}
		if reduce == ops.ReduceNone {
			shape = append(shape, m)
		}
		if s.out, err = atomicfile.Create(path); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		dt := npy.Float32
		if e.dtype == tensor.Float64 {
			dt = npy.Float64
		}
		if s.writer, err = npy.NewWriter(s.out, dt, shape); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		cfg.Out = s.writer
	}
	if s.job, err = graphs.NewInterp(cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// seedTable is the seed's table: f = x² on linspace(0, 1, g), in every row.
func seedTable(m, g int) []float64 {
	f := make([]float64, m*g)
	for i := range g {
		x := float64(i) / float64(g-1)
		f[i] = x * x
	}
	for j := 1; j < m; j++ {
		copy(f[j*g:(j+1)*g], f[:g])
	}
	return f
}

func runInterp(c *cli.Context) error {
	if c.Args().Present() {
		return fmt.Errorf("interp: unexpected argument %q", c.Args().First())
	}
	e, err := engineConfig(c)
	if err != nil {
		return err
	}
	s, err := setupInterp(c, e, true)
	if err != nil {
		return err
	}
	defer s.close()
	if _, err := runJob(e, s.job, func() any { return s.job.Result() }); err != nil {
		return err
	}
	if s.out != nil {
		if err := s.writer.Flush(); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		if err := s.out.Commit(); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	r := s.job.Result()
	fmt.Fprintf(os.Stdout, "interp: sum of %s over %d queries (M = %d, G = %d, %s): %.17g\n",
		r.Reduce, r.Queries, r.Interpolants, r.Grid, e.dtype, r.Sum)
	return nil
}

var errNoWorkload = errors.New("dot: name a workload, e.g. tapeloop dot interp")
