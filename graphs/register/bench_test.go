package register

import (
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops"
)

// benchmarkStep times one step of the finest level on the Cranium CT,
// biplane 128²: the forward pass alone (pose → DRRs → loss, compiled
// without the gradient) or forward and backward (the registration's
// step), each a replay of its own TapeMachine.
func benchmarkStep(b *testing.B, step float64, backward bool) {
	sc := newScene(b, "Cranium CT", cranium(b), 1020, 510, 128, 3.125, 2)
	rng := rand.New(rand.NewPCG(5, 6))
	c := sc.vol.Centre()
	p := &Problem{Vol: sc.vol, Views: Encode(sc.poses), Rows: 128, Cols: 128, Center: c, Targets: siddonTargets(b, sc.vol, sc.poses, randomTruth(rng, c), 0.05, rng)}
	if backward {
		cfg := DefaultConfig()
		cfg.Levels, cfg.Step = 1, step
		r, err := New(p, cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		b.ResetTimer()
		for range b.N {
			if _, _, err := r.Levels[0].Eval([6]float64{0.01, 0, 0, 1, 0, 0}); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	render, err := ops.NewRigidDRR(sc.vol, p.Views, 128, 128, step, c)
	if err != nil {
		b.Fatal(err)
	}
	loss, err := ops.NewImageLoss(ops.LossNCC, 2, 128, 128, 0)
	if err != nil {
		b.Fatal(err)
	}
	g := G.NewGraph()
	pt := tensor.New(tensor.WithShape(6), tensor.WithBacking([]float64{0.01, 0, 0, 1, 0, 0}))
	theta := G.NewVector(g, tensor.Float64, G.WithShape(6), G.WithName("θ"), G.WithValue(pt))
	img := G.Must(G.ApplyOp(render, theta))
	tgt := G.NewConstant(tensor.New(tensor.WithShape(2, 128, 128), tensor.WithBacking(p.Targets)))
	G.Must(G.ApplyOp(loss, img, tgt))
	m := G.NewTapeMachine(g)
	defer m.Close()
	b.ResetTimer()
	for range b.N {
		if err := m.RunAll(); err != nil {
			b.Fatal(err)
		}
		m.Reset()
	}
}

func BenchmarkStepTrilinearForward(b *testing.B)         { benchmarkStep(b, 1, false) }
func BenchmarkStepTrilinearForwardBackward(b *testing.B) { benchmarkStep(b, 1, true) }
func BenchmarkStepSiddonForward(b *testing.B)            { benchmarkStep(b, 0, false) }
func BenchmarkStepSiddonForwardBackward(b *testing.B)    { benchmarkStep(b, 0, true) }

// benchmarkRegister times whole registrations from random starts (one a
// b.N), and reports the share under 1 mm mTRE and the median steps.
func benchmarkRegister(b *testing.B, sc scene) {
	b.ResetTimer()
	tr := runTrials(b, sc, b.N, 9)
	b.StopTimer()
	ok, medEnd, medSec, maxSec, medSteps := summarise(tr)
	// ns/op counts the making of the targets too; these are the
	// registrations alone (compiling the levels, then the run).
	b.ReportMetric(medSec, "s/reg-median")
	b.ReportMetric(maxSec, "s/reg-max")
	b.ReportMetric(100*float64(ok)/float64(b.N), "%<1mm")
	b.ReportMetric(medEnd, "mm-mTRE-median")
	b.ReportMetric(float64(medSteps), "steps-median")
}

func BenchmarkRegisterBiplane(b *testing.B) {
	benchmarkRegister(b, newScene(b, "Cranium CT", cranium(b), 1020, 510, 128, 3.125, 2))
}
func BenchmarkRegisterSingleView(b *testing.B) {
	benchmarkRegister(b, newScene(b, "Cranium CT", cranium(b), 1020, 510, 128, 3.125, 1))
}
func BenchmarkRegisterPhantomSingleView(b *testing.B) {
	benchmarkRegister(b, newScene(b, "phantom", volume.Phantom(128, 192, 0.02), 1000, 700, 128, 1.6, 1))
}
