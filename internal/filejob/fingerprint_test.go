package filejob

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tapeloop/tapeloop/graphs/affinity"
	"github.com/tapeloop/tapeloop/graphs/option"
	"github.com/tapeloop/tapeloop/graphs/wavelet"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/shard"
	"github.com/tapeloop/tapeloop/ops"
)

// A fingerprint change is a setting of one option: base (nil: none)
// prepares the run it applies to, change sets the option to another
// value that changes the results.
type drrChange = specChange[DRRSpec]

type waveletChange = specChange[WaveletSpec]

// specChange sets an option of a spec S to another valid value, after base
// (when not nil) has set the spec up so that the option matters.
type specChange[S any] struct{ base, change func(*S) }

// checkPrintCovers checks every field of spec S (option.Fields, the
// Config's included): one tagged fingerprint:"-" must not be in changes;
// one listed in notInPrint is skipped; any other must have a change, and
// the change must alter print's fingerprint of the spec made by small.
// cfg names the Config in the messages.
func checkPrintCovers[S any](t *testing.T, cfg string, changes map[string]specChange[S], notInPrint map[string]string, small func() S, print func(*testing.T, S, string) string) {
	t.Helper()
	seen := map[string]bool{}
	for _, f := range option.Fields(*new(S)) {
		seen[f.Go] = true
		c, ok := changes[f.Go]
		_, declared := notInPrint[f.Go]
		switch {
		case !f.Result && ok:
			t.Errorf("%s is tagged fingerprint:\"-\" (it does not change the results), yet a change of it is listed", f.Go)
			continue
		case !f.Result || declared:
			continue
		case !ok:
			t.Errorf("%s: no change of it listed: if it changes the results, add one (and put it in the fingerprint); if not, tag it fingerprint:\"-\" in %s or list it among the fields not in the fingerprint", f.Go, cfg)
			continue
		}
		t.Run(f.Go, func(t *testing.T) {
			base := small()
			if c.base != nil {
				c.base(&base)
			}
			changed := base
			c.change(&changed)
			if reflect.DeepEqual(base, changed) {
				t.Fatalf("the change leaves %s as it was", f.Go)
			}
			if a, b := print(t, base, "cpu"), print(t, changed, "cpu"); a == b {
				t.Errorf("changing %s leaves the fingerprint %s: a shard or checkpoint of another run would be taken for this one's", f.Go, a)
			}
		})
	}
	for name := range changes {
		if !seen[name] {
			t.Errorf("a change of %s is listed, which the spec does not have", name)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// tinyDRR is a DRR run small enough to fingerprint many times.
func tinyDRR() DRRSpec {
	s := DefaultDRRSpec()
	s.Size, s.Orbit, s.Detector, s.Pixel, s.Out = 12, 3, "6x5", 8, "out" // Out is only parsed
	return s
}

// drrPrint is the fingerprint a shard or checkpoint of s on device
// records, made as OpenDRR makes it.
func drrPrint(t *testing.T, s DRRSpec, device string) string {
	t.Helper()
	p, err := s.parse()
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.loadVolume(p)
	if err != nil {
		t.Fatal(err)
	}
	poses, err := s.poses(p, v)
	if err != nil {
		t.Fatal(err)
	}
	setup, err := s.Prepare(v, poses[0].Rows, poses[0].Cols)
	if err != nil {
		t.Fatal(err)
	}
	setup.Poses = poses
	return s.fingerprint(v, poses, setup, device)
}

// drrNotInPrint are DRRSpec's own fields (beside its drr.Config) that do
// not change the images, or that reach them only through the volume or
// the poses, whose values the fingerprint holds.
var drrNotInPrint = map[string]string{
	"RawShape": "read into the volume",
	"RawDtype": "read into the volume",
	"RawOrder": "read into the volume",
	"Series":   "read into the volume",
	"Geometry": "read into the poses",
	"Out":      "where the images go",
	"Format":   "which files hold the images, not their values",
	"Shard":    "which poses a shard holds: the checkpoint and shard record it beside the fingerprint",
	"Shards":   "which poses a shard holds: the checkpoint and shard record it beside the fingerprint",
	"Env":      "which poses a shard holds: the checkpoint and shard record it beside the fingerprint",
	"Warn":     "where warnings go",
	"Resume":   "whether a run continues",
}

// drrChanges changes each option of a DRR that changes its images.
func drrChanges(dir string) map[string]drrChange {
	mha := filepath.Join(dir, "cube.mha")
	volume := func(s *DRRSpec) { s.Volume = mha }
	return map[string]drrChange{
		// drr.Config
		"Spacing": {nil, func(s *DRRSpec) { s.Spacing = &[3]float64{1.5, 1.5, 1.5} }},
		"Origin":  {nil, func(s *DRRSpec) { s.Origin = &[3]float64{3, 0, 0} }},
		"Frame":   {volume, func(s *DRRSpec) { s.Frame = "ras" }},
		"HU":      {volume, func(s *DRRSpec) { s.HU = true }},
		"MuWater": {nil, func(s *DRRSpec) { s.MuWater = ptr(0.03) }},
		"Mu":      {nil, func(s *DRRSpec) { s.Mu = "2*h" }},
		"Post":    {nil, func(s *DRRSpec) { s.Post = "exp(-p)" }},
		"Filter":  {nil, func(s *DRRSpec) { s.Filter = []string{"box:3"} }},
		"Params": {func(s *DRRSpec) { s.Post, s.Params = "s*p", map[string]float64{"s": 1} },
			func(s *DRRSpec) { s.Params = map[string]float64{"s": 2} }},
		"Method": {nil, func(s *DRRSpec) { s.Method = "trilinear" }},
		"Step":   {func(s *DRRSpec) { s.Method = "trilinear" }, func(s *DRRSpec) { s.Step = ptr(0.7) }},
		// DRRSpec
		"Volume":    {nil, volume},
		"Size":      {nil, func(s *DRRSpec) { s.Size = 10 }},
		"Orbit":     {nil, func(s *DRRSpec) { s.Orbit = 4 }},
		"SDD":       {nil, func(s *DRRSpec) { s.SDD = 1000 }},
		"SID":       {nil, func(s *DRRSpec) { s.SID = 500 }},
		"Detector":  {nil, func(s *DRRSpec) { s.Detector = "5x6" }},
		"Pixel":     {nil, func(s *DRRSpec) { s.Pixel = 7 }},
		"Isocenter": {nil, func(s *DRRSpec) { s.Isocenter = "1,2,3" }},
		"Start":     {nil, func(s *DRRSpec) { s.Start = 10 }},
		"Axis":      {nil, func(s *DRRSpec) { s.Axis = "x" }},
		"PNG":       {nil, func(s *DRRSpec) { s.PNG = true }},
		"PNGScale":  {func(s *DRRSpec) { s.PNG = true }, func(s *DRRSpec) { s.PNGScale = "global" }},
		"Window": {func(s *DRRSpec) { s.PNG, s.Window, s.Level = true, ptr(100.0), ptr(0.0) },
			func(s *DRRSpec) { s.Window = ptr(200.0) }},
		"Level": {func(s *DRRSpec) { s.PNG, s.Window, s.Level = true, ptr(100.0), ptr(0.0) },
			func(s *DRRSpec) { s.Level = ptr(50.0) }},
	}
}

// TestDRRFingerprintCoversConfig walks every option of a DRR run, those
// of drr.Config and those of the file layer's DRRSpec, and changes each
// in turn: the fingerprint its shards and checkpoints record must change
// with every option that changes the images. An option that does not is
// tagged fingerprint:"-" in drr.Config, or listed in drrNotInPrint.
func TestDRRFingerprintCoversConfig(t *testing.T) {
	dir := t.TempDir()
	writeMeta(t, filepath.Join(dir, "cube.mha"), [3][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, [3]float64{-7, 3, 5}, [3]float64{1, 1.5, 2}, mhaKeys{matrix: "TransformMatrix", offset: "Offset", local: true})
	checkPrintCovers(t, "drr.Config", drrChanges(dir), drrNotInPrint, tinyDRR, drrPrint)
	if a := drrPrint(t, tinyDRR(), "cpu"); a != drrPrint(t, tinyDRR(), "cpu") {
		t.Error("one run gives two fingerprints")
	}
	checkEngineInPrint(t, func(device string) string { return drrPrint(t, tinyDRR(), device) })
}

// engineInPrint is what each engine setting does to a DRR's or a wavelet
// sweep's results: the device's kind is in the fingerprint (a GPU rounds
// otherwise than the CPU); the others do not change them.
var engineInPrint = map[string]string{
	"Device":   "in the fingerprint",
	"GPUs":     "which GPUs of the kind: the same results",
	"MemLimit": "how much is computed at once: the same results",
	"Batch":    "how much is computed at once: the same results",
	"Dtype":    "DRR and wavelet compute in float32 whatever it is",
	"Verbose":  "what is printed",
	"Progress": "what is printed",
	"Log":      "where messages go",
	"Warn":     "where warnings go",
}

// checkEngineInPrint checks that every field of engine.Engine is
// accounted for in engineInPrint and that the device's kind changes the
// fingerprint print(kind) makes.
func checkEngineInPrint(t *testing.T, print func(device string) string) {
	t.Helper()
	for _, f := range option.Fields(engine.Engine{}) {
		if _, ok := engineInPrint[f.Go]; !ok {
			t.Errorf("engine.Engine.%s: not in engineInPrint: say whether it changes results (and if it does, put it in the fingerprints)", f.Go)
		}
	}
	if print("cpu") == print("cuda") {
		t.Error("the device's kind leaves the fingerprint as it was")
	}
}

// smallWavelet is a sweep small enough to fingerprint many times.
func smallWavelet() WaveletSpec {
	s := DefaultWaveletSpec()
	s.Size, s.Theta, s.Phi, s.Xi = "6x7x8", "0,1", "0", "1,2"
	return s
}

// waveletPrint is the fingerprint a shard or checkpoint of s on device
// records, made as OpenWavelet makes it.
func waveletPrint(t *testing.T, s WaveletSpec, device string) string {
	t.Helper()
	p, err := s.parse()
	if err != nil {
		t.Fatal(err)
	}
	v, n, err := s.volume(p)
	if err != nil {
		t.Fatal(err)
	}
	v, n = p.cfg.Arrange(v, n)
	formulas, err := p.cfg.Formulas(n, false)
	if err != nil {
		t.Fatal(err)
	}
	sup, err := wavelet.Supports(s.A, formulas.KernelFormula(), p.combos)
	if err != nil {
		t.Fatal(err)
	}
	pads, pad := wavelet.Pads(n, s.A, p.combos, sup)
	src, err := ops.NewWaveletSource(v, n, s.A, p.cfg.Boundary, pad)
	if err != nil {
		t.Fatal(err)
	}
	src.MaxSupport, src.Narrow = wavelet.MaxSupport(sup), wavelet.AnyNarrow(s.A, p.combos)
	src.SetPaddings(pads)
	src.Formulas = formulas
	job, err := wavelet.New(wavelet.Setup{Src: src, Combos: p.combos, Lo: 0, Hi: len(p.combos), Columns: s.Columns})
	if err != nil {
		t.Fatal(err)
	}
	return s.fingerprint(p, v, n, job.Header(), device)
}

// waveletNotInPrint are WaveletSpec's own fields (beside its
// wavelet.Config) that do not change the statistics, or that reach them
// only through the volume, whose values the fingerprint holds.
var waveletNotInPrint = map[string]string{
	"Series":        "read into the volume",
	"Out":           "where the CSV goes",
	"Stdout":        "where the CSV goes",
	"Shard":         "which combinations a shard holds: the checkpoint and shard record it beside the fingerprint",
	"Shards":        "which combinations a shard holds: the checkpoint and shard record it beside the fingerprint",
	"Env":           "which combinations a shard holds: the checkpoint and shard record it beside the fingerprint",
	"Warn":          "where warnings go",
	"Resume":        "whether a run continues",
	"SaveResponses": "files written beside the CSV at the end, not its values",
}

// waveletChanges changes each option of a sweep that changes its CSV.
func waveletChanges(t *testing.T, dir string) map[string]waveletChange {
	return map[string]waveletChange{
		// wavelet.Config
		"A":        {nil, func(s *WaveletSpec) { s.A = 1.5 }},
		"Boundary": {nil, func(s *WaveletSpec) { s.Boundary = "wrap" }},
		"Kernel":   {nil, func(s *WaveletSpec) { s.Kernel = "exp(-4*q)" }},
		"Reach":    {func(s *WaveletSpec) { s.Kernel = "exp(-4*q)" }, func(s *WaveletSpec) { s.Reach = "2" }},
		"Indexing": {nil, func(s *WaveletSpec) { s.Indexing = "xy" }},
		"Stats":    {nil, func(s *WaveletSpec) { s.Stats = []string{"l1=sum(abs(g))"} }},
		"Params": {func(s *WaveletSpec) { s.Stats, s.Params = []string{"l1=s*sum(abs(g))"}, map[string]float64{"s": 1} },
			func(s *WaveletSpec) { s.Params = map[string]float64{"s": 2} }},
		"Columns": {nil, func(s *WaveletSpec) { s.Columns = []string{"std"} }},
		// WaveletSpec
		"Volume": {nil, func(s *WaveletSpec) {
			writeCubeNpy(t, filepath.Join(dir, "cube.npy"))
			s.Volume = filepath.Join(dir, "cube.npy")
		}},
		"Size":  {nil, func(s *WaveletSpec) { s.Size = "6x7x9" }},
		"Seed":  {nil, func(s *WaveletSpec) { s.Seed = 2 }},
		"Theta": {nil, func(s *WaveletSpec) { s.Theta = "0,2" }},
		"Phi":   {nil, func(s *WaveletSpec) { s.Phi = "1" }},
		"Xi":    {nil, func(s *WaveletSpec) { s.Xi = "1,3" }},
	}
}

// TestWaveletFingerprintCoversConfig is TestDRRFingerprintCoversConfig
// for the wavelet sweep: wavelet.Config's options and WaveletSpec's.
func TestWaveletFingerprintCoversConfig(t *testing.T) {
	checkPrintCovers(t, "wavelet.Config", waveletChanges(t, t.TempDir()), waveletNotInPrint, smallWavelet, waveletPrint)
	checkEngineInPrint(t, func(device string) string { return waveletPrint(t, smallWavelet(), device) })
}

// affinityIdentity is what a merge requires the shards of one affinity
// run to share: their metadata but for which rows each holds.
func affinityIdentity(t *testing.T, s AffinitySpec, dtype string) shard.Meta {
	t.Helper()
	s.Out, s.Shard = filepath.Join(t.TempDir(), "s.npz"), ptr("0/2")
	task, err := OpenAffinity(s, cpuDevice(t, 1<<30, dtype), true)
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close()
	m := task.meta
	m.Lo, m.Hi, m.Index, m.Count = 0, 0, 0, 0
	return m
}

// affinityNotInPrint are AffinitySpec's fields that do not change the
// affinities, or that no test on the CPU can change.
var affinityNotInPrint = map[string]string{
	"TF32":     "needs a GPU; the shard records it (shard.Meta.TF32) and a merge compares it",
	"Block":    "how many rows are computed at once: the same results",
	"Shard":    "which rows a shard holds",
	"Shards":   "which rows a shard holds",
	"Env":      "which rows a shard holds",
	"Out":      "where the affinities go",
	"Streamed": "how the rows are computed: the same results",
}

// TestAffinityShardCoversConfig is TestDRRFingerprintCoversConfig for
// affinity shards, whose metadata (the images' fingerprint, the metric or
// formula, the dtype, top-k, the device) a merge requires to agree.
func TestAffinityShardCoversConfig(t *testing.T) {
	small := func() AffinitySpec {
		return AffinitySpec{Config: affinity.Config{Metric: "dot"}, N: 6, Height: 2, Width: 3, Seed: 1}
	}
	npyPath := filepath.Join(t.TempDir(), "x.npy")
	raw := npy.EncodeHeader(npy.Float32, []int{6, 5})
	for i := range 30 {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(float32(i%7)))
	}
	if err := os.WriteFile(npyPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	formula := func(s *AffinitySpec) { s.Metric, s.Formula = "", "-sum(abs(a-b))" }
	changes := map[string]func(*AffinitySpec){
		"Metric":  func(s *AffinitySpec) { s.Metric = "l1" },
		"Formula": formula,
		"Params": func(s *AffinitySpec) {
			formula(s)
			s.Formula, s.Params = "-s*sum(abs(a-b))", map[string]float64{"s": 2}
		},
		"Method": func(s *AffinitySpec) { formula(s); s.Method = "direct" },
		"TopK":   func(s *AffinitySpec) { s.TopK = ptr(2) },
		"Dtype":  func(s *AffinitySpec) { s.Dtype = "float64" },
		"Images": func(s *AffinitySpec) { s.Images = npyPath },
		"N":      func(s *AffinitySpec) { s.N = 7 },
		"Height": func(s *AffinitySpec) { s.Height = 3 },
		"Width":  func(s *AffinitySpec) { s.Width = 4 },
		"Seed":   func(s *AffinitySpec) { s.Seed = 2 },
	}
	// Params and Method are compared with the formula they go with.
	bases := map[string]func(*AffinitySpec){
		"Params": func(s *AffinitySpec) {
			formula(s)
			s.Formula, s.Params = "-s*sum(abs(a-b))", map[string]float64{"s": 1}
		},
		"Method": formula,
	}
	for _, f := range option.Fields(AffinitySpec{}) {
		change, ok := changes[f.Go]
		_, declared := affinityNotInPrint[f.Go]
		switch {
		case !f.Result && ok:
			t.Errorf("%s is tagged fingerprint:\"-\", yet changes the affinities", f.Go)
			continue
		case !f.Result || declared:
			continue
		case !ok:
			t.Errorf("%s: no change of it in the test: if it changes the affinities, add one (and put it in the shard's metadata); if not, tag it fingerprint:\"-\" in affinity.Config or list it in affinityNotInPrint", f.Go)
			continue
		}
		t.Run(f.Go, func(t *testing.T) {
			base := small()
			if b := bases[f.Go]; b != nil {
				b(&base)
			}
			changed := base
			change(&changed)
			if a, b := affinityIdentity(t, base, ""), affinityIdentity(t, changed, ""); a == b {
				t.Errorf("changing %s leaves the shard's metadata %+v: a shard of another run would be merged with this one's", f.Go, a)
			}
		})
	}
	// Affinity computes in the engine's dtype when its own is not given.
	if a, b := affinityIdentity(t, small(), "float32"), affinityIdentity(t, small(), "float64"); a == b {
		t.Errorf("the engine's dtype leaves the shard's metadata %+v", a)
	}
}
