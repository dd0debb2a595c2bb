package register

import (
	"context"
	"math"
	"math/rand/v2"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/rigid"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops"
)

// siddonTargets renders v moved by tr, seen with poses, by ops.DRR's exact
// (Siddon) path, another method than the trilinear samples registration
// renders, plus Gaussian noise of sd noise times the images' standard
// deviation: targets that are not the model's own output.
func siddonTargets(t testing.TB, v *volume.Volume, poses []ops.Pose, tr rigid.Transform, noise float64, rng *rand.Rand) []float64 {
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

// cranium is Debian's real skull CT (scripts/cranium.sh), in attenuation
// per mm; the test is skipped where it cannot be had.
func cranium(t testing.TB) *volume.Volume {
	t.Helper()
	out, err := exec.Command("../../scripts/cranium.sh").Output()
	if err != nil {
		t.Skipf("the Cranium CT is not available (scripts/cranium.sh: %v); install Debian's invesalius-examples", err)
	}
	sp := [3]float64{0.95703125, 0.95703125, 1.5}
	v, err := volume.Load(strings.TrimSpace(string(out)), volume.Options{Shape: [3]int{256, 256, 108}, Dtype: "int16", XFastest: true, Spacing: &sp})
	if err != nil {
		t.Fatal(err)
	}
	volume.ApplyHU(v, 0.02)
	return v
}

// A scene is a volume and its views: AP and lateral (orbit poses at 0° and
// 90° about z through the volume's centre).
type scene struct {
	name  string
	vol   *volume.Volume
	poses []ops.Pose
}

func newScene(t testing.TB, name string, v *volume.Volume, sdd, sid float64, n int, pixel float64, views int) scene {
	all, err := ops.OrbitAbout(4, v.Centre(), [3]float64{0, 0, 1}, 0, sdd, sid, n, n, pixel)
	if err != nil {
		t.Fatal(err)
	}
	return scene{name: name, vol: v, poses: all[:views]}
}

// randomTruth is a rotation of up to 10° about a random axis through the
// volume's centre and a translation of up to 10 mm in a random direction.
func randomTruth(rng *rand.Rand, c [3]float64) rigid.Transform {
	unit := func() [3]float64 {
		for {
			v := [3]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
			if n := math.Sqrt(v[0]*v[0] + v[1]*v[1] + v[2]*v[2]); n > 1e-6 {
				return [3]float64{v[0] / n, v[1] / n, v[2] / n}
			}
		}
	}
	a, d := unit(), unit()
	ang, dist := rng.Float64()*10*math.Pi/180, rng.Float64()*10
	tr := rigid.Transform{Center: c}
	for k := range 3 {
		tr.Rotation[k] = a[k] * ang
		tr.Translation[k] = d[k] * dist
	}
	return tr
}

// trial is one registration from the identity to a random truth.
type trial struct {
	start, end float64 // mTRE, mm
	seconds    float64
	steps      int
	converged  bool
}

func runTrials(t testing.TB, sc scene, n int, seed uint64) []trial {
	rng := rand.New(rand.NewPCG(seed, 7))
	c := sc.vol.Centre()
	var out []trial
	for range n {
		truth := randomTruth(rng, c)
		p := &Problem{Vol: sc.vol, Views: Encode(sc.poses), Rows: sc.poses[0].Rows, Cols: sc.poses[0].Cols, Center: c,
			Targets: siddonTargets(t, sc.vol, sc.poses, truth, 0.05, rng)}
		t0 := time.Now()
		r, err := New(p, DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		res, err := r.Run(context.Background(), nil)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, trial{start: MTRE(rigid.Transform{Center: c}, truth, sc.vol), end: MTRE(res.Transform, truth, sc.vol),
			seconds: time.Since(t0).Seconds(), steps: len(res.Trace), converged: res.Converged})
	}
	return out
}

func summarise(tr []trial) (under1 int, medEnd, medSec, maxSec float64, medSteps int) {
	var ends, secs []float64
	var steps []int
	for _, x := range tr {
		if x.end < 1 {
			under1++
		}
		ends, secs, steps = append(ends, x.end), append(secs, x.seconds), append(steps, x.steps)
	}
	slices.Sort(ends)
	slices.Sort(secs)
	slices.Sort(steps)
	return under1, ends[len(ends)/2], secs[len(secs)/2], secs[len(secs)-1], steps[len(steps)/2]
}

// Biplane registration (AP and lateral, 128² views) of a real CT and of
// the phantom from 20 random starts: the mTRE under 1 mm in at least 18.
func TestBiplaneRegistrationFromRandomStarts(t *testing.T) {
	if testing.Short() {
		t.Skip("20 registrations of a real CT and 20 of the phantom: make test-full")
	}
	for _, sc := range []scene{
		newScene(t, "Cranium CT", cranium(t), 1020, 510, 128, 3.125, 2),
		newScene(t, "phantom", volume.Phantom(128, 192, 0.02), 1000, 700, 128, 1.6, 2),
	} {
		tr := runTrials(t, sc, 20, 1)
		ok, medEnd, medSec, maxSec, medSteps := summarise(tr)
		t.Logf("%s, biplane: %d of 20 under 1 mm; median final mTRE %.3f mm; median %.2f s (max %.2f) and %d steps per registration", sc.name, ok, medEnd, medSec, maxSec, medSteps)
		for i, x := range tr {
			if x.end >= 1 {
				t.Logf("  start %d: mTRE %.2f → %.2f mm, converged %v", i, x.start, x.end, x.converged)
			}
			if x.end < 1 && !x.converged || x.end > 5 && x.converged {
				t.Errorf("%s start %d: mTRE %.2f mm but converged=%v", sc.name, i, x.end, x.converged)
			}
		}
		if ok < 18 {
			t.Errorf("%s: %d of 20 registrations under 1 mm, want at least 18", sc.name, ok)
		}
	}
}

// A short version for make test: the phantom, 64² views, 3 starts.
func TestBiplaneRegistrationPhantomSmall(t *testing.T) {
	sc := newScene(t, "phantom", volume.Phantom(64, 192, 0.02), 1000, 700, 64, 3.2, 2)
	for i, x := range runTrials(t, sc, 3, 2) {
		if x.end >= 1 || !x.converged {
			t.Errorf("start %d: mTRE %.2f → %.3f mm, converged %v", i, x.start, x.end, x.converged)
		}
	}
}

// settledRSS is the resident memory after a garbage collection that
// returns what it frees to the system: what the run holds, not the garbage
// a collection has yet to take (the Go heap may grow to twice what it
// holds before it collects).
func settledRSS(p *sysmem.Probe) int64 {
	runtime.GC()
	debug.FreeOSMemory()
	return p.RSS()
}

// liveHeap is the Go heap's live bytes after a collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// The work and memory of a step stay flat: 1,000 replays of the finest
// level's tape (Cranium, biplane 128²), the allocations of the 100 steps
// after warm-up against those of the last 100, and the live heap and
// resident memory after warm-up against the end (the fastest steps of
// each are logged, not bounded).
func TestStepsStayFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 steps of a real CT: make test-full")
	}
	sc := newScene(t, "Cranium CT", cranium(t), 1020, 510, 128, 3.125, 2)
	rng := rand.New(rand.NewPCG(3, 4))
	c := sc.vol.Centre()
	p := &Problem{Vol: sc.vol, Views: Encode(sc.poses), Rows: 128, Cols: 128, Center: c, Targets: siddonTargets(t, sc.vol, sc.poses, randomTruth(rng, c), 0.05, rng)}
	cfg := DefaultConfig()
	cfg.Levels = 1
	r, err := New(p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	probe := sysmem.NewProbe()
	defer probe.Close()
	l := r.Levels[0]
	times := make([]float64, 1000)
	var rssWarm, heapWarm int64
	var mallocs [3]uint64 // the heap's allocations at steps 100, 200 and 900
	readMallocs := func() uint64 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.Mallocs
	}
	for i := range times {
		switch i {
		case 100:
			mallocs[0] = readMallocs()
		case 200:
			mallocs[1] = readMallocs()
		case 900:
			mallocs[2] = readMallocs()
		}
		var q [6]float64
		for j := range q {
			q[j] = 0.01 * rng.NormFloat64()
		}
		t0 := time.Now()
		if _, _, err := l.Eval(q); err != nil {
			t.Fatal(err)
		}
		times[i] = time.Since(t0).Seconds()
		if i == 99 {
			rssWarm, heapWarm = settledRSS(probe), liveHeap()
		}
	}
	lateAllocs := readMallocs() - mallocs[2]
	grow, heapGrow := settledRSS(probe)-rssWarm, liveHeap()-heapWarm
	earlyAllocs := mallocs[1] - mallocs[0]
	early, late := slices.Min(times[100:200]), slices.Min(times[900:])
	t.Logf("step: fastest %.2f ms of steps 100–199, %.2f ms of 900–999 (drift %.3f); %d and %d allocations; RSS %.1f MiB after warm-up, %+.3f MiB by step 1000; live Go heap %+.1f KiB",
		1e3*early, 1e3*late, late/early, earlyAllocs, lateAllocs, float64(rssWarm)/(1<<20), float64(grow)/(1<<20), float64(heapGrow)/(1<<10))
	// What a step keeps shows in the live heap, to the byte: held to
	// 1 MiB over 900 steps. Time and resident memory are measured figures
	// (BENCHMARKS.md), not asserted to a drift of 1.1 and 1 MiB here: in a
	// go test ./... beside other packages' tests, the load changes under
	// the run (a drift of 1.16 was seen) and the runtime makes threads for
	// the cgo kernels as the scheduler needs them (their stacks: up to
	// 8.5 MiB of resident memory, with the live heap +1 KiB). The bounds
	// below catch a real growth: a step that does more (counted in its
	// allocations, not timed: the time is only logged), or a leak of 64 KiB
	// a step outside the Go heap.
	if heapGrow > 1<<20 {
		t.Errorf("the live heap grew by %.2f MiB over 900 steps", float64(heapGrow)/(1<<20))
	}
	if lateAllocs > earlyAllocs+earlyAllocs/10+100 {
		t.Errorf("steps 900–999 made %d allocations, steps 100–199 %d: a step does more as the run goes on", lateAllocs, earlyAllocs)
	}
	if grow > 64<<20 {
		t.Errorf("RSS grew by %.2f MiB over 900 steps", float64(grow)/(1<<20))
	}
}
