// Package telemetry records what each batch of a run cost (wall time, Go
// heap, resident set) and summarises it: median time per batch, the
// last-decile/first-decile drift that shows a loop getting slower, heap
// growth and peak RSS.
package telemetry

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"slices"
	"time"

	"github.com/tapeloop/tapeloop/internal/atomicfile"
	"github.com/tapeloop/tapeloop/internal/sysmem"
)

// Iteration is one batch's record.
type Iteration struct {
	Seconds   float64 `json:"seconds"`
	HeapBytes int64   `json:"heap_bytes"`
	RSSBytes  int64   `json:"rss_bytes"`
	// DeviceBytes is the GPU memory in use after the batch (GPU runs).
	DeviceBytes int64 `json:"device_bytes,omitempty"`
	// DeviceSeconds is the GPU time of the kernels, cuBLAS and cuFFT
	// calls since the previous record (CUDA events; summed over GPUs).
	DeviceSeconds float64 `json:"device_seconds,omitempty"`
	// Cost is the batch's work by the job's cost model (a wavelet
	// sweep's batches differ in transform size), in the model's units;
	// zero for a job whose batches cost alike.
	Cost float64 `json:"cost,omitempty"`
}

// Recorder collects one Iteration per batch into a slice allocated up front.
type Recorder struct {
	Iterations []Iteration
	// DeviceBytes, when set, is read after every batch; DeviceSeconds,
	// when set, is the GPUs' busy time so far, read after every batch.
	DeviceBytes   func() int64
	DeviceSeconds func() float64
	busy          float64 // DeviceSeconds at the previous record
	probe         *sysmem.Probe
	start         time.Time
	begin         time.Time
	peak          int64
	live0         int64 // live heap after the first batch, measured after a collection
}

// NewRecorder returns a Recorder with room for batches records (up to
// maxPrealloc of them; more grow as they come). It resets the kernel's
// peak-RSS mark where it can, so PeakRSS is this run's.
func NewRecorder(batches int) *Recorder {
	sysmem.ResetPeakRSS()
	return &Recorder{Iterations: make([]Iteration, 0, max(0, min(batches, maxPrealloc))), probe: sysmem.NewProbe(), begin: time.Now()}
}

// maxPrealloc bounds the records allocated up front, whatever the batch
// count a plan promises.
const maxPrealloc = 1 << 16

// Start marks the beginning of a batch.
func (r *Recorder) Start() { r.start = time.Now() }

// Stop ends the batch begun by Start and records it.
func (r *Recorder) Stop() {
	d := time.Since(r.start).Seconds()
	it := Iteration{Seconds: d, HeapBytes: r.probe.HeapBytes(), RSSBytes: r.probe.RSS()}
	if r.DeviceBytes != nil {
		it.DeviceBytes = r.DeviceBytes()
	}
	if r.DeviceSeconds != nil {
		b := r.DeviceSeconds()
		it.DeviceSeconds, r.busy = b-r.busy, b
	}
	r.Iterations = append(r.Iterations, it)
	if len(r.Iterations) == 1 { // outside the batch's time
		r.live0 = r.probe.LiveHeapBytes()
	}
}

// Record adds a batch measured elsewhere (seconds of work, and of GPU
// time: used instead of DeviceSeconds, which is then not read) with its
// cost (Iteration.Cost), as Stop does.
func (r *Recorder) Record(seconds, deviceSeconds, cost float64) {
	r.start = time.Now().Add(-time.Duration(seconds * float64(time.Second)))
	r.Stop()
	r.Iterations[len(r.Iterations)-1].DeviceSeconds = deviceSeconds
	r.Iterations[len(r.Iterations)-1].Cost = cost
}

// Close finishes the run and releases the probe.
func (r *Recorder) Close() Summary {
	s := Summarize(r.Iterations)
	if len(r.Iterations) > 0 {
		s.HeapGrowth = r.probe.LiveHeapBytes() - r.live0
	}
	s.PeakRSSBytes = r.probe.PeakRSS()
	s.TotalSeconds = time.Since(r.begin).Seconds()
	r.probe.Close()
	return s
}

// Summary condenses a run's iterations.
type Summary struct {
	Batches  int     `json:"batches"`
	MedianMs float64 `json:"median_ms"`
	// Drift is the median time of the last decile of batches over the
	// first's; for batches of different costs (Iteration.Cost), the same
	// within the batches of equal cost, over the cost class with the most
	// batches (DriftByCost has them all), or where no class has four, over
	// every batch's time per unit of cost.
	Drift float64 `json:"drift"`
	// DriftByCost is the drift within each class of batches of equal cost
	// (only for a run whose batches differ in cost), largest class first.
	DriftByCost []CostDrift `json:"drift_by_cost,omitempty"`
	// DeviceMs is the median GPU busy time per batch (GPU runs).
	DeviceMs float64 `json:"median_device_ms,omitempty"`
	// HeapGrowth is what the loop retains: the live Go heap after the
	// run minus after its first batch, each measured after a collection
	// (Summarize alone, without a Recorder, compares the per-batch heap
	// figures, garbage included).
	HeapGrowth   int64   `json:"heap_growth_bytes"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	TotalSeconds float64 `json:"total_seconds"`
}

// Summarize computes the summary of its (unchanged) argument. The deciles
// are the first and last max(1, n/10) batches; with fewer than two batches
// drift is 1.
func Summarize(it []Iteration) Summary {
	s := Summary{Batches: len(it), Drift: 1}
	if len(it) == 0 {
		return s
	}
	secs := make([]float64, len(it))
	for i, x := range it {
		secs[i] = x.Seconds
	}
	s.MedianMs = 1e3 * Median(secs)
	if it[0].DeviceSeconds > 0 {
		dev := make([]float64, len(it))
		for i, x := range it {
			dev[i] = x.DeviceSeconds
		}
		s.DeviceMs = 1e3 * Median(dev)
	}
	s.Drift = drift(secs)
	if classes := costClasses(it); len(classes) > 1 {
		s.DriftByCost = classes
		s.Drift = classes[0].Drift
		if classes[0].Batches < 4 { // too few alike: time per unit of cost
			per := make([]float64, len(it))
			for i, x := range it {
				per[i] = x.Seconds / x.Cost
			}
			s.Drift = drift(per)
		}
	}
	s.HeapGrowth = it[len(it)-1].HeapBytes - it[0].HeapBytes
	return s
}

// drift is the median of the last decile of secs over the first's (the
// deciles: the first and last max(1, n/10)); 1 for fewer than two.
func drift(secs []float64) float64 {
	if len(secs) < 2 {
		return 1
	}
	d := max(1, len(secs)/10)
	first, last := Median(secs[:d]), Median(secs[len(secs)-d:])
	if first > 0 {
		return last / first
	}
	return 1
}

// CostDrift is the drift within the batches of one cost.
type CostDrift struct {
	Cost     float64 `json:"cost"`
	Batches  int     `json:"batches"`
	MedianMs float64 `json:"median_ms"`
	Drift    float64 `json:"drift"`
}

// costClasses groups the batches by cost (equal within 1%), in run
// order within each, and measures each class's drift; largest class
// first (then the costlier). None when the batches carry no cost.
func costClasses(it []Iteration) []CostDrift {
	var classes []CostDrift
	var secs [][]float64
	for _, x := range it {
		if x.Cost <= 0 {
			return nil
		}
		c := -1
		for i, k := range classes {
			if math.Abs(x.Cost-k.Cost) <= 0.01*k.Cost {
				c = i
				break
			}
		}
		if c < 0 {
			c = len(classes)
			classes = append(classes, CostDrift{Cost: x.Cost})
			secs = append(secs, nil)
		}
		secs[c] = append(secs[c], x.Seconds)
	}
	for i := range classes {
		classes[i].Batches = len(secs[i])
		classes[i].MedianMs = 1e3 * Median(secs[i])
		classes[i].Drift = drift(secs[i])
	}
	slices.SortStableFunc(classes, func(a, b CostDrift) int {
		if a.Batches != b.Batches {
			return b.Batches - a.Batches
		}
		return cmp.Compare(b.Cost, a.Cost)
	})
	return classes
}

// Median returns the median of x without modifying it; NaN-free input assumed.
func Median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	y := slices.Clone(x)
	slices.Sort(y)
	n := len(y)
	if n%2 == 1 {
		return y[n/2]
	}
	return (y[n/2-1] + y[n/2]) / 2
}

// String is the one-line summary printed at the end of a run.
func (s Summary) String() string {
	return fmt.Sprintf("%d batches, median %.3f ms/batch, drift %.3f (last/first decile), heap growth %s, peak RSS %s",
		s.Batches, s.MedianMs, s.Drift, sysmem.Format(s.HeapGrowth), sysmem.Format(s.PeakRSSBytes))
}

// Platform is where a run ran: the operating system and architecture
// (Go's names) and the code the CPU kernels chose at run time.
type Platform struct {
	OS   string `json:"os"`
	Arch string `json:"arch"`
	// Kernels is the instruction set of the C kernels: avx512f, avx2 or
	// sse2 on x86-64, neon on arm64, generic elsewhere; FFT the FFT's.
	Kernels string `json:"kernels"`
	FFT     string `json:"fft"`
	// Threads is the number of threads the run's loops ran on, and
	// ThreadsReason what decided it: "SLURM_CPUS_PER_TASK=1", a cgroup's
	// CPU quota, GOMAXPROCS set by the user, or the CPUs the process may
	// run on.
	Threads       int    `json:"threads"`
	ThreadsReason string `json:"threads_reason"`
	// Paths is the code each kernel family runs, by family.
	Paths map[string]string `json:"paths"`
}

// Report is the JSON document written by --report.
type Report struct {
	Workload      string   `json:"workload"`
	Device        string   `json:"device"`
	Platform      Platform `json:"platform"`
	Dtype         string   `json:"dtype"`
	Batch         int      `json:"batch"`
	Batches       int      `json:"batches"`
	MemLimitBytes int64    `json:"mem_limit_bytes"`
	// MemLimitWarning says, when --mem-limit was more than the process's
	// cgroup or ulimit leaves, that it was lowered, to what and why: the
	// warning printed on stderr. "" when it was not.
	MemLimitWarning string `json:"mem_limit_warning,omitempty"`
	PlannedBytes    int64  `json:"planned_bytes"`
	// EstimatedPeakRSSBytes is the peak resident set the plan expected:
	// the planned buffers and BaselineRSSBytes, the process's resident set
	// before the inputs were read; PeakRSSBytes is the one measured.
	EstimatedPeakRSSBytes int64   `json:"estimated_peak_rss_bytes"`
	BaselineRSSBytes      int64   `json:"baseline_rss_bytes"`
	PeakRSSBytes          int64   `json:"peak_rss_bytes"`
	TotalSeconds          float64 `json:"total_seconds"`
	// Items is the number of items the run computed (rows, points, poses,
	// combinations) and ItemsPerSecond their rate over the whole run.
	Items          int         `json:"items"`
	ItemsPerSecond float64     `json:"items_per_second"`
	Summary        Summary     `json:"summary"`
	Plan           any         `json:"plan,omitempty"`
	Iterations     []Iteration `json:"iterations"`
	Result         any         `json:"result"`
	// NonFinite lists the places of the values that are NaN or ±Inf
	// ("result.sum"), which JSON cannot hold: they are written as null.
	NonFinite []string `json:"non_finite,omitempty"`
}

// Encode writes the report as indented JSON, a value that is NaN or ±Inf
// as null, its place in NonFinite.
func (r *Report) Encode(w io.Writer) error {
	r.NonFinite = nil
	b, places, err := MarshalFinite(r)
	if err == nil && places != nil {
		r.NonFinite = places
		b, _, err = MarshalFinite(r)
	}
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}

// WriteFile writes the report to path atomically.
func (r *Report) WriteFile(path string) error {
	f, err := r.Stage(path)
	if err != nil {
		return err
	}
	return f.Rename()
}

// Stage writes the report to a temporary file beside path, synced and
// closed, for the caller to Rename into place once the run's outputs are
// committed, or to Abort.
func (r *Report) Stage(path string) (*atomicfile.File, error) {
	var buf bytes.Buffer
	if err := r.Encode(&buf); err != nil {
		return nil, err
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, err
	}
	for _, step := range []func() error{
		func() error { _, err := f.Write(buf.Bytes()); return err },
		f.Sync,
		f.Close,
	} {
		if err := step(); err != nil {
			f.Abort()
			var pe *fs.PathError
			if errors.As(err, &pe) { // the temporary file's name means nothing to the user
				err = pe.Err
			}
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
	}
	return f, nil
}
