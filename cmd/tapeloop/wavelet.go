package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/tapeloop/tapeloop/internal/filejob"
	"github.com/tapeloop/tapeloop/internal/warnings"
)

const catWavelet = "WAVELET"

var waveletDefaults = filejob.DefaultWaveletSpec()

var waveletFlags = []cli.Flag{
	&cli.StringFlag{Name: "volume", TakesFile: true, Category: catWavelet, Usage: "the volume: .npy, .nii, .nii.gz, .mha, .mhd or a DICOM series (its directory or one of its files) (`FILE`)"},
	&cli.StringFlag{Name: "series", Category: catWavelet, Usage: "DICOM: the SeriesInstanceUID to read when --volume's directory holds several"},
	&cli.StringFlag{Name: "size", Category: catWavelet, Value: waveletDefaults.Size, Usage: "the built-in random volume's `XxYxZ`, without --volume"},
	&cli.Uint64Flag{Name: "seed", Category: catWavelet, Value: waveletDefaults.Seed, Usage: "random seed of the built-in volume"},
	configFlag(&cli.Float64Flag{Category: catWavelet}, waveletDefaults.Config, "a"),
	&cli.StringFlag{Name: "theta", Category: catWavelet, Value: waveletDefaults.Theta, Usage: "θ values: a comma-separated `LIST` or START:STOP:COUNT (STOP excluded); pi allowed"},
	&cli.StringFlag{Name: "phi", Category: catWavelet, Value: waveletDefaults.Phi, Usage: "φ values, as --theta"},
	&cli.StringFlag{Name: "xi", Category: catWavelet, Value: waveletDefaults.Xi, Usage: "stretch ξ values, as --theta (ξ ≤ 0 has no kernel: its row holds NaN)"},
	configFlag(&cli.StringFlag{Category: catWavelet}, waveletDefaults.Config, "boundary"),
	configFlag(&cli.StringFlag{Category: catWavelet}, waveletDefaults.Config, "kernel"),
	configFlag(&cli.StringFlag{Category: catWavelet}, waveletDefaults.Config, "reach"),
	configFlag(&cli.StringFlag{Category: catWavelet}, waveletDefaults.Config, "indexing"),
	configFlag(&cli.StringSliceFlag{Category: catWavelet}, waveletDefaults.Config, "stat"),
	configFlag(&cli.StringFlag{Category: catWavelet}, waveletDefaults.Config, "columns"),
	paramFlag,
	failNonFiniteFlag,
	&cli.StringFlag{Name: "out", TakesFile: true, Category: catWavelet, Usage: "write the statistics CSV to `FILE` (default: standard output; a shard: an .npz)"},
	&cli.StringSliceFlag{Name: "save-response", Category: catWavelet, Usage: "write the response G of one combination, `THETA,PHI,XI:FILE.npy` (e.g. 0,pi/4,2:g.npy), float32 of the volume's shape, when the run ends (repeat for more; a shard writes those of its combinations)"},
	&cli.StringFlag{Name: "shard", Category: catWavelet, Usage: "compute only shard `i/n` of the combinations (0 ≤ i < n, in CSV order) into --out FILE.npz (merge with tapeloop merge)"},
	&cli.IntFlag{Name: "shards", Category: catWavelet, Usage: "split into `n` shards, this job's index from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX"},
	resumeFlag,
}

var waveletCommand = &cli.Command{
	Name:  "wavelet",
	Usage: "sweep a 3-D stretched, rotated Mexican-hat wavelet over (θ, φ, ξ)",
	Description: `Convolves the volume (scipy.ndimage.convolve semantics, output the size of the
volume) with the kernel ψ = (3 − q)·exp(−q/2) of every (θ, φ, ξ) combination and
writes, per combination, the response's energy Σ G², its standard deviation, its
maximum and the kernel's energy Σ ψ², as CSV (θ outermost, then φ, then ξ), or
those --columns names. The volume is transformed once; each combination costs
one product of spectra (a --kernel also its own transform) and one inverse
transform, except where no column written needs the response itself: with
--boundary wrap, energy and std come from the spectrum (Parseval's theorem),
so --columns energy,std (or wavelet_energy) runs no inverse transform.

--shard i/n (or --shards n under a SLURM array or a Kubernetes Indexed Job)
computes a contiguous range of the combinations into a shard file; tapeloop
merge assembles the shards into the CSV one run writes, byte for byte.`,
	Flags:  append(append([]cli.Flag{}, waveletFlags...), withoutDtype(engineFlags)...),
	Action: runWavelet,
}

// waveletSpec reads the wavelet flags: the Config's, the volume, the
// sweep and the output.
func waveletSpec(c *cli.Context) (filejob.WaveletSpec, error) {
	s := filejob.WaveletSpec{
		Volume: c.String("volume"), Series: c.String("series"), Size: c.String("size"), Seed: c.Uint64("seed"),
		Theta: c.String("theta"), Phi: c.String("phi"), Xi: c.String("xi"),
		Out: c.String("out"), Stdout: stdout, Warn: os.Stderr,
		Shards: intIfSet(c, "shards"), Resume: c.Bool(resumeFlag.Name), SaveResponses: c.StringSlice("save-response"),
	}
	// Read here: --columns, a list in one string, and --param's map.
	readConfig(c, &s.Config)
	if c.IsSet("shard") {
		v := c.String("shard")
		s.Shard = &v
	}
	if c.IsSet("columns") {
		s.Columns = strings.Split(c.String("columns"), ",")
	}
	var err error
	s.Params, err = params(c)
	return s, err
}

func runWavelet(c *cli.Context) error {
	spec, err := waveletSpec(c)
	if err != nil {
		return err
	}
	e, dev, t, err := openTask(c, spec, filejob.OpenWavelet)
	if err != nil {
		return err
	}
	defer t.Close()
	if e.Verbose {
		fmt.Fprintf(os.Stderr, "wavelet: per combination: %v\n", t.Passes(dev.GPU()))
	}
	if _, err := runTask(c.Context, e, dev, t, nil); err != nil { // the CSV is the result
		return t.Unfinished(err)
	}
	r := t.Summary()
	if !e.quiet {
		what := fmt.Sprintf("%d combinations", r.Combinations)
		if r.Range != [3]int{} {
			what = fmt.Sprintf("combinations [%d, %d) of %d", r.Range[0], r.Range[1], r.Range[2])
		}
		switch {
		case r.NoKernel == r.Combinations:
			fmt.Fprintf(os.Stderr, "wavelet: %s; none has a kernel\n", what)
		case r.Largest != nil:
			fmt.Fprintf(os.Stderr, "wavelet: %s; largest energy %.6g at θ = %.4g, φ = %.4g, ξ = %.4g\n",
				what, r.MaxEnergy, r.Theta, r.Phi, r.Xi)
		default:
			fmt.Fprintf(os.Stderr, "wavelet: %s\n", what)
		}
	}
	if r.NoKernel > 0 {
		warnings.Printf(os.Stderr, "%d combinations have no kernel (the first: %s); their rows hold NaN", r.NoKernel, r.NoKernelWhy)
	}
	if r.ZeroKernel > 0 {
		warnings.Printf(os.Stderr, "%d of %d combinations have a kernel that is 0 at every sample (the first: %s): their statistics are those of a response of zeros; check --kernel",
			r.ZeroKernel, r.Combinations, r.ZeroKernelFirst)
	}
	warnNonFinite(e, "--kernel or --stat", r.NonFinite)
	return nil
}
