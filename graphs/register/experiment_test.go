package register

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/rigid"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops"
)

// siddonTargets renders v moved by t with poses, by ops.DRR's Siddon path,
// plus Gaussian noise of sd noise times the images' standard deviation.
func siddonTargets(t *testing.T, v *volume.Volume, poses []ops.Pose, tr rigid.Transform, noise float64, rng *rand.Rand) []float64 {
	seen := Encode(SeenFrom(poses, tr))
	op := ops.NewDRR(v, poses[0].Rows, poses[0].Cols, 0, len(poses))
	out, err := op.Do(tensor.New(tensor.WithShape(len(poses), ops.PoseWidth), tensor.WithBacking(seen)))
	if err != nil {
		t.Fatal(err)
	}
	img := out.Data().([]float32)
	res := make([]float64, len(img))
	var m, s float64
	for i, x := range img {
		res[i] = float64(x)
		m += float64(x)
	}
	m /= float64(len(img))
	for _, x := range res {
		s += (x - m) * (x - m)
	}
	s = math.Sqrt(s / float64(len(res)))
	for i := range res {
		res[i] += noise * s * rng.NormFloat64()
	}
	return res
}

func TestExperimentPhantom(t *testing.T) {
	v := volume.Phantom(96, 192, 0.02)
	c := v.Centre()
	all, err := ops.OrbitAbout(4, c, [3]float64{0, 0, 1}, 0, 1000, 700, 128, 128, 1.6)
	if err != nil {
		t.Fatal(err)
	}
	poses := all[:2]
	rng := rand.New(rand.NewPCG(1, 2))
	ok := 0
	for trial := range 3 {
		var truth rigid.Transform
		truth.Center = c
		ax := [3]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
		n := math.Sqrt(ax[0]*ax[0] + ax[1]*ax[1] + ax[2]*ax[2])
		ang := rng.Float64() * 10 * math.Pi / 180
		for a := range 3 {
			truth.Rotation[a] = ax[a] / n * ang
			truth.Translation[a] = (2*rng.Float64() - 1) * 10 / math.Sqrt(3)
		}
		p := &Problem{Vol: v, Views: Encode(poses), Rows: 128, Cols: 128, Center: c, Targets: siddonTargets(t, v, poses, truth, 0.05, rng)}
		cfg := DefaultConfig()
		r, err := New(p, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		res, err := r.Run(context.Background(), nil)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		e := MTRE(res.Transform, truth, v)
		if e < 1 {
			ok++
		}
		t.Logf("trial %d: start mTRE %.2f mm, end %.3f mm, loss %.4f, %d steps, %d evals, %.2fs, converged=%v %s", trial, MTRE(rigid.Transform{Center: c}, truth, v), e, res.Loss, len(res.Trace), res.Evals, time.Since(t0).Seconds(), res.Converged, res.Reason)
	}
	t.Logf("%d of 5 under 1 mm", ok)
}

func loadCranium(t testing.TB) *volume.Volume {
	sp := [3]float64{0.95703125, 0.95703125, 1.5}
	v, err := volume.Load("/tmp/tapeloop-cranium/matrix.dat", volume.Options{Shape: [3]int{256, 256, 108}, Dtype: "int16", XFastest: true, Spacing: &sp})
	if err != nil {
		t.Skip(err)
	}
	volume.ApplyHU(v, 0.02)
	return v
}

func TestExperimentCranium(t *testing.T) {
	v := loadCranium(t)
	c := v.Centre()
	all, err := ops.OrbitAbout(4, c, [3]float64{0, 0, 1}, 0, 1020, 510, 128, 128, 3.125)
	if err != nil {
		t.Fatal(err)
	}
	poses := all[:2]
	rng := rand.New(rand.NewPCG(1, 2))
	ok := 0
	for trial := range 4 {
		var truth rigid.Transform
		truth.Center = c
		ax := [3]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
		n := math.Sqrt(ax[0]*ax[0] + ax[1]*ax[1] + ax[2]*ax[2])
		ang := rng.Float64() * 10 * math.Pi / 180
		for a := range 3 {
			truth.Rotation[a] = ax[a] / n * ang
			truth.Translation[a] = (2*rng.Float64() - 1) * 10 / math.Sqrt(3)
		}
		p := &Problem{Vol: v, Views: Encode(poses), Rows: 128, Cols: 128, Center: c, Targets: siddonTargets(t, v, poses, truth, 0.05, rng)}
		cfg := DefaultConfig()
		t0 := time.Now()
		r, err := New(p, cfg)
		if err != nil {
			t.Fatal(err)
		}
		tb := time.Since(t0)
		res, err := r.Run(context.Background(), nil)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		e := MTRE(res.Transform, truth, v)
		if e < 1 {
			ok++
		}
		lv := map[int]int{}
		for _, s := range res.Trace {
			lv[s.Level]++
		}
		t.Logf("trial %d: start mTRE %.2f mm, end %.3f mm, loss %.4f, steps/level %v, %d evals, build %.2fs total %.2fs, converged=%v %s", trial, MTRE(rigid.Transform{Center: c}, truth, v), e, res.Loss, lv, res.Evals, tb.Seconds(), time.Since(t0).Seconds(), res.Converged, res.Reason)
	}
	t.Logf("%d under 1 mm", ok)
}
