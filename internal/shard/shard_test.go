package shard

import (
	"testing"
)

func TestRowsCoverExactlyOnce(t *testing.T) {
	for _, n := range []int{1, 7, 100, 10007} {
		for _, count := range []int{1, 2, 3, 8, 13} {
			next := 0
			for i := range count {
				lo, hi := Rows(i, count, n)
				if lo != next || hi < lo {
					t.Fatalf("n=%d count=%d: shard %d is [%d, %d), want start %d", n, count, i, lo, hi, next)
				}
				next = hi
			}
			if next != n {
				t.Fatalf("n=%d count=%d: shards end at %d", n, count, next)
			}
		}
	}
}

func TestParse(t *testing.T) {
	if i, n, err := Parse("3/8"); err != nil || i != 3 || n != 8 {
		t.Errorf("Parse(3/8) = %d, %d, %v", i, n, err)
	}
	for _, s := range []string{"", "3", "8/8", "-1/4", "a/b", "1/0", "1/2/3"} {
		if _, _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q): no error", s)
		}
	}
}
