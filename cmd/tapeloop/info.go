package main

import (
	"fmt"
	"runtime"
	"syscall"
	"text/tabwriter"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/fft3"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/internal/telemetry"
	"github.com/tapeloop/tapeloop/internal/version"
	"github.com/urfave/cli/v2"
)

var infoCommand = &cli.Command{
	Name:  "info",
	Usage: "show the machine, memory and backends tapeloop sees",
	Action: func(c *cli.Context) error {
		if c.Args().Present() {
			return fmt.Errorf("info: unexpected argument %q", c.Args().First())
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "tapeloop\t%s\n", version.String())
		for _, l := range machineInfo() {
			fmt.Fprintf(tw, "%s\t%s\n", l.Key, l.Value)
		}
		return tw.Flush()
	},
}

// infoLine is one line of what tapeloop sees of the machine.
type infoLine struct{ Key, Value string }

// machineInfo describes the CPU, memory and backends this build uses.
func machineInfo() []infoLine {
	l := []infoLine{
		{"go", fmt.Sprintf("%s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)},
		{"cpus", fmt.Sprint(runtime.NumCPU())},
		{"threads", engine.Threads().String()},
	}
	if bs, err := sysmem.Bounds(); err == nil {
		a := bs[0].Left
		for _, b := range bs[1:] {
			a = min(a, b.Left)
		}
		l = append(l, infoLine{"memory available", sysmem.Format(a)})
		for _, b := range bs[1:] {
			v := fmt.Sprintf("%s: %s, %s in use, %s left", b.Name, sysmem.Format(b.Limit), sysmem.Format(b.Used), sysmem.Format(b.Left))
			if b.Rlimit {
				v = fmt.Sprintf("%s: %s, %s mapped, %s kept for threads and C heaps, %s left",
					b.Name, sysmem.Format(b.Limit), sysmem.Format(b.Used), sysmem.Format(b.Margin), sysmem.Format(b.Left))
			}
			l = append(l, infoLine{"memory limit", v})
		}
	}
	var files syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &files) == nil {
		l = append(l, infoLine{"open files", fmt.Sprintf("at most %d (ulimit -n)", files.Cur)})
	}
	if lim, err := engine.DefaultMemLimit(); err == nil {
		l = append(l, infoLine{"default --mem-limit", sysmem.Format(lim)})
	}
	l = append(l,
		infoLine{"blas", "none linked: matrix products and distances run on tapeloop's own kernels"},
		infoLine{"arch", runtime.GOARCH + ", kernels on " + cpukern.PairDistISA()},
		infoLine{"pairwise kernels", cpukern.PairDistISA() + " (C, cgo, chosen at run time)"},
		infoLine{"fft", "tapeloop's own, float32, " + fft3.ISA() + " (C, cgo, chosen at run time)"},
	)
	for _, p := range cpukern.Paths() {
		l = append(l, infoLine{"kernel: " + p.Family, p.Path})
	}
	return append(l, infoLine{"cuda", engine.GPUBackend})
}

// cpuPlatform is the platform this process runs on and the code its CPU
// kernels chose, for reports.
func cpuPlatform() telemetry.Platform {
	th := engine.Threads()
	p := telemetry.Platform{OS: runtime.GOOS, Arch: runtime.GOARCH, Kernels: cpukern.PairDistISA(), FFT: fft3.ISA(),
		Threads: th.Threads, ThreadsReason: th.Reason, Paths: map[string]string{}}
	for _, k := range cpukern.Paths() {
		p.Paths[k.Family] = k.Path
	}
	return p
}
