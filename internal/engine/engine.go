package engine

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/internal/warnings"
	"github.com/tapeloop/tapeloop/ops"
)

// Engine is the configuration every workload shares, as plain values: the
// CLI fills it from its flags. The zero value runs on the CPU in float32
// with the memory limit and batch size planned.
type Engine struct {
	// Device is "cpu" (the default when empty) or "cuda".
	Device string
	// GPUs lists the GPU ordinals to spread batches over with Device
	// "cuda"; empty means GPU 0.
	GPUs []int
	// MemLimit is the bytes the planned buffers may take; 0 means half of
	// the memory available to the process (DefaultMemLimit).
	MemLimit int64
	// Batch overrides the planner's batch size; 0 means planned.
	Batch int
	// Dtype is the element type, "float32" (the default when empty) or
	// "float64"; workloads that compute in float32 only ignore it.
	Dtype string
	// Verbose prints the memory plan to Log; Progress draws a progress bar
	// on Log once a run lasts over a second.
	Verbose, Progress bool
	Log               io.Writer
	// Warn receives one-line warnings about the configuration (a
	// MemLimit lowered to what the process's cgroup or ulimit leaves);
	// nil: none are printed (Device.LimitWarning keeps it).
	Warn io.Writer
}

// ErrEngine is matched (errors.Is) by errors about the engine
// configuration; their text names the flag and what is wrong.
var ErrEngine = errors.New("bad engine configuration")

// kindError is an error whose text is its message alone and that matches
// (errors.Is) its kind, a sentinel such as ErrEngine or ErrPath.
type kindError struct {
	msg  string
	kind error
}

func (e kindError) Error() string        { return e.msg }
func (e kindError) Is(target error) bool { return target == e.kind }

func engineErrorf(format string, a ...any) error {
	return kindError{fmt.Sprintf(format, a...), ErrEngine}
}

// Validate checks the configuration without opening anything.
func (e Engine) Validate() error {
	switch e.Device {
	case "", "cpu":
		if len(e.GPUs) > 0 {
			return engineErrorf("--devices: needs --device cuda")
		}
	case "cuda":
		if !GPUBuild {
			return engineErrorf("--device cuda: this tapeloop was built without CUDA; build the GPU flavour with `make build-cuda` on a machine with the CUDA toolkit")
		}
		seen := map[int]bool{}
		for _, o := range e.GPUs {
			if o < 0 {
				return engineErrorf("--devices: %d is not a GPU number", o)
			}
			if seen[o] {
				return engineErrorf("--devices: GPU %d listed twice", o)
			}
			seen[o] = true
		}
	default:
		return engineErrorf("--device %q: want cpu or cuda", e.Device)
	}
	if _, err := e.dtype(); err != nil {
		return err
	}
	if e.MemLimit < 0 {
		return engineErrorf("--mem-limit %d: must not be negative", e.MemLimit)
	}
	if e.Batch < 0 {
		return engineErrorf("--batch %d: must be at least 1", e.Batch)
	}
	return nil
}

func (e Engine) dtype() (tensor.Dtype, error) {
	switch e.Dtype {
	case "", "float32":
		return tensor.Float32, nil
	case "float64":
		return tensor.Float64, nil
	}
	return tensor.Dtype{}, engineErrorf("--dtype %q: want float32 or float64", e.Dtype)
}

// ParseSize parses a memory size such as 512MiB, 2GB or 1048576.
func ParseSize(s string) (int64, error) { return sysmem.ParseSize(s) }

// FormatBytes formats a byte count as a user reads it (KiB, MiB, GiB).
func FormatBytes(b int64) string { return sysmem.Format(b) }

// ParseGPUs parses a comma-separated list of GPU ordinals, e.g. "0,1,3".
func ParseGPUs(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a GPU number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// Device is where a run's graphs execute: the CPU, or one or more GPUs
// (real, or the CUDA emulator in its test build), with the memory limit
// that the planner turns into batch sizes. It is opened once per command.
type Device struct {
	// Name is "cpu", or the GPUs as their backend names them.
	Name string
	// MemLimit is the resolved limit in bytes for all of the device's
	// planned buffers together (split evenly between GPUs).
	MemLimit int64
	// LimitWarning says why MemLimit is below the limit asked for (it
	// was more than the process's cgroup or ulimit leaves): "" when it
	// is not.
	LimitWarning string
	dtype        tensor.Dtype
	gpus         []ops.Device
	run          RunConfig
}

// Open validates e and opens its device: the GPUs are opened and each one's
// memory is bounded by its share of the limit.
func Open(e Engine) (*Device, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	dt, _ := e.dtype()
	limit, warning, err := resolveLimit(e.MemLimit)
	if err != nil {
		return nil, err
	}
	if warning != "" && e.Warn != nil {
		fmt.Fprint(e.Warn, warnings.Line(warning))
	}
	d := &Device{Name: "cpu", MemLimit: limit, LimitWarning: warning, dtype: dt}
	d.run = RunConfig{MemLimit: limit, Batch: e.Batch, Verbose: e.Verbose, Progress: e.Progress, Log: e.Log, Baseline: baselineOr(0)}
	if e.Device != "cuda" {
		return d, nil
	}
	ordinals := e.GPUs
	if len(ordinals) == 0 {
		ordinals = []int{0}
	}
	var names []string
	for _, o := range ordinals {
		g, err := openGPU(o)
		if err != nil {
			return nil, fmt.Errorf("--device cuda: GPU %d: %w", o, err)
		}
		if l, ok := g.(interface{ SetLimit(int64) }); ok { // device memory, as host memory, bounded by the limit
			l.SetLimit(limit / int64(len(ordinals)))
		}
		d.gpus = append(d.gpus, g)
		names = append(names, g.String())
	}
	d.Name = strings.Join(names, ", ")
	if len(d.gpus) > 1 {
		d.run.Devices = d.gpus
	}
	d.run.DeviceBytes = d.deviceBytes
	d.run.DeviceSeconds = d.deviceSeconds
	return d, nil
}

// CPU is the CPU under limit (0: DefaultMemLimit), with planned batches.
func CPU(limit int64) (*Device, error) { return Open(Engine{MemLimit: limit}) }

// Kind is "cpu" or "cuda", as the Engine named it.
func (d *Device) Kind() string {
	if d.GPU() {
		return "cuda"
	}
	return "cpu"
}

// GPU reports whether the device is one or more GPUs.
func (d *Device) GPU() bool { return len(d.gpus) > 0 }

// Dtype is the configured element type.
func (d *Device) Dtype() tensor.Dtype { return d.dtype }

// op is the device the ops of a single-device Compile run on: nil for the
// CPU, else the first GPU (Run places them on each in turn).
func (d *Device) op() ops.Device {
	if len(d.gpus) == 0 {
		return nil
	}
	return d.gpus[0]
}

// RunConfig is the engine configuration Run takes on this device.
func (d *Device) RunConfig() RunConfig { return d.run }

// WithBatch returns a copy of d whose runs use batch items per batch.
func (d *Device) WithBatch(batch int) *Device {
	c := *d
	c.run.Batch = batch
	return &c
}

// Quiet returns a copy of d that prints no plan and no progress.
func (d *Device) Quiet() *Device {
	c := *d
	c.run.Log, c.run.Progress, c.run.Verbose = nil, false, false
	return &c
}

// deviceBytes reads the GPUs' memory in use, together (−1: unknown).
func (d *Device) deviceBytes() int64 {
	var used int64
	for _, g := range d.gpus {
		m, ok := g.(interface{ MemInfo() (int64, int64, error) })
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

// deviceSeconds reads the GPUs' busy time so far, together.
func (d *Device) deviceSeconds() float64 {
	var busy float64
	for _, g := range d.gpus {
		if b, ok := g.(interface{ BusySeconds() float64 }); ok {
			busy += b.BusySeconds()
		}
	}
	return busy
}
