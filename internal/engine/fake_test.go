package engine_test

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/ops"
)

// The engine against a workload made for its tests: fakeJob feeds items
// from a slice and takes results into another, through one small op,
// affine, whose sizes are known exactly, so that planning, padding,
// copying, errors, stopping and allocations are checked against what
// must happen, not against a real workload's numbers.

// affine is the op y = 2x + 1 over the valid rows of a (batch, width)
// float64 input, into its own buffer; the rows past the valid count (a
// short batch's padding) are set to poison, so that a result read from
// them shows. It holds resident bytes, counts its runs and can fail or
// wait to be stopped on a chosen run.
type affine struct {
	batch, width int
	resident     int64
	out          *tensor.Dense
	valid        int
	stop         *atomic.Bool
	runs         int
	// padSum is the sum of the input's padding rows in the last run.
	padSum float64
	// onRun, when set, is called at the start of every run (1, 2, …); an
	// error it returns is the run's.
	onRun func(run int) error
}

// poison is what affine writes into its output's padding rows.
const poison = -12345.0

func (op *affine) Arity() int { return 1 }
func (op *affine) Type() hm.Type {
	return hm.NewFnType(G.TensorType{Dims: 2, Of: hm.TypeVariable('a')}, G.TensorType{Dims: 2, Of: hm.TypeVariable('a')})
}
func (op *affine) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{op.batch, op.width}, nil
}
func (op *affine) Do(in ...G.Value) (G.Value, error) {
	op.runs++
	if op.onRun != nil {
		if err := op.onRun(op.runs); err != nil {
			return nil, err
		}
	}
	if op.stop != nil && op.stop.Load() {
		return nil, ops.ErrStopped
	}
	if op.out == nil {
		op.out = tensor.New(tensor.WithShape(op.batch, op.width), tensor.Of(tensor.Float64))
	}
	x, y := in[0].(*tensor.Dense).Data().([]float64), op.out.Data().([]float64)
	n := op.valid * op.width
	for i := range n {
		y[i] = 2*x[i] + 1
	}
	op.padSum = 0
	for i := n; i < len(y); i++ {
		y[i] = poison
		op.padSum += x[i]
	}
	return op.out, nil
}
func (op *affine) ReturnsPtr() bool          { return false }
func (op *affine) CallsExtern() bool         { return false }
func (op *affine) OverwritesInput() int      { return -1 }
func (op *affine) OwnsOutput() bool          { return true }
func (op *affine) ResidentBytes() int64      { return op.resident }
func (op *affine) SetValidRows(n int)        { op.valid = n }
func (op *affine) SetStop(flag *atomic.Bool) { op.stop = flag }
func (op *affine) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "affine %d %d %d", op.batch, op.width, op.resident)
}
func (op *affine) String() string { return fmt.Sprintf("affine{2x+1, width %d}", op.width) }
func (op *affine) Hashcode() uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}

// UsePreallocDo is Do: the op writes into its own buffer, whatever the
// machine holds for it.
func (op *affine) UsePreallocDo(_ G.Value, in ...G.Value) (G.Value, error) { return op.Do(in...) }

// fakeJob is a Job of items rows of width float64 values: its graph is
// x (batch, width) → affine → y, and with square also x → Square → z, an
// output of gorgonia's own whose values the Program copies into a result
// buffer. Consume keeps y in got and z in squares; every call to Feed and
// Consume is counted per item.
type fakeJob struct {
	items, width, maxBatch int
	resident               int64
	square                 bool
	src, got, squares      []float64
	fed, consumed          []int // calls per item
	feeds, consumes        int   // calls
	finished               int
	op                     *affine // the op of the last graph built
	// Hooks, when set, run at the start of Feed, Consume and the op's
	// runs; an error they return is the call's.
	onFeed, onConsume func(off, n int) error
	onRun             func(run int) error
	finishErr         error
}

func newFakeJob(items, width int) *fakeJob {
	j := &fakeJob{items: items, width: width}
	j.src = make([]float64, items*width)
	for i := range j.src {
		j.src[i] = float64(i%97) - 40.5
	}
	j.reset()
	return j
}

// reset forgets what the job was fed and what it consumed.
func (j *fakeJob) reset() {
	j.got, j.squares = make([]float64, len(j.src)), make([]float64, len(j.src))
	j.fed, j.consumed = make([]int, j.items), make([]int, j.items)
	j.feeds, j.consumes, j.finished = 0, 0, 0
}

func (j *fakeJob) Name() string        { return "fake" }
func (j *fakeJob) Dtype() tensor.Dtype { return tensor.Float64 }
func (j *fakeJob) Items() int          { return j.items }
func (j *fakeJob) MaxBatch() int       { return j.maxBatch }
func (j *fakeJob) Build(g *G.ExprGraph, batch int) ([]*G.Node, []*G.Node, error) {
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(batch, j.width), G.WithName("x"))
	j.op = &affine{batch: batch, width: j.width, resident: j.resident, valid: batch, onRun: j.onRun}
	y, err := G.ApplyOp(j.op, x)
	if err != nil {
		return nil, nil, err
	}
	out := []*G.Node{y}
	if j.square {
		z, err := G.Square(x)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, z)
	}
	return []*G.Node{x}, out, nil
}

func (j *fakeJob) Feed(in []*tensor.Dense, off, n int) error {
	j.feeds++
	if j.onFeed != nil {
		if err := j.onFeed(off, n); err != nil {
			return err
		}
	}
	copy(in[0].Data().([]float64), j.src[off*j.width:(off+n)*j.width])
	for i := off; i < off+n; i++ {
		j.fed[i]++
	}
	return nil
}

func (j *fakeJob) Consume(out []*tensor.Dense, off, n int) error {
	j.consumes++
	if j.onConsume != nil {
		if err := j.onConsume(off, n); err != nil {
			return err
		}
	}
	copy(j.got[off*j.width:(off+n)*j.width], out[0].Data().([]float64)[:n*j.width])
	if j.square {
		copy(j.squares[off*j.width:(off+n)*j.width], out[1].Data().([]float64)[:n*j.width])
	}
	for i := off; i < off+n; i++ {
		j.consumed[i]++
	}
	return nil
}

func (j *fakeJob) Finish() error {
	j.finished++
	return j.finishErr
}

// SetDevice makes fakeJob a DeviceJob: its op runs on the CPU whatever
// the device.
func (j *fakeJob) SetDevice(ops.Device) {}

// checkResults checks, against a slow loop over the items, that every
// item was fed and consumed exactly once and that its results are 2x + 1
// (and x², with square).
func (j *fakeJob) checkResults(t *testing.T) {
	t.Helper()
	for i := range j.items {
		if j.fed[i] != 1 || j.consumed[i] != 1 {
			t.Fatalf("item %d fed %d times, consumed %d times; want once each", i, j.fed[i], j.consumed[i])
		}
	}
	for i, x := range j.src {
		if want := 2*x + 1; j.got[i] != want {
			t.Fatalf("value %d (item %d): 2x+1 is %v, want %v", i, i/j.width, j.got[i], want)
		}
		if want := x * x; j.square && j.squares[i] != want {
			t.Fatalf("value %d (item %d): x² is %v, want %v", i, i/j.width, j.squares[i], want)
		}
	}
}

// runFake runs j on the CPU under a large memory limit with batch items per
// batch.
func runFake(ctx context.Context, j *fakeJob, batch int) (*engine.Outcome, error) {
	return engine.Run(ctx, j, engine.RunConfig{MemLimit: 1 << 30, Batch: batch, Baseline: 1})
}

// TestFakePlanPicksLargestBatch: with buffers of known sizes (the input
// and the op's output, 8·width bytes an item each; with square also its
// output and result buffer; the op's resident bytes once), the plan is
// the largest batch whose buffers fit the limit, bounded by MaxBatch and
// the items, and lists exactly those bytes.
func TestFakePlanPicksLargestBatch(t *testing.T) {
	const width, resident = 5, 1000
	for _, square := range []bool{false, true} {
		perItem := int64(2 * 8 * width)
		if square {
			perItem *= 2
		}
		for _, c := range []struct {
			items, maxBatch int
			limit           int64
			want            int
		}{
			{100, 0, resident + perItem, 1},
			{100, 0, resident + 2*perItem - 1, 1},
			{100, 0, resident + 2*perItem, 2},
			{100, 0, resident + 37*perItem + perItem/2, 37},
			{100, 0, resident + 100*perItem, 100},
			{100, 0, 1 << 40, 100},
			{100, 16, 1 << 40, 16},
			{100, 16, resident + 9*perItem, 9},
			{1, 0, 1 << 40, 1},
		} {
			j := newFakeJob(c.items, width)
			j.maxBatch, j.resident, j.square = c.maxBatch, resident, square
			p, err := engine.NewPlan(j, c.limit, 0)
			if err != nil {
				t.Fatalf("square %v, %+v: %v", square, c, err)
			}
			bytes := resident + int64(c.want)*perItem
			if p.Batch != c.want || p.Bytes != bytes || p.Batches != (c.items+c.want-1)/c.want || p.Forced {
				t.Errorf("square %v, %+v: batch %d × %d, %d bytes, forced %v; want batch %d, %d bytes",
					square, c, p.Batch, p.Batches, p.Bytes, p.Forced, c.want, bytes)
			}
		}
		// Under the smallest batch: refused, saying what one item needs.
		j := newFakeJob(100, width)
		j.resident, j.square = resident, square
		_, err := engine.NewPlan(j, resident+perItem-1, 0)
		var be *engine.BudgetError
		if !errors.As(err, &be) || !errors.Is(err, engine.ErrOverBudget) || be.Need != resident+perItem || be.Batch != 1 {
			t.Errorf("square %v: a limit under one item: %v, want a BudgetError needing %d bytes", square, err, resident+perItem)
		}
		// A forced batch is taken as given when it fits.
		if p, err := engine.NewPlan(j, 1<<40, 7); err != nil || p.Batch != 7 || !p.Forced || p.Batches != 15 {
			t.Errorf("square %v: forced batch 7: %+v, %v", square, p, err)
		}
	}
}

// TestFakeShortBatchPadded: a last batch shorter than the others reaches
// the op padded with zeros and told its valid rows; only its valid rows
// are consumed; every item is fed and consumed exactly once, in order.
func TestFakeShortBatchPadded(t *testing.T) {
	const items, width, batch = 10, 3, 4
	j := newFakeJob(items, width)
	var offs []int
	j.onConsume = func(off, n int) error {
		offs = append(offs, off, n)
		if off+n > items {
			return fmt.Errorf("consume of items [%d, %d): past the %d items", off, off+n, items)
		}
		return nil
	}
	out, err := runFake(t.Context(), j, batch)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 4, 4, 4, 8, 2}; fmt.Sprint(offs) != fmt.Sprint(want) {
		t.Errorf("consumed (offset, count) %v, want %v", offs, want)
	}
	if out.Plan.Batch != batch || out.Plan.Batches != 3 || len(out.Iterations) != 3 || j.op.runs != 3 {
		t.Errorf("batch %d × %d, %d records, %d runs; want 4 × 3, 3 and 3", out.Plan.Batch, out.Plan.Batches, len(out.Iterations), j.op.runs)
	}
	if j.op.valid != 2 || j.op.padSum != 0 {
		t.Errorf("last run: %d valid rows, padding adds up to %v; want 2 and 0", j.op.valid, j.op.padSum)
	}
	if j.finished != 1 {
		t.Errorf("Finish called %d times, want once", j.finished)
	}
	j.checkResults(t)
}

// TestFakeResultsMatchALoop: every batch size, dividing the items or not,
// larger than them or 1, gives every item's results as a loop over the
// items does, the op's own output read in place and gorgonia's copied
// into a result buffer.
func TestFakeResultsMatchALoop(t *testing.T) {
	for _, batch := range []int{1, 2, 7, 50, 101, 102, 500} {
		j := newFakeJob(101, 6)
		j.square = true
		out, err := runFake(t.Context(), j, batch)
		if err != nil {
			t.Fatalf("batch %d: %v", batch, err)
		}
		if b := min(batch, 101); out.Plan.Batch != b || j.op.runs != (101+b-1)/b {
			t.Errorf("batch %d: planned %d, %d runs", batch, out.Plan.Batch, j.op.runs)
		}
		j.checkResults(t)
	}
}

// TestFakeErrorsReturned: an error from Feed, Consume, the op's run or
// Finish ends the run and is returned, still matching its cause; no batch
// is fed after it and Finish is not called after a failed batch.
func TestFakeErrorsReturned(t *testing.T) {
	errFake := errors.New("fake failure")
	fail := func(off, _ int) error {
		if off == 8 {
			return fmt.Errorf("items from %d: %w", off, errFake)
		}
		return nil
	}
	for _, c := range []struct {
		name  string
		edit  func(j *fakeJob)
		want  string // the error's text
		feeds int    // Feed calls at most
	}{
		{"feed", func(j *fakeJob) { j.onFeed = fail }, "items from 8: fake failure", 3},
		{"consume", func(j *fakeJob) { j.onConsume = fail }, "items from 8: fake failure", 4},
		{"op", func(j *fakeJob) {
			j.onRun = func(run int) error {
				if run == 3 {
					return fmt.Errorf("affine: %w", errFake)
				}
				return nil
			}
		}, "engine: fake: run: affine: fake failure", 3},
		{"finish", func(j *fakeJob) { j.finishErr = errFake }, "fake: fake failure", 5},
	} {
		j := newFakeJob(20, 2)
		c.edit(j)
		_, err := runFake(t.Context(), j, 4)
		if !errors.Is(err, errFake) || err.Error() != c.want {
			t.Errorf("%s: error %v, want %q matching the cause", c.name, err, c.want)
		}
		if j.feeds > c.feeds || (c.name != "finish" && j.finished != 0) {
			t.Errorf("%s: %d feeds, Finish called %d times; want at most %d feeds and Finish only after the last batch", c.name, j.feeds, j.finished, c.feeds)
		}
		for i := range j.items {
			if j.consumed[i] > 1 {
				t.Errorf("%s: item %d consumed %d times", c.name, i, j.consumed[i])
			}
		}
	}
}

// TestFakeFeedChecksBatch: Program.Feed refuses a batch of the wrong dtype,
// rank or length, naming both shapes, and takes a short one, which Pad
// completes with zeros.
func TestFakeFeedChecksBatch(t *testing.T) {
	p, err := engine.Compile(newFakeJob(8, 2), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, c := range []struct {
		name string
		t    *tensor.Dense
		want []string
	}{
		{"dtype", tensor.New(tensor.WithShape(4, 2), tensor.Of(tensor.Float32)), []string{"float64", "float32"}},
		{"too long", tensor.New(tensor.WithShape(5, 2), tensor.Of(tensor.Float64)), []string{"(4, 2)", "(5, 2)"}},
		{"rank", tensor.New(tensor.WithShape(8), tensor.Of(tensor.Float64)), []string{"(4, 2)", "(8)"}},
		{"width", tensor.New(tensor.WithShape(4, 3), tensor.Of(tensor.Float64)), []string{"(4, 2)", "(4, 3)"}},
	} {
		err := p.Feed(0, c.t)
		if !errors.Is(err, engine.ErrBatch) {
			t.Errorf("%s: error %v, want ErrBatch", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not name %q", c.name, err, w)
			}
		}
	}
	if err := p.Feed(1, tensor.New(tensor.WithShape(4, 2), tensor.Of(tensor.Float64))); !errors.Is(err, engine.ErrBatch) {
		t.Errorf("input 1 of 1: %v, want ErrBatch", err)
	}
	x := p.Inputs()[0].Data().([]float64)
	for i := range x {
		x[i] = 9 // last batch's values, to be cleared
	}
	if err := p.Feed(0, tensor.New(tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6}), tensor.WithShape(3, 2))); err != nil {
		t.Fatal(err)
	}
	if err := p.Pad(3); err != nil {
		t.Fatal(err)
	}
	if want := "[1 2 3 4 5 6 0 0]"; fmt.Sprint(x) != want {
		t.Errorf("padded input %v, want %s", x, want)
	}
	if n, err := p.Run(); err != nil || n != 3 {
		t.Errorf("Run = %d, %v; want 3 valid rows", n, err)
	}
	if want := "[3 5 7 9 11 13 -12345 -12345]"; fmt.Sprint(p.Outputs()[0].Data()) != want {
		t.Errorf("output %v, want %s", p.Outputs()[0].Data(), want)
	}
	for _, n := range []int{0, 5} {
		if err := p.Pad(n); !errors.Is(err, engine.ErrBatch) {
			t.Errorf("Pad(%d): %v, want ErrBatch", n, err)
		}
	}
	p.Close()
	if _, err := p.Run(); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Run after Close: %v", err)
	}
}

// TestFakeReplayAllocations: after the first batch, a batch's feed, run
// and consume allocate no buffer of the batch's size, only the few small
// objects of the tape's bookkeeping: a call of a compiled session over 40
// batches allocates at most 32 objects and 4 KiB a batch more than a call
// over 4 batches (a batch's input is 32 KiB).
func TestFakeReplayAllocations(t *testing.T) {
	dev, err := engine.CPU(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	const batch, width = 16, 256
	s, err := engine.NewSession(newFakeJob(batch, width), dev.Quiet().WithBatch(batch), true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	call := func(j *fakeJob) {
		clear(j.fed)
		clear(j.consumed)
		if err := s.Run(j); err != nil {
			t.Fatal(err)
		}
	}
	allocs := func(batches int) (objects, bytes float64) {
		j := newFakeJob(batches*batch, width)
		objects = testing.AllocsPerRun(10, func() { call(j) })
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for range 10 {
			call(j)
		}
		runtime.ReadMemStats(&m1)
		j.checkResults(t)
		return objects, float64(m1.TotalAlloc-m0.TotalAlloc) / 10
	}
	few, fewBytes := allocs(4)
	many, manyBytes := allocs(40)
	perBatch, bytesPerBatch := (many-few)/36, (manyBytes-fewBytes)/36
	t.Logf("a call of 4 batches: %.0f allocations (%.0f B), of 40: %.0f (%.0f B); %.1f (%.0f B) a batch",
		few, fewBytes, many, manyBytes, perBatch, bytesPerBatch)
	if perBatch > 32 || bytesPerBatch > 4<<10 {
		t.Errorf("%.1f allocations, %.0f bytes a batch; want at most 32 and 4 KiB", perBatch, bytesPerBatch)
	}
}

// TestFakeCancelBetweenBatches: a context cancelled during a run stops it
// before its next batch, with an error matching ErrInterrupted that says
// nothing was written; Finish is not called and no item is consumed
// twice.
func TestFakeCancelBetweenBatches(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	j := newFakeJob(40, 2)
	j.onConsume = func(off, _ int) error {
		if off == 4 {
			cancel()
		}
		return nil
	}
	_, err := runFake(ctx, j, 4)
	if !errors.Is(err, engine.ErrInterrupted) || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("error %v, want ErrInterrupted saying nothing was written", err)
	}
	if j.feeds >= 10 || j.finished != 0 {
		t.Errorf("%d of 10 batches fed, Finish called %d times after the cancel", j.feeds, j.finished)
	}
	for i := range j.items {
		if j.consumed[i] > 1 {
			t.Errorf("item %d consumed %d times", i, j.consumed[i])
		}
	}
}

// TestFakeCancelDuringOp: a context cancelled while an op runs sets the
// op's stop flag; the op's ErrStopped ends the run as interrupted, and the
// stopped batch is not consumed.
func TestFakeCancelDuringOp(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	j := newFakeJob(40, 2)
	j.onRun = func(run int) error {
		if run != 2 {
			return nil
		}
		cancel()
		// The flag is set from another goroutine; a flag never set is a
		// hang, caught after minutes.
		for deadline := time.Now().Add(2 * time.Minute); !j.op.stop.Load(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				return errors.New("hung: the stop flag is not set two minutes after the cancel")
			}
		}
		return nil
	}
	_, err := runFake(ctx, j, 4)
	if !errors.Is(err, engine.ErrInterrupted) {
		t.Fatalf("error %v, want ErrInterrupted", err)
	}
	if j.op.runs != 2 || j.finished != 0 {
		t.Errorf("%d runs, Finish called %d times; want 2 and none", j.op.runs, j.finished)
	}
	for i := range j.items {
		want := 0 // the stopped batch and those after it
		if i < 4 {
			want = 1 // the batch before
		}
		if j.consumed[i] != want {
			t.Errorf("item %d consumed %d times, want %d", i, j.consumed[i], want)
		}
	}
}

// TestFakeSessionInterrupt: Session.Interrupt during a call stops that
// call, with ErrInterrupted; the next call runs whole.
func TestFakeSessionInterrupt(t *testing.T) {
	dev, err := engine.CPU(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	s, err := engine.NewSession(newFakeJob(4, 3), dev.Quiet().WithBatch(4), true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	j := newFakeJob(20, 3)
	j.onFeed = func(off, _ int) error {
		if off == 8 {
			s.Interrupt()
		}
		return nil
	}
	if err := s.Run(j); !errors.Is(err, engine.ErrInterrupted) {
		t.Fatalf("interrupted call: %v, want ErrInterrupted", err)
	}
	if j.feeds != 3 || j.finished != 0 {
		t.Errorf("interrupted call: %d feeds, Finish called %d times; want 3 and none", j.feeds, j.finished)
	}
	j.reset()
	j.onFeed = nil
	if err := s.Run(j); err != nil {
		t.Fatalf("the call after: %v", err)
	}
	j.checkResults(t)
	if r := s.Report(); r.Calls != 1 || r.LastItems != 20 || r.LastBatches != 5 {
		t.Errorf("report: %d calls, last %d items in %d batches; want 1, 20, 5", r.Calls, r.LastItems, r.LastBatches)
	}
}

// TestFakeDevicesMatchOne: batches dealt over several Programs (2 and 3
// CPU "devices", run concurrently) are fed and consumed in order, once
// each, with the results of one Program; an error with batches in flight
// ends the run with that error.
func TestFakeDevicesMatchOne(t *testing.T) {
	for _, nd := range []int{2, 3} {
		j := newFakeJob(103, 4)
		j.square = true
		next := 0
		j.onConsume = func(off, n int) error {
			if off != next {
				return fmt.Errorf("consumed from item %d, want %d", off, next)
			}
			next = off + n
			return nil
		}
		out, err := engine.Run(t.Context(), j, engine.RunConfig{MemLimit: 1 << 30, Batch: 5, Baseline: 1, Devices: make([]ops.Device, nd)})
		if err != nil {
			t.Fatalf("%d devices: %v", nd, err)
		}
		if out.Summary.Batches != 21 {
			t.Errorf("%d devices: %d batch records, want 21", nd, out.Summary.Batches)
		}
		j.checkResults(t)

		errFeed := errors.New("feed failed")
		j = newFakeJob(100, 2)
		j.onFeed = func(off, _ int) error {
			if off >= 8 {
				return errFeed
			}
			return nil
		}
		if _, err := engine.Run(t.Context(), j, engine.RunConfig{MemLimit: 1 << 30, Batch: 4, Baseline: 1, Devices: make([]ops.Device, nd)}); !errors.Is(err, errFeed) {
			t.Errorf("%d devices: %v, want the feed's error", nd, err)
		}
	}
}
