package main

import (
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/urfave/cli/v2"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs"
	"github.com/tapeloop/tapeloop/internal/atomicfile"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/shard"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/ops"
)

const catAffinity = "AFFINITY"

var affinityFlags = []cli.Flag{
	&cli.StringFlag{Name: "images", Category: catAffinity, Usage: "images, an (N, H, W) or (N, D) .npy `FILE` (uint8, uint16, int16, int32, float32, float64)"},
	&cli.IntFlag{Name: "n", Category: catAffinity, Value: 10_000, Usage: "N, without --images"},
	&cli.IntFlag{Name: "height", Category: catAffinity, Value: 100, Usage: "H, without --images"},
	&cli.IntFlag{Name: "width", Category: catAffinity, Value: 100, Usage: "W, without --images"},
	&cli.Uint64Flag{Name: "seed", Category: catAffinity, Value: 1, Usage: "random seed of the built-in images"},
	&cli.StringFlag{Name: "metric", Category: catAffinity, Value: "dot", Usage: "dot, cosine, l1 (−Σ|xi−xj|) or l2 (−Σ(xi−xj)²)"},
	&cli.StringFlag{Name: "out", Category: catAffinity, Usage: "write the (N, N) matrix to an .npy `FILE` (top-k or a shard: an .npz)"},
	&cli.BoolFlag{Name: "tf32", Category: catAffinity, Usage: "with --device cuda, dot and cosine: let the GPU use TF32 tensor cores (about 1e-3 relative per product)"},
	&cli.IntFlag{Name: "topk", Category: catAffinity, Usage: "keep the K largest affinities per row, self excluded: OUT.npz with indices and values"},
	&cli.IntFlag{Name: "block", Category: catAffinity, Usage: "rows per block (the batch), overriding the planner"},
	&cli.StringFlag{Name: "shard", Category: catAffinity, Usage: "compute only shard `i/n` of the rows into --out (merge with tapeloop merge)"},
	&cli.IntFlag{Name: "shards", Category: catAffinity, Usage: "split into `n` shards, this job's index from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX"},
}

var affinityCommand = &cli.Command{
	Name:  "affinity",
	Usage: "pairwise affinities of N images in blocks of rows (seed 003)",
	Description: `A[i, j] between flattened images x_i and x_j: dot (Σ x_i·x_j), cosine
(dot/(‖x_i‖·‖x_j‖)), l1 (−Σ|x_i − x_j|) or l2 (−Σ(x_i − x_j)²), computed in
float32 (--dtype float64 for float64) one block of rows at a time against all N
images, so memory is O(block·N + N·D), never (N, N, D). The (N, N) matrix goes
to --out block by block. Without --images it makes the seed's case: N = 10,000
standard-normal images of 100×100.`,
	Flags:  append(append([]cli.Flag{}, affinityFlags...), engineFlags...),
	Action: runAffinity,
}

// loadImages reads or makes the images, flattened, in the computation's
// dtype. A file already in that dtype (little endian) is memory-mapped, not
// read: mapped reports it, and its pages stay in the page cache.
func loadImages[T float32 | float64](c *cli.Context) (x []T, n, d int, shape []int, mapped bool, err error) {
	x, n, d, shape, mapped, err = readImages[T](c)
	if err == nil && len(shape) != 2 && len(shape) != 3 {
		err = fmt.Errorf("--images: %s has shape %s, want (N, H, W) or (N, D)", c.String("images"), npy.ShapeString(shape))
	}
	if err == nil && (n < 1 || len(x) == 0) {
		err = fmt.Errorf("--images: %s holds no images (shape %s)", c.String("images"), npy.ShapeString(shape))
	}
	return x, n, d, shape, mapped, err
}

func readImages[T float32 | float64](c *cli.Context) (x []T, n, d int, shape []int, mapped bool, err error) {
	if path := c.String("images"); path != "" {
		m, ok, err := npy.Map[T](path)
		if err != nil {
			return nil, 0, 0, nil, false, fmt.Errorf("--images: %w", err)
		}
		if ok {
			// Left mapped for the life of the process.
			return m.Data, m.Shape[0], m.Len() / max(m.Shape[0], 1), m.Shape, true, nil
		}
		f, err := npy.Open(path)
		if err != nil {
			return nil, 0, 0, nil, false, fmt.Errorf("--images: %w", err)
		}
		defer f.Close()
		shape = f.Shape
		if len(shape) != 2 && len(shape) != 3 || f.Len() == 0 {
			return nil, 0, 0, shape, false, nil // loadImages says what is wrong
		}
		n, d = shape[0], f.Len()/max(shape[0], 1)
		x = make([]T, f.Len())
		sysmem.AdviseHugePagesOf(x)
		switch v := any(x).(type) {
		case []float32:
			_, err = f.Read32(v)
		case []float64:
			_, err = f.Read64(v)
		}
		if err != nil {
			return nil, 0, 0, nil, false, fmt.Errorf("--images: %s: %w", path, err)
		}
		return x, n, d, shape, false, nil
	}
	n, h, w := c.Int("n"), c.Int("height"), c.Int("width")
	if n < 1 || h < 1 || w < 1 {
		return nil, 0, 0, nil, false, fmt.Errorf("--n %d --height %d --width %d: each must be at least 1", n, h, w)
	}
	if int64(n)*int64(h)*int64(w) > 1<<34 {
		return nil, 0, 0, nil, false, fmt.Errorf("--n %d --height %d --width %d: too many values for the built-in images", n, h, w)
	}
	rng := rand.New(rand.NewPCG(c.Uint64("seed"), 0x5eed0003))
	x = make([]T, n*h*w)
	sysmem.AdviseHugePagesOf(x)
	for i := range x {
		x[i] = T(rng.NormFloat64())
	}
	return x, n, h * w, []int{n, h, w}, false, nil
}

func runAffinity(c *cli.Context) error {
	if c.Args().Present() {
		return fmt.Errorf("affinity: unexpected argument %q", c.Args().First())
	}
	e, err := legacyConfig(c)
	if err != nil {
		return err
	}
	a, err := setupAffinity(c, &e, true)
	if err != nil {
		return err
	}
	defer a.close()
	if _, err := runJob(e, a.job, func() any { return a.job.Result() }); err != nil {
		return err
	}
	if err := a.finish(); err != nil {
		return err
	}
	r := a.job.Result()
	what := "all affinities"
	if r.TopK > 0 {
		what = fmt.Sprintf("the top %d per row", r.TopK)
	}
	fmt.Fprintf(os.Stdout, "affinity: %s over %d images of %d values, rows [%d, %d), %s: sum of %s %.17g\n",
		r.Metric, r.N, r.D, r.Rows[0], r.Rows[1], e.dtype, what, r.Checksum)
	return nil
}

// affinitySetup is an affinity job with its output file.
type affinitySetup struct {
	job   *graphs.Affinity
	out   *atomicfile.File
	npz   *npy.NPZWriter
	rows  *npy.Writer
	meta  shard.Meta
	dtype npy.Dtype
}

func (a *affinitySetup) close() {
	if a.out != nil {
		a.out.Abort()
	}
}

// setupAffinity reads the flags and images into a job and opens --out.
func setupAffinity(c *cli.Context, e *legacy, withOutput bool) (_ *affinitySetup, err error) {
	metric, err := ops.ParseMetric(c.String("metric"))
	if err != nil {
		return nil, fmt.Errorf("--metric: %w", err)
	}
	if c.IsSet("block") {
		if b := c.Int("block"); b < 1 {
			return nil, fmt.Errorf("--block %d: must be at least 1", b)
		} else {
			e.run.Batch = b
		}
	}
	if c.Bool("tf32") && e.dev == nil {
		return nil, fmt.Errorf("--tf32: needs --device cuda")
	}
	topk := c.Int("topk")
	if c.IsSet("topk") && topk < 1 {
		return nil, fmt.Errorf("--topk %d: must be at least 1", topk)
	}
	var data *ops.PairData
	var shape []int
	var fp string
	var n, d int
	var mapped bool
	if e.dtype == tensor.Float64 {
		var x []float64
		if x, n, d, shape, mapped, err = loadImages[float64](c); err != nil {
			return nil, err
		}
		if data, err = ops.NewPairData(x, n, d, metric); err != nil {
			return nil, err
		}
		fp = graphs.Fingerprint(x, shape)
	} else {
		var x []float32
		if x, n, d, shape, mapped, err = loadImages[float32](c); err != nil {
			return nil, err
		}
		if data, err = ops.NewPairData(x, n, d, metric); err != nil {
			return nil, err
		}
		fp = graphs.Fingerprint(x, shape)
	}
	data.Mapped = mapped
	if topk >= n {
		return nil, fmt.Errorf("--topk %d: must be below N = %d (self is excluded)", topk, n)
	}

	idx, count := 0, 1
	sharded := false
	switch {
	case c.IsSet("shard") && c.IsSet("shards"):
		return nil, fmt.Errorf("--shard and --shards: give one")
	case c.IsSet("shard"):
		if idx, count, err = shard.Parse(c.String("shard")); err != nil {
			return nil, fmt.Errorf("--shard: %w", err)
		}
		sharded = true
	case c.IsSet("shards"):
		count = c.Int("shards")
		if idx, err = shard.FromEnv(count); err != nil {
			return nil, fmt.Errorf("--shards: %w", err)
		}
		sharded = true
	}
	lo, hi := shard.Rows(idx, count, n)
	if lo == hi {
		return nil, fmt.Errorf("--shard %d/%d: no rows (N = %d is smaller than the shard count)", idx, count, n)
	}
	path := c.String("out")
	if !withOutput {
		path = ""
	} else if sharded && path == "" {
		return nil, fmt.Errorf("--shard: a shard needs --out FILE.npz")
	}
	a := &affinitySetup{dtype: npy.Float32}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	if e.dtype == tensor.Float64 {
		a.dtype = npy.Float64
	}
	a.meta = shard.Meta{N: n, D: d, Metric: metric.String(), Dtype: e.dtype.String(), Fingerprint: fp,
		Lo: lo, Hi: hi, Index: idx, Count: count, TopK: topk}
	cfg := graphs.AffinityConfig{Data: data, Metric: metric, Lo: lo, Hi: hi, TopK: topk, Device: e.dev, TF32: c.Bool("tf32")}
	// Hold the whole matrix and compute each pair once when it fits the
	// limit beside the images and a modest block; else stream whole rows.
	if !sharded && topk == 0 {
		limit := e.run.MemLimit
		if limit == 0 {
			if limit, err = graphs.DefaultMemLimit(); err != nil {
				return nil, err
			}
		}
		sz := int64(e.dtype.Size())
		need := sz*(int64(n)*int64(n)+64*int64(n+d)) + data.Bytes()
		cfg.Symmetric = need <= limit
	}
	if path != "" {
		if a.out, err = atomicfile.Create(path); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		switch {
		case sharded || topk > 0:
			a.npz = npy.NewNPZWriter(a.out)
			if err = shard.WriteMeta(a.npz, a.meta); err != nil {
				return nil, fmt.Errorf("--out: %w", err)
			}
			if topk == 0 {
				if a.rows, err = a.npz.Create("affinity", a.dtype, []int{hi - lo, n}); err != nil {
					return nil, fmt.Errorf("--out: %w", err)
				}
			}
		default:
			if a.rows, err = npy.NewWriter(a.out, a.dtype, []int{n, n}); err != nil {
				return nil, fmt.Errorf("--out: %w", err)
			}
		}
		cfg.Rows = a.rows
	}
	if a.job, err = graphs.NewAffinity(cfg); err != nil {
		return nil, err
	}
	return a, nil
}

// finish writes the top-k arrays, closes the archive and commits --out.
func (a *affinitySetup) finish() error {
	if a.out == nil {
		return nil
	}
	if a.npz != nil {
		if k := a.meta.TopK; k > 0 {
			rows := a.meta.Hi - a.meta.Lo
			w, err := a.npz.Create("indices", npy.Int64, []int{rows, k})
			if err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			if err := w.WriteInt64(a.job.Indices); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			if w, err = a.npz.Create("values", a.dtype, []int{rows, k}); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			if err := w.Write64(a.job.Values); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
		}
		if err := a.npz.Close(); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	} else if err := a.rows.Flush(); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	return a.out.Commit()
}

var mergeCommand = &cli.Command{
	Name:      "merge",
	Usage:     "assemble affinity shards into one matrix",
	ArgsUsage: "SHARD.npz…",
	Description: `Checks that the shards cover every row exactly once and come from the same
images, metric, dtype and top-k, then writes the (N, N) matrix to --out (.npy), or
for top-k shards the indices and values (.npz).`,
	Flags: []cli.Flag{&cli.StringFlag{Name: "out", Required: true, Usage: "the merged `FILE`"}},
	Action: func(c *cli.Context) error {
		return shard.Merge(c.String("out"), c.Args().Slice())
	},
}
