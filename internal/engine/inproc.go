package engine

import (
	"bytes"
	"time"

	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/internal/telemetry"
)

// This file is the in-process side of the engine, for callers in the same
// process (the C ABI and the Python package over it): a workload compiled
// once, then called again and again on the caller's arrays, each call
// replaying the same Program over the same buffers.

// Session runs Jobs over one Program compiled once, call after call, and
// keeps each call's time for Report.
type Session struct {
	prog  *Program
	plan  Plan
	calls int
	// secs holds the time of the latest calls (a ring of maxCalls).
	secs      []float64
	items     int     // the last call's items
	batches   int     // the last call's batches
	last      float64 // the last call's seconds
	total     float64 // seconds in every call
	totalItem int
	warning   string // the device's LimitWarning
}

// maxCalls is how many calls' times a Report summarises.
const maxCalls = 1 << 16

// InProcess is dev, or the CPU under the default limit when dev is
// nil. An in-process program runs on one device.
func InProcess(dev *Device) (*Device, error) {
	if dev == nil {
		return CPU(0)
	}
	if len(dev.gpus) > 1 {
		return nil, engineErrorf("--devices: a compiled object runs on one GPU, not %d", len(dev.gpus))
	}
	return dev, nil
}

// NewSession places w on dev (when it is a DeviceJob) and compiles it for
// dev's batch, or the batch NewPlan picks under dev's memory limit. With
// perCall the items come with each call: the plan counts a full batch
// (dev's, else w.MaxBatch), not w.Items.
func NewSession(w Workload, dev *Device, perCall bool) (*Session, error) {
	if dj, ok := w.(DeviceJob); ok {
		dj.SetDevice(dev.op())
	}
	items := w.Items()
	if perCall {
		items = dev.run.Batch
		if items == 0 {
			items = max(w.MaxBatch(), 1)
		}
	}
	plan, err := planFor(w, items, dev.run.MemLimit, dev.run.Batch)
	if err != nil {
		return nil, err
	}
	plan = plan.withBaseline(baselineOr(dev.run.Baseline), w)
	prog, err := Compile(w, plan.Batch)
	if err != nil {
		return nil, err
	}
	return &Session{prog: prog, plan: plan, warning: dev.LimitWarning}, nil
}

// run feeds, runs and consumes every batch of job, whose graph is the
// compiled one's, then finishes it. Interrupt stops it between batches or
// inside a long op, with an error wrapping ErrInterrupted; a later call
// runs normally.
func (s *Session) Run(job Job) error {
	began := time.Now()
	p := s.prog
	defer p.stop.Store(false) // an interrupt ends this call only
	items := job.Items()
	loop := batchLoop{job: job, progs: []*Program{p}, items: items, stopped: p.stop.Load}
	batches, err := loop.run()
	if err != nil {
		return err
	}
	if err := finish(job); err != nil {
		return err
	}
	d := time.Since(began).Seconds()
	if len(s.secs) < maxCalls {
		s.secs = append(s.secs, d)
	} else {
		s.secs[s.calls%maxCalls] = d
	}
	s.calls++
	s.items, s.batches, s.last = items, batches, d
	s.total += d
	s.totalItem += items
	return nil
}

// Interrupt stops the call in progress as soon as its op checks (between
// blocks of work); it may be called from any goroutine, but only while a
// call is in progress: one made between calls stops the next.
func (s *Session) Interrupt() { s.prog.Stop() }

// Report is what the calls of a compiled workload measured so far.
type Report struct {
	Workload string `json:"workload"`
	// Plan is the compiled batch and the buffers planned for it.
	Plan Plan `json:"plan"`
	// Calls is the number of calls that finished; LastItems,
	// LastBatches and LastSeconds describe the latest.
	Calls       int     `json:"calls"`
	LastItems   int     `json:"last_items"`
	LastBatches int     `json:"last_batches"`
	LastSeconds float64 `json:"last_seconds"`
	// Summary condenses the latest calls (up to 65,536) as the CLI's report
	// condenses batches: each call is one entry, so median_ms is the
	// median call and drift the last decile's median over the first's.
	Summary        telemetry.Summary `json:"summary"`
	Items          int               `json:"items"`
	ItemsPerSecond float64           `json:"items_per_second"`
	// RSSBytes and PeakRSSBytes are the process's resident set now and
	// at its peak.
	RSSBytes     int64 `json:"rss_bytes"`
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// MemLimitWarning says, when mem_limit was more than the process's
	// cgroup or ulimit leaves, that it was lowered, to what and why (the
	// command prints the same line on stderr); "" otherwise.
	MemLimitWarning string `json:"mem_limit_warning,omitempty"`
	// Threads is the number of threads the calls run on, ThreadsReason
	// what decided it (as tapeloop info shows it).
	Threads       int    `json:"threads"`
	ThreadsReason string `json:"threads_reason"`
}

// Report is what the calls so far measured, and the process's memory.
func (s *Session) Report() Report {
	order := s.secs
	if s.calls > maxCalls { // oldest first
		k := s.calls % maxCalls
		order = append(append([]float64(nil), s.secs[k:]...), s.secs[:k]...)
	}
	it := make([]telemetry.Iteration, len(order))
	for i, d := range order {
		it[i].Seconds = d
	}
	r := Report{Workload: s.prog.Name, Plan: s.plan, Calls: s.calls, LastItems: s.items, LastBatches: s.batches,
		LastSeconds: s.last, Summary: telemetry.Summarize(it), Items: s.totalItem, MemLimitWarning: s.warning}
	th := Threads()
	r.Threads, r.ThreadsReason = th.Threads, th.Reason
	r.Summary.TotalSeconds = s.total
	if s.total > 0 {
		r.ItemsPerSecond = float64(s.totalItem) / s.total
	}
	probe := sysmem.NewProbe()
	r.RSSBytes, r.PeakRSSBytes = probe.RSS(), probe.PeakRSS()
	probe.Close()
	return r
}

// DOT is the compiled graph as Graphviz DOT.
func (s *Session) DOT() (string, error) {
	var b bytes.Buffer
	if err := WriteDOT(&b, s.prog.Name, s.prog.Graph()); err != nil {
		return "", err
	}
	return b.String(), nil
}

// close releases the program.
func (s *Session) Close() error { return s.prog.Close() }

// Batch is the batch size the session's Program was compiled for.
func (s *Session) Batch() int { return s.prog.Batch }

// Recompiled makes s run next's Program (compiled anew, for other shapes)
// with the calls counted so far, and closes s's own. A Stop of the old
// Program (an Interrupt made while next compiled) carries over.
func (s *Session) Recompiled(next *Session) error {
	old := s.prog
	s.prog, s.plan = next.prog, next.plan
	if old.stop.Load() {
		s.prog.Stop()
	}
	return old.Close()
}
