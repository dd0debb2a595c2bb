package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/internal/telemetry"
	"github.com/tapeloop/tapeloop/ops"
)

const (
	catEngine  = "ENGINE"
	catProfile = "PROFILING"
)

// Engine flags, shared by every workload command.
var (
	memLimitFlag = &cli.StringFlag{Name: "mem-limit", Category: catEngine, EnvVars: []string{"TAPELOOP_MEM_LIMIT"},
		Usage: "memory the planned buffers may take, e.g. 512MiB or 2GB (default: half of available memory)"}
	batchFlag  = &cli.IntFlag{Name: "batch", Category: catEngine, Usage: "batch size, overriding the planner"}
	deviceFlag = &cli.StringFlag{Name: "device", Category: catEngine, Value: "cpu", EnvVars: []string{"TAPELOOP_DEVICE"},
		Usage: "where to run: cpu or cuda"}
	devicesFlag = &cli.StringFlag{Name: "devices", Category: catEngine, EnvVars: []string{"TAPELOOP_DEVICES"},
		Usage: "with --device cuda: the GPUs to spread batches over, e.g. 0,1,2,3 (default 0)"}
	dtypeFlag = &cli.StringFlag{Name: "dtype", Category: catEngine, Value: "float32",
		Usage: "element type of the computation: float32 or float64"}
	reportFlag  = &cli.StringFlag{Name: "report", Category: catEngine, Usage: "write a JSON report with per-batch telemetry to `FILE`"}
	quietFlag   = &cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Category: catEngine, Usage: "no progress bar and no summary on stderr"}
	verboseFlag = &cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Category: catEngine, Usage: "print the memory plan"}
	cpuProfFlag = &cli.StringFlag{Name: "cpuprofile", Category: catProfile, Usage: "write a pprof CPU profile to `FILE`"}
	memProfFlag = &cli.StringFlag{Name: "memprofile", Category: catProfile, Usage: "write a pprof heap profile to `FILE` at the end"}
	traceFlag   = &cli.StringFlag{Name: "trace", Category: catProfile, Usage: "write a runtime/trace execution trace to `FILE`"}
)

var engineFlags = []cli.Flag{memLimitFlag, batchFlag, deviceFlag, devicesFlag, dtypeFlag, reportFlag, quietFlag, verboseFlag, cpuProfFlag, memProfFlag, traceFlag}

// engine is the engine configuration read from the flags.
type engine struct {
	run        graphs.RunConfig
	dtype      tensor.Dtype
	device     string
	dev        ops.Device // nil: the CPU
	report     string
	quiet      bool
	cpuprofile string
	memprofile string
	trace      string
}

func engineConfig(c *cli.Context) (engine, error) {
	e := engine{
		report: c.String(reportFlag.Name), quiet: c.Bool(quietFlag.Name), device: c.String(deviceFlag.Name),
		cpuprofile: c.String(cpuProfFlag.Name), memprofile: c.String(memProfFlag.Name), trace: c.String(traceFlag.Name),
	}
	switch e.device {
	case "cpu":
	case "cuda":
		if !cudaBuild {
			return e, errors.New("--device cuda: this tapeloop was built without CUDA; build the GPU flavour with `make build-cuda` on a machine with the CUDA toolkit")
		}
		ordinals := []int{0}
		if s := c.String(devicesFlag.Name); s != "" {
			var err error
			if ordinals, err = parseOrdinals(s); err != nil {
				return e, fmt.Errorf("--devices %q: %w", s, err)
			}
		}
		var devs []ops.Device
		for _, o := range ordinals {
			dev, err := openDevice(o)
			if err != nil {
				return e, fmt.Errorf("--device cuda: GPU %d: %w", o, err)
			}
			devs = append(devs, dev)
		}
		e.dev = devs[0]
		if len(devs) > 1 {
			e.run.Devices = devs
		}
		e.run.DeviceBytes = func() int64 { // the GPUs' memory in use, together
			var used int64
			for _, d := range devs {
				m, ok := d.(interface{ MemInfo() (int64, int64, error) })
				if !ok {
					return -1
				}
				free, total, err := m.MemInfo()
				if err != nil {
					return -1
				}
				used += total - free
			}
			return used
		}
		e.run.DeviceSeconds = func() float64 { // the GPUs' busy time, together
			var busy float64
			for _, d := range devs {
				if b, ok := d.(interface{ BusySeconds() float64 }); ok {
					busy += b.BusySeconds()
				}
			}
			return busy
		}
	default:
		return e, fmt.Errorf("--device %q: want cpu or cuda", e.device)
	}
	dtype := c.String(dtypeFlag.Name)
	if !hasFlag(c, dtypeFlag) {
		dtype = "float32" // a command whose --dtype means something else
	}
	switch dtype {
	case "float32":
		e.dtype = tensor.Float32
	case "float64":
		e.dtype = tensor.Float64
	default:
		return e, fmt.Errorf("--dtype %q: want float32 or float64", c.String(dtypeFlag.Name))
	}
	if s := c.String(memLimitFlag.Name); s != "" {
		b, err := sysmem.ParseSize(s)
		if err != nil {
			return e, fmt.Errorf("--mem-limit: %w", err)
		}
		e.run.MemLimit = b
	}
	if c.IsSet(batchFlag.Name) {
		if b := c.Int(batchFlag.Name); b < 1 {
			return e, fmt.Errorf("--batch %d: must be at least 1", b)
		} else {
			e.run.Batch = b
		}
	}
	if e.dev != nil {
		lim := e.run.MemLimit
		if lim == 0 {
			var err error
			if lim, err = graphs.DefaultMemLimit(); err != nil {
				return e, err
			}
		}
		devs := e.run.Devices
		if len(devs) == 0 {
			devs = []ops.Device{e.dev}
		}
		for _, d := range devs { // device memory, as host memory, bounded by --mem-limit
			if l, ok := d.(interface{ SetLimit(int64) }); ok {
				l.SetLimit(lim / int64(len(devs)))
			}
		}
	}
	if c.String(devicesFlag.Name) != "" && e.device != "cuda" {
		return e, errors.New("--devices: needs --device cuda")
	}
	e.run.Verbose = c.Bool(verboseFlag.Name)
	e.run.Log = os.Stderr
	e.run.Progress = !e.quiet && term.IsTerminal(int(os.Stderr.Fd()))
	return e, nil
}

// hasFlag reports whether the running command defines f itself.
func hasFlag(c *cli.Context, f cli.Flag) bool {
	if c.Command == nil {
		return false
	}
	for _, g := range c.Command.Flags {
		if g == f {
			return true
		}
	}
	return false
}

// runJob runs job with profiling as configured, prints the summary line to
// stderr and writes the report.
func runJob(e engine, job graphs.Job, result func() any) (*graphs.Outcome, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopProf, err := startProfiles(e)
	if err != nil {
		return nil, err
	}
	out, err := graphs.Run(ctx, job, e.run)
	if perr := stopProf(); err == nil {
		err = perr
	}
	if err != nil {
		return nil, err
	}
	if !e.quiet {
		fmt.Fprintf(os.Stderr, "%s: %s\n", job.Name(), out.Summary)
	}
	if e.report != "" {
		rep := newReport(e, job, out, result())
		if err := rep.WriteFile(e.report); err != nil {
			return nil, fmt.Errorf("--report: %w", err)
		}
	}
	return out, nil
}

func newReport(e engine, job graphs.Job, out *graphs.Outcome, result any) *telemetry.Report {
	return &telemetry.Report{
		Workload: job.Name(), Device: e.device, Dtype: job.Dtype().String(),
		Batch: out.Plan.Batch, Batches: out.Plan.Batches, MemLimitBytes: out.Plan.Limit, PlannedBytes: out.Plan.Bytes,
		PeakRSSBytes: out.Summary.PeakRSSBytes, TotalSeconds: out.Summary.TotalSeconds, Summary: out.Summary,
		Plan: out.Plan, Iterations: out.Iterations, Result: result,
	}
}

// startProfiles starts the CPU profile and execution trace and returns a
// function that stops them and writes the heap profile.
func startProfiles(e engine) (func() error, error) {
	var closers []func() error
	stop := func() error {
		var first error
		for i := len(closers) - 1; i >= 0; i-- {
			if err := closers[i](); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	create := func(flag, path string) (*os.File, error) {
		f, err := os.Create(path)
		if err != nil {
			stop()
			return nil, fmt.Errorf("--%s: %w", flag, err)
		}
		return f, nil
	}
	if e.cpuprofile != "" {
		f, err := create(cpuProfFlag.Name, e.cpuprofile)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			stop()
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
		closers = append(closers, func() error { pprof.StopCPUProfile(); return f.Close() })
	}
	if e.trace != "" {
		f, err := create(traceFlag.Name, e.trace)
		if err != nil {
			return nil, err
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			stop()
			return nil, fmt.Errorf("--trace: %w", err)
		}
		closers = append(closers, func() error { trace.Stop(); return f.Close() })
	}
	if e.memprofile != "" {
		path := e.memprofile
		closers = append(closers, func() error {
			f, err := os.Create(path)
			if err != nil {
				return fmt.Errorf("--memprofile: %w", err)
			}
			runtime.GC()
			if err := pprof.WriteHeapProfile(f); err != nil {
				f.Close()
				return fmt.Errorf("--memprofile: %w", err)
			}
			return f.Close()
		})
	}
	return stop, nil
}

// parseOrdinals parses a comma-separated list of distinct GPU numbers.
func parseOrdinals(s string) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a GPU number", f)
		}
		if seen[n] {
			return nil, fmt.Errorf("GPU %d listed twice", n)
		}
		seen[n] = true
		out = append(out, n)
	}
	return out, nil
}
