package main

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/tapeloop/tapeloop/graphs/option"
	"github.com/tapeloop/tapeloop/internal/atomicfile"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/filejob"
	"github.com/tapeloop/tapeloop/internal/telemetry"
	"github.com/tapeloop/tapeloop/internal/warnings"
)

const (
	catEngine  = "ENGINE"
	catProfile = "PROFILING"
)

// Engine flags, shared by every workload command: their names, defaults,
// environment variables and help are engine.Settings' tags.
var (
	memLimitFlag = settingFlag(&cli.StringFlag{Category: catEngine}, "mem-limit")
	batchFlag    = settingFlag(&cli.IntFlag{Category: catEngine}, "batch")
	deviceFlag   = settingFlag(&cli.StringFlag{Category: catEngine}, "device")
	devicesFlag  = settingFlag(&cli.StringFlag{Category: catEngine}, "devices")
	dtypeFlag    = settingFlag(&cli.StringFlag{Category: catEngine}, "dtype")
	reportFlag   = &cli.StringFlag{Name: "report", TakesFile: true, Category: catEngine, Usage: "write a JSON report with per-batch telemetry to `FILE`"}
	quietFlag    = &cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Category: catEngine, Usage: "no progress bar and no summary on stderr"}
	verboseFlag  = &cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Category: catEngine, Usage: "print the memory plan"}
	cpuProfFlag  = &cli.StringFlag{Name: "cpuprofile", TakesFile: true, Category: catProfile, Usage: "write a pprof CPU profile to `FILE`"}
	memProfFlag  = &cli.StringFlag{Name: "memprofile", TakesFile: true, Category: catProfile, Usage: "write a pprof heap profile to `FILE` at the end"}
	traceFlag    = &cli.StringFlag{Name: "trace", TakesFile: true, Category: catProfile, Usage: "write a runtime/trace execution trace to `FILE`"}
)

// settingFlag fills f, a string or int flag, with the name, default,
// environment variable and help of the engine setting whose flag is name
// (engine.Settings), in the ENGINE category.
func settingFlag[F configFlags](f F, name string) F {
	return configFlag(f, engine.Settings{}, name)
}

// configFlags are the kinds of flag configFlag fills.
type configFlags interface {
	*cli.StringFlag | *cli.IntFlag | *cli.BoolFlag | *cli.Float64Flag | *cli.StringSliceFlag
}

// configFlag fills f with the name, help, environment variable and
// default of the option of cfg (a Config holding the defaults) whose
// flag is name, as the tags of its field say (option.Field); a default
// f already has stays. The help's Arg is the value's placeholder. f
// names its Category.
func configFlag[F configFlags](f F, cfg any, name string) F {
	o := option.Flag(cfg, name)
	usage := o.Help
	if o.Arg != "" {
		if !strings.Contains(usage, o.Arg) {
			panic("tapeloop: --" + name + ": the help does not name its value " + o.Arg)
		}
		usage = strings.Replace(usage, o.Arg, "`"+o.Arg+"`", 1)
	}
	var env []string
	if o.Env != "" {
		env = []string{o.Env}
	}
	v := reflect.ValueOf(cfg).FieldByName(o.Go)
	switch f := any(f).(type) {
	case *cli.StringFlag:
		f.Name, f.Usage, f.EnvVars = o.Flag, usage, env
		if f.Value == "" && v.Kind() == reflect.String {
			f.Value = v.String()
		}
		if f.Value == "" {
			f.Value = o.Default
		}
	case *cli.IntFlag:
		f.Name, f.Usage, f.EnvVars = o.Flag, usage, env
		if f.Value == 0 && v.Kind() == reflect.Int {
			f.Value = int(v.Int())
		}
	case *cli.BoolFlag:
		f.Name, f.Usage, f.EnvVars = o.Flag, usage, env
	case *cli.StringSliceFlag:
		f.Name, f.Usage, f.EnvVars = o.Flag, usage, env
	case *cli.Float64Flag:
		f.Name, f.Usage, f.EnvVars = o.Flag, usage, env
		if f.Value == 0 && v.Kind() == reflect.Float64 {
			f.Value = v.Float()
		}
	}
	return f
}

// Flags of the workloads' formulas.
var (
	paramFlag = &cli.StringSliceFlag{Name: "param", Category: "FORMULA",
		Usage: "a formula's parameter, `name=value` (repeat for each)"}
	failNonFiniteFlag = &cli.BoolFlag{Name: "fail-on-nonfinite", Category: "FORMULA",
		Usage: "stop with an error when a formula gives NaN or ±Inf, or a wavelet combination has no kernel (ξ = 0) (else they are counted and reported)"}
)

// resumeFlag continues a wavelet or DRR run from the checkpoint beside its
// output.
var resumeFlag = &cli.BoolFlag{Name: "resume", Category: catEngine,
	Usage: "continue a stopped run from its checkpoint (wavelet: OUT.ckpt; drr: DIR/drr.npy.ckpt; a shard: FILE.npz.ckpt): the same command and flags, plus --resume"}

// params reads --param name=value.
func params(c *cli.Context) (map[string]float64, error) {
	return option.ParseParams(c.StringSlice(paramFlag.Name))
}

// warnNonFinite says on stderr how many non-finite values a formula gave.
func warnNonFinite(e engineOpts, flag string, n int64) {
	if n > 0 {
		warnings.Printf(os.Stderr, "%s gave %d non-finite values (NaN or ±Inf)", flag, n)
	}
}

var engineFlags = []cli.Flag{memLimitFlag, batchFlag, deviceFlag, devicesFlag, dtypeFlag, reportFlag, quietFlag, verboseFlag, cpuProfFlag, memProfFlag, traceFlag}

// engineOpts is the engine configuration read from the flags, with the
// command-line-only settings (report, profiles) beside it.
type engineOpts struct {
	engine.Engine
	report     string
	quiet      bool
	cpuprofile string
	memprofile string
	trace      string
}

// engineConfig reads the engine flags into engine.Settings and parses them
// as the C ABI does (Settings.Engine); engine.Engine.Validate checks them.
func engineConfig(c *cli.Context) (engineOpts, error) {
	e := engineOpts{
		report: c.String(reportFlag.Name), quiet: c.Bool(quietFlag.Name),
		cpuprofile: c.String(cpuProfFlag.Name), memprofile: c.String(memProfFlag.Name), trace: c.String(traceFlag.Name),
	}
	var set engine.Settings
	var skip []string
	if !hasFlag(c, dtypeFlag) { // a command whose --dtype means something else has its own
		skip = append(skip, dtypeFlag.Name)
	}
	readConfig(c, &set, skip...)
	if c.IsSet(batchFlag.Name) && set.Batch < 1 { // 0 is the planner's choice only by default
		return e, fmt.Errorf("--batch %d: must be at least 1", set.Batch)
	}
	var err error
	if e.Engine, err = set.Engine(); err != nil {
		return e, err
	}
	e.Verbose = c.Bool(verboseFlag.Name)
	e.Log, e.Warn = os.Stderr, os.Stderr
	e.Progress = !e.quiet && term.IsTerminal(int(os.Stderr.Fd()))
	return e, e.Validate()
}

// checkPaths refuses, before any work, outputs (the workload's and the
// report and profiles) that would overwrite an input or each other.
func checkPaths(e engineOpts, s filejob.Paths) error {
	outs := append(s.OutputPaths(),
		filejob.Path{Flag: reportFlag.Name, Path: e.report}, filejob.Path{Flag: cpuProfFlag.Name, Path: e.cpuprofile},
		filejob.Path{Flag: memProfFlag.Name, Path: e.memprofile}, filejob.Path{Flag: traceFlag.Name, Path: e.trace})
	return filejob.CheckPaths(s.InputPaths(), outs)
}

// spec is a workload's spec as the commands use it.
type spec interface {
	filejob.Paths
	Validate() error
}

// openTask reads the engine flags, opens the device, checks s (its rules,
// then its paths and the report's and profiles') and opens its task.
func openTask[S spec, T filejob.Task](c *cli.Context, s S, open func(S, *engine.Device, bool) (T, error)) (e engineOpts, dev *engine.Device, t T, err error) {
	if c.Args().Present() {
		return e, nil, t, fmt.Errorf("%s: unexpected argument %q", c.Command.Name, c.Args().First())
	}
	if e, dev, err = openEngine(c); err != nil {
		return e, nil, t, err
	}
	if err = s.Validate(); err != nil {
		return e, nil, t, err
	}
	if err = checkPaths(e, s); err != nil {
		return e, nil, t, err
	}
	t, err = open(s, dev, true)
	return e, dev, t, err
}

// openEngine reads the engine flags and opens the device they name.
func openEngine(c *cli.Context) (engineOpts, *engine.Device, error) {
	e, err := engineConfig(c)
	if err != nil {
		return e, nil, err
	}
	dev, err := engine.Open(e.Engine)
	return e, dev, err
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

// runTask runs t's job on dev with profiling as configured, prints the
// result to standard output through result, commits the outputs, the
// report and the profiles, and prints the summary line to stderr. A run
// that fails, a write to standard output included, commits none of them
// and an existing file of the same name is left as it was; only a rename
// of a profile or the report, the last steps, can fail once the outputs
// are in place.
func runTask(ctx context.Context, e engineOpts, dev *engine.Device, t filejob.Task, result func()) (*engine.Outcome, error) {
	job := t.Job()
	prof, err := startProfiles(e)
	if err != nil {
		return nil, err
	}
	defer prof.abort()
	out, err := dev.Run(ctx, job)
	if perr := prof.stop(); err == nil {
		err = perr
	}
	if err == nil && ctx.Err() != nil { // stopped during the last batch
		err = fmt.Errorf("%s: %w after the last batch; nothing was written", job.Name(), engine.ErrInterrupted)
	}
	if err != nil {
		return nil, stdoutFirst(job.Name(), err)
	}
	var rep *atomicfile.File
	var r *telemetry.Report
	if e.report != "" {
		r = &telemetry.Report{
			Workload: job.Name(), Device: dev.Kind(), Platform: cpuPlatform(), Dtype: job.Dtype().String(),
			Batch: out.Plan.Batch, Batches: out.Plan.Batches, MemLimitBytes: out.Plan.Limit, PlannedBytes: out.Plan.Bytes,
			PeakRSSBytes: out.Summary.PeakRSSBytes, EstimatedPeakRSSBytes: out.Plan.Estimate, BaselineRSSBytes: out.Plan.Baseline, TotalSeconds: out.Summary.TotalSeconds, Summary: out.Summary,
			Items: out.Plan.Items, MemLimitWarning: dev.LimitWarning,
			Plan: out.Plan, Iterations: out.Iterations, Result: t.Result(),
		}
		if r.TotalSeconds > 0 {
			r.ItemsPerSecond = float64(r.Items) / r.TotalSeconds
		}
		if rep, err = r.Stage(e.report); err != nil {
			return nil, fmt.Errorf("--report: %w", err)
		}
		defer func() { rep.Abort() }() // the report staged last
	}
	if result != nil {
		result()
	}
	if err := stdout.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", job.Name(), err)
	}
	if err := t.Commit(); err != nil { // a CSV to standard output is flushed here
		return nil, stdoutFirst(job.Name(), err)
	}
	if pt, ok := t.(filejob.PhasedTask); ok && rep != nil && pt.PhasesChange() {
		// The phases now include the outputs' writing. Should this report
		// fail where the first did not, the first stands.
		r.Result = t.Result()
		if again, err := r.Stage(e.report); err == nil {
			rep.Abort()
			rep = again
		}
	}
	if err := prof.commit(); err != nil {
		return nil, err
	}
	if rep != nil {
		if err := rep.Rename(); err != nil {
			return nil, fmt.Errorf("--report: %w", err)
		}
	}
	if !e.quiet {
		fmt.Fprintf(os.Stderr, "%s: %s\n", job.Name(), out.Summary)
	}
	return out, nil
}

// stdoutFirst is err, the error that ended a run, or, when standard output
// failed (the wavelet CSV goes there), that failure, the cause, named by
// the workload.
func stdoutFirst(workload string, err error) error {
	if werr := stdout.Err(); werr != nil {
		return fmt.Errorf("%s: %w", workload, werr)
	}
	return err
}

// profiles are a run's --cpuprofile, --trace and --memprofile files. Each
// is written to a temporary file beside its destination and renamed into
// place by commit, only when the run succeeded; abort removes them.
type profiles struct {
	files   []*profileFile
	stops   []func() // the CPU profile's and the trace's
	heap    *profileFile
	stopped bool
}

// profileFile is one profile being written.
type profileFile struct {
	flag string
	f    *atomicfile.File
	w    *checkedWriter // the profilers do not report their write errors: w keeps them
}

// startProfiles creates the profile files and starts the CPU profile and
// the execution trace; stop writes the heap profile.
func startProfiles(e engineOpts) (_ *profiles, err error) {
	p := &profiles{}
	defer func() {
		if err != nil {
			p.abort()
		}
	}()
	create := func(flag, path string) (*profileFile, error) {
		f, err := atomicfile.Create(path)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", flag, err)
		}
		pf := &profileFile{flag: flag, f: f, w: &checkedWriter{w: f, name: path}}
		p.files = append(p.files, pf)
		return pf, nil
	}
	if e.cpuprofile != "" {
		pf, err := create(cpuProfFlag.Name, e.cpuprofile)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(pf.w); err != nil {
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
		p.stops = append(p.stops, pprof.StopCPUProfile)
	}
	if e.trace != "" {
		pf, err := create(traceFlag.Name, e.trace)
		if err != nil {
			return nil, err
		}
		if err := trace.Start(pf.w); err != nil {
			return nil, fmt.Errorf("--trace: %w", err)
		}
		p.stops = append(p.stops, trace.Stop)
	}
	if e.memprofile != "" {
		if p.heap, err = create(memProfFlag.Name, e.memprofile); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// stop stops the CPU profile and the trace, writes the heap profile and
// finishes every file, short of renaming it: the first error is returned.
func (p *profiles) stop() error {
	p.halt()
	if p.heap != nil {
		runtime.GC()
		if err := pprof.WriteHeapProfile(p.heap.w); err != nil && p.heap.w.Err() == nil {
			return fmt.Errorf("--memprofile: %w", err)
		}
	}
	for _, pf := range p.files {
		if err := pf.w.Err(); err != nil {
			return fmt.Errorf("--%s: %w", pf.flag, err)
		}
		if err := pf.f.Sync(); err != nil {
			pf.w.fail(err)
			return fmt.Errorf("--%s: %w", pf.flag, pf.w.Err())
		}
		if err := pf.f.Close(); err != nil {
			pf.w.fail(err)
			return fmt.Errorf("--%s: %w", pf.flag, pf.w.Err())
		}
	}
	return nil
}

// halt stops the profilers still running, once; each returns only after
// its last write.
func (p *profiles) halt() {
	if p.stopped {
		return
	}
	p.stopped = true
	for i := len(p.stops) - 1; i >= 0; i-- {
		p.stops[i]()
	}
}

// commit renames the finished profiles into place.
func (p *profiles) commit() error {
	for _, pf := range p.files {
		if err := pf.f.Rename(); err != nil {
			return fmt.Errorf("--%s: %w", pf.flag, err)
		}
	}
	return nil
}

// abort stops the profilers and removes the profiles not committed; after
// commit it does nothing.
func (p *profiles) abort() {
	p.halt()
	for _, pf := range p.files {
		pf.f.Abort()
	}
}
