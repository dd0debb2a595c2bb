// Package shard splits a run into shards computed independently (one job
// of a SLURM array or Kubernetes Indexed Job each): the rows of a
// pairwise-affinity matrix, the combinations of a wavelet sweep or the
// poses of a DRR run. It records in every shard what it was computed
// from, and checks a set of shards before they are merged, refusing one
// that is incomplete, overlapping, duplicated, mixed from different inputs
// or of two workloads; it merges affinity shards itself.
//
// A shard file is an .npz archive with meta.json: an affinity shard's
// (Meta) holds either affinity.npy (rows, N) or indices.npy and values.npy
// (rows, K); a wavelet shard's (RangeMeta) rows.csv, its lines of the CSV;
// a DRR shard's (RangeMeta) drr.npy (poses, R, C) float32.
package shard

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/tapeloop/tapeloop/internal/atomicfile"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/sysmem"
)

// Format names the shard file format and its version.
const Format = "tapeloop-affinity-shard/1"

// Meta is what a shard records about itself. Fingerprint covers the
// images alone; Device (the device kind, "cpu" or "cuda") and TF32
// (whether a GPU's dot products used TF32) change the values too, and are
// recorded beside it. A shard of an earlier release records neither
// (Device "").
type Meta struct {
	Format      string `json:"format"`
	N           int    `json:"n"`
	D           int    `json:"d"`
	Metric      string `json:"metric"`
	Dtype       string `json:"dtype"`
	Fingerprint string `json:"fingerprint"`
	Lo          int    `json:"lo"` // rows [Lo, Hi)
	Hi          int    `json:"hi"`
	Index       int    `json:"index"` // shard Index of Count
	Count       int    `json:"count"`
	TopK        int    `json:"topk,omitempty"`
	Device      string `json:"device,omitempty"`
	TF32        bool   `json:"tf32,omitempty"`
}

// computedOn says what m was computed on, for messages.
func (m Meta) computedOn() string {
	switch {
	case m.Device == "":
		return "a device it does not record (an earlier tapeloop)"
	case m.TF32:
		return m.Device + " with --tf32"
	}
	return m.Device
}

// ErrShards is wrapped by every error about a set of shards.
var ErrShards = errors.New("shard")

// Rows returns the rows [⌊i·n/count⌋, ⌊(i+1)·n/count⌋) of shard i.
func Rows(i, count, n int) (lo, hi int) {
	return int(int64(i) * int64(n) / int64(count)), int(int64(i+1) * int64(n) / int64(count))
}

// Parse parses "i/n" with 0 ≤ i < n.
func Parse(s string) (i, n int, err error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(a))
	n, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("%w: %q is not i/n with 0 ≤ i < n (e.g. 3/8)", ErrShards, s)
	}
	return i, n, nil
}

// FromEnv finds this job's shard index among count from the scheduler's
// environment, read through lookup (nil: the process's, os.LookupEnv):
// SLURM_ARRAY_TASK_ID itself, or else Kubernetes' JOB_COMPLETION_INDEX.
// The task number is the shard, whatever else the array holds, so that
// resubmitting the failed tasks of an array (sbatch --array=3,7) computes
// shards 3 and 7 again; an array of n shards is therefore submitted as
// --array=0-(n−1). Each variable is a plain decimal number, as the
// schedulers write them: a sign, a space, a leading zero, hexadecimal, a
// negative value, one too large for an int or a shard outside 0…count−1 is
// refused with the variable and its value, never taken as some other shard.
func FromEnv(count int, lookup func(string) (string, bool)) (int, error) {
	if count < 1 {
		return 0, fmt.Errorf("%w: --shards %d: need at least 1", ErrShards, count)
	}
	if lookup == nil {
		lookup = os.LookupEnv
	}
	get := func(name string) (value string, n int, ok bool, err error) {
		s, ok := lookup(name)
		if !ok {
			return "", 0, false, nil
		}
		n, err = envIndex(s)
		if err != nil {
			return "", 0, false, fmt.Errorf("%w: %s=%q from the scheduler %v", ErrShards, name, s, err)
		}
		return s, n, true, nil
	}
	s, i, ok, err := get("SLURM_ARRAY_TASK_ID")
	if err != nil {
		return 0, err
	}
	if ok {
		if i >= count {
			return 0, fmt.Errorf("%w: SLURM_ARRAY_TASK_ID=%q from the scheduler: shard %d is outside 0…%d of --shards %d: the task number is the shard, so submit the array as --array=0-%d (or a list of shards in that range)",
				ErrShards, s, i, count-1, count, count-1)
		}
		return i, nil
	}
	s, i, ok, err = get("JOB_COMPLETION_INDEX")
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("%w: --shards needs SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX in the environment (or use --shard i/n)", ErrShards)
	}
	if i >= count {
		return 0, fmt.Errorf("%w: JOB_COMPLETION_INDEX=%q from the scheduler: shard %d is outside 0…%d of --shards %d", ErrShards, s, i, count-1, count)
	}
	return i, nil
}

// envIndex parses a scheduler's task number: decimal digits only, no
// sign, space or leading zero, at most what an int holds.
func envIndex(s string) (int, error) {
	if s == "" {
		return 0, errors.New("is empty, not an integer (want e.g. 3)")
	}
	digits := func(s string) bool {
		for _, c := range []byte(s) {
			if c < '0' || c > '9' {
				return false
			}
		}
		return s != ""
	}
	if !digits(s) {
		if s[0] == '-' && digits(s[1:]) {
			return 0, errors.New("is negative (a task number is 0 or more)")
		}
		return 0, errors.New("is not an integer of decimal digits only (want e.g. 3)")
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, errors.New("has a leading zero (want e.g. 3, not 03)")
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("is too large (at most %d)", math.MaxInt)
	}
	return v, nil
}

// WriteMeta writes meta.json into z.
func WriteMeta(z *npy.NPZWriter, m Meta) error {
	m.Format = Format
	return writeJSON(z, "meta.json", m)
}

// writeJSON writes v as JSON to the member name of z.
func writeJSON(z *npy.NPZWriter, name string, v any) error {
	w, err := z.CreateRaw(name)
	if err != nil {
		return err
	}
	return json.NewEncoder(w).Encode(v)
}

// ReadMeta reads meta.json from an open shard.
func ReadMeta(z *npy.NPZ, path string) (Meta, error) {
	b, err := z.ReadRaw("meta.json", 1<<16)
	if err != nil {
		return Meta{}, fmt.Errorf("%w: %s is not a tapeloop shard: %v", ErrShards, path, err)
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return Meta{}, fmt.Errorf("%w: %s is not a tapeloop shard: meta.json: %v", ErrShards, path, err)
	}
	if m.Format != Format {
		return Meta{}, fmt.Errorf("%w: %s is not a tapeloop shard (format %q)", ErrShards, path, m.Format)
	}
	if m.N < 1 || m.Lo < 0 || m.Hi > m.N || m.Lo >= m.Hi {
		return Meta{}, fmt.Errorf("%w: %s: rows [%d, %d) of N = %d make no sense", ErrShards, path, m.Lo, m.Hi, m.N)
	}
	switch {
	case m.D < 1:
		return Meta{}, fmt.Errorf("%w: %s: D = %d values per image makes no sense", ErrShards, path, m.D)
	case m.Dtype != "float32" && m.Dtype != "float64" && m.Dtype != "int32" && m.Dtype != "int64":
		return Meta{}, fmt.Errorf("%w: %s: dtype %q, want float32, float64, int32 or int64", ErrShards, path, m.Dtype)
	case m.TopK < 0 || (m.TopK > 0 && m.TopK >= m.N):
		return Meta{}, fmt.Errorf("%w: %s: top-k %d of N = %d makes no sense", ErrShards, path, m.TopK, m.N)
	case m.Count < 1 || m.Index < 0 || m.Index >= m.Count:
		return Meta{}, fmt.Errorf("%w: %s: shard %d of %d makes no sense", ErrShards, path, m.Index, m.Count)
	case m.Device != "" && m.Device != "cpu" && m.Device != "cuda":
		return Meta{}, fmt.Errorf("%w: %s: device %q, want cpu or cuda", ErrShards, path, m.Device)
	}
	return m, nil
}

type opened struct {
	path string
	z    *npy.NPZ
	meta Meta
}

// Merge checks that shards cover rows [0, N) exactly once, all from the same
// input, metric, dtype and top-k, and writes the whole matrix to out: an
// (N, N) .npy, or for top-k an .npz with indices (N, K) and values (N, K).
// The output appears only when everything succeeded. paths names at least
// one shard (filejob.MergeSpec.Validate checks).
func Merge(out string, paths []string) error {
	var all []opened
	defer func() {
		for _, o := range all {
			o.z.Close()
		}
	}()
	for _, p := range paths {
		z, err := npy.OpenNPZ(p)
		if errors.Is(err, syscall.EMFILE) { // every shard stays open until the end
			return fmt.Errorf("%w: %w (the merge of %d shards keeps them all open)", ErrShards, sysmem.WithFileLimit(err), len(paths))
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrShards, err)
		}
		m, err := ReadMeta(z, p)
		if err != nil {
			z.Close()
			return err
		}
		all = append(all, opened{p, z, m})
	}
	ref := all[0].meta
	for _, o := range all[1:] {
		m := o.meta
		if m.Device != ref.Device || m.TF32 != ref.TF32 {
			return fmt.Errorf("%w: %s was computed on %s and %s on %s, whose values differ: merge the shards of one run (the same --device and --tf32)",
				ErrShards, o.path, m.computedOn(), all[0].path, ref.computedOn())
		}
		if m.N != ref.N || m.D != ref.D || m.Metric != ref.Metric || m.Dtype != ref.Dtype || m.Fingerprint != ref.Fingerprint || m.TopK != ref.TopK {
			return fmt.Errorf("%w: %s is from a different run than %s (N %d/%d, metric %s/%s, dtype %s/%s, top-k %d/%d, input %s/%s)",
				ErrShards, o.path, all[0].path, m.N, ref.N, m.Metric, ref.Metric, m.Dtype, ref.Dtype, m.TopK, ref.TopK, m.Fingerprint, ref.Fingerprint)
		}
	}
	pieces := make([]piece, len(all))
	for i, o := range all {
		pieces[i] = piece{o.path, o.meta.Index, o.meta.Count, o.meta.Lo, o.meta.Hi}
	}
	if err := checkPieces(pieces, ref.N, "rows"); err != nil {
		return err
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].meta.Lo < all[j].meta.Lo })

	if ref.TopK > 0 && !strings.HasSuffix(strings.ToLower(out), ".npz") {
		return fmt.Errorf("%w: --out %s: top-k shards merge into an .npz archive of indices and values: name it FILE.npz", ErrShards, out)
	}
	// Integer affinities (of 8-bit images) pass through float64 exactly:
	// their magnitude is far below 2⁵³.
	dt := map[string]npy.Dtype{"float32": npy.Float32, "float64": npy.Float64, "int32": npy.Int32, "int64": npy.Int64}[ref.Dtype]
	// Every member's shape is checked before anything is written, and the
	// output's size against the disk: shard metadata is input too.
	members, cols := []string{"affinity"}, ref.N
	if ref.TopK > 0 {
		members, cols = []string{"indices", "values"}, ref.TopK
	}
	for _, o := range all {
		for _, name := range members {
			if err := checkShape(o, name, []int{o.meta.Hi - o.meta.Lo, cols}); err != nil {
				return err
			}
		}
	}
	size := sysmem.Mul(int64(ref.N), int64(cols), int64(dt.Size))
	if ref.TopK > 0 {
		size = sysmem.Mul(int64(ref.N), int64(cols), int64(dt.Size)+8)
	}
	if err := atomicfile.CheckSpace(out, size); err != nil {
		return err
	}
	f, err := atomicfile.Create(out)
	if err != nil {
		return err
	}
	defer f.Abort()
	if ref.TopK == 0 {
		w, err := npy.NewWriter(f, dt, []int{ref.N, ref.N})
		if err != nil {
			return err
		}
		buf := make([]float64, min(ref.N, chunk))
		for i := range all {
			o := &all[i]
			if err := copyRows(*o, "affinity", []int{o.meta.Hi - o.meta.Lo, ref.N}, buf, checkValues(o, "affinity", w.Write64)); err != nil {
				return err
			}
		}
		if err := w.Flush(); err != nil {
			return atomicfile.WriteError(out, err)
		}
	} else {
		// The archive an unsharded top-k run writes: its meta.json (the
		// whole run as shard 0 of 1), then the indices and the values.
		z := npy.NewNPZWriter(f)
		whole := ref
		whole.Lo, whole.Hi, whole.Index, whole.Count = 0, ref.N, 0, 1
		if err := WriteMeta(z, whole); err != nil {
			return atomicfile.WriteError(out, err)
		}
		k := ref.TopK
		for _, member := range []struct {
			name string
			dt   npy.Dtype
		}{{"indices", npy.Int64}, {"values", dt}} {
			w, err := z.Create(member.name, member.dt, []int{ref.N, k})
			if err != nil {
				return err
			}
			buf := make([]float64, min(k, chunk))
			write := w.Write64
			if member.dt == npy.Int64 {
				ints := make([]int64, len(buf))
				write = func(v []float64) error {
					for i, x := range v {
						ints[i] = int64(x)
					}
					return w.WriteInt64(ints[:len(v)])
				}
			}
			var o opened
			write = checkValues(&o, member.name, write)
			for _, cur := range all {
				o = cur
				if err := copyRows(o, member.name, []int{o.meta.Hi - o.meta.Lo, k}, buf, write); err != nil {
					return err
				}
			}
		}
		if err := z.Close(); err != nil {
			return atomicfile.WriteError(out, err)
		}
	}
	return f.Commit()
}

// chunk is the most values merge holds in memory at a time.
const chunk = 1 << 16

// checkShape checks that member of o has the given shape.
func checkShape(o opened, member string, shape []int) error {
	r, c, err := o.z.Open(member)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrShards, err)
	}
	defer c.Close()
	if npy.ShapeString(r.Shape) != npy.ShapeString(shape) {
		return fmt.Errorf("%w: %s: %s has shape %s, want %s", ErrShards, o.path, member, npy.ShapeString(r.Shape), npy.ShapeString(shape))
	}
	if r.Transposed() {
		return fmt.Errorf("%w: %s: %s is stored in Fortran order; tapeloop writes shards in C order", ErrShards, o.path, member)
	}
	return nil
}

// checkValues wraps write with the checks of a member's values, as they
// stream through: indices must be row numbers in [0, N), and the
// affinities and top-k values of a built-in metric must not be NaN
// (tapeloop refuses the images that would make one); a user's formula may
// give NaN, as its run without shards writes it. o is read at each call:
// the shard being copied.
func checkValues(o *opened, member string, write func([]float64) error) func([]float64) error {
	return func(v []float64) error {
		for _, x := range v {
			switch {
			case member == "indices" && !(x >= 0 && x < float64(o.meta.N) && x == math.Trunc(x)):
				return fmt.Errorf("%w: %s: indices holds %g, not a row index in [0, %d): the shard is corrupt", ErrShards, o.path, x, o.meta.N)
			case math.IsNaN(x) && !o.meta.formula():
				return fmt.Errorf("%w: %s: %s holds NaN: the shard is corrupt", ErrShards, o.path, member)
			}
		}
		return write(v)
	}
}

// formula reports whether m's values are a user's formula's ("formula …"
// in Metric), which may be NaN.
func (m Meta) formula() bool { return strings.HasPrefix(m.Metric, "formula ") }

// copyRows streams member of o, which must have the given shape, through
// buf into write.
func copyRows(o opened, member string, shape []int, buf []float64, write func([]float64) error) error {
	r, c, err := o.z.Open(member)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrShards, err)
	}
	defer c.Close()
	if npy.ShapeString(r.Shape) != npy.ShapeString(shape) {
		return fmt.Errorf("%w: %s: %s has shape %s, want %s", ErrShards, o.path, member, npy.ShapeString(r.Shape), npy.ShapeString(shape))
	}
	for r.Remaining() > 0 {
		n, err := r.Read64(buf)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrShards, o.path, err)
		}
		if err := write(buf[:n]); err != nil {
			return err
		}
	}
	return nil
}

// span is the range [lo, hi) of items one shard file holds.
type span struct {
	path   string
	lo, hi int
}

// checkCover checks that spans, sorted by lo, cover [0, total) once each:
// no range held twice, no overlap, none missing. what names the items.
func checkCover(spans []span, total int, what string) error {
	next := 0
	for i, s := range spans {
		switch {
		case i > 0 && s.lo == spans[i-1].lo && s.hi == spans[i-1].hi:
			return fmt.Errorf("%w: %s and %s hold the same %s [%d, %d)", ErrShards, spans[i-1].path, s.path, what, s.lo, s.hi)
		case s.lo < next:
			return fmt.Errorf("%w: %s (%s [%d, %d)) overlaps %s (%s up to %d)", ErrShards, s.path, what, s.lo, s.hi, spans[i-1].path, what, next)
		case s.lo > next:
			return fmt.Errorf("%w: %s [%d, %d) are missing: no shard holds them", ErrShards, what, next, s.lo)
		}
		next = s.hi
	}
	if next != total {
		return fmt.Errorf("%w: %s [%d, %d) are missing: no shard holds them", ErrShards, what, next, total)
	}
	return nil
}
