package main

// The hostile-input suite: every run of tapeloop on bad input must end with
// exit status 1 and one line on stderr starting "tapeloop: ", without a
// panic, a hang or a memory flood, and without creating or changing any
// file. Each case runs the binary in a directory of its own, holding the
// case's inputs, under an address-space limit and a time limit, and
// compares the directory before and after.

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"crypto/sha256"
	bin "encoding/binary"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/testutil"
)

const (
	// hostileMemKiB bounds each run's address space (ulimit -v): 3 GiB,
	// room for the Go runtime and the small real work some cases do
	// before they fail, far below what a header's lie would allocate.
	hostileMemKiB = 3 << 20
	// hostileTimeout is when a run is called hung and killed.
	hostileTimeout = hangAfter
)

// hostile is one case: the arguments (after the program name), the input
// files to create in the case's directory, and what the one line must say.
type hostile struct {
	name  string
	args  []string
	files map[string][]byte
	dirs  []string // directories to create, before files
	env   []string // added to the environment
	// defaultLimit runs without TAPELOOP_MEM_LIMIT (the default limit,
	// half of available memory), instead of the suite's 1 GiB.
	defaultLimit bool
	want         string // the message must contain this ("": anything)
	not          string // the message must not contain this
}

func TestHostileInput(t *testing.T) {
	cases := hostileCases()
	seen, classes := map[string]bool{}, map[string]int{}
	for _, c := range cases {
		if seen[c.name] {
			t.Fatalf("two cases named %q", c.name)
		}
		seen[c.name] = true
		class, _, _ := strings.Cut(c.name, "/")
		classes[class]++
	}
	t.Logf("%d cases: %v", len(cases), classes)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runHostile(t, c)
		})
	}
}

func runHostile(t *testing.T, c hostile) {
	dir := t.TempDir()
	for _, d := range c.dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, b := range c.files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Set every mtime in the past, so a file rewritten with the same
	// bytes within the clock's granularity still shows.
	past := time.Now().Add(-time.Hour)
	filepath.WalkDir(dir, func(p string, _ fs.DirEntry, _ error) error { return os.Chtimes(p, past, past) })
	before := snapshot(t, dir)

	env := filterEnvPrefix(os.Environ(), "TAPELOOP_", "SLURM_", "JOB_COMPLETION_INDEX")
	if !c.defaultLimit {
		env = append(env, "TAPELOOP_MEM_LIMIT=1GiB")
	}
	env = append(env, c.env...)
	ctx, cancel := context.WithTimeout(context.Background(), hostileTimeout)
	defer cancel()
	script := fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, hostileMemKiB)
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", script, binary}, c.args...)...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("tapeloop %s: hung: still running after %v (killed); stderr %q", strings.Join(c.args, " "), hostileTimeout, tail(se.String()))
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	msg := se.String()
	switch {
	case code != 1:
		t.Errorf("tapeloop %s: exit status %d, want 1; stderr %q", strings.Join(c.args, " "), code, tail(msg))
	case strings.Contains(msg, "panic") || strings.Contains(msg, "goroutine") || strings.Contains(msg, "fatal error"):
		t.Errorf("tapeloop %s: crashed: %q", strings.Join(c.args, " "), tail(msg))
	case !strings.HasPrefix(msg, "tapeloop: ") || !strings.HasSuffix(msg, "\n") || strings.Count(msg, "\n") != 1:
		t.Errorf("tapeloop %s: stderr is not one 'tapeloop: ' line: %q", strings.Join(c.args, " "), tail(msg))
	case strings.HasPrefix(msg, "tapeloop: tapeloop: "):
		t.Errorf("tapeloop %s: the prefix twice: %q", strings.Join(c.args, " "), msg)
	}
	if c.want != "" && !strings.Contains(msg, c.want) {
		t.Errorf("tapeloop %s: message %q does not say %q", strings.Join(c.args, " "), tail(msg), c.want)
	}
	if c.not != "" && strings.Contains(msg, c.not) {
		t.Errorf("tapeloop %s: message %q says %q", strings.Join(c.args, " "), tail(msg), c.not)
	}
	after := snapshot(t, dir)
	for p, a := range after {
		if b, ok := before[p]; !ok {
			t.Errorf("tapeloop %s: created %s", strings.Join(c.args, " "), p)
		} else if a != b {
			t.Errorf("tapeloop %s: changed %s: %+v → %+v", strings.Join(c.args, " "), p, b, a)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("tapeloop %s: removed %s", strings.Join(c.args, " "), p)
		}
	}
	if testing.Verbose() {
		t.Logf("%v: %s", took.Round(time.Millisecond), strings.TrimSpace(msg))
	}
}

// tail keeps the end of a long stderr (a panic's trace) readable.
func tail(s string) string {
	if len(s) > 1500 {
		return s[:700] + " … " + s[len(s)-700:]
	}
	return s
}

// fileState is what snapshot records of a path.
type fileState struct {
	Mode  fs.FileMode
	Size  int64
	MTime time.Time
	Hash  [32]byte
	Link  string
}

// snapshot records every path under dir (not following links): mode,
// size, mtime, contents' hash and link target.
func snapshot(t *testing.T, dir string) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		s := fileState{Mode: st.Mode(), Size: st.Size(), MTime: st.ModTime()}
		switch {
		case st.Mode()&fs.ModeSymlink != 0:
			s.Link, _ = os.Readlink(p)
		case st.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s.Hash = sha256.Sum256(b)
		}
		if st.IsDir() {
			// A directory's size depends on the file system, and its mtime
			// moves when a temporary output is made and removed: what
			// counts is what is left in it.
			s.Size, s.MTime = 0, time.Time{}
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = s
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func filterEnvPrefix(env []string, prefixes ...string) []string {
	var out []string
	for _, e := range env {
		keep := true
		for _, p := range prefixes {
			if strings.HasPrefix(e, p) {
				keep = false
			}
		}
		if keep {
			out = append(out, e)
		}
	}
	return out
}

// ---- input builders ----

// rawNpy is a version 1.0 .npy file with the given header dictionary and
// data, exactly as given.
func rawNpy(dict string, data []byte) []byte {
	h := dict + "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), 0, 0)
	bin.LittleEndian.PutUint16(b[8:], uint16(len(h)))
	return append(append(b, h...), data...)
}

// npyDict is a header dictionary.
func npyDict(descr, shape string, fortran bool) string {
	f := "False"
	if fortran {
		f = "True"
	}
	return fmt.Sprintf("{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr, f, shape)
}

// npyOf is a well-formed little-endian .npy of dtype (float32 or float64).
func npyOf(dt npy.Dtype, shape []int, vals []float64) []byte {
	var buf bytes.Buffer
	w, err := npy.NewWriter(&buf, dt, shape)
	if err != nil {
		panic(err)
	}
	if err := w.Write64(vals); err != nil {
		panic(err)
	}
	if err := w.Flush(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

func f64s(n int, at map[int]float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(i%7) / 7
	}
	for i, x := range at {
		v[i] = x
	}
	return v
}

// nifti describes a NIfTI-1 single file for niftiOf.
type nifti struct {
	dim                     [8]int16
	datatype, bitpix        int16
	pixdim                  [8]float32
	voxOffset, slope, inter float32
	magic                   string
	sizeof                  int32
	data                    []byte
}

// goodNIfTI is a 4×3×2 int16 volume.
func goodNIfTI() nifti {
	return nifti{dim: [8]int16{3, 4, 3, 2, 1, 1, 1, 1}, datatype: 4, bitpix: 16, pixdim: [8]float32{1, 1, 1, 1},
		voxOffset: 352, slope: 1, magic: "n+1", sizeof: 348, data: make([]byte, 4*3*2*2)}
}

func niftiOf(n nifti) []byte {
	b := make([]byte, 352)
	o := bin.LittleEndian
	o.PutUint32(b[0:], uint32(n.sizeof))
	for i, d := range n.dim {
		o.PutUint16(b[40+2*i:], uint16(d))
	}
	o.PutUint16(b[70:], uint16(n.datatype))
	o.PutUint16(b[72:], uint16(n.bitpix))
	for i, p := range n.pixdim {
		o.PutUint32(b[76+4*i:], math.Float32bits(p))
	}
	o.PutUint32(b[108:], math.Float32bits(n.voxOffset))
	o.PutUint32(b[112:], math.Float32bits(n.slope))
	o.PutUint32(b[116:], math.Float32bits(n.inter))
	copy(b[344:], n.magic)
	return append(b, n.data...)
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func zlibOf(b []byte) []byte {
	var buf bytes.Buffer
	w, _ := zlib.NewWriterLevel(&buf, zlib.BestCompression)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// meta is a MetaImage header, its lines joined, with data after it.
func meta(data []byte, lines ...string) []byte {
	return append([]byte(strings.Join(lines, "\n")+"\n"), data...)
}

// member is one entry of a zip built by zipOf.
type member struct {
	name    string
	data    []byte
	deflate bool
}

func zipOf(ms ...member) []byte {
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	for _, m := range ms {
		method := zip.Store
		if m.deflate {
			method = zip.Deflate
		}
		w, err := z.CreateHeader(&zip.FileHeader{Name: m.name, Method: method})
		if err != nil {
			panic(err)
		}
		w.Write(m.data)
	}
	z.Close()
	return buf.Bytes()
}

// shardMeta is a shard's meta.json for N = 4, D = 2, float32, dot.
func shardMeta(lo, hi, index, count int, edits ...string) string {
	m := fmt.Sprintf(`{"format":"tapeloop-affinity-shard/1","n":4,"d":2,"metric":"dot","dtype":"float32","fingerprint":"fp","lo":%d,"hi":%d,"index":%d,"count":%d}`,
		lo, hi, index, count)
	for i := 0; i+1 < len(edits); i += 2 {
		m = strings.Replace(m, edits[i], edits[i+1], 1)
	}
	return m
}

// shardOf is a shard of rows [lo, hi) of the N = 4 matrix, as meta says.
func shardOf(metaJSON string, rows int) []byte {
	return zipOf(member{"meta.json", []byte(metaJSON), false},
		member{"affinity.npy", npyOf(npy.Float32, []int{rows, 4}, make([]float64, rows*4)), false})
}

// topkShard is a top-1 shard of rows [lo, hi) of shard index of 2, its
// indices all i.
func topkShard(lo, hi, index int, i uint64) []byte {
	var idx []byte
	for range hi - lo {
		idx = bin.LittleEndian.AppendUint64(idx, i)
	}
	return zipOf(member{"meta.json", []byte(shardMeta(lo, hi, index, 2, `"count":2`, `"count":2,"topk":1`)), false},
		member{"indices.npy", rawNpy(npyDict("<i8", fmt.Sprintf("(%d, 1)", hi-lo), false), idx), false},
		member{"values.npy", npyOf(npy.Float32, []int{hi - lo, 1}, make([]float64, hi-lo)), false})
}

// rangeMeta is a wavelet or drr shard's meta.json for 2 items, with edits.
func rangeMeta(workload string, lo, hi, index, count int, edits ...string) string {
	extra := `"header":"theta,phi,xi,energy,std,max,wavelet_energy"`
	if workload == "drr" {
		extra = `"rows":2,"cols":3`
	}
	m := fmt.Sprintf(`{"format":"tapeloop-shard/1","workload":%q,"items":2,"lo":%d,"hi":%d,"index":%d,"count":%d,"fingerprint":"fp",%s}`,
		workload, lo, hi, index, count, extra)
	for i := 0; i+1 < len(edits); i += 2 {
		m = strings.Replace(m, edits[i], edits[i+1], 1)
	}
	return m
}

// waveletShard is a wavelet shard: meta, and rows as its CSV lines.
func waveletShard(metaJSON, rows string) []byte {
	return zipOf(member{"meta.json", []byte(metaJSON), false}, member{"rows.csv", []byte(rows), false})
}

// drrShard is a drr shard of poses images of 2×3 pixels.
func drrShard(metaJSON string, poses int) []byte {
	return zipOf(member{"meta.json", []byte(metaJSON), false},
		member{"drr.npy", npyOf(npy.Float32, []int{poses, 2, 3}, make([]float64, poses*6)), false})
}

// pose is a valid geometry pose over the small phantom, with edits.
func pose(edits ...string) string {
	p := `{"source": [8,8,500], "center": [8,8,-500], "u": [1,0,0], "v": [0,1,0], "rows": 4, "cols": 5, "pixel": [1,1]}`
	for i := 0; i+1 < len(edits); i += 2 {
		p = strings.Replace(p, edits[i], edits[i+1], 1)
	}
	return p
}

func geom(poses ...string) []byte { return []byte(`{"poses": [` + strings.Join(poses, ", ") + `]}`) }

// withDefaults is args after the flag-value pairs of defaults that args
// does not give itself.
func withDefaults(args []string, defaults ...string) []string {
	var out []string
	for i := 0; i+1 < len(defaults); i += 2 {
		given := false
		for _, a := range args {
			given = given || a == defaults[i]
		}
		if !given {
			out = append(out, defaults[i], defaults[i+1])
		}
	}
	return append(out, args...)
}

func files(kv ...any) map[string][]byte {
	m := map[string][]byte{}
	for i := 0; i+1 < len(kv); i += 2 {
		switch v := kv[i+1].(type) {
		case string:
			m[kv[i].(string)] = []byte(v)
		case []byte:
			m[kv[i].(string)] = v
		}
	}
	return m
}

func dicomSlice(series string, instance int, z float64) []byte {
	return testutil.DICOMFile(testutil.DICOMSlice{Series: series, Description: "hostile", Instance: instance,
		IPP: [3]float64{0, 0, z}, IOP: [6]float64{1, 0, 0, 0, 1, 0}, PixelSpacing: [2]float64{1, 1}, Rows: 2, Cols: 3,
		Slope: 1, Pixels: []int16{1, 2, 3, 4, 5, 6}, Signed: true})
}

// ---- the cases ----

func hostileCases() []hostile {
	var cs []hostile
	add := func(c ...hostile) { cs = append(cs, c...) }
	big := "4611686018427387904" // 2⁶²

	// The program and its commands.
	add(
		hostile{name: "top/unknown command", args: []string{"frobnicate"}, want: "frobnicate"},
		hostile{name: "top/empty command", args: []string{""}, want: "unknown command"},
		hostile{name: "top/unknown flag", args: []string{"--frobnicate"}, want: "frobnicate"},
		hostile{name: "top/help of no command", args: []string{"help", "nosuch"}, want: "nosuch"},
		hostile{name: "top/flag without value", args: []string{"interp", "--points"}, want: "points"},
		hostile{name: "top/flag not a number", args: []string{"interp", "--points", "many"}, want: "points"},
		hostile{name: "top/uint flag negative", args: []string{"interp", "--seed", "-1"}, want: "seed"},
		hostile{name: "top/bool flag value", args: []string{"interp", "--quiet=maybe"}, want: "quiet"},
		hostile{name: "top/flag twice", args: []string{"interp", "--points", "10", "--points", "20"}, want: "--points"},
		hostile{name: "top/out twice", args: []string{"interp", "--points", "10", "--out", "a.npy", "--out", "b.npy"}, want: "--out"},
	)

	// info, demo, dot: stray arguments and flags.
	add(
		hostile{name: "info/stray argument", args: []string{"info", "extra"}, want: "extra"},
		hostile{name: "info/unknown flag", args: []string{"info", "--out", "x"}, want: "out"},
		hostile{name: "info/engine flag", args: []string{"info", "--mem-limit", "1GiB"}, want: "mem-limit"},
		hostile{name: "demo/stray argument", args: []string{"demo", "extra"}, want: "extra"},
		hostile{name: "demo/mem-limit syntax", args: []string{"demo", "--mem-limit", "abc"}, want: "mem-limit"},
		hostile{name: "demo/mem-limit tiny", args: []string{"demo", "--mem-limit", "1KiB"}, want: "memory limit"},
		hostile{name: "demo/device", args: []string{"demo", "--device", "tpu"}, want: "tpu"},
		hostile{name: "demo/devices without cuda", args: []string{"demo", "--devices", "0,1"}, want: "--device cuda"},
		hostile{name: "demo/batch not a demo flag", args: []string{"demo", "--batch", "2"}, want: "batch"},
		hostile{name: "dot/no workload", args: []string{"dot"}, want: "workload"},
		hostile{name: "dot/unknown workload", args: []string{"dot", "nosuch"}, want: "nosuch"},
		hostile{name: "dot/interp stray", args: []string{"dot", "interp", "stray", "--points", "10"}, want: "stray"},
		hostile{name: "dot/drr stray", args: []string{"dot", "drr", "--size", "8", "stray"}, want: "stray"},
		hostile{name: "dot/wavelet stray", args: []string{"dot", "wavelet", "--size", "4x4x4", "stray"}, want: "stray"},
		hostile{name: "dot/affinity stray", args: []string{"dot", "affinity", "-n", "4", "stray"}, want: "stray"},
		hostile{name: "dot/interp points 0", args: []string{"dot", "interp", "--points", "0"}, want: "--points"},
		hostile{name: "dot/interp mem-limit tiny", args: []string{"dot", "interp", "--mem-limit", "1KiB"}, want: "memory limit"},
		hostile{name: "dot/drr tiny step", args: []string{"dot", "drr", "--size", "8", "--method", "trilinear", "--step", "1e-12"}, want: "--step"},
		hostile{name: "dot/drr empty geometry", args: []string{"dot", "drr", "--size", "8", "--geometry", "g.json"},
			files: files("g.json", ""), want: "empty", not: "EOF"},
		hostile{name: "dot/wavelet theta", args: []string{"dot", "wavelet", "--theta", "abc"}, want: "theta"},
		hostile{name: "dot/affinity junk images", args: []string{"dot", "affinity", "--images", "x.npy"},
			files: files("x.npy", "junk"), want: "x.npy"},
		hostile{name: "dot/affinity bad shard", args: []string{"dot", "affinity", "-n", "4", "--shard", "3/3"}, want: "3/3"},
	)

	// interp: every numeric flag out of range.
	ip := func(name, want string, args ...string) hostile {
		return hostile{name: "interp/" + name, args: append([]string{"interp", "--quiet"}, args...), want: want}
	}
	add(
		ip("points 0", "--points", "--points", "0"),
		ip("points negative", "--points", "--points", "-1"),
		ip("points huge", "--points", "--points", big),
		ip("points float", "points", "--points", "1e3"),
		ip("grid 0", "--grid", "--grid", "0", "--points", "10"),
		ip("grid 3", "--grid", "--grid", "3", "--points", "10"),
		ip("grid negative", "--grid", "--grid", "-5", "--points", "10"),
		ip("grid huge", "--grid", "--grid", big, "--points", "10"),
		ip("interpolants 0", "--interpolants", "--interpolants", "0", "--points", "10"),
		ip("interpolants negative", "--interpolants", "--interpolants", "-1", "--points", "10"),
		ip("interpolants huge", "--interpolants", "--interpolants", big, "--points", "10"),
		ip("table too large", "too large", "--interpolants", "1000000", "--grid", "1000000", "--points", "10"),
		ip("a NaN", "finite", "--a", "NaN", "--points", "10"),
		ip("a Inf", "finite", "--a", "Inf", "--points", "10"),
		ip("a -Inf", "finite", "--a", "-Inf", "--points", "10"),
		ip("dx 0", "dx", "--dx", "0", "--points", "10"),
		ip("dx negative", "dx", "--dx", "-1", "--points", "10"),
		ip("dx NaN", "dx", "--dx", "NaN", "--points", "10"),
		ip("dx Inf", "dx", "--dx", "Inf", "--points", "10"),
		ip("dx overflows the grid", "", "--dx", "1e308", "--grid", "16", "--points", "10"),
		ip("reduce", "max", "--reduce", "max", "--points", "10"),
		ip("method", "fast", "--method", "fast", "--points", "10"),
		ip("batch 0", "--batch", "--batch", "0", "--points", "10"),
		ip("batch negative", "--batch", "--batch", "-1", "--points", "10"),
		ip("mem-limit syntax", "mem-limit", "--mem-limit", "abc", "--points", "10"),
		ip("mem-limit 1KiB", "memory limit", "--mem-limit", "1KiB", "--points", "10"),
		ip("mem-limit 0", "mem-limit", "--mem-limit", "0", "--points", "10"),
		ip("mem-limit negative", "mem-limit", "--mem-limit", "-1", "--points", "10"),
		ip("mem-limit huge", "mem-limit", "--mem-limit", "1e30", "--points", "10"),
		ip("mem-limit NaN", "mem-limit", "--mem-limit", "NaN", "--points", "10"),
		ip("dtype", "float16", "--dtype", "float16", "--points", "10"),
		ip("device", "tpu", "--device", "tpu", "--points", "10"),
		ip("devices without cuda", "--device cuda", "--devices", "0", "--points", "10"),
		ip("devices syntax", "devices", "--devices", "a,b", "--points", "10"),
		ip("stray argument", "extra", "--points", "10", "extra"),
		hostile{name: "interp/env mem-limit syntax", args: []string{"interp", "--quiet", "--points", "10"},
			env: []string{"TAPELOOP_MEM_LIMIT=lots"}, want: "mem-limit"},
		hostile{name: "interp/env device", args: []string{"interp", "--quiet", "--points", "10"},
			env: []string{"TAPELOOP_DEVICE=abacus"}, want: "abacus"},
		hostile{name: "interp/out is a directory", args: []string{"interp", "--quiet", "--points", "10", "--out", "d"},
			dirs: []string{"d"}, want: "directory"},
		hostile{name: "interp/out in a missing directory", args: []string{"interp", "--quiet", "--points", "10", "--out", "no/x.npy"}, want: "no"},
		hostile{name: "interp/out is the table", args: []string{"interp", "--quiet", "--f", "f.npy", "--out", "f.npy"},
			files: files("f.npy", npyOf(npy.Float64, []int{2, 8}, f64s(16, nil))), want: "--out"},
		hostile{name: "interp/report is out", args: []string{"interp", "--quiet", "--points", "10", "--out", "a.npy", "--report", "a.npy"}, want: "--report"},
		hostile{name: "interp/cpuprofile is the queries", args: []string{"interp", "--quiet", "--x", "x.npy", "--cpuprofile", "x.npy"},
			files: files("x.npy", npyOf(npy.Float64, []int{3}, []float64{0, .5, .9})), want: "x.npy"},
		hostile{name: "interp/points with x", args: []string{"interp", "--quiet", "--x", "x.npy", "--points", "10"},
			files: files("x.npy", npyOf(npy.Float64, []int{3}, []float64{0, .5, .9})), want: "--points"},
		hostile{name: "interp/grid with f", args: []string{"interp", "--quiet", "--f", "f.npy", "--grid", "10", "--points", "10"},
			files: files("f.npy", npyOf(npy.Float64, []int{2, 8}, f64s(16, nil))), want: "--grid"},
	)

	// .npy files, through interp's --f and --x.
	f8 := npyOf(npy.Float64, []int{2, 8}, f64s(16, nil))
	npyCase := func(name, flag, want string, b []byte) hostile {
		args := []string{"interp", "--quiet", "--" + flag, "in.npy"}
		if flag == "x" {
			args = append(args, "--f", "f.npy")
		}
		return hostile{name: "npy/" + name, args: args, files: files("in.npy", b, "f.npy", f8), want: want}
	}
	body := make([]byte, 64)
	add(
		npyCase("empty file", "f", "in.npy", nil),
		npyCase("five bytes", "f", "too short", []byte("\x93NUMP")),
		npyCase("bad magic", "f", "magic", append([]byte("\x93NUMPX\x01\x00"), rawNpy(npyDict("<f8", "(2, 8)", false), body)[8:]...)),
		npyCase("text file", "x", "not a .npy", []byte("0.1 0.2 0.3\n")),
		npyCase("version 9", "f", "version", append([]byte("\x93NUMPY\x09\x00"), rawNpy(npyDict("<f8", "(2, 8)", false), body)[8:]...)),
		npyCase("header length beyond the file", "f", "truncated", []byte("\x93NUMPY\x01\x00\xff\xff{'descr'")),
		npyCase("header length 4 GiB", "f", "header", []byte("\x93NUMPY\x02\x00\xff\xff\xff\xff{")),
		npyCase("header not a dict", "f", "dictionary", rawNpy("['<f8', False, (2, 8)]", body)),
		npyCase("header missing shape", "f", "shape", rawNpy("{'descr': '<f8', 'fortran_order': False}", body)),
		npyCase("header unknown key", "f", "unknown", rawNpy("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 8), 'x': 1}", body)),
		npyCase("header junk after dict", "f", "header", rawNpy(npyDict("<f8", "(2, 8)", false)+" junk", make([]byte, 128))),
		npyCase("dtype complex", "f", "dtype", rawNpy(npyDict("<c16", "(2, 8)", false), make([]byte, 256))),
		npyCase("dtype object", "f", "dtype", rawNpy(npyDict("|O", "(2, 8)", false), make([]byte, 128))),
		npyCase("dtype unicode", "f", "dtype", rawNpy(npyDict("<U10", "(2, 8)", false), make([]byte, 640))),
		npyCase("dtype long double", "f", "dtype", rawNpy(npyDict("<f16", "(2, 8)", false), make([]byte, 256))),
		npyCase("dtype void", "x", "dtype", rawNpy(npyDict("|V8", "(3,)", false), make([]byte, 24))),
		npyCase("dtype big-endian complex", "f", "dtype", rawNpy(npyDict(">c8", "(2, 8)", false), make([]byte, 128))),
		npyCase("dtype big-endian long double", "x", "dtype", rawNpy(npyDict(">f16", "(3,)", false), make([]byte, 48))),
		npyCase("dtype bad size", "x", "dtype", rawNpy(npyDict("<i3", "(3,)", false), make([]byte, 9))),
		npyCase("dtype a name", "x", "dtype", rawNpy(npyDict("float64", "(3,)", false), make([]byte, 24))),
		npyCase("dtype structured", "x", "", rawNpy("{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (3,), }", make([]byte, 24))),
		npyCase("shape huge", "f", "too large", rawNpy(npyDict("<f8", "(1099511627776, 1099511627776)", false), body)),
		npyCase("shape lies", "f", "truncated", rawNpy(npyDict("<f8", "(1000000000, 1000000000)", false), body)),
		npyCase("shape negative", "f", "shape", rawNpy(npyDict("<f8", "(-2, 8)", false), body)),
		npyCase("shape not numbers", "f", "shape", rawNpy(npyDict("<f8", "('a', 8)", false), body)),
		npyCase("shape 20 digits", "x", "shape", rawNpy(npyDict("<f8", "(18446744073709551616,)", false), body)),
		npyCase("fortran maybe", "f", "fortran_order", rawNpy(npyDict("<f8", "(2, 8)", false)[:0]+"{'descr': '<f8', 'fortran_order': maybe, 'shape': (2, 8), }", make([]byte, 128))),
		npyCase("fortran truncated", "f", "truncated", rawNpy(npyDict("<f8", "(2, 8)", true), make([]byte, 100))),
		npyCase("0-d table", "f", "want (M, G)", rawNpy(npyDict("<f8", "()", false), make([]byte, 8))),
		npyCase("0-d queries", "x", "want a vector", rawNpy(npyDict("<f8", "()", false), make([]byte, 8))),
		npyCase("no queries", "x", "no queries", rawNpy(npyDict("<f8", "(0,)", false), nil)),
		npyCase("table M=0", "f", "M = 0", rawNpy(npyDict("<f8", "(0, 8)", false), nil)),
		npyCase("table G=0", "f", "G = 0", rawNpy(npyDict("<f8", "(3, 0)", false), nil)),
		npyCase("table NaN", "f", "NaN", npyOf(npy.Float64, []int{2, 8}, f64s(16, map[int]float64{9: math.NaN()}))),
		npyCase("table Inf", "f", "Inf", npyOf(npy.Float32, []int{2, 8}, f64s(16, map[int]float64{3: math.Inf(-1)}))),
		npyCase("queries NaN", "x", "NaN", npyOf(npy.Float64, []int{4}, []float64{0, .1, math.NaN(), .3})),
		npyCase("queries Inf", "x", "Inf", npyOf(npy.Float32, []int{4}, []float64{0, .1, .2, math.Inf(1)})),
		npyCase("queries truncated", "x", "truncated", npyOf(npy.Float64, []int{4}, make([]float64, 4))[:100]),
		npyCase("big-endian queries truncated", "x", "truncated", rawNpy(npyDict(">i8", "(4,)", false), make([]byte, 31))),
		npyCase("an npz", "f", "in.npy", zipOf(member{"a.npy", f8, false})),
		hostile{name: "npy/a directory", args: []string{"interp", "--quiet", "--f", "d"}, dirs: []string{"d"}, want: "directory"},
		hostile{name: "npy/missing", args: []string{"interp", "--quiet", "--f", "none.npy"}, want: "none.npy"},
	)

	// affinity.
	img := npyOf(npy.Float32, []int{4, 1, 2}, f64s(8, nil))
	af := func(name, want string, args ...string) hostile {
		return hostile{name: "affinity/" + name, args: append([]string{"affinity", "--quiet"}, args...), want: want,
			files: files("img.npy", img)}
	}
	small := []string{"-n", "4", "--height", "2", "--width", "2"}
	add(
		af("n 0", "-n", "-n", "0"),
		af("n negative", "-n", "-n", "-3"),
		af("n huge", "", "-n", big),
		af("height 0", "--height", "--height", "0"),
		af("width negative", "--width", "--width", "-1"),
		af("too many values", "too many", "-n", "1000000", "--height", "1000", "--width", "1000"),
		af("values overflow", "too many", "-n", "4294967296", "--height", "4294967296", "--width", "1"),
		af("images over the limit", "memory limit", "-n", "100000", "--height", "100", "--width", "100"),
		af("metric", "l3", append([]string{"--metric", "l3"}, small...)...),
		af("topk 0", "--topk", append([]string{"--topk", "0"}, small...)...),
		af("topk negative", "--topk", append([]string{"--topk", "-2"}, small...)...),
		af("topk N", "--topk", append([]string{"--topk", "4"}, small...)...),
		af("topk huge", "--topk", append([]string{"--topk", big}, small...)...),
		af("block 0", "--block", append([]string{"--block", "0"}, small...)...),
		af("block negative", "--block", append([]string{"--block", "-1"}, small...)...),
		af("block and batch apart", "--block 20 and --batch 10", append([]string{"--batch", "10", "--block", "20"}, small...)...),
		af("shard i=n", "3/3", append([]string{"--shard", "3/3", "--out", "s.npz"}, small...)...),
		af("shard negative", "-1/2", append([]string{"--shard", "-1/2", "--out", "s.npz"}, small...)...),
		af("shard n=0", "1/0", append([]string{"--shard", "1/0", "--out", "s.npz"}, small...)...),
		af("shard letters", "a/b", append([]string{"--shard", "a/b", "--out", "s.npz"}, small...)...),
		af("shard no slash", "--shard", append([]string{"--shard", "1", "--out", "s.npz"}, small...)...),
		af("shard three parts", "--shard", append([]string{"--shard", "0/2/3", "--out", "s.npz"}, small...)...),
		af("shard empty", "--shard", append([]string{"--shard", "", "--out", "s.npz"}, small...)...),
		af("shard more than rows", "no rows", append([]string{"--shard", "0/8", "--out", "s.npz"}, small...)...),
		af("shard without out", "--out", append([]string{"--shard", "0/2"}, small...)...),
		af("shard under an npy name", ".npz", append([]string{"--shard", "0/2", "--out", "s.npy"}, small...)...),
		af("topk under an npy name", ".npz", append([]string{"--topk", "2", "--out", "t.npy"}, small...)...),
		af("shard and shards", "give one", append([]string{"--shard", "0/2", "--shards", "2", "--out", "s.npz"}, small...)...),
		af("shards without env", "SLURM_ARRAY_TASK_ID", append([]string{"--shards", "2", "--out", "s.npz"}, small...)...),
		af("shards 0", "--shards", append([]string{"--shards", "0", "--out", "s.npz"}, small...)...),
		hostile{name: "affinity/shards env outside", args: append([]string{"affinity", "--quiet", "--shards", "2", "--out", "s.npz"}, small...),
			env: []string{"SLURM_ARRAY_TASK_ID=5"}, want: "outside"},
		hostile{name: "affinity/shards env not a number", args: append([]string{"affinity", "--quiet", "--shards", "2", "--out", "s.npz"}, small...),
			env: []string{"JOB_COMPLETION_INDEX=abc"}, want: "JOB_COMPLETION_INDEX"},
		hostile{name: "affinity/shards env array from 1", args: append([]string{"affinity", "--quiet", "--shards", "2", "--out", "s.npz"}, small...),
			env: []string{"SLURM_ARRAY_TASK_ID=2", "SLURM_ARRAY_TASK_MIN=1"}, want: "--array=0-1"},
		af("tf32 on the cpu", "--tf32", append([]string{"--tf32"}, small...)...),
		af("dtype", "float8", append([]string{"--dtype", "float8"}, small...)...),
		af("stray argument", "extra", append(small, "extra")...),
		af("images missing", "none.npy", "--images", "none.npy"),
		af("images is out", "--out", "--images", "img.npy", "--out", "img.npy"),
		hostile{name: "affinity/images junk", args: []string{"affinity", "--quiet", "--images", "j.npy"}, files: files("j.npy", "junk"), want: "j.npy"},
		hostile{name: "affinity/images a vector", args: []string{"affinity", "--quiet", "--images", "v.npy"},
			files: files("v.npy", npyOf(npy.Float32, []int{8}, f64s(8, nil))), want: "want (N, H, W)"},
		// Well formed, as np.save writes them: read in place (mapped).
		hostile{name: "affinity/images 0-d", args: []string{"affinity", "--quiet", "--images", "v.npy"},
			files: files("v.npy", npyOf(npy.Float32, []int{}, []float64{0.5})), want: "has shape ()"},
		hostile{name: "affinity/images 0-d float64", args: []string{"affinity", "--quiet", "--dtype", "float64", "--images", "v.npy"},
			files: files("v.npy", npyOf(npy.Float64, []int{}, []float64{0.5})), want: "has shape ()"},
		hostile{name: "affinity/images 0-d uint8", args: []string{"affinity", "--quiet", "--images", "v.npy"},
			files: files("v.npy", rawNpy(npyDict("|u1", "()", false), make([]byte, 1))), want: "has shape ()"},
		hostile{name: "affinity/images 4-d", args: []string{"affinity", "--quiet", "--images", "v.npy"},
			files: files("v.npy", npyOf(npy.Float32, []int{2, 2, 1, 2}, f64s(8, nil))), want: "want (N, H, W)"},
		hostile{name: "affinity/images empty", args: []string{"affinity", "--quiet", "--images", "v.npy"},
			files: files("v.npy", rawNpy(npyDict("<f4", "(0, 4)", false), nil)), want: "no images"},
		hostile{name: "affinity/images empty rows", args: []string{"affinity", "--quiet", "--images", "v.npy"},
			files: files("v.npy", rawNpy(npyDict("<f4", "(4, 0)", false), nil)), want: "no"},
		hostile{name: "affinity/images NaN", args: []string{"affinity", "--quiet", "--images", "v.npy"},
			files: files("v.npy", npyOf(npy.Float32, []int{4, 2}, f64s(8, map[int]float64{5: math.NaN()}))), want: "image 2"},
		hostile{name: "affinity/images Inf float64", args: []string{"affinity", "--quiet", "--dtype", "float64", "--images", "v.npy"},
			files: files("v.npy", npyOf(npy.Float64, []int{4, 2}, f64s(8, map[int]float64{0: math.Inf(1)}))), want: "image 0"},
		hostile{name: "affinity/images lie about their size", args: []string{"affinity", "--quiet", "--images", "v.npy"},
			files: files("v.npy", rawNpy(npyDict("<f4", "(100000, 100000)", false), make([]byte, 64))), want: "truncated"},
		hostile{name: "affinity/images int16 lie", args: []string{"affinity", "--quiet", "--images", "v.npy"},
			files: files("v.npy", rawNpy(npyDict("<i2", "(100000, 100000)", false), make([]byte, 64))), want: "truncated"},
		hostile{name: "affinity/images object", args: []string{"affinity", "--quiet", "--images", "v.npy"},
			files: files("v.npy", rawNpy(npyDict("|O", "(4, 2)", false), make([]byte, 64))), want: "dtype"},
		hostile{name: "affinity/images an npz", args: []string{"affinity", "--quiet", "--images", "v.npz"},
			files: files("v.npz", zipOf(member{"x.npy", img, false})), want: "v.npz"},
	)

	// merge: shard files and their metadata.
	s0 := shardOf(shardMeta(0, 2, 0, 2), 2)
	s1 := shardOf(shardMeta(2, 4, 1, 2), 2)
	mg := func(name, want string, fs map[string][]byte, args ...string) hostile {
		if fs == nil {
			fs = map[string][]byte{}
		}
		if _, ok := fs["s0.npz"]; !ok {
			fs["s0.npz"] = s0
		}
		if _, ok := fs["s1.npz"]; !ok {
			fs["s1.npz"] = s1
		}
		return hostile{name: "merge/" + name, args: append([]string{"merge"}, args...), files: fs, want: want}
	}
	lying := func(edits ...string) map[string][]byte {
		return files("s1.npz", shardOf(shardMeta(2, 4, 1, 2, edits...), 2))
	}
	add(
		mg("no shards", "no shard", nil, "--out", "m.npy"),
		mg("no out", "out", nil, "s0.npz", "s1.npz"),
		mg("empty out", "out", nil, "--out", "", "s0.npz", "s1.npz"),
		mg("missing shard", "shard: open none.npz: no such file or directory", nil, "--out", "m.npy", "s0.npz", "none.npz"),
		mg("shard is a directory", "d", nil, "--out", "m.npy", "s0.npz", "d"),
		mg("shard junk", "j.npz: npy: invalid format: not an .npz archive", files("j.npz", "junk"), "--out", "m.npy", "s0.npz", "j.npz"),
		mg("shard is an npy", "a.npy", files("a.npy", f8), "--out", "m.npy", "s0.npz", "a.npy"),
		mg("shard truncated zip", "s1.npz", files("s1.npz", s1[:len(s1)-30]), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("zip under an npy name", "", files("s1.npy", s1), "--out", "m.npy", "s0.npz", "s1.npy"),
		mg("no meta", "not a tapeloop shard", files("s1.npz", zipOf(member{"affinity.npy", f8, false})), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("meta not json", "not a tapeloop shard", files("s1.npz", shardOf("{not json", 2)), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("meta foreign format", "not a tapeloop shard", lying("shard/1", "shard/9"), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("meta too big", "not a tapeloop shard", files("s1.npz", shardOf(shardMeta(2, 4, 1, 2)+strings.Repeat(" ", 1<<17), 2)), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("meta N 0", "make no sense", lying(`"n":4`, `"n":0`), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("meta rows backwards", "make no sense", lying(`"lo":2,"hi":4`, `"lo":4,"hi":2`), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("meta rows past N", "make no sense", lying(`"hi":4`, `"hi":9`), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("meta D 0", "D = 0", lying(`"d":2`, `"d":0`), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("meta dtype", "float16", lying(`"float32"`, `"float16"`), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("meta topk N", "top-k", lying(`"count":2`, `"count":2,"topk":4`), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("meta index past count", "makes no sense", lying(`"index":1`, `"index":7`), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("meta N huge", "", files("s0.npz", shardOf(shardMeta(0, 2, 0, 2, `"n":4`, `"n":4611686018427387904`), 2),
			"s1.npz", shardOf(shardMeta(2, 4611686018427387904, 1, 2, `"n":4`, `"n":4611686018427387904`), 2)), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("meta wrong types", "not a tapeloop shard", lying(`"n":4`, `"n":"four"`), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("duplicate shard", "same rows", nil, "--out", "m.npy", "s0.npz", "s1.npz", "s1.npz"),
		mg("missing rows", "missing", nil, "--out", "m.npy", "s0.npz"),
		mg("overlapping", "overlaps", files("s1.npz", shardOf(shardMeta(1, 4, 1, 2), 3)), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("foreign shard", "different run", lying(`"fp"`, `"other"`), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("member shape", "shape", files("s1.npz", shardOf(shardMeta(2, 4, 1, 2), 3)), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("member missing", "affinity", files("s1.npz", zipOf(member{"meta.json", []byte(shardMeta(2, 4, 1, 2)), false})), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("member junk", "s1.npz", files("s1.npz", zipOf(member{"meta.json", []byte(shardMeta(2, 4, 1, 2)), false},
			member{"affinity.npy", []byte("junk"), false})), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("member object dtype", "dtype", files("s1.npz", zipOf(member{"meta.json", []byte(shardMeta(2, 4, 1, 2)), false},
			member{"affinity.npy", rawNpy(npyDict("|O", "(2, 4)", false), make([]byte, 64)), false})), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("member truncated", "truncated", files("s1.npz", zipOf(member{"meta.json", []byte(shardMeta(2, 4, 1, 2)), false},
			member{"affinity.npy", rawNpy(npyDict("<f4", "(2, 4)", false), make([]byte, 20)), false})), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("member deflated and truncated", "truncated", files("s1.npz", zipOf(member{"meta.json", []byte(shardMeta(2, 4, 1, 2)), true},
			member{"affinity.npy", rawNpy(npyDict("<f4", "(2, 4)", false), make([]byte, 20)), true})), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("member fortran", "order", files("s1.npz", zipOf(member{"meta.json", []byte(shardMeta(2, 4, 1, 2)), false},
			member{"affinity.npy", rawNpy(npyDict("<f4", "(2, 4)", true), make([]byte, 32)), false})), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("member NaN", "NaN", files("s1.npz", zipOf(member{"meta.json", []byte(shardMeta(2, 4, 1, 2)), false},
			member{"affinity.npy", npyOf(npy.Float32, []int{2, 4}, f64s(8, map[int]float64{6: math.NaN()})), false})), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("topk index out of range", "index", files("s0.npz", topkShard(0, 2, 0, 99), "s1.npz", topkShard(2, 4, 1, 0)), "--out", "m.npz", "s0.npz", "s1.npz"),
		mg("out is a shard", "--out", nil, "--out", "s0.npz", "s0.npz", "s1.npz"),
		mg("out is a directory", "directory", files("d/x", ""), "--out", "d", "s0.npz", "s1.npz"),
		mg("out in a missing directory", "no", nil, "--out", "no/m.npy", "s0.npz", "s1.npz"),
		mg("topk under an npy name", ".npz", files("s0.npz", topkShard(0, 2, 0, 1), "s1.npz", topkShard(2, 4, 1, 2)), "--out", "m.npy", "s0.npz", "s1.npz"),
		mg("unknown flag", "frobnicate", nil, "--out", "m.npy", "--frobnicate", "s0.npz", "s1.npz"),
	)

	// drr: flags.
	dr := func(name, want string, args ...string) hostile {
		return hostile{name: "drr/" + name, args: append([]string{"drr", "--quiet"}, withDefaults(args, "--size", "16", "--orbit", "2", "--detector", "4x5")...), want: want}
	}
	add(
		dr("size 0", "--size", "--size", "0"),
		dr("size 1", "--size", "--size", "1"),
		dr("size 1025", "--size", "--size", "1025"),
		dr("size negative", "--size", "--size", "-8"),
		dr("orbit 0", "--orbit", "--orbit", "0"),
		dr("orbit negative", "--orbit", "--orbit", "-1"),
		dr("orbit huge", "--orbit", "--orbit", big),
		dr("orbit a billion", "--orbit", "--orbit", "1000000000", "--detector", "1x1"),
		dr("sdd 0", "sdd", "--sdd", "0"),
		dr("sdd NaN", "sdd", "--sdd", "NaN"),
		dr("sdd Inf", "", "--sdd", "Inf"),
		dr("sid above sdd", "sid", "--sid", "2000"),
		dr("sid 0", "sid", "--sid", "0"),
		dr("sid negative", "sid", "--sid", "-5"),
		dr("detector 0x0", "--detector", "--detector", "0x0"),
		dr("detector 0x5", "--detector", "--detector", "0x5"),
		dr("detector negative", "--detector", "--detector", "-4x5"),
		dr("detector syntax", "--detector", "--detector", "4by5"),
		dr("detector one number", "--detector", "--detector", "4"),
		dr("detector float", "--detector", "--detector", "4.5x5"),
		dr("detector huge", "", "--detector", "100000x100000"),
		dr("detector overflows", "", "--detector", "4294967296x4294967296"),
		dr("pixel 0", "pixel", "--pixel", "0"),
		dr("pixel negative", "pixel", "--pixel", "-1"),
		dr("pixel NaN", "", "--pixel", "NaN"),
		dr("pixel Inf", "", "--pixel", "Inf"),
		dr("pixel tiny, with --out", "at least 1e-06", "--pixel", "1e-200", "--out", "px"),
		dr("method", "joseph", "--method", "joseph"),
		dr("step with siddon", "--step", "--step", "1"),
		dr("step 0", "--step", "--method", "trilinear", "--step", "0"),
		dr("step negative", "--step", "--method", "trilinear", "--step", "-1"),
		dr("step NaN", "--step", "--method", "trilinear", "--step", "NaN"),
		dr("step Inf", "--step", "--method", "trilinear", "--step", "Inf"),
		dr("step 1e-12", "--step", "--method", "trilinear", "--step", "1e-12"),
		dr("step 1e-300", "--step", "--method", "trilinear", "--step", "1e-300"),
		dr("tiny spacing default step", "samples", "--method", "trilinear", "--spacing", "1e-9,1e-9,1e-9"),
		dr("mu-water 0", "--mu-water", "--mu-water", "0"),
		dr("mu-water NaN", "--mu-water", "--mu-water", "NaN"),
		dr("mu-water Inf", "--mu-water", "--mu-water", "Inf"),
		dr("spacing two", "--spacing", "--spacing", "1,2"),
		dr("spacing four", "--spacing", "--spacing", "1,1,1,1"),
		dr("spacing letters", "--spacing", "--spacing", "a,b,c"),
		dr("spacing zero", "spacing", "--spacing", "0,1,1"),
		dr("spacing negative", "spacing", "--spacing", "-1,1,1"),
		dr("spacing NaN", "--spacing", "--spacing", "NaN,1,1"),
		dr("spacing huge", "", "--spacing", "1e308,1e308,1e308"),
		dr("origin Inf", "--origin", "--origin", "Inf,0,0"),
		dr("origin short", "--origin", "--origin", "1,2"),
		dr("series without volume", "--series", "--series", "1.2.3"),
		dr("png without out", "--png", "--png"),
		dr("out is a file", "", "--out", "f"),
		dr("batch 0", "--batch", "--batch", "0"),
		dr("mem-limit tiny", "memory limit", "--mem-limit", "1KiB"),
		dr("dtype without volume", "", "--dtype", "uint8"),
		dr("shape without volume", "", "--shape", "2,2,2"),
		dr("stray argument", "extra", "extra"),
	)
	// Fix the cases above that need a file.
	for i := range cs {
		switch cs[i].name {
		case "drr/out is a file":
			cs[i].files = files("f", "x")
		}
	}

	// drr: geometry files.
	gm := func(name, want, not string, doc []byte) hostile {
		return hostile{name: "geometry/" + name, args: []string{"drr", "--quiet", "--size", "16", "--geometry", "g.json"},
			files: files("g.json", doc), want: want, not: not}
	}
	add(
		gm("empty file", "empty", "EOF", nil),
		gm("whitespace", "empty", "EOF", []byte("  \n\t\n")),
		gm("garbage after", "after", "", append(geom(pose()), " garbage"...)),
		gm("two documents", "after", "", append(geom(pose()), geom(pose())...)),
		gm("not json", "geometry", "", []byte("poses: 1")),
		gm("unterminated", "geometry", "", []byte(`{"poses": [`)),
		gm("an array", "geometry", "", []byte(`[1, 2]`)),
		gm("poses null", "no poses", "", []byte(`{"poses": null}`)),
		gm("no poses", "no poses", "", []byte(`{"poses": []}`)),
		gm("unknown top-level field", "extra", "", []byte(`{"poses": [`+pose()+`], "extra": 1}`)),
		gm("unknown pose field", "tilt", "", geom(pose(`"rows"`, `"tilt": 3, "rows"`))),
		gm("missing rows", "rows", "", geom(pose(`"rows": 4, `, ``))),
		gm("missing source", "source", "", geom(pose(`"source": [8,8,500], `, ``))),
		gm("2^62 pixels", "", "", geom(pose(`"rows": 4`, `"rows": 2147483648`, `"cols": 5`, `"cols": 2147483648`))),
		gm("2^64 pixels", "", "", geom(pose(`"rows": 4`, `"rows": 4294967296`, `"cols": 5`, `"cols": 4294967296`))),
		gm("10^10 pixels", "", "", geom(pose(`"rows": 4`, `"rows": 100000`, `"cols": 5`, `"cols": 100000`))),
		gm("rows negative", "rows", "", geom(pose(`"rows": 4`, `"rows": -4`))),
		gm("rows float", "geometry", "", geom(pose(`"rows": 4`, `"rows": 4.5`))),
		gm("rows beyond int64", "geometry", "", geom(pose(`"rows": 4`, `"rows": 1e30`))),
		gm("pixel negative", "pixel", "", geom(pose(`"pixel": [1,1]`, `"pixel": [-1,1]`))),
		gm("pixel NaN", "geometry", "", geom(pose(`"pixel": [1,1]`, `"pixel": [NaN,1]`))),
		gm("number overflows", "geometry", "", geom(pose(`[8,8,500]`, `[8,8,1e400]`))),
		gm("coordinate huge", "", "", geom(pose(`[8,8,500]`, `[8,8,1e300]`))),
		gm("pixel huge", "", "", geom(pose(`"pixel": [1,1]`, `"pixel": [1e300,1e300]`))),
		gm("source a string", "geometry", "", geom(pose(`[8,8,500]`, `"here"`))),
		gm("short vector", "3 numbers", "", geom(pose(`"u": [1,0,0]`, `"u": [1,0]`))),
		gm("zero u", "zero u", "", geom(pose(`"u": [1,0,0]`, `"u": [0,0,0]`))),
		gm("parallel u and v", "parallel", "", geom(pose(`"v": [0,1,0]`, `"v": [2,0,0]`))),
		gm("two detector sizes", "detector", "", geom(pose(), pose(`"cols": 5`, `"cols": 6`))),
		gm("source on the detector", "", "", geom(pose(`[8,8,500]`, `[8,8,-500]`))),
		hostile{name: "geometry/a directory", args: []string{"drr", "--quiet", "--size", "16", "--geometry", "d"}, dirs: []string{"d"}, want: "d"},
		hostile{name: "geometry/missing", args: []string{"drr", "--quiet", "--size", "16", "--geometry", "none.json"}, want: "none.json"},
		hostile{name: "geometry/with orbit flags", args: []string{"drr", "--quiet", "--size", "16", "--geometry", "g.json", "--orbit", "4"},
			files: files("g.json", geom(pose())), want: "--orbit"},
		hostile{name: "geometry/step too fine for the rays", args: []string{"drr", "--quiet", "--size", "16", "--geometry", "g.json", "--method", "trilinear", "--step", "1e-6"},
			files: files("g.json", geom(pose())), want: "--step"},
	)

	// Volumes: .npy, NIfTI, MetaImage, raw, DICOM, through drr and wavelet.
	vol := func(name, path, want, not string, b []byte, extra ...string) hostile {
		return hostile{name: "volume/" + name, args: append([]string{"drr", "--quiet", "--orbit", "2", "--detector", "4x5", "--volume", path}, extra...),
			files: files(path, b), want: want, not: not}
	}
	v3 := npyOf(npy.Float32, []int{2, 3, 4}, f64s(24, nil))
	n := goodNIfTI()
	nBomb := n
	nBomb.dim = [8]int16{3, 1000, 1000, 1000, 1, 1, 1, 1}
	nBomb.data = make([]byte, 10<<20)
	nTrunc := n
	nTrunc.data = n.data[:10]
	with := func(f func(*nifti)) []byte { m := goodNIfTI(); f(&m); return niftiOf(m) }
	mhd := func(extra ...string) []string {
		return append([]string{"ObjectType = Image", "NDims = 3", "DimSize = 2 3 4", "ElementType = MET_SHORT"}, extra...)
	}
	add(
		vol("unknown format", "v.xyz", "unknown format", "", []byte("x")),
		vol("npy empty file", "v.npy", "v.npy", "", nil),
		hostile{name: "volume/missing", args: []string{"drr", "--quiet", "--volume", "none.npy"}, want: "none.npy"},
		vol("out is the volume", "v.npy", "--out", "", v3, "--out", "v.npy"),
		vol("size with volume", "v.npy", "--size", "", v3, "--size", "16"),
		vol("orbit with geometry", "v.npy", "--geometry", "", v3, "--geometry", "v.npy", "--sdd", "900"),
		vol("raw lies", "v.raw", "holds 8 bytes", "", make([]byte, 8), "--shape", "600,600,600", "--dtype", "float32"),
		vol("npy over the limit", "v.npy", "memory limit", "", rawNpy(npyDict("|u1", "(64, 64, 64)", false), make([]byte, 64*64*64)), "--mem-limit", "512KiB"),
		vol("npy 2-d", "v.npy", "3-D", "", npyOf(npy.Float32, []int{4, 6}, make([]float64, 24))),
		vol("npy 4-d", "v.npy", "3-D", "", npyOf(npy.Float32, []int{1, 2, 3, 4}, make([]float64, 24))),
		vol("npy empty axis", "v.npy", "empty", "", rawNpy(npyDict("<f4", "(2, 0, 4)", false), nil)),
		vol("npy NaN", "v.npy", "NaN", "", npyOf(npy.Float32, []int{2, 3, 4}, f64s(24, map[int]float64{7: math.NaN()}))),
		vol("npy Inf", "v.npy", "Inf", "", npyOf(npy.Float64, []int{2, 3, 4}, f64s(24, map[int]float64{23: math.Inf(1)}))),
		vol("npy truncated", "v.npy", "truncated", "", v3[:len(v3)-3]),
		vol("npy lies", "v.npy", "truncated", "", rawNpy(npyDict("<f4", "(1000, 1000, 1000)", false), make([]byte, 64))),
		vol("npy too many voxels", "v.npy", "", "", rawNpy(npyDict("|u1", "(100000, 100000, 100000)", false), make([]byte, 64))),
		vol("npy object", "v.npy", "dtype", "", rawNpy(npyDict("|O", "(2, 2, 2)", false), make([]byte, 64))),
		vol("npy fortran truncated", "v.npy", "truncated", "", rawNpy(npyDict("<f4", "(2, 3, 4)", true), make([]byte, 90))),
		vol("nifti short", "v.nii", "truncated", "", niftiOf(n)[:100]),
		vol("nifti sizeof_hdr", "v.nii", "NIfTI", "", with(func(m *nifti) { m.sizeof = 540 })),
		vol("nifti magic", "v.nii", "magic", "", with(func(m *nifti) { m.magic = "xyz" })),
		vol("nifti pair", "v.nii", "ni1", "", with(func(m *nifti) { m.magic = "ni1" })),
		vol("nifti 2-d", "v.nii", "3-D", "", with(func(m *nifti) { m.dim[0] = 2 })),
		vol("nifti dim 9", "v.nii", "dims", "", with(func(m *nifti) { m.dim[0] = 9 })),
		vol("nifti series", "v.nii", "series", "", with(func(m *nifti) { m.dim[0], m.dim[4] = 4, 2 })),
		vol("nifti negative dim", "v.nii", "dims", "", with(func(m *nifti) { m.dim[2] = -3 })),
		vol("nifti rgb", "v.nii", "datatype", "", with(func(m *nifti) { m.datatype = 128 })),
		vol("nifti complex", "v.nii", "datatype", "", with(func(m *nifti) { m.datatype = 32 })),
		vol("nifti vox_offset NaN", "v.nii", "vox_offset", "", with(func(m *nifti) { m.voxOffset = float32(math.NaN()) })),
		vol("nifti vox_offset small", "v.nii", "vox_offset", "", with(func(m *nifti) { m.voxOffset = 100 })),
		vol("nifti vox_offset huge", "v.nii", "vox_offset", "", with(func(m *nifti) { m.voxOffset = 1 << 30 })),
		vol("nifti truncated", "v.nii", "truncated", "", niftiOf(nTrunc)),
		vol("nifti pixdim NaN", "v.nii", "pixdim", "", with(func(m *nifti) { m.pixdim[2] = float32(math.NaN()) })),
		vol("nifti slope Inf", "v.nii", "voxel", "", with(func(m *nifti) { m.slope = float32(math.Inf(1)) })),
		vol("nifti lies", "v.nii", "truncated", "", with(func(m *nifti) { m.dim = [8]int16{3, 600, 600, 600, 1, 1, 1, 1} })),
		vol("nii.gz not gzip", "v.nii.gz", "v.nii.gz", "", niftiOf(n)),
		vol("nii.gz truncated stream", "v.nii.gz", "v.nii.gz", "", gz(niftiOf(n))[:60]),
		vol("nii.gz truncated data", "v.nii.gz", "truncated", "", gz(niftiOf(nTrunc))),
		hostile{name: "volume/nii.gz bomb", args: []string{"drr", "--quiet", "--orbit", "2", "--detector", "4x5", "--volume", "v.nii.gz"},
			files: files("v.nii.gz", gz(niftiOf(nBomb))), defaultLimit: true, want: "v.nii.gz"},
		hostile{name: "volume/nii.gz over the limit", args: []string{"drr", "--quiet", "--orbit", "2", "--detector", "4x5", "--volume", "v.nii.gz", "--mem-limit", "16MiB"},
			files: files("v.nii.gz", gz(niftiOf(nBomb))), want: "limit"},
		hostile{name: "volume/nii.gz bomb in wavelet", args: []string{"wavelet", "--quiet", "--volume", "v.nii.gz"},
			files: files("v.nii.gz", gz(niftiOf(nBomb))), defaultLimit: true, want: "v.nii.gz"},
		vol("mha without ElementDataFile", "v.mha", "ElementDataFile", "\x00", meta([]byte("\x00\x01\x02\xff\xfe binary = \x00\n\x00\x00"), mhd()...)),
		vol("mha NDims 2", "v.mha", "NDims", "", meta(nil, "NDims = 2", "DimSize = 2 3", "ElementType = MET_SHORT", "ElementDataFile = LOCAL")),
		vol("mha DimSize 0", "v.mha", "DimSize", "", meta(nil, "NDims = 3", "DimSize = 0 3 4", "ElementType = MET_SHORT", "ElementDataFile = LOCAL")),
		vol("mha DimSize huge", "v.mha", "DimSize", "", meta(nil, "NDims = 3", "DimSize = 1e300 3 4", "ElementType = MET_SHORT", "ElementDataFile = LOCAL")),
		vol("mha DimSize short", "v.mha", "DimSize", "", meta(nil, "NDims = 3", "DimSize = 2 3", "ElementType = MET_SHORT", "ElementDataFile = LOCAL")),
		vol("mha ElementType", "v.mha", "MET_LONG", "", meta(nil, "NDims = 3", "DimSize = 2 3 4", "ElementType = MET_LONG", "ElementDataFile = LOCAL")),
		vol("mha channels", "v.mha", "channels", "", meta(nil, append(mhd(), "ElementNumberOfChannels = 3", "ElementDataFile = LOCAL")...)),
		vol("mha LIST", "v.mha", `ElementDataFile "LIST": the voxels are in one file per slice`, "", meta(nil, append(mhd(), "ElementDataFile = LIST")...)),
		vol("mha LIST 2D", "v.mha", `ElementDataFile "LIST 2D": the voxels are in one file per slice`, "", meta(nil, append(mhd(), "ElementDataFile = LIST 2D")...)),
		vol("mha pattern", "v.mha", "one file per slice, which tapeloop does not read", "", meta(nil, append(mhd(), "ElementDataFile = slice%03d.raw 1 4 1")...)),
		vol("mhd data file missing", "v.mhd", "data file", "", meta(nil, append(mhd(), "ElementDataFile = v.raw")...)),
		hostile{name: "volume/mhd data file elsewhere, too short", args: []string{"drr", "--quiet", "--orbit", "2", "--detector", "4x5", "--volume", "h/v.mhd"},
			files: files("h/v.mhd", meta(nil, append(mhd(), "ElementDataFile = ../short.raw")...), "short.raw", []byte("five!")), want: "its data file short.raw holds 5"},
		vol("mha truncated", "v.mha", "truncated", "", meta(make([]byte, 10), append(mhd(), "ElementDataFile = LOCAL")...)),
		vol("mha lies", "v.mha", "truncated", "", meta(make([]byte, 10), "NDims = 3", "DimSize = 600 600 600", "ElementType = MET_FLOAT", "ElementDataFile = LOCAL")),
		vol("mha compressed junk", "v.mha", "compressed", "", meta([]byte("not zlib at all"), append(mhd(), "CompressedData = True", "ElementDataFile = LOCAL")...)),
		vol("mha compressed truncated", "v.mha", "truncated", "", meta(zlibOf(make([]byte, 10)), append(mhd(), "CompressedData = True", "ElementDataFile = LOCAL")...)),
		hostile{name: "volume/mha compressed bomb", args: []string{"drr", "--quiet", "--orbit", "2", "--detector", "4x5", "--volume", "v.mha"},
			files:        files("v.mha", meta(zlibOf(make([]byte, 10<<20)), "NDims = 3", "DimSize = 1000 1000 1000", "ElementType = MET_FLOAT", "CompressedData = True", "ElementDataFile = LOCAL")),
			defaultLimit: true, want: "v.mha"},
		vol("mha line too long", "v.mha", "too long", "", meta(nil, "NDims = 3", "Comment = "+strings.Repeat("x", 5000), "ElementDataFile = LOCAL")),
		vol("mha endless header", "v.mha", "ElementDataFile", "", meta(nil, strings.Split(strings.Repeat("Comment = x\n", 300), "\n")...)),
		vol("mha spacing NaN", "v.mha", "spacing", "", meta(make([]byte, 48), append(mhd(), "ElementSpacing = nan 1 1", "ElementDataFile = LOCAL")...)),
		vol("mha spacing zero", "v.mha", "spacing", "", meta(make([]byte, 48), append(mhd(), "ElementSpacing = 0 1 1", "ElementDataFile = LOCAL")...)),
		vol("mha offset Inf", "v.mha", "origin", "", meta(make([]byte, 48), append(mhd(), "Offset = inf 0 0", "ElementDataFile = LOCAL")...)),
		vol("mha empty", "v.mha", "ElementDataFile", "", nil),
		vol("raw without shape", "v.raw", "--shape", "", make([]byte, 8), "--dtype", "uint8"),
		vol("raw without dtype", "v.raw", "--dtype", "", make([]byte, 8), "--shape", "2,2,2"),
		vol("raw dtype", "v.raw", "complex", "", make([]byte, 8), "--shape", "2,2,2", "--dtype", "complex64"),
		vol("raw size", "v.raw", "needs 16", "", make([]byte, 8), "--shape", "2,2,2", "--dtype", "uint16"),
		vol("raw shape overflows", "v.raw", "", "needs 0", make([]byte, 8), "--shape", "4294967296,4294967296,1", "--dtype", "uint8"),
		vol("raw shape huge", "v.raw", "voxels", "", make([]byte, 8), "--shape", "2097152,2097152,2097152", "--dtype", "uint8"),
		vol("raw shape zero", "v.raw", "--shape", "", make([]byte, 8), "--shape", "0,2,2", "--dtype", "uint8"),
		vol("raw shape float", "v.raw", "--shape", "", make([]byte, 8), "--shape", "2.5,2,2", "--dtype", "uint8"),
		vol("raw shape short", "v.raw", "--shape", "", make([]byte, 8), "--shape", "2,2", "--dtype", "uint8"),
		vol("raw NaN", "v.raw", "NaN", "", bin.LittleEndian.AppendUint32(make([]byte, 28), math.Float32bits(float32(math.NaN()))), "--shape", "2,2,2", "--dtype", "float32"),
		hostile{name: "volume/dicom empty directory", args: []string{"drr", "--quiet", "--volume", "d"}, dirs: []string{"d"}, want: "d"},
		hostile{name: "volume/dicom junk directory", args: []string{"drr", "--quiet", "--volume", "d"},
			files: files("d/a", "junk", "d/b", "more junk"), want: "d"},
		hostile{name: "volume/dicom magic and junk", args: []string{"drr", "--quiet", "--volume", "x.dcm"},
			files: files("x.dcm", append(append(make([]byte, 128), "DICM"...), bytes.Repeat([]byte{0xff}, 300)...)), want: "x.dcm"},
		hostile{name: "volume/dicom truncated slice", args: []string{"drr", "--quiet", "--volume", "d"},
			files: files("d/1.dcm", dicomSlice("1.2.3", 1, 0), "d/2.dcm", dicomSlice("1.2.3", 2, 1)[:200]), want: "d"},
		hostile{name: "volume/dicom two series", args: []string{"drr", "--quiet", "--volume", "d"},
			files: files("d/1.dcm", dicomSlice("1.2.3", 1, 0), "d/2.dcm", dicomSlice("1.2.3", 2, 1),
				"d/3.dcm", dicomSlice("1.2.4", 1, 0), "d/4.dcm", dicomSlice("1.2.4", 2, 1)), want: "--series"},
		hostile{name: "volume/dicom unknown series", args: []string{"drr", "--quiet", "--volume", "d", "--series", "9.9"},
			files: files("d/1.dcm", dicomSlice("1.2.3", 1, 0), "d/2.dcm", dicomSlice("1.2.3", 2, 1)), want: "9.9"},
		hostile{name: "volume/dicom uneven spacing", args: []string{"drr", "--quiet", "--volume", "d"},
			files: files("d/1.dcm", dicomSlice("1.2.3", 1, 0), "d/2.dcm", dicomSlice("1.2.3", 2, 1), "d/3.dcm", dicomSlice("1.2.3", 3, 5)), want: "spacing"},
		hostile{name: "volume/dicom same position twice", args: []string{"drr", "--quiet", "--volume", "d"},
			files: files("d/1.dcm", dicomSlice("1.2.3", 1, 0), "d/2.dcm", dicomSlice("1.2.3", 2, 0)), want: "d"},
	)

	// wavelet.
	wv := func(name, want string, args ...string) hostile {
		return hostile{name: "wavelet/" + name, args: append([]string{"wavelet", "--quiet"}, withDefaults(args, "--size", "8x8x8")...), want: want}
	}
	add(
		wv("size 0", "--size", "--size", "0x0x0"),
		wv("size two axes", "--size", "--size", "8x8"),
		wv("size letters", "--size", "--size", "axbxc"),
		wv("size negative", "--size", "--size", "-8x8x8"),
		wv("size huge", "--size", "--size", "100000x100000x100000"),
		wv("size overflows", "--size", "--size", big+"x4x1"),
		wv("a 0", "", "--a", "0"),
		wv("a negative", "", "--a", "-1"),
		wv("a NaN", "", "--a", "NaN"),
		wv("a Inf", "", "--a", "Inf"),
		wv("a huge", "", "--a", "1e6"),
		wv("a whose square overflows, axes aligned", "memory limit", "--a", "1e155", "--theta", "0", "--phi", "0", "--xi", "1"),
		wv("a whose square overflows, wrap", "memory limit", "--a", "1e300", "--theta", "0", "--phi", "0", "--xi", "1", "--boundary", "wrap"),
		wv("theta letters", "theta", "--theta", "abc"),
		wv("theta empty", "theta", "--theta", ""),
		wv("theta empty item", "theta", "--theta", "1,,2"),
		wv("theta two parts", "theta", "--theta", "1:2"),
		wv("theta count 0", "COUNT", "--theta", "0:1:0"),
		wv("theta count negative", "COUNT", "--theta", "0:1:-1"),
		wv("theta count huge", "COUNT", "--theta", "0:1:1000000000"),
		wv("theta count letters", "COUNT", "--theta", "0:1:abc"),
		wv("theta pi over 0", "theta", "--theta", "pi/0"),
		wv("theta NaN", "theta", "--theta", "nan"),
		wv("theta Inf", "theta", "--theta", "inf"),
		wv("phi letters", "phi", "--phi", "pie"),
		wv("xi 0 failing on non-finite", "ξ = 0", "--xi", "0", "--fail-on-nonfinite"),
		wv("xi negative failing on non-finite", "ξ = -1", "--xi", "-1", "--fail-on-nonfinite"),
		wv("reach negative", "--reach -1: want a half-width in voxels", "--kernel", "exp(-q)", "--reach", "-1"),
		wv("reach 0", "--reach 0: want a half-width in voxels, at least 1 (leave --reach out", "--kernel", "exp(-q)", "--reach", "0"),
		wv("reach without a kernel", "--reach: it is for --kernel", "--reach", "3"),
		wv("reach not a number", `--reach "far": want a half-width in voxels, or volume`, "--kernel", "exp(-q)", "--reach", "far"),
		wv("reach volume without a kernel", "--reach: it is for --kernel", "--reach", "volume"),
		wv("indexing", `--indexing "yx": want ij`, "--indexing", "yx"),
		wv("save-response without a file", "--save-response \"0,0,1\": want THETA,PHI,XI:FILE.npy", "--save-response", "0,0,1"),
		wv("save-response not .npy", "want THETA,PHI,XI:FILE.npy", "--save-response", "0,0,1:g.csv"),
		wv("save-response two numbers", "want THETA,PHI,XI:FILE.npy", "--save-response", "0,1:g.npy"),
		wv("save-response not a number", "--save-response \"0,x,1:g.npy\"", "--save-response", "0,x,1:g.npy"),
		wv("save-response not in the sweep", "is not a combination of the sweep", "--save-response", "0.5,0,1:g.npy"),
		wv("save-response without a kernel", "ξ = 0", "--xi", "0,1", "--save-response", "0,0,0:g.npy"),
		wv("save-response twice", "is named twice", "--save-response", "0,0,1:g.npy", "--save-response", "0,0,2:g.npy"),
		wv("save-response in no directory", "directory", "--save-response", "0,0,1:nodir/g.npy"),
		wv("kernel past the volume", "--kernel: θ = 0, φ = 0, ξ = 1: it does not decay within the volume", "--theta", "0", "--phi", "0", "--xi", "1", "--kernel", "exp(-(x^2+y^2+z^2)/200)"),
		wv("too many combinations", "combinations", "--theta", "0:1:4096", "--phi", "0:1:4096", "--xi", "1,2"),
		wv("boundary", "mirror", "--boundary", "mirror"),
		wv("seed negative", "seed", "--seed", "-1"),
		wv("stray argument", "extra", "extra"),
		wv("out is a directory", "directory", "--out", "."),
		wv("mem-limit tiny", "memory limit", "--mem-limit", "1KiB"),
		hostile{name: "wavelet/volume missing", args: []string{"wavelet", "--quiet", "--volume", "none.npy"}, want: "none.npy"},
		hostile{name: "wavelet/size with volume", args: []string{"wavelet", "--quiet", "--volume", "v.npy", "--size", "4x4x4"},
			files: files("v.npy", v3), want: "--size"},
		hostile{name: "wavelet/volume 2-d", args: []string{"wavelet", "--quiet", "--volume", "v.npy"},
			files: files("v.npy", npyOf(npy.Float32, []int{4, 6}, make([]float64, 24))), want: "3-D"},
		hostile{name: "wavelet/volume NaN", args: []string{"wavelet", "--quiet", "--volume", "v.npy"},
			files: files("v.npy", npyOf(npy.Float32, []int{2, 3, 4}, f64s(24, map[int]float64{4: math.NaN()}))), want: "NaN"},
		hostile{name: "wavelet/out is the volume", args: []string{"wavelet", "--quiet", "--volume", "v.npy", "--out", "v.npy"},
			files: files("v.npy", v3), want: "--out"},
		hostile{name: "wavelet/volume is a raw", args: []string{"wavelet", "--quiet", "--volume", "v.raw"},
			files: files("v.raw", make([]byte, 8)), want: "v.raw"},
	)

	// wavelet and drr: --shard and --shards.
	for _, w := range []struct {
		name string
		hf   func(name, want string, args ...string) hostile
	}{{"wavelet", wv}, {"drr", dr}} {
		sh := func(name, want string, args ...string) hostile {
			c := w.hf("shard "+name, want, args...)
			c.name = w.name + "/shard " + name
			return c
		}
		add(
			sh("i=n", "3/3", "--shard", "3/3", "--out", "s.npz"),
			sh("negative", "-1/2", "--shard", "-1/2", "--out", "s.npz"),
			sh("n=0", "1/0", "--shard", "1/0", "--out", "s.npz"),
			sh("letters", "a/b", "--shard", "a/b", "--out", "s.npz"),
			sh("no slash", "--shard", "--shard", "1", "--out", "s.npz"),
			sh("empty", "--shard", "--shard", "", "--out", "s.npz"),
			sh("more than items", "no ", "--shard", "5/99", "--out", "s.npz"),
			sh("without out", "--out", "--shard", "0/2"),
			sh("under a csv name", ".npz", "--shard", "0/2", "--out", "s.csv"),
			sh("and shards", "give one", "--shard", "0/2", "--shards", "2", "--out", "s.npz"),
			sh("shards without env", "SLURM_ARRAY_TASK_ID", "--shards", "2", "--out", "s.npz"),
			sh("shards 0", "--shards", "--shards", "0", "--out", "s.npz"),
		)
		c := sh("env outside", "outside", "--shards", "2", "--out", "s.npz")
		c.env = []string{"SLURM_ARRAY_TASK_ID=5"}
		add(c)
		c = sh("env not a number", "JOB_COMPLETION_INDEX", "--shards", "2", "--out", "s.npz")
		c.env = []string{"JOB_COMPLETION_INDEX=abc"}
		add(c)
	}

	// merge: wavelet and drr shards and their metadata.
	w0 := waveletShard(rangeMeta("wavelet", 0, 1, 0, 2), "0,0,1,1,2,3,4\n")
	w1 := waveletShard(rangeMeta("wavelet", 1, 2, 1, 2), "0,0,2,1,2,3,4\n")
	d0, d1 := drrShard(rangeMeta("drr", 0, 1, 0, 2), 1), drrShard(rangeMeta("drr", 1, 2, 1, 2), 1)
	rm := func(name, want string, fs map[string][]byte, args ...string) hostile {
		for k, v := range map[string][]byte{"w0.npz": w0, "w1.npz": w1, "d0.npz": d0, "d1.npz": d1, "s0.npz": s0} {
			if _, ok := fs[k]; !ok {
				fs[k] = v
			}
		}
		return hostile{name: "merge/" + name, args: append([]string{"merge"}, args...), files: fs, want: want}
	}
	wlie := func(edits ...string) map[string][]byte {
		return files("w1.npz", waveletShard(rangeMeta("wavelet", 1, 2, 1, 2, edits...), "0,0,2,1,2,3,4\n"))
	}
	add(
		rm("wavelet missing", "missing", files(), "--out", "m.csv", "w0.npz"),
		rm("wavelet duplicate", "same combinations", files(), "--out", "m.csv", "w0.npz", "w1.npz", "w1.npz"),
		rm("wavelet overlap", "overlaps", wlie(`"lo":1`, `"lo":0`), "--out", "m.csv", "w0.npz", "w1.npz"),
		rm("wavelet foreign", "different run", wlie(`"fp"`, `"other"`), "--out", "m.csv", "w0.npz", "w1.npz"),
		rm("wavelet other header", `different run than w0.npz: columns "theta,phi,xi,energy,std,max,l1" / "theta,phi,xi,energy,std,max,wavelet_energy"`, wlie(`wavelet_energy`, `l1`), "--out", "m.csv", "w0.npz", "w1.npz"),
		rm("wavelet and affinity", "affinity", files(), "--out", "m.csv", "w0.npz", "s0.npz"),
		rm("wavelet and drr", "drr", files(), "--out", "m.csv", "w0.npz", "d1.npz"),
		rm("unknown workload", "workload", wlie(`"workload":"wavelet"`, `"workload":"interp"`), "--out", "m.csv", "w0.npz", "w1.npz"),
		rm("wavelet items 0", "make no sense", wlie(`"items":2`, `"items":0`), "--out", "m.csv", "w0.npz", "w1.npz"),
		rm("wavelet index past count", "makes no sense", wlie(`"index":1`, `"index":5`), "--out", "m.csv", "w0.npz", "w1.npz"),
		rm("wavelet no header", "header", wlie(`,"header":"theta,phi,xi,energy,std,max,wavelet_energy"`, ``), "--out", "m.csv", "w0.npz", "w1.npz"),
		rm("wavelet no rows", "rows.csv", files("w1.npz", zipOf(member{"meta.json", []byte(rangeMeta("wavelet", 1, 2, 1, 2)), false})), "--out", "m.csv", "w0.npz", "w1.npz"),
		rm("wavelet rows short", "lines", files("w1.npz", waveletShard(rangeMeta("wavelet", 1, 2, 1, 2), "")), "--out", "m.csv", "w0.npz", "w1.npz"),
		rm("wavelet rows long", "lines", files("w1.npz", waveletShard(rangeMeta("wavelet", 1, 2, 1, 2), "0,0,2,1,2,3,4\n0,0,2,1,2,3,4\n")), "--out", "m.csv", "w0.npz", "w1.npz"),
		rm("wavelet rows columns", "columns", files("w1.npz", waveletShard(rangeMeta("wavelet", 1, 2, 1, 2), "0,0,2\n")), "--out", "m.csv", "w0.npz", "w1.npz"),
		rm("wavelet rows unterminated", "lines", files("w1.npz", waveletShard(rangeMeta("wavelet", 1, 2, 1, 2), "0,0,2,1,2,3,4")), "--out", "m.csv", "w0.npz", "w1.npz"),
		rm("wavelet out is a shard", "--out", files(), "--out", "w0.npz", "w0.npz", "w1.npz"),
		rm("drr missing", "missing", files(), "--out", "m", "d1.npz"),
		rm("drr detector 0", "detector", files("d1.npz", drrShard(rangeMeta("drr", 1, 2, 1, 2, `"rows":2`, `"rows":0`), 1)), "--out", "m", "d0.npz", "d1.npz"),
		rm("drr member shape", "want little-endian float32", files("d1.npz", drrShard(rangeMeta("drr", 1, 2, 1, 2), 2)), "--out", "m", "d0.npz", "d1.npz"),
		rm("drr member missing", "drr", files("d1.npz", zipOf(member{"meta.json", []byte(rangeMeta("drr", 1, 2, 1, 2)), false})), "--out", "m", "d0.npz", "d1.npz"),
		rm("drr member float64", "float32", files("d1.npz", zipOf(member{"meta.json", []byte(rangeMeta("drr", 1, 2, 1, 2)), false},
			member{"drr.npy", npyOf(npy.Float64, []int{1, 2, 3}, make([]float64, 6)), false})), "--out", "m", "d0.npz", "d1.npz"),
		rm("drr member truncated", "truncated", files("d1.npz", zipOf(member{"meta.json", []byte(rangeMeta("drr", 1, 2, 1, 2)), false},
			member{"drr.npy", rawNpy(npyDict("<f4", "(1, 2, 3)", false), make([]byte, 10)), false})), "--out", "m", "d0.npz", "d1.npz"),
		rm("drr out is a file", "is a file", files("m", "x"), "--out", "m", "d0.npz", "d1.npz"),
	)

	// The users' formulas: every mistake named, with its column, before
	// any work.
	smallArgs := []string{"--n", "9", "--height", "2", "--width", "3"}
	aff := func(name, want string, args ...string) hostile {
		return hostile{name: "formula/affinity " + name, args: append(append([]string{"affinity", "--quiet"}, smallArgs...), args...), want: want}
	}
	add(
		aff("unknown function", "column 5: unknown function abss", "--formula", "sum(abss(a-b))"),
		aff("unknown name", "column 5: unknown name c", "--formula", "sum(c*a)"),
		aff("missing parameter", "--param s=VALUE", "--formula", "exp(-sum((a-b)^2)/(2*s^2))"),
		aff("parameter twice", "given twice", "--formula", "sum(a*b)*s", "--param", "s=1", "--param", "s=2"),
		aff("parameter not a number", "not a finite number", "--formula", "sum(a*b)*s", "--param", "s=x"),
		aff("parameter infinite", "not a finite number", "--formula", "sum(a*b)*s", "--param", "s=inf"),
		aff("parameter without name", "name=value", "--formula", "sum(a*b)", "--param", "=3"),
		aff("parameter unused", "parameter t is not used", "--formula", "sum(a*b)", "--param", "t=1"),
		aff("parameter without formula", "--param", "--param", "t=1"),
		aff("parameter named as a variable", "name of a variable", "--formula", "sum(a*b)", "--param", "a=1"),
		aff("wrong arity", "where takes 3 arguments, got 2", "--formula", "sum(where(a > b, a))"),
		aff("does not reduce", "must reduce to one number", "--formula", "abs(a-b)"),
		aff("syntax error", "column 8: a parenthesis is not closed", "--formula", "sum(a-b"),
		aff("python power", "write powers as x^y", "--formula", "sum((a-b)**2)"),
		aff("empty formula", "--formula: empty value", "--formula", " "),
		aff("with metric", "--metric is not used with --formula", "--formula", "sum(a*b)", "--metric", "l1"),
		aff("bad method", "--method", "--formula", "sum(a*b)", "--method", "fast"),
		aff("method without formula", "--method", "--method", "direct"),
		aff("nonfinite fails", "non-finite", "--formula", "sum(a*b)/0", "--fail-on-nonfinite"),
		aff("nonfinite fails direct", "non-finite", "--formula", "log(sum(a-b))", "--method", "direct", "--fail-on-nonfinite"),
		hostile{name: "formula/affinity formula on a GPU", args: append(append([]string{"affinity", "--quiet", "--device", "cuda"}, smallArgs...),
			"--formula", "sum(a*b)"), want: ""},
		hostile{name: "formula/interp reduce unknown", args: []string{"interp", "--quiet", "--points", "10", "--reduce", "maximum(v)"}, want: "unknown function maximum"},
		hostile{name: "formula/interp reduce vector", args: []string{"interp", "--quiet", "--points", "10", "--reduce", "v^2"}, want: "must reduce"},
		hostile{name: "formula/interp reduce of x", args: []string{"interp", "--quiet", "--points", "10", "--reduce", "sum(x)"}, want: "no vector axis"},
		hostile{name: "formula/interp nonfinite", args: []string{"interp", "--quiet", "--points", "10", "--reduce", "log(sum(v)-1e9)", "--fail-on-nonfinite"}, want: "non-finite"},
		hostile{name: "formula/interp param without formula", args: []string{"interp", "--quiet", "--points", "10", "--param", "s=1"}, want: "--param"},
		hostile{name: "formula/drr mu with hu", args: []string{"drr", "--quiet", "--orbit", "1", "--detector", "4x4", "--mu", "h", "--hu", "--volume", "v.npy"},
			files: files("v.npy", npyOf(npy.Float32, []int{2, 3, 4}, make([]float64, 24))), want: "--mu and --hu"},
		hostile{name: "formula/drr mu unknown name", args: []string{"drr", "--quiet", "--size", "8", "--orbit", "1", "--detector", "4x4", "--mu", "hu*2"}, want: "unknown name hu"},
		hostile{name: "formula/drr mu not finite", args: []string{"drr", "--quiet", "--size", "8", "--orbit", "1", "--detector", "4x4", "--mu", "1/h"}, want: "non-finite"},
		hostile{name: "formula/drr post nonfinite", args: []string{"drr", "--quiet", "--size", "8", "--orbit", "1", "--detector", "4x4", "--post", "log(p-1e6)", "--fail-on-nonfinite"}, want: "non-finite"},
		hostile{name: "formula/drr param unused by both", args: []string{"drr", "--quiet", "--size", "8", "--orbit", "1", "--detector", "4x4", "--post", "p*k", "--param", "k=1", "--param", "j=2"}, want: "--param j"},
		hostile{name: "formula/wavelet kernel reduces", args: []string{"wavelet", "--quiet", "--size", "4x4x4", "--kernel", "q - mean(q)"}, want: "cannot reduce"},
		hostile{name: "formula/wavelet stat without name", args: []string{"wavelet", "--quiet", "--size", "4x4x4", "--stat", "sum(g)"}, want: "name=formula"},
		hostile{name: "formula/wavelet stat name taken", args: []string{"wavelet", "--quiet", "--size", "4x4x4", "--stat", "theta=sum(g^2)"}, want: "theta is taken by a built-in column; give the statistic another name"},
		hostile{name: "formula/wavelet stat twice", args: []string{"wavelet", "--quiet", "--size", "4x4x4", "--stat", "e=sum(g)", "--stat", "e=max(g)"}, want: "e is taken by another statistic; give each statistic its own name"},
		hostile{name: "formula/wavelet stat bad name", args: []string{"wavelet", "--quiet", "--size", "4x4x4", "--stat", "2x=sum(g)"}, want: "is not a name"},
		hostile{name: "formula/wavelet stat not reducing", args: []string{"wavelet", "--quiet", "--size", "4x4x4", "--stat", "s=g^2"}, want: "must reduce"},
		hostile{name: "formula/wavelet stat nonfinite", args: []string{"wavelet", "--quiet", "--size", "4x4x4", "--stat", "s=log(min(g)-1e9)", "--fail-on-nonfinite"}, want: "non-finite"},
		aff("name unused", "column 12: e is assigned but not used", "--formula", "d = a - b; e = 2; -sum(abs(d))"),
		aff("name twice", "column 8: d is assigned twice (first at column 1)", "--formula", "d = a; d = b; sum(d)"),
		aff("name shadows a parameter", "column 1: s is a parameter (--param s)", "--formula", "s = a; sum(s)", "--param", "s=1"),
		aff("name shadows a variable", "column 1: b is a variable of this formula", "--formula", "b = a; sum(b)"),
		aff("name used before", "column 5: d is used before it is assigned", "--formula", "e = d; d = a; sum(e)"),
		aff("ends with a name", "ends with the assignment of d", "--formula", "d = a - b;"),
		aff("histogram not reduced", "gives a histogram, 8 numbers", "--formula", "hist(a, 0, 1, 8)"),
		aff("histogram bins", "hist's bins must be a whole number from 1 to 4096, got 0", "--formula", "sum(hist(a, 0, 1, n))", "--param", "n=0"),
		aff("histogram with its vector", "combines a histogram (8 numbers) with values along the vector axis", "--formula", "sum(hist(a, 0, 1, 8) - b)"),
		hostile{name: "formula/interp reduce name unused", args: []string{"interp", "--quiet", "--points", "10", "--reduce", "m = mean(v); max(v)"}, want: "m is assigned but not used"},
		hostile{name: "formula/drr post histogram", args: []string{"drr", "--quiet", "--size", "8", "--orbit", "1", "--detector", "4x4", "--post", "hist(p, 0, 1, 4)"}, want: "gives a histogram"},
		hostile{name: "formula/wavelet kernel histogram", args: []string{"wavelet", "--quiet", "--size", "4x4x4", "--kernel", "sum(hist(q, 0, 1, 4))"}, want: "cannot count"},
		hostile{name: "formula/wavelet stat name shadows", args: []string{"wavelet", "--quiet", "--size", "4x4x4", "--stat", "s=g = 1; sum(g)"}, want: "g is a variable"},
	)
	return cs
}
