package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/tapeloop/tapeloop/graphs"
	"github.com/tapeloop/tapeloop/internal/atomicfile"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops"
)

const catWavelet = "WAVELET"

var waveletFlags = []cli.Flag{
	&cli.StringFlag{Name: "volume", Category: catWavelet, Usage: "the volume: .npy, .nii, .nii.gz, .mha or .mhd (`FILE`)"},
	&cli.StringFlag{Name: "size", Category: catWavelet, Value: "32x32x32", Usage: "the built-in random volume's `XxYxZ`, without --volume"},
	&cli.Uint64Flag{Name: "seed", Category: catWavelet, Value: 1, Usage: "random seed of the built-in volume"},
	&cli.Float64Flag{Name: "a", Category: catWavelet, Value: 1, Usage: "kernel scale a (voxels)"},
	&cli.StringFlag{Name: "theta", Category: catWavelet, Value: "0:pi:4", Usage: "θ values: a comma-separated `LIST` or START:STOP:COUNT (STOP excluded); pi allowed"},
	&cli.StringFlag{Name: "phi", Category: catWavelet, Value: "0:pi:2", Usage: "φ values, as --theta"},
	&cli.StringFlag{Name: "xi", Category: catWavelet, Value: "1,2", Usage: "stretch ξ values (> 0), as --theta"},
	&cli.StringFlag{Name: "boundary", Category: catWavelet, Value: "reflect", Usage: "reflect (half-sample symmetric) or wrap (periodic), as scipy.ndimage.convolve"},
	&cli.StringFlag{Name: "out", Category: catWavelet, Usage: "write the statistics CSV to `FILE` (default: standard output)"},
}

var waveletCommand = &cli.Command{
	Name:  "wavelet",
	Usage: "sweep a 3-D stretched, rotated Mexican-hat wavelet over (θ, φ, ξ) (seed 002)",
	Description: `Convolves the volume (scipy.ndimage.convolve semantics, output the size of the
volume) with the kernel ψ = (3 − q)·exp(−q/2) of every (θ, φ, ξ) combination and
writes, per combination, the response's energy Σ G², its standard deviation, its
maximum and the kernel's energy Σ ψ², as CSV (θ outermost, then φ, then ξ). The
volume is transformed once; each combination costs one kernel transform, one
product and one inverse transform.`,
	Flags:  append(append([]cli.Flag{}, waveletFlags...), withoutDtype(engineFlags)...),
	Action: runWavelet,
}

// parseNumber parses a number that may use pi: 2.5, pi, -pi/4, 3pi/2, 0.5*pi.
func parseNumber(s string) (float64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	bad := fmt.Errorf("%q is not a number (e.g. 2.5, pi, pi/4, 3*pi/2)", s)
	num, den, hasDen := strings.Cut(t, "/")
	d := 1.0
	if hasDen {
		var err error
		if d, err = strconv.ParseFloat(strings.TrimSpace(den), 64); err != nil || d == 0 {
			return 0, bad
		}
	}
	num = strings.TrimSpace(num)
	v := 1.0
	if coef, ok := strings.CutSuffix(num, "pi"); ok {
		coef = strings.TrimSuffix(strings.TrimSpace(coef), "*")
		switch coef {
		case "", "+":
		case "-":
			v = -1
		default:
			c, err := strconv.ParseFloat(coef, 64)
			if err != nil {
				return 0, bad
			}
			v = c
		}
		v *= math.Pi
	} else {
		c, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return 0, bad
		}
		v = c
	}
	v /= d
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, bad
	}
	return v, nil
}

// parseList parses "a,b,c" or "START:STOP:COUNT" (COUNT values
// START + k·(STOP − START)/COUNT, STOP excluded, like numpy.arange grids).
func parseList(name, s string) ([]float64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("--%s: empty list", name)
	}
	if strings.Contains(s, ":") {
		f := strings.Split(s, ":")
		if len(f) != 3 {
			return nil, fmt.Errorf("--%s %q: want START:STOP:COUNT", name, s)
		}
		lo, err := parseNumber(f[0])
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", name, err)
		}
		hi, err := parseNumber(f[1])
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", name, err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(f[2]))
		if err != nil || n < 1 || n > 1<<24 {
			return nil, fmt.Errorf("--%s %q: COUNT %q must be a positive integer", name, s, f[2])
		}
		out := make([]float64, n)
		for k := range out {
			out[k] = lo + float64(k)*(hi-lo)/float64(n)
		}
		return out, nil
	}
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := parseNumber(f)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", name, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// waveletVolume loads --volume or makes the built-in random volume.
func waveletVolume(c *cli.Context) ([]float64, [3]int, error) {
	if path := c.String("volume"); path != "" {
		v, err := volume.Load(path, volume.Options{Warn: os.Stderr})
		if err != nil {
			return nil, [3]int{}, fmt.Errorf("--volume: %w", err)
		}
		x := make([]float64, len(v.V))
		for i, f := range v.V {
			x[i] = float64(f)
		}
		return x, [3]int{int(v.N[0]), int(v.N[1]), int(v.N[2])}, nil
	}
	var n [3]int
	if _, err := fmt.Sscanf(c.String("size"), "%dx%dx%d", &n[0], &n[1], &n[2]); err != nil ||
		fmt.Sprintf("%dx%dx%d", n[0], n[1], n[2]) != c.String("size") || n[0] < 1 || n[1] < 1 || n[2] < 1 || n[0]*n[1]*n[2] > 1<<28 {
		return nil, n, fmt.Errorf("--size %q: want XxYxZ, each at least 1", c.String("size"))
	}
	rng := rand.New(rand.NewPCG(c.Uint64("seed"), 0x5eed0002))
	x := make([]float64, n[0]*n[1]*n[2])
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	return x, n, nil
}

// setupWavelet reads the flags and the volume into a sweep whose CSV goes
// to csv (nil: none), the volume transformed once.
func setupWavelet(c *cli.Context, csv io.Writer, dev ops.Device) (*graphs.Wavelet, error) {
	b, err := ops.ParseBoundary(c.String("boundary"))
	if err != nil {
		return nil, fmt.Errorf("--boundary: %w", err)
	}
	var lists [3][]float64
	for i, name := range []string{"theta", "phi", "xi"} {
		if lists[i], err = parseList(name, c.String(name)); err != nil {
			return nil, err
		}
	}
	a := c.Float64("a")
	combos := graphs.Combos(lists[0], lists[1], lists[2])
	for _, k := range combos {
		if err := ops.CheckHat(a, k.Theta, k.Phi, k.Xi); err != nil {
			return nil, fmt.Errorf("θ = %g, φ = %g, ξ = %g: %w", k.Theta, k.Phi, k.Xi, err)
		}
	}
	_, pad := graphs.WaveletPads(a, combos)
	x, n, err := waveletVolume(c)
	if err != nil {
		return nil, err
	}
	src, err := ops.NewWaveletSource(x, n, a, b, pad)
	if err != nil {
		return nil, err
	}
	return graphs.NewWavelet(graphs.WaveletConfig{Src: src, Combos: combos, CSV: csv, Device: dev})
}

func runWavelet(c *cli.Context) error {
	if c.Args().Present() {
		return fmt.Errorf("wavelet: unexpected argument %q", c.Args().First())
	}
	e, err := legacyConfig(c)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	var file *atomicfile.File
	if path := c.String("out"); path != "" {
		if file, err = atomicfile.Create(path); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		defer file.Abort()
		out = bufio.NewWriter(file)
	}
	job, err := setupWavelet(c, out, e.dev)
	if err != nil {
		return err
	}
	if _, err := runJob(e, job, func() any { return job.Result() }); err != nil {
		return err
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if file != nil {
		if err := file.Commit(); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	r := job.Result()
	if !e.quiet {
		fmt.Fprintf(os.Stderr, "wavelet: %d combinations; largest energy %.6g at θ = %.4g, φ = %.4g, ξ = %.4g\n",
			r.Combinations, r.MaxEnergy, r.Theta, r.Phi, r.Xi)
	}
	return nil
}
