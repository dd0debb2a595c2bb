package parallel

import (
	"sync/atomic"
	"testing"
)

func TestForCoversEveryIndexOnce(t *testing.T) {
	for _, n := range []int{0, 1, 7, 1000, 4097} {
		for _, grain := range []int{0, 1, 100, 5000} {
			hits := make([]atomic.Int32, n)
			For(n, grain, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					hits[i].Add(1)
				}
			})
			for i := range hits {
				if h := hits[i].Load(); h != 1 {
					t.Fatalf("n=%d grain=%d: index %d visited %d times", n, grain, i, h)
				}
			}
		}
	}
}

func TestDynamicCoversEveryIndexOnce(t *testing.T) {
	for _, n := range []int{0, 1, 7, 1000, 4097} {
		for _, chunk := range []int{0, 1, 100, 5000} {
			hits := make([]atomic.Int32, n)
			Dynamic(n, chunk, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					hits[i].Add(1)
				}
			})
			for i := range hits {
				if h := hits[i].Load(); h != 1 {
					t.Fatalf("n=%d chunk=%d: index %d visited %d times", n, chunk, i, h)
				}
			}
		}
	}
}
