package filejob

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/tapeloop/tapeloop/graphs/wavelet"
	"github.com/tapeloop/tapeloop/internal/atomicfile"
	"github.com/tapeloop/tapeloop/internal/checkpoint"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/shard"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/internal/warnings"
	"github.com/tapeloop/tapeloop/ops"
)

// WaveletSpec is a wavelet sweep as the command line states it: the
// options of the computation (the embedded wavelet.Config), a volume file
// or the size and seed of a random one, the (θ, φ, ξ) grid as lists or
// ranges, and where the CSV goes. DefaultWaveletSpec holds the defaults.
type WaveletSpec struct {
	wavelet.Config
	// Volume is a .npy, .nii, .nii.gz, .mha or .mhd file; "": a volume of
	// standard normal values of Size from Seed.
	Volume string
	// Series picks the DICOM series (its SeriesInstanceUID) when Volume
	// is a directory holding several.
	Series string
	Size   string // "XxYxZ", each at least 1; without Volume
	Seed   uint64
	// Theta, Phi and Xi are the values of θ, φ and ξ, each a
	// comma-separated list or START:STOP:COUNT (COUNT values from START,
	// STOP excluded); numbers may use pi (pi/4, 3*pi/2, -pi).
	Theta, Phi, Xi string
	// Out is the file the CSV goes to; "": to Stdout. A shard goes to an
	// .npz Out.
	Out    string
	Stdout io.Writer // nil: the CSV goes nowhere without Out
	// Shard computes only shard "i/n" of the combinations (0 ≤ i < n, a
	// contiguous range in CSV order) into an .npz Out, for `tapeloop
	// merge`; Shards splits into this many shards, this job's index read
	// from Env (nil: the process's environment: SLURM_ARRAY_TASK_ID or
	// JOB_COMPLETION_INDEX). Give one or neither.
	Shard  *string
	Shards *int
	Env    func(string) (string, bool)
	Warn   io.Writer // the volume reader's warnings; nil: discarded
	// Resume continues the run whose checkpoint is beside Out (see
	// openCheckpoint); without it, a checkpoint there is refused.
	Resume bool
	// SaveResponses write the response G of chosen combinations, each
	// "θ,φ,ξ:FILE.npy", as float32 arrays of the volume's shape, when the
	// run finishes. A shard writes those of its own combinations.
	SaveResponses []string
}

// DefaultWaveletSpec is the built-in sweep: a random 32³ volume, θ over
// four and φ over two steps of [0, π), ξ ∈ {1, 2}, a = 1, reflect.
func DefaultWaveletSpec() WaveletSpec {
	return WaveletSpec{Config: wavelet.DefaultConfig(), Size: "32x32x32", Seed: 1, Theta: "0:pi:4", Phi: "0:pi:2", Xi: "1,2"}
}

// waveletPlan is a WaveletSpec checked and parsed.
type waveletPlan struct {
	cfg    *wavelet.Parsed
	combos []wavelet.Combo
	size   [3]int // without a volume file
	shard  shardChoice
	save   []wavelet.SavedResponse
}

func (s WaveletSpec) parse() (p waveletPlan, err error) {
	// The boundary, then the sweep (whose kernels check the scale a),
	// then the rest of the Config.
	if _, err = wavelet.ParseBoundary(s.Boundary); err != nil {
		return p, err
	}
	var lists [3][]float64
	for i, f := range []struct{ name, value string }{{"theta", s.Theta}, {"phi", s.Phi}, {"xi", s.Xi}} {
		if lists[i], err = wavelet.ParseList(f.name, f.value); err != nil {
			return p, err
		}
	}
	if p.combos, err = wavelet.Sweep(s.A, lists[0], lists[1], lists[2]); err != nil {
		return p, err
	}
	if s.Volume == "" {
		if p.size, err = parseSize(s.Size); err != nil {
			return p, err
		}
		if s.Series != "" {
			return p, fmt.Errorf("--series %s: picks a DICOM series of --volume, and there is none", s.Series)
		}
	}
	if p.cfg, err = s.Config.Parse(); err != nil {
		return p, err
	}
	if p.save, err = wavelet.ParseSaveResponses(s.SaveResponses, s.A, p.combos); err != nil {
		return p, err
	}

	if p.shard, err = parseShard(s.Shard, s.Shards, s.Env, s.Out); err != nil {
		return p, err
	}
	if s.Resume && s.Out == "" {
		return p, errors.New("--resume: it needs --out: a run to standard output keeps no checkpoint")
	}
	return p, nil
}

// Validate checks what can be checked before the volume is read.
func (s WaveletSpec) Validate() error {
	_, err := s.parse()
	return err
}

// parseSize parses a volume size "XxYxZ", each at least 1, 2²⁸ voxels at
// most.
func parseSize(s string) ([3]int, error) {
	var n [3]int
	if _, err := fmt.Sscanf(s, "%dx%dx%d", &n[0], &n[1], &n[2]); err != nil ||
		fmt.Sprintf("%dx%dx%d", n[0], n[1], n[2]) != s || n[0] < 1 || n[1] < 1 || n[2] < 1 {
		return n, fmt.Errorf("--size %q: want XxYxZ, each at least 1", s)
	}
	if v := sysmem.Mul(int64(n[0]), int64(n[1]), int64(n[2])); v < 0 || v > 1<<28 {
		return n, fmt.Errorf("--size %q: at most 2²⁸ voxels for the built-in volume", s)
	}
	return n, nil
}

// WaveletTask is an opened wavelet sweep.
type WaveletTask struct {
	job   *wavelet.Job
	claim *claim // the checkpoint's lock, and what it holds
	ckp   *checkpoint.File
	out   *atomicfile.File
	npz   *npy.NPZWriter // a shard's archive
	csv   *bufio.Writer
	// save are the responses to write at Commit, those of [lo, hi);
	// swapXY turns them back to the volume's axes (Indexing "xy").
	save   []wavelet.SavedResponse
	swapXY bool
	n      [3]int // the volume's shape as computed on
}

// OpenWavelet validates s, reads or makes the volume, and creates the
// output. With withOutput false (for printing the graph) no CSV is
// written.
func OpenWavelet(s WaveletSpec, dev *engine.Device, withOutput bool) (_ *WaveletTask, err error) {
	p, err := s.parse()
	if err != nil {
		return nil, err
	}
	if s.Volume != "" {
		if err := checkVolumeFits("wavelet", s.Volume, volume.Options{Series: s.Series}, dev.MemLimit); err != nil {
			return nil, err
		}
	}
	lo, hi, err := p.shard.items(len(p.combos), "combinations", s.Out, withOutput)
	if err != nil {
		return nil, err
	}
	if s.Volume == "" {
		if err := checkVoxelsFit("wavelet's volume", [3]int64{int64(p.size[0]), int64(p.size[1]), int64(p.size[2])}, dev.MemLimit); err != nil {
			return nil, fmt.Errorf("--size %s: %w", s.Size, err)
		}
	}
	v, n, err := s.volume(p)
	if err != nil {
		return nil, err
	}
	n0 := n
	v, n = p.cfg.Arrange(v, n)
	// A shard pads for the whole sweep: the paddings depend on which
	// combinations run together (wavelet.Pads).
	formulas, err := p.cfg.Formulas(n, dev.GPU())
	if err != nil {
		return nil, err
	}
	sup, err := wavelet.Supports(s.A, formulas.KernelFormula(), p.combos)
	if err != nil {
		return nil, err
	}
	pads, pad := wavelet.Pads(n, s.A, p.combos, sup)
	if err := wavelet.CheckPadding(n, wavelet.LargestPad(n, pads), dev.MemLimit); err != nil {
		return nil, err
	}
	src, err := ops.NewWaveletSource(v, n, s.A, p.cfg.Boundary, pad)
	if err != nil {
		return nil, err
	}
	src.MaxSupport, src.Narrow = wavelet.MaxSupport(sup), wavelet.AnyNarrow(s.A, p.combos)
	src.SetPaddings(pads)
	src.Formulas = formulas
	t := &WaveletTask{n: n, swapXY: n != n0 || s.Indexing == "xy"}
	for _, r := range p.save {
		if r.Combo >= lo && r.Combo < hi && withOutput {
			t.save = append(t.save, r)
		}
	}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	setup := wavelet.Setup{Src: src, Combos: p.combos, FailOnNonFinite: s.FailOnNonFinite, Lo: lo, Hi: hi, Columns: s.Columns}
	if t.job, err = wavelet.New(setup); err != nil {
		return nil, err
	}
	if withOutput {
		if err := t.checkSpace(s.Out, s.warn); err != nil {
			return nil, err
		}
	}
	var fp string
	if withOutput && s.Out != "" {
		fp = s.fingerprint(p, v, n, t.job.Header(), dev.Kind())
		h := checkpoint.Header{Workload: shard.Wavelet, Fingerprint: fp, Lo: lo, Hi: hi, Record: t.job.RecordBytes()}
		if t.claim, err = claimCheckpoint(s.Out, h, s.Resume, len(p.combos), false, "kernels", s.warn); err != nil {
			return nil, err
		}
		restore, drop := t.job.Restorer()
		if t.ckp, err = t.claim.open(t.job.Computed(), restore); err != nil {
			return nil, err
		}
		drop()
		t.job.SetSaver(t.ckp)
	}
	if withOutput {
		noHeader := false
		switch {
		case p.shard.sharded:
			if t.out, err = atomicfile.Create(s.Out); err != nil {
				return nil, fmt.Errorf("--out: %w", err)
			}
			t.npz = npy.NewNPZWriter(t.out)
			meta := shard.RangeMeta{Workload: shard.Wavelet, Items: len(p.combos), Lo: lo, Hi: hi,
				Index: p.shard.index, Count: p.shard.count, Header: t.job.Header(),
				Fingerprint: fp}
			if err = shard.WriteRangeMeta(t.npz, meta); err != nil {
				return nil, fmt.Errorf("--out: %w", err)
			}
			rows, err := t.npz.CreateRaw("rows.csv")
			if err != nil {
				return nil, fmt.Errorf("--out: %w", err)
			}
			t.csv = bufio.NewWriter(rows)
			noHeader = true
		case s.Out != "":
			if t.out, err = atomicfile.Create(s.Out); err != nil {
				return nil, fmt.Errorf("--out: %w", err)
			}
			t.csv = bufio.NewWriter(t.out)
		case s.Stdout != nil:
			t.csv = bufio.NewWriter(s.Stdout)
		}
		if t.csv != nil {
			t.job.SetCSV(t.csv, noHeader)
		}
	}
	return t, nil
}

// fingerprint identifies what a shard's statistics depend on: the volume's
// values as computed on, the whole sweep, the kernel scale, the boundary,
// the formulas with their parameters, the CSV's columns and the kind of
// device, "cpu" or "cuda" (a GPU rounds otherwise than the CPU). Every
// option of wavelet.Config not tagged fingerprint:"-" changes it
// (TestWaveletFingerprintCoversConfig).
func (s WaveletSpec) fingerprint(p waveletPlan, v []float32, n [3]int, header string, device string) string {
	f := newRunPrint(shard.Wavelet)
	f.ints(n[0], n[1], n[2])
	f.f32s(v)
	f.f64s(s.A)
	f.str(p.cfg.Boundary.String())
	for _, c := range p.combos {
		f.f64s(c.Theta, c.Phi, c.Xi)
	}
	for _, s := range p.cfg.Canonical() {
		f.str(s)
	}
	f.params(s.Params)
	f.str(header)
	f.str(device)
	return f.sum()
}

// volume reads the volume file, float32 as the reader gives it, or makes
// the random volume: standard normals rounded to float32.
func (s WaveletSpec) volume(p waveletPlan) ([]float32, [3]int, error) {
	if s.Volume != "" {
		v, err := volume.Load(s.Volume, volume.Options{VoxelsOnly: true, Warn: s.Warn, Series: s.Series})
		if err != nil {
			return nil, [3]int{}, fmt.Errorf("--volume: %w", err)
		}
		return v.V, [3]int{int(v.N[0]), int(v.N[1]), int(v.N[2])}, nil
	}
	n := p.size
	rng := rand.New(rand.NewPCG(s.Seed, 0x5eed0002))
	x := make([]float32, n[0]*n[1]*n[2])
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x, n, nil
}

// Job is the sweep.
func (t *WaveletTask) Job() engine.Job { return t.job }

// Result is the run's wavelet.Result.
func (t *WaveletTask) Result() any { return t.job.Result() }

// Summary is the run's wavelet.Result.
func (t *WaveletTask) Summary() wavelet.Result { return t.job.Result() }

// Passes is what the sweep's response op runs per combination, on a GPU
// (gpu) or the CPU.
func (t *WaveletTask) Passes(gpu bool) ops.WaveletPasses { return t.job.Passes(gpu) }

// Commit flushes the CSV, closes a shard's archive and renames the
// output file into place.
func (t *WaveletTask) Commit() error {
	// The responses are written whole first and put in place last, once
	// the CSV reached its file or standard output: a run whose CSV fails
	// leaves none of them.
	staged, err := t.writeResponses()
	defer func() {
		for _, f := range staged {
			f.Abort()
		}
	}()
	if err != nil {
		return err
	}
	if t.csv != nil {
		if err := t.csv.Flush(); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	if t.npz != nil {
		if err := t.npz.Close(); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	if t.out != nil {
		if err := t.out.Commit(); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		t.out = nil
	}
	for _, f := range staged {
		if err := f.Rename(); err != nil {
			return fmt.Errorf("--save-response: %w", err)
		}
	}
	err = removeCheckpoint(&t.ckp)
	t.claim.release()
	return err
}

// checkSpace checks, before any work, that the CSV (or a shard's archive
// of the same rows) and the responses to save fit their file systems
// together. The CSV's size is known only once written: a sweep it cannot
// fit at its smallest is refused, and one it will likely not fit is
// warned of (if its write fails, the finished combinations stay in the
// checkpoint).
func (t *WaveletTask) checkSpace(out string, warn func(string)) error {
	var needs []atomicfile.Need
	atLeast, likely := t.job.CSVBytes()
	if out != "" {
		needs = append(needs, atomicfile.Need{Path: out, Bytes: atLeast, Bound: "at least"})
	}
	for _, r := range t.save {
		size := sysmem.Mul(int64(t.n[0]), int64(t.n[1]), int64(t.n[2]), 4)
		if size >= 0 {
			size += int64(len(npy.EncodeHeader(npy.Float32, t.n[:])))
		}
		needs = append(needs, atomicfile.Need{Path: r.File, Bytes: size})
	}
	flags := "--out"
	switch {
	case out == "" && len(t.save) > 0:
		flags = "--save-response"
	case len(t.save) > 0:
		flags = "--out, --save-response"
	}
	if err := atomicfile.CheckSpaces(needs...); err != nil {
		return fmt.Errorf("%s: %w", flags, err)
	}
	if out == "" {
		return nil
	}
	needs[0].Bytes, needs[0].Bound = likely, "about"
	if err := atomicfile.CheckSpaces(needs...); err != nil {
		warn(fmt.Sprintf("%s: %v; if the CSV's write fails, the finished combinations stay in the checkpoint", flags, err))
	}
	return nil
}

// writeResponses writes the responses of --save-response, in the
// volume's own axes, each to a temporary file that Commit renames into
// place (or removes) once the CSV is whole.
func (t *WaveletTask) writeResponses() (staged []*atomicfile.File, err error) {
	if len(t.save) == 0 {
		return nil, nil
	}
	g := make([]float32, t.n[0]*t.n[1]*t.n[2])
	for _, r := range t.save {
		if err := t.job.Response(r.Combo, g); err != nil {
			return staged, fmt.Errorf("--save-response %s: %w", r.File, err)
		}
		out, n := g, t.n
		if t.swapXY {
			out, n = wavelet.SwapXY(g, t.n, false)
		}
		f, err := stageNpy32(r.File, out, n[:])
		if err != nil {
			return staged, fmt.Errorf("--save-response: %w", err)
		}
		staged = append(staged, f)
	}
	return staged, nil
}

// stageNpy32 writes v of shape n as an .npy to a temporary file beside
// path, synced and closed, to be renamed to path (File.Rename) once the
// run's other outputs are whole, or removed (File.Abort).
func stageNpy32(path string, v []float32, n []int) (*atomicfile.File, error) {
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, fileError("create", path, err)
	}
	b := bufio.NewWriterSize(f, 1<<20)
	w, err := npy.NewWriter(b, npy.Float32, n)
	if err == nil {
		err = w.Write32(v)
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = b.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		f.Abort()
		return nil, fileError("write", path, err)
	}
	return f, nil
}

// Close removes an uncommitted output file and closes the checkpoint,
// which stays when it holds finished work.
func (t *WaveletTask) Close() error {
	if t.out != nil {
		t.out.Abort()
		t.out = nil
	}
	err := closeCheckpoint(&t.ckp)
	t.claim.release()
	return err
}

// warn writes a warning line to s.Warn, if any.
func (s WaveletSpec) warn(msg string) {
	if s.Warn != nil {
		fmt.Fprint(s.Warn, warnings.Line(msg))
	}
}

// Unfinished is err, the error that ended the run, saying what the
// checkpoint holds and how to continue.
func (t *WaveletTask) Unfinished(err error) error { return unfinished(t.job.Name(), err, t.ckp) }
