package parallel

import "testing"

func TestBuffersKeepAndGrow(t *testing.T) {
	b := NewBuffers[float64](2)
	s := b.Get(10)
	if len(s) != 10 {
		t.Fatalf("Get(10) gave %d values", len(s))
	}
	s[0] = 7
	b.Put(s)
	if r := b.Get(5); len(r) != 10 || r[0] != 7 {
		t.Errorf("Get(5) after Put of 10 values gave %d values, first %v: want the kept slice", len(r), r[0])
	}
	b.Put(make([]float64, 3))
	if r := b.Get(8); len(r) != 8 {
		t.Errorf("Get(8) with only 3 values kept gave %d", len(r))
	}
	for range 5 { // more than it keeps: Put must not block
		b.Put(make([]float64, 1))
	}
}
