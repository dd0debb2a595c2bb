package engine

import (
	"errors"
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	G "gorgonia.org/gorgonia"

	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/ops"
)

// Kinds of buffer in a Plan.
const (
	KindInput        = "input"        // bound to an input node, filled per batch
	KindIntermediate = "intermediate" // an op's output that feeds another op
	KindOutput       = "output"       // an output node's value
	KindResult       = "result"       // the copy of an output that Run keeps
	KindResident     = "resident"     // tables and scratch an op holds
	KindStaging      = "staging"      // I/O buffers of the Job
	KindDevice       = "device"       // GPU memory a GPU op's arena takes
)

// Buffer is one allocation of a Program at a given batch size.
type Buffer struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Shape []int  `json:"shape,omitempty"`
	Bytes int64  `json:"bytes"`
}

// Stager is implemented by Workloads whose feeding or consuming needs
// buffers of their own (file reading and writing), sized per batch.
type Stager interface {
	StagingBytes(batch int) int64
}

// Footprint builds w's graph for batch items, without compiling it or
// allocating data, and lists every buffer a Program of that batch holds.
func Footprint(w Workload, batch int) ([]Buffer, error) {
	g := G.NewGraph()
	in, out, err := w.Build(g, batch)
	if err != nil {
		return nil, err
	}
	role := map[*G.Node]string{}
	for _, n := range in {
		role[n] = KindInput
	}
	for _, n := range out {
		role[n] = KindOutput
	}
	var bufs []Buffer
	for _, n := range g.AllNodes() {
		kind, ok := role[n]
		if !ok {
			if n.Op() == nil {
				kind = KindInput
			} else {
				kind = KindIntermediate
			}
		}
		bufs = append(bufs, Buffer{Name: n.Name(), Kind: kind, Shape: n.Shape(), Bytes: nodeBytes(n)})
		if r, ok := n.Op().(ops.Resident); ok && n.Op() != nil {
			if b := r.ResidentBytes(); b > 0 {
				bufs = append(bufs, Buffer{Name: n.Op().String(), Kind: KindResident, Bytes: b})
			}
		}
		if r, ok := n.Op().(ops.DeviceResident); ok && n.Op() != nil {
			bufs = append(bufs, Buffer{Name: n.Op().String(), Kind: KindDevice, Bytes: r.DeviceBytes()})
		}
	}
	for _, n := range out {
		if owned(n) {
			continue // read in place
		}
		bufs = append(bufs, Buffer{Name: n.Name(), Kind: KindResult, Shape: n.Shape(), Bytes: nodeBytes(n)})
	}
	if s, ok := w.(Stager); ok {
		if b := s.StagingBytes(batch); b > 0 {
			bufs = append(bufs, Buffer{Name: "i/o", Kind: KindStaging, Bytes: b})
		}
	}
	return bufs, nil
}

// nodeBytes is the size of n's value, math.MaxInt64 when it does not fit
// in an int64 (a shape from a header, a flag or a geometry file).
func nodeBytes(n *G.Node) int64 {
	b := int64(n.Dtype().Size())
	for _, d := range n.Shape() {
		b = sysmem.Mul(b, int64(d))
	}
	if b < 0 {
		return math.MaxInt64
	}
	return b
}

// AddBytes is t + b, saturating at math.MaxInt64 (a negative b, an
// overflowed size, counts as math.MaxInt64).
func AddBytes(t, b int64) int64 {
	if b < 0 || t > math.MaxInt64-b {
		return math.MaxInt64
	}
	return t + b
}

// Total adds up the host memory of bufs (every kind but KindDevice),
// math.MaxInt64 when the sum does not fit.
func Total(bufs []Buffer) int64 {
	var t int64
	for _, b := range bufs {
		if b.Kind != KindDevice {
			t = AddBytes(t, b.Bytes)
		}
	}
	return t
}

// DeviceTotal adds up the GPU memory of bufs (KindDevice), math.MaxInt64
// when the sum does not fit.
func DeviceTotal(bufs []Buffer) int64 {
	var t int64
	for _, b := range bufs {
		if b.Kind == KindDevice {
			t = AddBytes(t, b.Bytes)
		}
	}
	return t
}

// Plan is the batch size chosen for a Workload and what it costs.
type Plan struct {
	Workload string `json:"workload"`
	Items    int    `json:"items"`
	Batch    int    `json:"batch"`
	Batches  int    `json:"batches"`
	Limit    int64  `json:"mem_limit_bytes"`
	Bytes    int64  `json:"planned_bytes"`                  // host memory
	Device   int64  `json:"planned_device_bytes,omitempty"` // GPU memory, on each GPU
	// Baseline is the process's resident set before the run's inputs
	// were read (the binary, the Go runtime, the libraries; a Python
	// caller's own), and Estimate the peak resident set the plan expects:
	// Bytes + Baseline. The buffers are allocated once and the per-batch
	// garbage is small, so the Go heap adds little past them.
	Baseline int64    `json:"baseline_rss_bytes"`
	Estimate int64    `json:"estimated_peak_rss_bytes"`
	Buffers  []Buffer `json:"buffers"`
	Forced   bool     `json:"forced"` // batch given by the user
}

// BudgetError says that even the smallest batch does not fit the limit.
type BudgetError struct {
	Workload string
	Batch    int
	Need     int64
	Limit    int64
	Device   bool // GPU memory, not host memory, is short
}

func (e *BudgetError) Error() string {
	what := ""
	if e.Device {
		what = " of GPU memory"
	}
	if e.Batch > 0 {
		what += fmt.Sprintf(" for a batch of %d", e.Batch)
	}
	need := fmt.Sprintf("%s (%d bytes)", sysmem.Format(e.Need), e.Need)
	if e.Need < 0 || e.Need == math.MaxInt64 {
		need = "more than 8 EiB"
	}
	return fmt.Sprintf("plan: %s needs %s%s, over the memory limit of %s (%d bytes)%s",
		e.Workload, need, what, sysmem.Format(e.Limit), e.Limit, limitNoteFor(e.Limit))
}

// ErrOverBudget is wrapped by BudgetError.
var ErrOverBudget = errors.New("plan: over the memory limit")

// Unwrap makes errors.Is(err, ErrOverBudget) hold.
func (e *BudgetError) Unwrap() error { return ErrOverBudget }

// NewPlan picks the batch for w: forced when batch > 0 (it must still fit
// the limit), else the largest batch, up to w.MaxBatch and w.Items, whose
// buffers add up to at most limit bytes, in host memory and, for a GPU
// Program, in the GPU's memory.
func NewPlan(w Workload, limit int64, batch int) (Plan, error) {
	return planFor(w, w.Items(), limit, batch)
}

// planFor is NewPlan for items items, whatever w.Items says: a program
// compiled in process takes its items with each call.
func planFor(w Workload, items int, limit int64, batch int) (Plan, error) {
	if items < 1 {
		return Plan{}, fmt.Errorf("plan: %s has no items to process", w.Name())
	}
	if limit <= 0 {
		return Plan{}, fmt.Errorf("plan: memory limit must be positive, got %d", limit)
	}
	cost := func(b int) (int64, []Buffer, error) { // the larger of host and GPU memory
		bufs, err := Footprint(w, b)
		return max(Total(bufs), DeviceTotal(bufs)), bufs, err
	}
	budgetErr := func(b int, bufs []Buffer) error {
		h, d := Total(bufs), DeviceTotal(bufs)
		if d > h {
			return &BudgetError{Workload: w.Name(), Batch: b, Need: d, Limit: limit, Device: true}
		}
		return &BudgetError{Workload: w.Name(), Batch: b, Need: h, Limit: limit}
	}
	p := Plan{Workload: w.Name(), Items: items, Limit: limit}
	if batch > 0 {
		p.Batch, p.Forced = min(batch, items), true
	} else {
		hi := items
		if m := w.MaxBatch(); m > 0 {
			hi = min(hi, m)
		}
		c1, b1, err := cost(1)
		if err != nil {
			return Plan{}, err
		}
		if c1 > limit {
			return Plan{}, budgetErr(1, b1)
		}
		c2, _, err := cost(2)
		if err != nil {
			return Plan{}, err
		}
		// Buffers grow linearly with the batch: probe the linear estimate
		// and its successor first, then bisect on the exact cost, keeping
		// cost(lo) <= limit < cost(over).
		est := hi
		if per := c2 - c1; per > 0 {
			est = int(min(int64(hi), 1+(limit-c1)/per))
		}
		lo, over := 1, hi+1
		for _, probe := range []int{est, est + 1} {
			if probe <= lo || probe >= over {
				continue
			}
			c, _, err := cost(probe)
			if err != nil {
				return Plan{}, err
			}
			if c <= limit {
				lo = probe
			} else {
				over = probe
			}
		}
		for over-lo > 1 {
			mid := lo + (over-lo)/2
			c, _, err := cost(mid)
			if err != nil {
				return Plan{}, err
			}
			if c <= limit {
				lo = mid
			} else {
				over = mid
			}
		}
		p.Batch = lo
	}
	c, bufs, err := cost(p.Batch)
	if err != nil {
		return Plan{}, err
	}
	if c > limit {
		return Plan{}, budgetErr(p.Batch, bufs)
	}
	p.Bytes, p.Device, p.Buffers = Total(bufs), DeviceTotal(bufs), bufs
	p.Batches = (items + p.Batch - 1) / p.Batch
	return p, nil
}

// A SetUpHolder is a Job whose set-up held memory the plan does not
// count, and that the process still holds as its heap's pages when the
// run begins: an interpolation's table, read and converted before its
// coefficients were made.
type SetUpHolder interface {
	SetUpBytes() int64
}

// withBaseline is p with the process's resident set baseline, and what
// job's set-up held (SetUpHolder), counted in its estimate of the peak.
func (p Plan) withBaseline(baseline int64, job any) Plan {
	p.Baseline, p.Estimate = baseline, AddBytes(p.Bytes, baseline)
	if h, ok := job.(SetUpHolder); ok {
		p.Estimate = AddBytes(p.Estimate, h.SetUpBytes())
	}
	return p
}

// Print writes the plan as a table: one row per buffer, then the total.
func (p Plan) Print(w io.Writer) {
	how := "planned"
	if p.Forced {
		how = "forced by --batch"
	}
	fmt.Fprintf(w, "plan: %s, batch %d (%s), %d batches of %d items, limit %s\n", p.Workload, p.Batch, how, p.Batches, p.Items, sysmem.Format(p.Limit))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  buffer\tkind\tshape\tbytes")
	for _, b := range p.Buffers {
		shape := ""
		if b.Shape != nil {
			shape = fmt.Sprint(b.Shape)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", b.Name, b.Kind, shape, sysmem.Format(b.Bytes))
	}
	fmt.Fprintf(tw, "  total\t\t\t%s\n", sysmem.Format(p.Bytes))
	if p.Device > 0 {
		fmt.Fprintf(tw, "  total on each GPU\t\t\t%s\n", sysmem.Format(p.Device))
	}
	tw.Flush()
	if p.Estimate > 0 {
		fmt.Fprintf(w, "  estimated peak RSS %s: the total, the process's %s at start and what set-up held\n", sysmem.Format(p.Estimate), sysmem.Format(p.Baseline))
	}
}
