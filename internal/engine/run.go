package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/internal/telemetry"
	"github.com/tapeloop/tapeloop/internal/warnings"
	"github.com/tapeloop/tapeloop/ops"
)

// Job is a Workload that also supplies its batches and takes its results.
type Job interface {
	Workload
	// Feed fills the first n rows of the inputs with items [off, off+n).
	Feed(in []*tensor.Dense, off, n int) error
	// Consume takes the first n rows of the outputs: items [off, off+n).
	Consume(out []*tensor.Dense, off, n int) error
}

// Finisher is implemented by Jobs with work to do after the last batch
// (assembling or writing results); Run calls Finish before it returns.
type Finisher interface {
	Finish() error
}

// RunConfig is the engine's configuration, filled from the CLI flags.
type RunConfig struct {
	MemLimit int64     // bytes the planned buffers may take; 0: DefaultMemLimit
	Batch    int       // batch size; 0: planned
	Verbose  bool      // print the plan to Log
	Progress bool      // draw a progress bar on Log once a run lasts over a second
	Log      io.Writer // plan and progress; nil: discard
	// DeviceBytes, when set, reads the GPU memory in use; each batch's
	// record then carries it.
	DeviceBytes func() int64
	// DeviceSeconds, when set, reads the GPU's busy time so far; each
	// batch's record then carries its share. (With several Devices, each
	// batch's time is read from its own device.)
	DeviceSeconds func() float64
	// Baseline is the process's resident set before the inputs were
	// read (Open measures it), counted in the plan's estimate of the peak
	// resident set; 0: measured when the run starts.
	Baseline int64
	// Devices, when it names two or more, runs one Program per device
	// (the job must be a DeviceJob), batches dealt round-robin and run
	// concurrently, fed and consumed in order. The memory limit is shared:
	// each Program is planned under limit/len(Devices).
	Devices []ops.Device
}

// DeviceJob is a Job whose op can be placed on a device before each
// Compile.
type DeviceJob interface {
	Job
	SetDevice(ops.Device)
}

// ErrInterrupted is wrapped by the error of a run stopped by its context
// (SIGINT or SIGTERM in the CLI).
var ErrInterrupted = errors.New("interrupted")

// Outcome is what a run measured.
type Outcome struct {
	Plan       Plan
	Summary    telemetry.Summary
	Iterations []telemetry.Iteration
}

// resolveLimit is limit, or DefaultMemLimit when limit is 0. A limit
// above what the process's cgroup, address-space or data limit leaves is
// lowered to that, and warning says so (capMemLimit).
func resolveLimit(limit int64) (_ int64, warning string, err error) {
	if limit != 0 {
		return capMemLimit(limit)
	}
	l, err := DefaultMemLimit()
	return l, "", err
}

// DefaultMemLimit is half of the memory available to this process: the
// least of what the machine, its cgroup and its own limits (ulimit -v,
// ulimit -d, less what it has mapped and a margin for its threads and the
// C kernels' heaps) leave (sysmem.Available).
func DefaultMemLimit() (int64, error) {
	b, err := sysmem.Tightest()
	if err != nil {
		return 0, err
	}
	limit := max(b.Left/2, 1)
	noteDefaultLimit(limit, b)
	return limit, nil
}

// Run plans job under cfg, compiles it once, and feeds, runs and consumes
// every batch in order, recording each batch's time, heap and RSS. It stops
// between batches when ctx is done.
func Run(ctx context.Context, job Job, cfg RunConfig) (*Outcome, error) {
	log := cfg.Log
	if log == nil {
		log = io.Discard
	}
	limit, warning, err := resolveLimit(cfg.MemLimit)
	if err != nil {
		return nil, err
	}
	if warning != "" {
		fmt.Fprint(log, warnings.Line(warning))
	}
	if job.Items() == 0 { // resumed with every item already done
		return finishOnly(job, limit)
	}
	if len(cfg.Devices) > 1 {
		limit /= int64(len(cfg.Devices))
	}
	plan, err := NewPlan(job, limit, cfg.Batch)
	if err != nil {
		return nil, err
	}
	plan = plan.withBaseline(baselineOr(cfg.Baseline), job)
	if cfg.Verbose {
		plan.Print(log)
	}
	devs := cfg.Devices
	if len(devs) < 2 {
		devs = nil // the job's own device: a single Program
	}
	progs := make([]*Program, max(len(devs), 1))
	busy := make([]func() float64, len(progs))
	for i := range progs {
		if devs != nil {
			dj, ok := job.(DeviceJob)
			if !ok {
				return nil, fmt.Errorf("%s: cannot run on several devices", job.Name())
			}
			dj.SetDevice(devs[i])
			if b, ok := devs[i].(interface{ BusySeconds() float64 }); ok {
				busy[i] = b.BusySeconds
			}
		} else {
			busy[i] = cfg.DeviceSeconds
		}
		p, err := Compile(job, plan.Batch)
		if err != nil {
			return nil, err
		}
		defer p.Close()
		defer context.AfterFunc(ctx, p.Stop)()
		progs[i] = p
	}

	rec := telemetry.NewRecorder(plan.Batches)
	rec.DeviceBytes = cfg.DeviceBytes
	var bar *progressbar.ProgressBar
	var probe *sysmem.Probe
	began := time.Now()
	items := plan.Items
	loop := batchLoop{job: job, progs: progs, items: items, busy: busy, record: rec.Record,
		stopped: func() bool { return ctx.Err() != nil }, after: "; nothing was written"}
	// A job whose items differ in cost has its time left estimated from
	// the cost of what remains, not the count.
	coster, _ := job.(Coster)
	var total, spent float64 // the whole run's cost, and that of the items done
	counted := 0             // the items whose cost spent holds
	if coster != nil {
		total = coster.Cost(0, items)
	}
	loop.done = func(done int) {
		if cfg.Progress && bar == nil && time.Since(began) > time.Second && done < items {
			bar = progressbar.NewOptions(items,
				progressbar.OptionSetWriter(log),
				progressbar.OptionSetDescription(job.Name()),
				progressbar.OptionShowCount(),
				progressbar.OptionShowIts(),
				progressbar.OptionSetItsString(itemUnit(job)),
				progressbar.OptionSetPredictTime(coster == nil || total <= 0),
				progressbar.OptionThrottle(200*time.Millisecond),
				progressbar.OptionClearOnFinish(),
			)
			probe = sysmem.NewProbe()
		}
		if bar != nil {
			// done/total, the rate and [elapsed:remaining] (or the time
			// left by cost), and the memory in use
			desc := fmt.Sprintf("%s, RSS %s", job.Name(), sysmem.Format(probe.RSS()))
			if coster != nil && total > 0 {
				spent, counted = spent+coster.Cost(counted, done-counted), done
				desc += ", " + timeLeft(time.Since(began), spent, total)
			}
			bar.Describe(desc)
			bar.Set(done)
		}
	}
	defer func() {
		if probe != nil {
			probe.Close()
		}
	}()
	if _, err := loop.run(); err != nil {
		return nil, err
	}
	if bar != nil {
		bar.Finish()
	}
	if err := finish(job); err != nil {
		return nil, err
	}
	s := rec.Close()
	return &Outcome{Plan: plan, Summary: s, Iterations: rec.Iterations}, nil
}

// baselineOr is b, or the process's resident set now when b is 0.
func baselineOr(b int64) int64 {
	if b > 0 {
		return b
	}
	p := sysmem.NewProbe()
	defer p.Close()
	return p.RSS()
}

// timeLeft is the time a run has left that has spent elapsed on done of
// total units of cost: "~2m30s left".
func timeLeft(elapsed time.Duration, done, total float64) string {
	if done <= 0 {
		return "time left unknown"
	}
	left := time.Duration(float64(elapsed) * (total - done) / done)
	return "~" + left.Round(time.Second).String() + " left"
}

// finish calls job's Finish, if it has one, after its last batch.
func finish(job Job) error {
	if f, ok := job.(Finisher); ok {
		if err := f.Finish(); err != nil {
			return fmt.Errorf("%s: %w", job.Name(), err)
		}
	}
	return nil
}

// finishOnly finishes a job with no batches to run.
func finishOnly(job Job, limit int64) (*Outcome, error) {
	if err := finish(job); err != nil {
		return nil, err
	}
	return &Outcome{Plan: Plan{Workload: job.Name(), Limit: limit}, Summary: telemetry.NewRecorder(0).Close()}, nil
}

// A Coster is a Job whose items differ in cost: Cost is what the items
// run in places [off, off+n) cost, in any unit proportional to time (a
// wavelet sweep's combinations: their transforms' sizes). The progress
// bar's time left and the report's drift use it.
type Coster interface {
	Cost(off, n int) float64
}

// ItemNamer is implemented by the Workloads that name their items (rows,
// poses, …) for the progress bar's rate; the others' are "items".
type ItemNamer interface {
	ItemUnit() string
}

// itemUnit names what w's items are.
func itemUnit(w Workload) string {
	if n, ok := w.(ItemNamer); ok {
		return n.ItemUnit()
	}
	return "items"
}
