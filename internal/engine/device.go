package engine

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"syscall"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/cpus"
	"github.com/tapeloop/tapeloop/internal/fft3"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/internal/telemetry"
)

// Run places job on d (when it is a DeviceJob) and runs it under d's
// engine configuration.
func (d *Device) Run(ctx context.Context, job Job) (*Outcome, error) {
	if dj, ok := job.(DeviceJob); ok {
		dj.SetDevice(d.op())
	}
	out, err := Run(ctx, job, d.run)
	return out, sysmem.WithFileLimit(err)
}

// WriteDOT plans w on d as a run would, compiles it and writes its graph
// as Graphviz DOT.
func (d *Device) WriteDOT(out io.Writer, w Workload) error {
	if dj, ok := w.(DeviceJob); ok {
		dj.SetDevice(d.op())
	}
	limit := d.run.MemLimit
	if n := len(d.run.Devices); n > 1 {
		limit /= int64(n)
	}
	plan, err := NewPlan(w, limit, d.run.Batch)
	if err != nil {
		return err
	}
	p, err := Compile(w, plan.Batch)
	if err != nil {
		return err
	}
	defer p.Close()
	return WriteDOT(out, w.Name(), p.Graph())
}

// Threads is the number of threads the parallel loops run on now
// (GOMAXPROCS), and why: what decided it at start-up (cpus.Apply: the
// CPUs, SLURM_CPUS_PER_TASK, the cgroup's CPU quota or GOMAXPROCS set by
// the user), and whether it was lowered since to fit an address-space
// limit.
func Threads() cpus.Choice {
	n := runtime.GOMAXPROCS(0)
	c, ok := cpus.Applied()
	switch {
	case !ok:
		return cpus.Choice{Threads: n, Reason: "GOMAXPROCS"}
	case n == c.Threads:
		return c
	case sysmem.FittedFrom() > 0:
		return cpus.Choice{Threads: n, Reason: fmt.Sprintf("lowered from %d (%s) to fit the address-space limit", c.Threads, c.Reason)}
	}
	return cpus.Choice{Threads: n, Reason: fmt.Sprintf("GOMAXPROCS set to %d since: %d were chosen (%s)", n, c.Threads, c.Reason)}
}

// InfoLine is one line of what tapeloop sees of the machine.
type InfoLine struct{ Key, Value string }

// Info describes the CPU, memory and backends this build uses.
func Info() []InfoLine {
	l := []InfoLine{
		{"go", fmt.Sprintf("%s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)},
		{"cpus", fmt.Sprint(runtime.NumCPU())},
		{"threads", Threads().String()},
	}
	if bs, err := sysmem.Bounds(); err == nil {
		a := bs[0].Left
		for _, b := range bs[1:] {
			a = min(a, b.Left)
		}
		l = append(l, InfoLine{"memory available", sysmem.Format(a)})
		for _, b := range bs[1:] {
			v := fmt.Sprintf("%s: %s, %s in use, %s left", b.Name, sysmem.Format(b.Limit), sysmem.Format(b.Used), sysmem.Format(b.Left))
			if b.Rlimit {
				v = fmt.Sprintf("%s: %s, %s mapped, %s kept for threads and C heaps, %s left",
					b.Name, sysmem.Format(b.Limit), sysmem.Format(b.Used), sysmem.Format(b.Margin), sysmem.Format(b.Left))
			}
			l = append(l, InfoLine{"memory limit", v})
		}
	}
	var files syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &files) == nil {
		l = append(l, InfoLine{"open files", fmt.Sprintf("at most %d (ulimit -n)", files.Cur)})
	}
	if lim, err := DefaultMemLimit(); err == nil {
		l = append(l, InfoLine{"default --mem-limit", sysmem.Format(lim)})
	}
	l = append(l,
		InfoLine{"blas", "none linked: matrix products and distances run on tapeloop's own kernels"},
		InfoLine{"arch", runtime.GOARCH + ", kernels on " + cpukern.PairDistISA()},
		InfoLine{"pairwise kernels", cpukern.PairDistISA() + " (C, cgo, chosen at run time)"},
		InfoLine{"fft", "tapeloop's own, float32, " + fft3.ISA() + " (C, cgo, chosen at run time)"},
	)
	for _, p := range cpukern.Paths() {
		l = append(l, InfoLine{"kernel: " + p.Family, p.Path})
	}
	return append(l, InfoLine{"cuda", GPUBackend})
}

// CPUPlatform is the platform this process runs on and the code its CPU
// kernels chose, for reports.
func CPUPlatform() telemetry.Platform {
	th := Threads()
	p := telemetry.Platform{OS: runtime.GOOS, Arch: runtime.GOARCH, Kernels: cpukern.PairDistISA(), FFT: fft3.ISA(),
		Threads: th.Threads, ThreadsReason: th.Reason, Paths: map[string]string{}}
	for _, k := range cpukern.Paths() {
		p.Paths[k.Family] = k.Path
	}
	return p
}
