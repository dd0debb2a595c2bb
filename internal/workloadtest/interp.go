package workloadtest

import (
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/ops"
)

// MemQueries serves an interpolation's queries from memory.
type MemQueries struct {
	X   []float64
	pos int
}

// Len is the number of queries.
func (q *MemQueries) Len() int { return len(q.X) }

// Read32 copies the next len(dst) queries into dst as float32.
func (q *MemQueries) Read32(dst []float32, _ int) error {
	for i := range dst {
		dst[i] = float32(q.X[q.pos+i])
	}
	q.pos += len(dst)
	return nil
}

// Read64 copies the next len(dst) queries into dst.
func (q *MemQueries) Read64(dst []float64, _ int) error {
	q.pos += copy(dst, q.X[q.pos:q.pos+len(dst)])
	return nil
}

// RandomInterpTable is the table of m standard-normal interpolants on g
// points from -0.5, 0.37 apart, reduced by r in dtype dt, and its values.
func RandomInterpTable(t testing.TB, rng *rand.Rand, m, g int, r ops.Reduce, dt tensor.Dtype) (*ops.InterpTable, []float64) {
	t.Helper()
	f := make([]float64, m*g)
	for i := range f {
		f[i] = rng.NormFloat64()
	}
	tab, err := ops.NewInterpTable(f, m, g, -0.5, 0.37, r, ops.MethodAuto, dt)
	if err != nil {
		t.Fatal(err)
	}
	return tab, f
}
