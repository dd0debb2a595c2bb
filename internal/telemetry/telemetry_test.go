package telemetry

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

func TestSummarize(t *testing.T) {
	// 20 batches: the first two take 1 s, the last two 3 s, the rest 2 s.
	it := make([]Iteration, 20)
	for i := range it {
		it[i] = Iteration{Seconds: 2, HeapBytes: int64(1000 + i)}
	}
	it[0].Seconds, it[1].Seconds = 1, 1
	it[18].Seconds, it[19].Seconds = 3, 3
	s := Summarize(it)
	if s.Batches != 20 || s.MedianMs != 2000 || math.Abs(s.Drift-3) > 1e-12 || s.HeapGrowth != 19 {
		t.Errorf("summary %+v, want 20 batches, median 2000 ms, drift 3, heap growth 19", s)
	}
	if s := Summarize(it[:1]); s.Drift != 1 || s.Batches != 1 {
		t.Errorf("one batch: %+v", s)
	}
	if s := Summarize(nil); s.Batches != 0 || s.Drift != 1 {
		t.Errorf("no batches: %+v", s)
	}
}

func TestMedianLeavesInputAlone(t *testing.T) {
	x := []float64{5, 1, 4, 2}
	if m := Median(x); m != 3 {
		t.Errorf("median %v, want 3", m)
	}
	if x[0] != 5 || x[3] != 2 {
		t.Errorf("input reordered: %v", x)
	}
}

func TestRecorderAndReport(t *testing.T) {
	r := NewRecorder(3)
	for range 3 {
		r.Start()
		r.Stop()
	}
	s := r.Close()
	if len(r.Iterations) != 3 || s.Batches != 3 || s.PeakRSSBytes <= 0 {
		t.Fatalf("recorded %d iterations, summary %+v", len(r.Iterations), s)
	}
	for _, it := range r.Iterations {
		if it.Seconds < 0 || it.HeapBytes <= 0 || it.RSSBytes <= 0 {
			t.Errorf("iteration %+v", it)
		}
	}
	var buf bytes.Buffer
	rep := &Report{Workload: "w", Iterations: r.Iterations, Result: map[string]float64{"sum": 1}}
	if err := rep.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"workload", "device", "dtype", "batch", "batches", "mem_limit_bytes", "planned_bytes", "peak_rss_bytes", "total_seconds", "iterations", "result"} {
		if _, ok := back[k]; !ok {
			t.Errorf("report lacks %q", k)
		}
	}
}

// TestRecorderDeviceSeconds: each record carries the device time since the
// previous one, and the summary their median.
func TestRecorderDeviceSeconds(t *testing.T) {
	busy := []float64{0.5, 0.75, 1.75, 2} // the device's cumulative busy time, read after each batch
	k := 0
	r := NewRecorder(4)
	r.DeviceSeconds = func() float64 { k++; return busy[k-1] }
	for range busy {
		r.Start()
		r.Stop()
	}
	s := r.Close()
	want := []float64{0.5, 0.25, 1, 0.25}
	for i, it := range r.Iterations {
		if it.DeviceSeconds != want[i] {
			t.Errorf("batch %d: device_seconds %v, want %v", i, it.DeviceSeconds, want[i])
		}
	}
	if s.DeviceMs != 375 {
		t.Errorf("median device time %v ms, want 375", s.DeviceMs)
	}
}

// TestSummarizeDriftByCost: a run whose batches differ in cost (a sweep
// running its small transforms first) measures drift within each cost
// class: steady batches of growing cost give drift 1 where the plain
// last/first ratio says 8, and a class that slows is seen.
func TestSummarizeDriftByCost(t *testing.T) {
	var it []Iteration
	for range 30 { // cost 1, 1 ms each
		it = append(it, Iteration{Seconds: 0.001, Cost: 1})
	}
	for range 20 { // cost 8, 8 ms each
		it = append(it, Iteration{Seconds: 0.008, Cost: 8.04})
	}
	s := Summarize(it)
	if s.Drift != 1 || len(s.DriftByCost) != 2 {
		t.Fatalf("steady classes: drift %v, classes %+v; want 1 and two classes", s.Drift, s.DriftByCost)
	}
	if c := s.DriftByCost; c[0].Cost != 1 || c[0].Batches != 30 || c[0].MedianMs != 1 || c[1].Batches != 20 || c[1].MedianMs != 8 {
		t.Errorf("classes %+v, want 30 of cost 1 at 1 ms, then 20 at 8 ms", c)
	}
	var plain []Iteration
	for _, x := range it {
		plain = append(plain, Iteration{Seconds: x.Seconds})
	}
	if d := Summarize(plain).Drift; d != 8 {
		t.Errorf("without costs: drift %v, want 8", d)
	}
	// The large class's last three batches take twice as long.
	for i := 27; i < 30; i++ {
		it[i].Seconds = 0.002
	}
	if s := Summarize(it); s.Drift != 2 {
		t.Errorf("the cost-1 class slowing: drift %v, want 2", s.Drift)
	}
	// Every batch of its own cost, time proportional to cost: drift by
	// time per unit of cost, 1; then with the last batches twice as slow
	// per unit, 2.
	var each []Iteration
	for i := range 40 {
		c := float64(1 + i*i)
		each = append(each, Iteration{Seconds: 1e-3 * c, Cost: c})
	}
	if s := Summarize(each); math.Abs(s.Drift-1) > 1e-12 || len(s.DriftByCost) != 40 {
		t.Errorf("a cost per batch: drift %v with %d classes, want 1 and 40", s.Drift, len(s.DriftByCost))
	}
	for i := 36; i < 40; i++ {
		each[i].Seconds *= 2
	}
	if s := Summarize(each); math.Abs(s.Drift-2) > 1e-12 {
		t.Errorf("a cost per batch, the last slower: drift %v, want 2", s.Drift)
	}
}
