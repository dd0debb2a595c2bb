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
// above what the process's address-space or data limit leaves is lowered
// to that, one above the limit itself refused (capMemLimit).
func resolveLimit(limit int64) (int64, error) {
	if limit != 0 {
		return capMemLimit(limit)
	}
	return DefaultMemLimit()
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
	limit, err := resolveLimit(cfg.MemLimit)
	if err != nil {
		return nil, err
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
	if cfg.Verbose {
		plan.Print(log)
	}
	if len(cfg.Devices) > 1 {
		return runDevices(ctx, job, cfg, plan)
	}
	prog, err := Compile(job, plan.Batch)
	if err != nil {
		return nil, err
	}
	defer prog.Close()
	defer context.AfterFunc(ctx, prog.Stop)()

	rec := telemetry.NewRecorder(plan.Batches)
	rec.DeviceBytes, rec.DeviceSeconds = cfg.DeviceBytes, cfg.DeviceSeconds
	var bar *progressbar.ProgressBar
	var probe *sysmem.Probe
	began := time.Now()
	items := plan.Items
	for off := 0; off < items; off += plan.Batch {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w after %d of %d items; nothing was written", job.Name(), ErrInterrupted, off, items)
		}
		n := min(plan.Batch, items-off)
		rec.Start()
		if err := replayBatch(prog, job, off, n); err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%s: %w during the batch at item %d of %d; nothing was written", job.Name(), ErrInterrupted, off, items)
			}
			return nil, err
		}
		rec.Stop()
		if cfg.Progress && bar == nil && time.Since(began) > time.Second && off+n < items {
			bar = progressbar.NewOptions(items,
				progressbar.OptionSetWriter(log),
				progressbar.OptionSetDescription(job.Name()),
				progressbar.OptionShowCount(),
				progressbar.OptionShowIts(),
				progressbar.OptionSetItsString(itemUnit(job)),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionThrottle(200*time.Millisecond),
				progressbar.OptionClearOnFinish(),
			)
			probe = sysmem.NewProbe()
			defer probe.Close()
		}
		if bar != nil {
			// done/total, the rate and [elapsed:remaining], and the memory in use
			bar.Describe(fmt.Sprintf("%s, RSS %s", job.Name(), sysmem.Format(probe.RSS())))
			bar.Set(off + n)
		}
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

// replayBatch feeds items [off, off+n) of job into p, runs p once and
// gives the outputs to job.
func replayBatch(p *Program, job Job, off, n int) error {
	if err := job.Feed(p.Inputs(), off, n); err != nil {
		return err
	}
	if err := p.Pad(n); err != nil {
		return err
	}
	if _, err := p.Run(); err != nil {
		return err
	}
	return job.Consume(p.Outputs(), off, n)
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

// runDevices is Run over one Program per device: batch k runs on program
// k mod D, concurrently with the others; Feed and Consume stay in the
// caller's goroutine, in batch order, so jobs see the same sequence as in
// a single-device run. A batch's record is the time its Program took.
func runDevices(ctx context.Context, job Job, cfg RunConfig, plan Plan) (*Outcome, error) {
	dj, ok := job.(DeviceJob)
	if !ok {
		return nil, fmt.Errorf("%s: cannot run on several devices", job.Name())
	}
	nd := len(cfg.Devices)
	progs := make([]*Program, nd)
	for i, dev := range cfg.Devices {
		dj.SetDevice(dev)
		p, err := Compile(job, plan.Batch)
		if err != nil {
			return nil, err
		}
		defer p.Close()
		defer context.AfterFunc(ctx, p.Stop)()
		progs[i] = p
	}
	type result struct {
		secs, busy float64 // wall time, and the device's busy time
		err        error
	}
	start := make([]chan struct{}, nd)
	done := make([]chan result, nd)
	for i := range progs {
		start[i], done[i] = make(chan struct{}), make(chan result, 1)
		busy := func() float64 { return 0 }
		if b, ok := cfg.Devices[i].(interface{ BusySeconds() float64 }); ok {
			busy = b.BusySeconds
		}
		go func(p *Program, start <-chan struct{}, done chan<- result) {
			for range start {
				t0, b0 := time.Now(), busy()
				_, err := p.Run()
				done <- result{time.Since(t0).Seconds(), busy() - b0, err}
			}
		}(progs[i], start[i], done[i])
	}
	inflight := make([]bool, nd)
	defer func() { // runs before the Programs close: nothing may still be running them
		for i, c := range start {
			if inflight[i] {
				<-done[i]
			}
			close(c)
		}
	}()
	rec := telemetry.NewRecorder(plan.Batches)
	rec.DeviceBytes = cfg.DeviceBytes // device time: each batch's own, measured on its device
	items := plan.Items
	nb := (items + plan.Batch - 1) / plan.Batch
	size := func(k int) int { return min(plan.Batch, items-k*plan.Batch) }
	// consume waits for batch k and consumes it.
	consume := func(k int) error {
		r := <-done[k%nd]
		inflight[k%nd] = false
		if r.err != nil && ctx.Err() != nil {
			return fmt.Errorf("%s: %w during the batch at item %d of %d; nothing was written", job.Name(), ErrInterrupted, k*plan.Batch, items)
		}
		if r.err != nil {
			return r.err
		}
		if err := job.Consume(progs[k%nd].Outputs(), k*plan.Batch, size(k)); err != nil {
			return err
		}
		rec.Record(r.secs, r.busy)
		return nil
	}
	next := 0 // the oldest batch not yet consumed
	for k := range nb {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w after %d of %d items; nothing was written", job.Name(), ErrInterrupted, k*plan.Batch, items)
		}
		if k >= nd { // program k mod D is busy with batch k−D
			if err := consume(next); err != nil {
				return nil, err
			}
			next++
		}
		p := progs[k%nd]
		if err := job.Feed(p.Inputs(), k*plan.Batch, size(k)); err != nil {
			return nil, err
		}
		if err := p.Pad(size(k)); err != nil {
			return nil, err
		}
		start[k%nd] <- struct{}{}
		inflight[k%nd] = true
	}
	for ; next < nb; next++ {
		if err := consume(next); err != nil {
			return nil, err
		}
	}
	if err := finish(job); err != nil {
		return nil, err
	}
	s := rec.Close()
	return &Outcome{Plan: plan, Summary: s, Iterations: rec.Iterations}, nil
}
