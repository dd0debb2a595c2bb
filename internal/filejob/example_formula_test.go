package filejob_test

import (
	"context"
	"fmt"
	"log"

	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/filejob"
)

// A Gaussian affinity of the user's own, with its width as a parameter,
// over 300 built-in images of 8×8: the formula is checked when the spec
// is opened, compiled once into the graph and replayed block after block;
// here it runs from dot products (the sum of squares expands).
func ExampleOpenAffinity_formula() {
	dev, err := engine.Open(engine.Engine{})
	if err != nil {
		log.Fatal(err)
	}
	spec := filejob.AffinitySpec{N: 300, Height: 8, Width: 8, Seed: 1}
	spec.Formula, spec.Params = "exp(-sum((a-b)^2)/(2*s^2))", map[string]float64{"s": 8}
	t, err := filejob.OpenAffinity(spec, dev, true)
	if err != nil {
		log.Fatal(err)
	}
	defer t.Close()
	if _, err := dev.Quiet().Run(context.Background(), t.Job()); err != nil {
		log.Fatal(err)
	}
	r := t.Summary()
	fmt.Printf("%s over %d images: mean affinity %.4f\n", r.Formula, r.N, r.Checksum/float64(r.N*r.N))
	// Output:
	// exp(-sum((a-b)^2)/(2*s^2)); s=8 (from dot products) over 300 images: mean affinity 0.3767
}

// A reduction of the user's own over the 300 interpolants of the built-in
// case: the largest value at each of 10,000 points.
func ExampleOpenInterp_formula() {
	dev, err := engine.Open(engine.Engine{})
	if err != nil {
		log.Fatal(err)
	}
	spec := filejob.DefaultInterpSpec()
	spec.Points, spec.Reduce = 10_000, "max(v)"
	t, err := filejob.OpenInterp(spec, dev, true)
	if err != nil {
		log.Fatal(err)
	}
	defer t.Close()
	if _, err := dev.Quiet().Run(context.Background(), t.Job()); err != nil {
		log.Fatal(err)
	}
	r := t.Summary()
	fmt.Printf("mean of %s over %d points: %.4f\n", r.Reduce, r.Queries, r.Sum/float64(r.Queries))
	// Output:
	// mean of max(v) over 10000 points: 0.3315
}
