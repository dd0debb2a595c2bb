package filejob

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unsafe"

	"github.com/tapeloop/tapeloop/graphs/drr"
	"github.com/tapeloop/tapeloop/internal/atomicfile"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/shard"
	"github.com/tapeloop/tapeloop/internal/stackfile"
)

// shardChoice is a workload's --shard or --shards, parsed.
type shardChoice struct {
	index, count int // 0 of 1 when not sharded
	sharded      bool
}

// parseShard reads --shard i/n or --shards n (the index from env, nil: the
// process's environment): one or neither. A shard goes to an .npz out;
// out "" is checked where the output is opened.
func parseShard(spec *string, count *int, env func(string) (string, bool), out string) (c shardChoice, err error) {
	c.count = 1
	switch {
	case spec != nil && count != nil:
		return c, errors.New("--shard and --shards: give one")
	case spec != nil:
		if c.index, c.count, err = shard.Parse(*spec); err != nil {
			return c, fmt.Errorf("--shard: %w", err)
		}
		c.sharded = true
	case count != nil:
		c.count = *count
		if c.index, err = shard.FromEnv(c.count, env); err != nil {
			return c, fmt.Errorf("--shards: %w", err)
		}
		c.sharded = true
	}
	if c.sharded && out != "" && !strings.HasSuffix(strings.ToLower(out), ".npz") {
		return c, fmt.Errorf("--out %s: a shard is written as an .npz archive: name it FILE.npz", out)
	}
	return c, nil
}

// items returns the shard's range of n items, refusing an empty one, and
// with withOutput a shard without an output file.
func (c shardChoice) items(n int, what, out string, withOutput bool) (lo, hi int, err error) {
	lo, hi = shard.Rows(c.index, c.count, n)
	if lo == hi {
		return 0, 0, fmt.Errorf("--shard %d/%d: no %s (the run has %d, fewer than the shard count)", c.index, c.count, what, n)
	}
	if withOutput && c.sharded && out == "" {
		return 0, 0, errors.New("--shard: a shard needs --out FILE.npz")
	}
	return lo, hi, nil
}

// runPrint accumulates what a shard's values depend on.
type runPrint struct{ h hash.Hash }

func newRunPrint(workload string) *runPrint {
	f := &runPrint{sha256.New()}
	f.str(workload)
	return f
}

// str adds a string, length first so that fields never run together.
func (f *runPrint) str(s string) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(len(s)))
	f.h.Write(b[:])
	io.WriteString(f.h, s)
}

func (f *runPrint) ints(v ...int) {
	for _, x := range v {
		f.str(fmt.Sprint(x))
	}
}

func (f *runPrint) f64s(v ...float64) {
	var b [8]byte
	f.ints(len(v))
	for _, x := range v {
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(x))
		f.h.Write(b[:])
	}
}

// f32s adds the values' little-endian bytes: on a little-endian machine
// their own memory, with no copy.
func (f *runPrint) f32s(v []float32) {
	f.ints(len(v))
	if npy.LittleEndianHost {
		if len(v) > 0 {
			f.h.Write(unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v)))
		}
		return
	}
	var buf [8 << 10]byte
	for len(v) > 0 {
		n := min(len(v), len(buf)/4)
		for i, x := range v[:n] {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(x))
		}
		f.h.Write(buf[:4*n])
		v = v[n:]
	}
}

// params adds the formulas' parameters, by name.
func (f *runPrint) params(p map[string]float64) {
	names := make([]string, 0, len(p))
	for k := range p {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		f.str(k)
		f.f64s(p[k])
	}
}

func (f *runPrint) sum() string { return hex.EncodeToString(f.h.Sum(nil)[:16]) }

// MergeSpec is a `tapeloop merge`: the shard files of one affinity,
// wavelet or DRR run and where to assemble them.
type MergeSpec struct {
	// Out is what one unsharded run writes: for affinity shards the
	// (N, N) .npy, or for top-k shards an .npz; for wavelet shards the
	// CSV file; for DRR shards the directory of drr.npy (or the files of
	// the shards' --format) and the PNGs.
	Out    string
	Shards []string // the shards' .npz files, in any order
	// Check asks only which shards are missing or held twice (CheckShards):
	// nothing is written, and there is no Out.
	Check bool
}

// Validate checks that there is an output (none with Check) and at least
// one shard.
func (s MergeSpec) Validate() error {
	switch {
	case s.Check && s.Out != "":
		return errors.New("merge: --check writes nothing: leave out --out")
	case !s.Check && s.Out == "":
		return errors.New("merge: --out: name the merged file (or use --check)")
	}
	if len(s.Shards) == 0 {
		return fmt.Errorf("%w: no shard files given", shard.ErrShards)
	}
	for _, p := range s.Shards {
		if !strings.HasSuffix(strings.ToLower(p), ".npz") {
			return fmt.Errorf("%w: %s: shard files are .npz archives (tapeloop affinity, wavelet or drr --shard i/n --out FILE.npz)", shard.ErrShards, p)
		}
	}
	return nil
}

// CheckShards reads the shards' metadata and reports every shard of
// their run that no file holds, every one that several files hold, and
// every file that does not belong to the run; it writes nothing.
func CheckShards(s MergeSpec) (shard.Report, error) {
	if err := s.Validate(); err != nil {
		return shard.Report{}, err
	}
	if err := CheckPaths(s.InputPaths(), nil); err != nil {
		return shard.Report{}, fmt.Errorf("merge: %w", err)
	}
	return shard.Check(s.Shards)
}

// Merge finds the workload of the shards (refusing a mix), checks that
// they cover every row, combination or pose exactly once and come from the
// same run, and writes to Out what one unsharded run writes, byte for byte.
// Out appears only when everything succeeded.
func Merge(s MergeSpec) error {
	if err := s.Validate(); err != nil {
		return err
	}
	kind, first := "", ""
	for _, p := range s.Shards {
		k, err := shard.Kind(p)
		if err != nil {
			return err
		}
		if kind == "" {
			kind, first = k, p
		} else if k != kind {
			return fmt.Errorf("%w: %s is a %s shard and %s a %s one: merge the shards of one run", shard.ErrShards, first, kind, p, k)
		}
	}
	outs := []Path{{Flag: "out", Path: s.Out}}
	if kind == shard.DRR {
		outs = []Path{{Flag: "out", Path: s.Out, Dir: true}, {Flag: "out", Path: filepath.Join(s.Out, "drr.npy")}}
	}
	if err := CheckPaths(s.InputPaths(), outs); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	if kind == shard.DRR {
		return mergeDRR(s) // locks drr.npy once the directory is there
	}
	// The lock a run writing Out holds: a merge and a run, or two merges,
	// never write one output together.
	lock, err := lockOutput(s.Out)
	if err != nil {
		return err
	}
	defer lock.Release()
	if kind == shard.Wavelet {
		return mergeWavelet(s)
	}
	return shard.Merge(s.Out, s.Shards)
}

// mergeWavelet writes the CSV header, then every shard's rows in order,
// each shard checked to hold one line per combination.
func mergeWavelet(s MergeSpec) error {
	all, err := shard.OpenRange(shard.Wavelet, s.Shards)
	if err != nil {
		return err
	}
	defer shard.CloseAll(all)
	var size int64
	for _, o := range all {
		_, n, err := o.Z.OpenRaw("rows.csv")
		if err != nil {
			return fmt.Errorf("%w: %s: %v", shard.ErrShards, o.Path, err)
		}
		if n < 0 || size+n < size {
			size = -1 // overflowed: CheckSpace refuses it
			break
		}
		size += n
	}
	if err := atomicfile.CheckSpace(s.Out, size); err != nil {
		return err
	}
	f, err := atomicfile.Create(s.Out)
	if err != nil {
		return err
	}
	defer f.Abort()
	w := bufio.NewWriter(f)
	if _, err := io.WriteString(w, all[0].Meta.Header+"\n"); err != nil {
		return atomicfile.WriteError(s.Out, err)
	}
	for _, o := range all {
		if err := copyLines(w, o); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return atomicfile.WriteError(s.Out, err)
	}
	return f.Commit()
}

// copyLines copies the rows of a wavelet shard to w, checking that they are
// Hi − Lo lines of the header's number of fields.
func copyLines(w io.Writer, o shard.RangeShard) error {
	r, _, err := o.Z.OpenRaw("rows.csv")
	if err != nil {
		return fmt.Errorf("%w: %s: %v", shard.ErrShards, o.Path, err)
	}
	defer r.Close()
	want, fields := o.Meta.Hi-o.Meta.Lo, strings.Count(o.Meta.Header, ",")
	br := bufio.NewReader(r)
	for k := range want {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return fmt.Errorf("%w: %s: line %d of rows.csv is too long: the shard is corrupt", shard.ErrShards, o.Path, k+1)
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("%w: %s: rows.csv: damaged (%v)", shard.ErrShards, o.Path, err)
		}
		if err != nil {
			return fmt.Errorf("%w: %s: rows.csv holds %d lines, want %d: the shard is corrupt", shard.ErrShards, o.Path, k, want)
		}
		if bytes.Count(line, []byte{','}) != fields {
			return fmt.Errorf("%w: %s: line %d of rows.csv does not have the header's columns: the shard is corrupt", shard.ErrShards, o.Path, k+1)
		}
		if _, err := w.Write(line); err != nil {
			return err
		}
	}
	switch _, err := br.ReadByte(); {
	case err == nil:
		return fmt.Errorf("%w: %s: rows.csv holds more than %d lines: the shard is corrupt", shard.ErrShards, o.Path, want)
	case err != io.EOF:
		return fmt.Errorf("%w: %s: rows.csv: damaged (%v)", shard.ErrShards, o.Path, err)
	}
	return nil
}

// mergeDRR writes drr.npy (or the files the shards' --format names:
// drr.npy, drr.mha, drr.tiff) into the Out directory from the shards'
// images in pose order and, when the run wrote PNGs, one per pose, as
// OpenDRR's task does.
func mergeDRR(s MergeSpec) (err error) {
	all, err := shard.OpenRange(shard.DRR, s.Shards)
	if err != nil {
		return err
	}
	defer shard.CloseAll(all)
	ref := all[0].Meta
	for _, o := range all {
		r, c, err := o.Z.Open("drr")
		if err != nil {
			return fmt.Errorf("%w: %v", shard.ErrShards, err)
		}
		ok := npy.ShapeString(r.Shape) == npy.ShapeString([]int{o.Meta.Hi - o.Meta.Lo, ref.Rows, ref.Cols}) && r.Dtype == npy.Float32 && !r.Transposed()
		c.Close()
		if !ok {
			return fmt.Errorf("%w: %s: drr is %s %s, want little-endian float32 (%d, %d, %d) in C order: the shard is corrupt",
				shard.ErrShards, o.Path, r.Dtype.Name(), npy.ShapeString(r.Shape), o.Meta.Hi-o.Meta.Lo, ref.Rows, ref.Cols)
		}
	}
	formats := ref.Formats
	if len(formats) == 0 {
		formats = []string{"npy"}
	}
	for _, f := range formats {
		if !slices.Contains(stackFormats, f) {
			return fmt.Errorf("%w: %s: format %q: the shard is corrupt or from a later version", shard.ErrShards, all[0].Path, f)
		}
	}
	outs := []Path{{Flag: "out", Path: s.Out, Dir: true}}
	for _, f := range formats {
		outs = append(outs, Path{Flag: "out", Path: filepath.Join(s.Out, "drr."+f)})
	}
	if err := CheckPaths(nil, outs); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	t := &DRRTask{dir: s.Out, n: ref.Items, rows: ref.Rows, cols: ref.Cols}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	if t.dirs, err = atomicfile.MakeDirs(s.Out); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	lock, err := lockOutput(filepath.Join(s.Out, "drr.npy")) // a drr run's lock on its output
	if err != nil {
		return err
	}
	defer lock.Release()
	if err := atomicfile.CheckSpace(filepath.Join(s.Out, "drr.npy"), stacksSpace(len(formats), ref.PNG, ref.Items, ref.Rows, ref.Cols)); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if err := t.createStacks(formats, stackfile.Stack{N: ref.Items, Rows: ref.Rows, Cols: ref.Cols, Pixel: ref.Pixel}); err != nil {
		return err
	}
	// The run's geometry.json, which every shard carries, the same in
	// each: the shards come from one run.
	var geometry []byte
	for i, o := range all {
		g, err := o.Z.ReadRaw("geometry.json", 1<<30)
		switch {
		case err != nil:
			msg := err.Error() // the archive's errors mostly name it
			if !strings.HasPrefix(msg, o.Path+": ") {
				msg = o.Path + ": geometry.json: " + msg
			}
			return fmt.Errorf("%w: %s: the shard is damaged", shard.ErrShards, msg)
		case i > 0 && !bytes.Equal(g, geometry):
			return fmt.Errorf("%w: %s and %s hold different geometry.json: merge the shards of one run", shard.ErrShards, all[0].Path, o.Path)
		}
		geometry = g
	}
	if err := t.createSide("geometry.json", geometry); err != nil {
		return err
	}
	img := make([]float32, ref.Rows*ref.Cols)
	sc := pngScaleOf(ref)
	if ref.PNG && sc.global { // a first pass for the run's range
		first := true
		err := eachShardImage(all, img, func(int, []float32) error {
			lo, hi := drr.ImageRange(img)
			if first || lo < sc.lo {
				sc.lo = lo
			}
			if first || hi > sc.hi {
				sc.hi = hi
			}
			first = false
			return nil
		})
		if err != nil {
			return err
		}
	}
	err = eachShardImage(all, img, func(i int, img []float32) error {
		if err := t.stacks.Write32(img); err != nil {
			return err
		}
		if !ref.PNG {
			return nil
		}
		lo, hi := drr.ImageRange(img)
		if sc.global || sc.window {
			lo, hi = sc.lo, sc.hi
		}
		return t.writePNG(i, img, lo, hi, ref.Rows, ref.Cols)
	})
	if err != nil {
		return err
	}
	return t.Commit()
}

// eachShardImage calls fn with each pose's image of the DRR shards all, in
// order, read into img.
func eachShardImage(all []shard.RangeShard, img []float32, fn func(pose int, img []float32) error) error {
	for _, o := range all {
		r, c, err := o.Z.Open("drr")
		if err != nil {
			return fmt.Errorf("%w: %v", shard.ErrShards, err)
		}
		for i := o.Meta.Lo; i < o.Meta.Hi; i++ {
			if _, err := r.Read32(img); err != nil {
				c.Close()
				return fmt.Errorf("%w: %s: %v", shard.ErrShards, o.Path, err)
			}
			if err := fn(i, img); err != nil {
				c.Close()
				return err
			}
		}
		c.Close()
	}
	return nil
}
