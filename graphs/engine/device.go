package engine

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"syscall"

	"github.com/tapeloop/tapeloop/internal/cpukern"
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

// cpusLine is the CPUs and GOMAXPROCS, and what FitThreads lowered.
func cpusLine() string {
	if from := sysmem.FittedFrom(); from > 0 {
		return fmt.Sprintf("%d (GOMAXPROCS %d, lowered from %d to fit the address-space limit)", runtime.NumCPU(), runtime.GOMAXPROCS(0), from)
	}
	return fmt.Sprintf("%d (GOMAXPROCS %d)", runtime.NumCPU(), runtime.GOMAXPROCS(0))
}

// InfoLine is one line of what tapeloop sees of the machine.
type InfoLine struct{ Key, Value string }

// Info describes the CPU, memory and backends this build uses.
func Info() []InfoLine {
	l := []InfoLine{
		{"go", fmt.Sprintf("%s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)},
		{"cpus", cpusLine()},
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
	p := telemetry.Platform{OS: runtime.GOOS, Arch: runtime.GOARCH, Kernels: cpukern.PairDistISA(), FFT: fft3.ISA(),
		Paths: map[string]string{}}
	for _, k := range cpukern.Paths() {
		p.Paths[k.Family] = k.Path
	}
	return p
}
