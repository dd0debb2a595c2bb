package filejob

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"strings"
	"time"
	"unsafe"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs/affinity"
	"github.com/tapeloop/tapeloop/graphs/option"
	"github.com/tapeloop/tapeloop/internal/atomicfile"
	"github.com/tapeloop/tapeloop/internal/checkpoint"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/shard"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/ops/pairwise"
)

// AffinitySpec is an affinity run as the user states it on the command
// line: the computation (the embedded affinity.Config) and around it the
// files, the built-in images' sizes, the block and the shards. The
// settings whose every value is a choice the user can get wrong (--block
// 0 is an error, not "planned") are pointers, nil when not given; the
// zero value of each other field is its documented default.
type AffinitySpec struct {
	affinity.Config
	// Images is an (N, H, W) or (N, D) .npy (uint8, uint16, int16, int32,
	// float32 or float64); "": N standard-normal images of Height×Width
	// from Seed.
	Images           string
	N, Height, Width int
	Seed             uint64
	Block            *int // rows per block, the batch; nil: planned
	// Shard computes only shard "i/n" of the rows (0 ≤ i < n) into an
	// .npz Out, for `tapeloop merge`; Shards splits into this many
	// shards, this job's index read from Env. Give one or neither.
	Shard  *string
	Shards *int
	// Env looks up the scheduler's variables for Shards (SLURM array or
	// Kubernetes Indexed Job); nil: the process's environment.
	Env func(string) (string, bool)
	// Out receives the (N, N) matrix as .npy, or for top-k or a shard an
	// .npz; "": nothing written.
	Out string
	// Streamed computes whole rows and streams them even when the whole
	// matrix would fit the memory limit (each pair then computed twice,
	// every block the same work). Otherwise a run of all rows without
	// top-k holds the matrix and computes each pair once when it fits.
	Streamed bool
}

// affinityPlan is what Validate derives from a spec.
type affinityPlan struct {
	affinity.Plan
	index, count int // the shard; 0 of 1 when not sharded
	sharded      bool
}

// Validate checks what can be checked before the images are read.
func (s AffinitySpec) Validate() error {
	_, err := s.check(nil)
	return err
}

// check validates s, and with dev the settings that depend on the device.
func (s AffinitySpec) check(dev *engine.Device) (p affinityPlan, err error) {
	if p.Plan, err = s.Config.Parse(); err != nil {
		return p, err
	}
	if s.Block != nil && *s.Block < 1 {
		return p, fmt.Errorf("--block %d: must be at least 1", *s.Block)
	}
	if err := s.Config.CheckRun(&p.Plan, dev); err != nil {
		return p, err
	}
	if s.Images == "" {
		if err := p.CheckInt(s.Dtype, false, 0, false); err != nil {
			return p, err
		}
		if s.N < 1 || s.Height < 1 || s.Width < 1 {
			return p, fmt.Errorf("--n %d --height %d --width %d: each must be at least 1", s.N, s.Height, s.Width)
		}
		if n := sysmem.Mul(int64(s.N), int64(s.Height), int64(s.Width)); n < 0 || n > 1<<34 {
			return p, fmt.Errorf("--n %d --height %d --width %d: too many values for the built-in images", s.N, s.Height, s.Width)
		}
	}
	sc, err := parseShard(s.Shard, s.Shards, s.Env, s.Out)
	if err != nil {
		return p, err
	}
	p.index, p.count, p.sharded = sc.index, sc.count, sc.sharded
	if (p.sharded || p.TopK > 0) && s.Out != "" && !strings.HasSuffix(strings.ToLower(s.Out), ".npz") {
		what := "--topk's indices and values are"
		if p.sharded {
			what = "a shard is"
		}
		return p, fmt.Errorf("--out %s: %s written as an .npz archive: name it FILE.npz", s.Out, what)
	}
	return p, nil
}

// AffinityTask is an opened affinity run.
type AffinityTask struct {
	job   *affinity.Job
	dev   *engine.Device
	out   *atomicfile.File
	npz   *npy.NPZWriter
	rows  *npy.Writer
	meta  shard.Meta
	dtype npy.Dtype
	lock  *checkpoint.Lock // the output's, while it is written
	// The phases' boundaries (Phases): the process's start (zero:
	// unknown), OpenAffinity's start and end, the time its check of the
	// images took, and the end of Commit.
	started, opening, opened, committed time.Time
	check                               time.Duration
}

// OpenAffinity validates s, reads or makes the images in dev's dtype,
// decides between the whole matrix in memory and streamed rows, and
// creates the output. With withOutput false (for printing the graph), Out
// is ignored.
func OpenAffinity(s AffinitySpec, dev *engine.Device, withOutput bool) (_ *AffinityTask, err error) {
	opening := time.Now()
	p, err := s.check(dev)
	if err != nil {
		return nil, err
	}
	dt := s.Compute(dev) // the type computed in; the affinities' is out
	out := dt
	if p.Int != (tensor.Dtype{}) {
		out = p.Int
	}
	var data *pairwise.PairData
	var shape []int
	var fp string
	var n, d int
	var mapped bool
	// 8-bit images with a built-in metric on the CPU: exactly, in integers.
	var x8 []uint8
	exact := false
	if p.Formula == nil && !dev.GPU() && s.Images != "" {
		if x8, n, d, shape, exact, err = readImagesU8(s.Images, dev.MemLimit); err != nil {
			return nil, err
		}
	}
	if err := p.CheckInt(s.Dtype, exact, d, dev.GPU()); err != nil {
		return nil, err
	}
	// The fingerprint goes only into an .npz (a shard or top-k), for merge.
	fingerprints := withOutput && s.Out != "" && (p.sharded || p.TopK > 0)
	var check time.Duration // NewPairData's scan of the images
	timed := func(f func() error) error {
		began := time.Now()
		err := f()
		check += time.Since(began)
		return err
	}
	switch {
	case exact:
		if err = timed(func() (err error) { data, err = pairwise.NewPairDataU8(x8, n, d, p.Metric, dt); return err }); err != nil {
			return nil, err
		}
		if fingerprints {
			fp = fingerprint(x8, "[]"+dt.String(), shape)
		}
	case dt == tensor.Float64:
		var x []float64
		if x, n, d, shape, mapped, err = loadImages[float64](s, dev.MemLimit); err != nil {
			return nil, err
		}
		if err = timed(func() (err error) { data, err = pairwise.NewPairData(x, n, d, p.Metric); return err }); err != nil {
			return nil, err
		}
		if fingerprints {
			fp = Fingerprint(x, shape)
		}
	default:
		var x []float32
		if x, n, d, shape, mapped, err = loadImages[float32](s, dev.MemLimit); err != nil {
			return nil, err
		}
		// Dot products of all rows on the CPU check the images as the
		// matrix product packs each block's rows: no pass of their own.
		packed := false
		if p.Formula == nil && p.Metric == pairwise.MetricDot && !dev.GPU() && !p.sharded {
			if data, packed, err = pairwise.NewPairDataPacked(x, n, d); err != nil {
				return nil, err
			}
		}
		if !packed {
			if err = timed(func() (err error) { data, err = pairwise.NewPairData(x, n, d, p.Metric); return err }); err != nil {
				return nil, err
			}
		}
		if fingerprints {
			fp = Fingerprint(x, shape)
		}
	}
	data.Mapped = mapped
	if p.TopK >= n {
		return nil, fmt.Errorf("--topk %d: must be below N = %d (self is excluded)", p.TopK, n)
	}
	lo, hi := shard.Rows(p.index, p.count, n)
	if lo == hi {
		return nil, fmt.Errorf("--shard %d/%d: no rows (N = %d is smaller than the shard count)", p.index, p.count, n)
	}
	path := s.Out
	if !withOutput {
		path = ""
	} else if p.sharded && path == "" {
		return nil, errors.New("--shard: a shard needs --out FILE.npz")
	}
	t := &AffinityTask{dev: dev, dtype: npy.Float32, opening: opening, check: check}
	if s.Block != nil {
		t.dev = dev.WithBatch(*s.Block)
	}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	switch out {
	case tensor.Float64:
		t.dtype = npy.Float64
	case tensor.Int32:
		t.dtype = npy.Int32
	case tensor.Int64:
		t.dtype = npy.Int64
	}
	metric := p.Metric.String()
	if exact {
		metric += " (8-bit, exact)"
	}
	cfg := affinity.Setup{Data: data, Metric: p.Metric, Lo: lo, Hi: hi, TopK: p.TopK, TF32: s.TF32, FailOnNonFinite: s.FailOnNonFinite, Int: p.Int}
	if p.Formula != nil {
		if cfg.Formula, err = pairwise.NewPairFormula(p.Formula, data, p.Direct); err != nil {
			return nil, err
		}
		metric = "formula " + p.Formula.Canonical() + " (" + option.OrDefault(s.Method, "auto") + ")"
	}
	t.meta = shard.Meta{N: n, D: d, Metric: metric, Dtype: out.String(), Fingerprint: fp,
		Lo: lo, Hi: hi, Index: p.index, Count: p.count, TopK: p.TopK, Device: dev.Kind(), TF32: s.TF32}
	// Hold the whole matrix and compute each pair once when it fits the
	// limit beside the images and a modest block; else stream whole rows.
	if !p.sharded && p.TopK == 0 && !s.Streamed && (cfg.Formula == nil || cfg.Formula.Symmetric) {
		need := int64(out.Size())*int64(n)*int64(n) + int64(dt.Size())*64*int64(n+d) + data.Bytes()
		if cfg.Formula != nil {
			need += cfg.Formula.Bytes()
		}
		cfg.Symmetric = need <= dev.MemLimit
	}
	if path != "" {
		if t.lock, err = lockOutput(path); err != nil {
			return nil, err
		}
		size := sysmem.Mul(int64(hi-lo), int64(n), int64(out.Size()))
		if p.TopK > 0 {
			size = sysmem.Mul(int64(hi-lo), int64(p.TopK), int64(out.Size())+8)
		}
		if err := atomicfile.CheckSpace(path, size); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		if t.out, err = atomicfile.Create(path); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		switch {
		case p.sharded || p.TopK > 0:
			t.npz = npy.NewNPZWriter(t.out)
			if err = shard.WriteMeta(t.npz, t.meta); err != nil {
				return nil, fmt.Errorf("--out: %w", err)
			}
			if p.TopK == 0 {
				if t.rows, err = t.npz.Create("affinity", t.dtype, []int{hi - lo, n}); err != nil {
					return nil, fmt.Errorf("--out: %w", err)
				}
			}
		default:
			// A symmetric run's matrix is computed in the output file,
			// mapped.
			mapped := false
			if cfg.Symmetric {
				if mapped, err = t.mapOutput(&cfg, n); err != nil {
					return nil, fmt.Errorf("--out: %w", err)
				}
			}
			if !mapped {
				if t.rows, err = npy.NewWriter(t.out, t.dtype, []int{n, n}); err != nil {
					return nil, fmt.Errorf("--out: %w", err)
				}
			}
		}
		if t.rows != nil { // a typed nil would be a Rows to write to
			cfg.Rows = namedRows{t.rows, path, t.out}
		}
	}
	if t.job, err = affinity.New(cfg); err != nil {
		return nil, err
	}
	t.opened = time.Now()
	return t, nil
}

// mapOutput has a symmetric run compute its matrix where the output file
// stores it: the .npy file mapped into memory (atomicfile.Map), its
// header in place, each range of finished rows started on its way to the
// disk. The matrix is neither copied nor written, and takes its memory
// once, as the file's pages. It reports false, with nothing written,
// where the file system cannot map the file.
func (t *AffinityTask) mapOutput(cfg *affinity.Setup, n int) (bool, error) {
	hdr := npy.EncodeHeader(t.dtype, []int{n, n})
	row := int64(n) * int64(t.dtype.Size)
	mem, err := t.out.Map(int64(len(hdr)) + sysmem.Mul(row, int64(n)))
	if errors.Is(err, atomicfile.ErrNoMap) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	copy(mem, hdr)
	p, nn := unsafe.Pointer(&mem[len(hdr)]), n*n
	switch t.dtype {
	case npy.Float32:
		cfg.Matrix = unsafe.Slice((*float32)(p), nn)
	case npy.Float64:
		cfg.Matrix = unsafe.Slice((*float64)(p), nn)
	case npy.Int32:
		cfg.Matrix = unsafe.Slice((*int32)(p), nn)
	case npy.Int64:
		cfg.Matrix = unsafe.Slice((*int64)(p), nn)
	default:
		return false, fmt.Errorf("write %s: a mapped matrix of %v", t.out.Path, t.dtype)
	}
	off, out := int64(len(hdr)), t.out
	cfg.Finished = func(lo, hi int) { out.WriteBackRange(off+int64(lo)*row, int64(hi-lo)*row) }
	return true, nil
}

// namedRows is the output's rows, whose write errors name the output
// (--out: write FILE: …) rather than the temporary file being written.
// After each write it starts the rows' way to the disk (WriteBack), so
// that Commit's sync, after the last block, waits for little more than
// the last rows.
type namedRows struct {
	w    *npy.Writer
	path string
	f    *atomicfile.File
}

func (r namedRows) Write32(v []float32) error  { return r.named(r.w.Write32(v)) }
func (r namedRows) Write64(v []float64) error  { return r.named(r.w.Write64(v)) }
func (r namedRows) WriteInt32(v []int32) error { return r.named(r.w.WriteInt32(v)) }
func (r namedRows) WriteInt64(v []int64) error { return r.named(r.w.WriteInt64(v)) }

func (r namedRows) named(err error) error {
	if err == nil {
		r.f.WriteBack()
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("--out: write %s: %w", r.path, err)
}

// Fingerprint identifies images: a SHA-256 over their shape and values
// as computed on (after conversion to the computation's dtype), so shards
// of the same input agree and shards of different inputs do not.
func Fingerprint[T float32 | float64](x []T, shape []int) string {
	return fingerprint(x, fmt.Sprintf("%T", x[:0]), shape)
}

// fingerprint hashes the values of x as float64 under the name of the
// type they are computed in (so that 8-bit images, computed in integers,
// match their float32 conversion).
func fingerprint[E float32 | float64 | uint8](x []E, typ string, shape []int) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s%v", typ, shape)
	var buf [8 << 10]byte
	for len(x) > 0 {
		n := 0
		for ; n < len(x) && 8*(n+1) <= len(buf); n++ {
			binary.LittleEndian.PutUint64(buf[8*n:], math.Float64bits(float64(x[n])))
		}
		h.Write(buf[:8*n])
		x = x[n:]
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// readImagesU8 maps an (N, H, W) or (N, D) uint8 .npy file, flattened,
// or where it cannot be mapped (Fortran order) reads it after checking it
// fits limit. A file of another dtype is not read: ok is false.
func readImagesU8(path string, limit int64) (x []uint8, n, d int, shape []int, ok bool, err error) {
	f, err := npy.Open(path)
	if err != nil {
		return nil, 0, 0, nil, false, fmt.Errorf("--images: %w", err)
	}
	defer f.Close()
	if f.Dtype.Kind != 'u' || f.Dtype.Size != 1 {
		return nil, 0, 0, nil, false, nil
	}
	shape = f.Shape
	if len(shape) != 2 && len(shape) != 3 {
		return nil, 0, 0, shape, true, fmt.Errorf("--images: %s has shape %s, want (N, H, W) or (N, D)", path, npy.ShapeString(shape))
	}
	if f.Len() == 0 {
		return nil, 0, 0, shape, true, fmt.Errorf("--images: %s holds no images (shape %s)", path, npy.ShapeString(shape))
	}
	n, d = shape[0], f.Len()/shape[0]
	if m, ok, err := npy.Map[uint8](path); err != nil {
		return nil, 0, 0, shape, true, fmt.Errorf("--images: %w", err)
	} else if ok { // left mapped for the life of the process
		return m.Data, n, d, shape, true, nil
	}
	if need := int64(f.Len()); need > limit {
		return nil, 0, 0, shape, true, &engine.BudgetError{Workload: "affinity's images", Need: need, Limit: limit}
	}
	x = make([]uint8, f.Len())
	if _, err := f.ReadU8(x); err != nil {
		return nil, 0, 0, shape, true, fmt.Errorf("--images: %s: %w", path, err)
	}
	return x, n, d, shape, true, nil
}

// loadImages reads or makes the images, flattened, in the computation's
// dtype. A file already in that dtype (little endian) is memory-mapped, not
// read: mapped reports it, and its pages stay in the page cache.
func loadImages[T float32 | float64](s AffinitySpec, limit int64) (x []T, n, d int, shape []int, mapped bool, err error) {
	x, n, d, shape, mapped, err = readImages[T](s, limit)
	if err == nil && len(shape) != 2 && len(shape) != 3 {
		err = fmt.Errorf("--images: %s has shape %s, want (N, H, W) or (N, D)", s.Images, npy.ShapeString(shape))
	}
	if err == nil && (n < 1 || len(x) == 0) {
		err = fmt.Errorf("--images: %s holds no images (shape %s)", s.Images, npy.ShapeString(shape))
	}
	return x, n, d, shape, mapped, err
}

// readImages maps the images, or reads or makes them in memory when their
// bytes fit the limit.
func readImages[T float32 | float64](s AffinitySpec, limit int64) (x []T, n, d int, shape []int, mapped bool, err error) {
	var zero T
	size := int64(unsafe.Sizeof(zero))
	if path := s.Images; path != "" {
		m, ok, err := npy.Map[T](path)
		if err != nil {
			return nil, 0, 0, nil, false, fmt.Errorf("--images: %w", err)
		}
		if ok {
			if len(m.Shape) != 2 && len(m.Shape) != 3 || m.Len() == 0 {
				m.Close()
				return nil, 0, 0, m.Shape, false, nil // loadImages says what is wrong
			}
			// Left mapped for the life of the process.
			return m.Data, m.Shape[0], m.Len() / max(m.Shape[0], 1), m.Shape, true, nil
		}
		f, err := npy.Open(path)
		if err != nil {
			return nil, 0, 0, nil, false, fmt.Errorf("--images: %w", err)
		}
		defer f.Close()
		shape = f.Shape
		if len(shape) != 2 && len(shape) != 3 || f.Len() == 0 {
			return nil, 0, 0, shape, false, nil // loadImages says what is wrong
		}
		n, d = shape[0], f.Len()/max(shape[0], 1)
		if need := sysmem.Mul(int64(f.Len()), size); need < 0 || need > limit {
			return nil, 0, 0, nil, false, fmt.Errorf("--images: %s: %w", path, &engine.BudgetError{Workload: "affinity's images", Need: need, Limit: limit})
		}
		x = make([]T, f.Len())
		sysmem.AdviseHugePagesOf(x)
		switch v := any(x).(type) {
		case []float32:
			_, err = f.Read32(v)
		case []float64:
			_, err = f.Read64(v)
		}
		if err != nil {
			return nil, 0, 0, nil, false, fmt.Errorf("--images: %s: %w", path, err)
		}
		return x, n, d, shape, false, nil
	}
	n, h, w := s.N, s.Height, s.Width
	if need := sysmem.Mul(int64(n), int64(h), int64(w), size); need < 0 || need > limit {
		return nil, 0, 0, nil, false, &engine.BudgetError{Workload: "affinity's images", Need: need, Limit: limit}
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0x5eed0003))
	x = make([]T, n*h*w)
	sysmem.AdviseHugePagesOf(x)
	for i := range x {
		x[i] = T(rng.NormFloat64())
	}
	return x, n, h * w, []int{n, h, w}, false, nil
}

// Job is the affinity job.
func (t *AffinityTask) Job() engine.Job { return t.job }

// Device is the device OpenAffinity was given, its batch set to the
// spec's Block when there is one: run and print the job on it.
func (t *AffinityTask) Device() *engine.Device { return t.dev }

// Result is the run's affinity.Result, with its phases.
func (t *AffinityTask) Result() any { return t.Summary() }

// Summary is the run's affinity.Result, with its phases.
func (t *AffinityTask) Summary() affinity.Result {
	r := t.job.Result()
	ph := t.Phases()
	r.Phases = &ph
	return r
}

// SetStarted gives the time the process started, for the start-up phase
// (Phases); without it the phases begin when OpenAffinity was called.
func (t *AffinityTask) SetStarted(at time.Time) { t.started = at }

// PhasesChange says that Result changes when Commit times the output's
// writing: a report staged before Commit is to be staged again after it.
func (t *AffinityTask) PhasesChange() bool { return true }

// Phases is where the run's wall time went so far: the phases that have
// not ended yet end now.
func (t *AffinityTask) Phases() affinity.Phases {
	now := time.Now()
	end := t.committed
	if end.IsZero() {
		end = now
	}
	start := t.opening
	var p affinity.Phases
	if !t.started.IsZero() && t.started.Before(t.opening) {
		start = t.started
		p.Startup = t.opening.Sub(t.started).Seconds()
	}
	p.Check = t.check.Seconds()
	p.CheckFused = t.job.PackChecked()
	p.Read = max(t.opened.Sub(t.opening)-t.check, 0).Seconds()
	computed := t.job.Finishing()
	if computed.IsZero() {
		computed = end
	}
	p.Compute = max(computed.Sub(t.opened), 0).Seconds()
	p.Write = max(end.Sub(computed), 0).Seconds()
	p.Wall = end.Sub(start).Seconds()
	return p
}

// Commit writes the top-k arrays, closes the archive or flushes the
// matrix, and renames the output into place: a shard or top-k archive
// synced to the disk first, the matrix when it took atomicfile.SyncAfter
// or longer to make.
func (t *AffinityTask) Commit() error {
	if t.out == nil {
		t.committed = time.Now()
		return nil
	}
	if t.npz != nil {
		if k := t.meta.TopK; k > 0 {
			rows := t.meta.Hi - t.meta.Lo
			w, err := t.npz.Create("indices", npy.Int64, []int{rows, k})
			if err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			if err := w.WriteInt64(t.job.Indices); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			if w, err = t.npz.Create("values", t.dtype, []int{rows, k}); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			if err := w.Write64(t.job.Values); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
		}
		if err := t.npz.Close(); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	} else if t.rows != nil { // nil: the matrix was computed in the mapped file
		if err := t.rows.Flush(); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	commit := t.out.Commit // a shard or top-k archive: synced, a resumed run trusts it
	if t.npz == nil {
		commit = func() error { return t.out.CommitResult(time.Since(t.opening)) }
	}
	if err := commit(); err != nil {
		return err
	}
	t.committed = time.Now()
	t.out = nil
	t.lock.Release()
	return nil
}

// Close removes an uncommitted output.
func (t *AffinityTask) Close() error {
	if t.job != nil {
		t.job.Close() // its row writer writes to t.out
	}
	if t.out != nil {
		t.out.Abort()
		t.out = nil
	}
	t.lock.Release()
	return nil
}
