package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/tapeloop/tapeloop/graphs"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/ops"
)

// demoRow is one workload of the demo: how to run it and what it printed.
type demoRow struct {
	workload string
	size     string
	run      func(ctx context.Context, rc graphs.RunConfig, dev ops.Device) (*graphs.Outcome, string, error)
}

var demoRows = []demoRow{
	{"interp sumsq", "M=300 G=4096 N=1e6", func(ctx context.Context, rc graphs.RunConfig, dev ops.Device) (*graphs.Outcome, string, error) {
		return demoInterp(ctx, rc, dev, "sumsq", 300, 4096, 1_000_000, 1<<14)
	}},
	{"interp none", "M=300 G=4096 N=1e5", func(ctx context.Context, rc graphs.RunConfig, dev ops.Device) (*graphs.Outcome, string, error) {
		return demoInterp(ctx, rc, dev, "none", 300, 4096, 100_000, 1<<11)
	}},
	{"affinity l1", "N=2000 64×64 block=50", demoAffinity},
	{"drr siddon", "phantom 96³ 72 poses 128²", demoDRR},
	{"wavelet", "24³ wrap 8θ×4φ×2ξ", demoWavelet},
}

var demoCommand = &cli.Command{
	Name:  "demo",
	Usage: "run every workload on built-in synthetic data at CPU-friendly sizes and print one table",
	Description: `Runs each workload on built-in data (the seeds' cases, scaled to finish in
seconds on 2 cores) and prints, per workload: size, batches, median ms per batch,
drift (last-decile/first-decile median batch time), Go heap growth from the
first batch to the last, peak RSS and the result. With --device cuda (the GPU
build) every workload runs on the GPU, or spread over --devices.`,
	Flags: []cli.Flag{memLimitFlag, deviceFlag, devicesFlag},
	Action: func(c *cli.Context) error {
		e, err := legacyConfig(c)
		if err != nil {
			return err
		}
		rc := e.run
		rc.Log, rc.Progress, rc.Verbose = nil, false, false
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if e.dev != nil {
			fmt.Printf("on %v", e.dev)
			for _, d := range rc.Devices[min(1, len(rc.Devices)):] {
				fmt.Printf(", %v", d)
			}
			fmt.Println()
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "workload\tsize\tbatches\tms/batch\tdrift\theap growth\tpeak RSS\tresult")
		for _, d := range demoRows {
			out, res, err := d.run(ctx, rc, e.dev)
			if err != nil {
				return fmt.Errorf("demo %s: %w", d.workload, err)
			}
			s := out.Summary
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.3f\t%.3f\t%s\t%s\t%s\n", d.workload, d.size, s.Batches, s.MedianMs, s.Drift,
				sysmem.Format(s.HeapGrowth), sysmem.Format(s.PeakRSSBytes), res)
		}
		return tw.Flush()
	},
}

// demoInterp runs the seed's interpolation case (f = x² in every row,
// uniform queries on [0, 1]). The cubic scheme reproduces x² exactly away
// from the padded ends, so Σ_j value_j² ≈ M·x⁴ with mean M/5 per query, and
// Σ_j value_j ≈ M·x² with mean M/3.
func demoInterp(ctx context.Context, rc graphs.RunConfig, dev ops.Device, reduce string, m, g, n, batch int) (*graphs.Outcome, string, error) {
	d, err := graphs.CPU(rc.MemLimit) // TEMPORARY: the demo moves to graphs
	if err != nil {
		return nil, "", err
	}
	t, err := graphs.OpenInterp(graphs.InterpSpec{Interpolants: m, Grid: g, Points: n, Seed: 1, Reduce: reduce}, d, false)
	if err != nil {
		return nil, "", err
	}
	defer t.Close()
	rc.Batch = batch
	job := t.Job()
	if dj, ok := job.(graphs.DeviceJob); ok {
		dj.SetDevice(dev)
	}
	out, err := graphs.Run(ctx, job, rc)
	if err != nil {
		return nil, "", err
	}
	r := t.Summary()
	expect := float64(n*m) / 5
	if reduce != "sumsq" {
		expect = float64(n*m) / 3
	}
	return out, fmt.Sprintf("Σ=%.6g (≈%.6g expected)", r.Sum, expect), nil
}

// demoAffinity computes the negative L1 affinities of 2000 standard-normal
// 64×64 images in blocks of 50 rows (40 batches: enough for the drift
// column's deciles to hold more than one batch each). For independent standard normals,
// E|x − y| = 2/√π per value, so the mean off-diagonal affinity is about
// −4096·2/√π ≈ −4622.
func demoAffinity(ctx context.Context, rc graphs.RunConfig, dev ops.Device) (*graphs.Outcome, string, error) {
	const n, d = 2000, 64 * 64
	cpu, err := graphs.CPU(rc.MemLimit) // TEMPORARY: the demo moves to graphs
	if err != nil {
		return nil, "", err
	}
	block := 50
	// Whole rows, streamed, even though the matrix would fit: every block
	// does the same work, so the drift column measures the engine alone.
	t, err := graphs.OpenAffinity(graphs.AffinitySpec{N: n, Height: 64, Width: 64, Seed: 1, Metric: "l1", Block: &block, Streamed: true}, cpu, false)
	if err != nil {
		return nil, "", err
	}
	defer t.Close()
	job := t.Job()
	if dj, ok := job.(graphs.DeviceJob); ok {
		dj.SetDevice(dev)
	}
	rc.Batch = t.Device().RunConfig().Batch
	out, err := graphs.Run(ctx, job, rc)
	if err != nil {
		return nil, "", err
	}
	mean := t.Summary().Checksum / float64(n*(n-1))
	return out, fmt.Sprintf("mean A=%.1f (≈%.1f expected)", mean, -float64(d)*2/math.Sqrt(math.Pi)), nil
}

// demoDRR renders the 96³ Shepp–Logan phantom over a 72-pose orbit.
func demoDRR(ctx context.Context, rc graphs.RunConfig, dev ops.Device) (*graphs.Outcome, string, error) {
	d, err := graphs.CPU(rc.MemLimit) // TEMPORARY: the demo moves to graphs
	if err != nil {
		return nil, "", err
	}
	spec := graphs.DefaultDRRSpec()
	spec.Size, spec.Orbit, spec.Detector = 96, 72, "128x128"
	t, err := graphs.OpenDRR(spec, d, false)
	if err != nil {
		return nil, "", err
	}
	defer t.Close()
	rc.Batch = 2
	job := t.Job()
	if dj, ok := job.(graphs.DeviceJob); ok {
		dj.SetDevice(dev)
	}
	out, err := graphs.Run(ctx, job, rc)
	if err != nil {
		return nil, "", err
	}
	r := t.Summary()
	return out, fmt.Sprintf("Σ=%.5g, max line integral %.4f", r.Sum, r.Max), nil
}

// demoWavelet sweeps 64 kernels over a 24³ random volume with periodic
// boundaries (every batch the same work; in reflect mode the kernels run
// grouped by ξ, and a group with a wider kernel costs more per batch, which
// the drift column would show) and reports the strongest response.
func demoWavelet(ctx context.Context, rc graphs.RunConfig, dev ops.Device) (*graphs.Outcome, string, error) {
	d, err := graphs.CPU(rc.MemLimit) // TEMPORARY: the demo moves to graphs
	if err != nil {
		return nil, "", err
	}
	spec := graphs.WaveletSpec{Size: "24x24x24", Seed: 1, A: 1, Theta: "0:pi:8", Phi: "0:pi:4", Xi: "1,2", Boundary: "wrap"}
	t, err := graphs.OpenWavelet(spec, d, false)
	if err != nil {
		return nil, "", err
	}
	defer t.Close()
	rc.Batch = 2
	job := t.Job()
	if dj, ok := job.(graphs.DeviceJob); ok {
		dj.SetDevice(dev)
	}
	out, err := graphs.Run(ctx, job, rc)
	if err != nil {
		return nil, "", err
	}
	r := t.Summary()
	return out, fmt.Sprintf("max energy %.4g at θ=%.3g φ=%.3g ξ=%g", r.MaxEnergy, r.Theta, r.Phi, r.Xi), nil
}
