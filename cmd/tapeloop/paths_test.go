package main

// Paths as the user gives them: an empty path is refused, not read as
// "the built-in data" or "no output"; no output replaces or removes a file
// the run reads, whether named on the command line or read because of one
// (a MetaImage's data file, a DICOM series' slices); a failed write names
// the file the user named.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/testutil"
)

// TestPathsEmptyRefused: every flag that names a file or directory, given
// "" (an unset shell variable), is refused with one line naming it, and
// nothing is written: not the built-in data read, not a run without its
// output.
func TestPathsEmptyRefused(t *testing.T) {
	drr := []string{"drr", "--quiet", "--orbit", "2", "--detector", "4x4"}
	wv := []string{"wavelet", "--quiet", "--theta", "0", "--phi", "0", "--xi", "1"}
	// Small runs: without the check, a flag of the built-in data beside
	// the empty one is refused too, but not as an empty path.
	ip := []string{"interp", "--quiet", "--points", "10", "--grid", "8", "--interpolants", "2"}
	aff := []string{"affinity", "--quiet", "-n", "4", "--height", "2", "--width", "2"}
	for _, c := range []struct {
		flag string
		args []string
	}{
		{"volume", drr},
		{"geometry", []string{"drr", "--quiet"}},
		{"out", drr},
		{"report", drr},
		{"volume", wv},
		{"out", wv},
		{"trace", wv},
		{"f", ip},
		{"x", ip},
		{"out", ip},
		{"cpuprofile", ip},
		{"memprofile", ip},
		{"images", aff},
		{"out", aff},
		{"out", []string{"merge"}},
		{"volume", []string{"dot", "drr"}},
	} {
		args := append(append([]string{}, c.args...), "--"+c.flag, "")
		if c.args[0] == "merge" {
			args = append(args, "x.npz")
		}
		t.Run(strings.Join(args, " "), func(t *testing.T) { refusedBeforeWork(t, args, "--"+c.flag+": empty path") })
	}
}

// TestPathsFlagsMarked: every flag whose help names a FILE or DIR is
// marked as a path (TakesFile), the one mark the empty-path check reads.
// refusedBeforeWork runs args in an empty directory: the run must fail in
// one line saying want, print nothing and leave the directory empty.
func refusedBeforeWork(t *testing.T, args []string, want string) {
	t.Helper()
	dir := t.TempDir()
	stdout, stderr, code := outputsRun{args: args, dir: dir, fsize: -1}.run(t)
	failsWithOneLine(t, args, stderr, code, want)
	if stdout != "" {
		t.Errorf("tapeloop %s: printed %q", strings.Join(args, " "), stdout)
	}
	sameContents(t, args, dir, map[string]string{})
}

// TestEmptyValuesRefused gives every string flag that is not a path and
// not read from the environment, of every command, as "" and as blanks:
// each is refused in one line, naming the flag, before any work.
func TestEmptyValuesRefused(t *testing.T) {
	var walk func(path []string, cmds []*cli.Command)
	n := 0
	walk = func(path []string, cmds []*cli.Command) {
		for _, cmd := range cmds {
			p := append(slices.Clone(path), cmd.Name)
			walk(p, cmd.Subcommands)
			if len(cmd.Subcommands) > 0 {
				continue
			}
			for _, f := range cmd.Flags {
				sf, ok := f.(*cli.StringFlag)
				if !ok || sf.TakesFile || len(sf.EnvVars) > 0 {
					continue
				}
				for _, v := range []string{"", "  "} {
					args := append(slices.Clone(p), "--"+sf.Name, v)
					if cmd.Name == "merge" {
						args = append(args, "x.npz")
					}
					n++
					t.Run(strings.Join(args, " "), func(t *testing.T) { refusedBeforeWork(t, args, "--"+sf.Name+": empty value") })
				}
			}
		}
	}
	walk(nil, newApp().Commands)
	if n < 60 {
		t.Errorf("%d cases, want at least 60", n)
	}
}

func TestPathsFlagsMarked(t *testing.T) {
	var walk func(prefix string, cmds []*cli.Command)
	n := 0
	walk = func(prefix string, cmds []*cli.Command) {
		for _, cmd := range cmds {
			name := prefix + cmd.Name
			walk(name+" ", cmd.Subcommands)
			for _, f := range cmd.Flags {
				sf, ok := f.(*cli.StringFlag)
				if !ok {
					continue
				}
				path := strings.Contains(sf.Usage, "`FILE") || strings.Contains(sf.Usage, "`DIR")
				if path != sf.TakesFile {
					t.Errorf("%s --%s: names a path: %v, marked TakesFile: %v", name, sf.Name, path, sf.TakesFile)
				}
				if sf.TakesFile {
					n++
				}
			}
		}
	}
	walk("", newApp().Commands)
	if n < 14 {
		t.Errorf("%d path flags, want at least 14", n)
	}
}

// refusedUnchanged runs args in dir, which must fail with one line saying
// want and leave every file under dir as it was.
func refusedUnchanged(t *testing.T, dir string, want string, args ...string) {
	t.Helper()
	before := snapshot(t, dir)
	_, stderr, code := outputsRun{args: args, dir: dir, fsize: -1}.run(t)
	failsWithOneLine(t, args, stderr, code, want)
	after := snapshot(t, dir)
	for p, a := range after {
		if b, ok := before[p]; !ok {
			t.Errorf("tapeloop %s: created %s", strings.Join(args, " "), p)
		} else if a != b {
			t.Errorf("tapeloop %s: changed %s", strings.Join(args, " "), p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("tapeloop %s: removed %s", strings.Join(args, " "), p)
		}
	}
}

// writeFiles writes name → contents under dir, making directories.
func writeFiles(t *testing.T, dir string, fs map[string][]byte) {
	t.Helper()
	for name, b := range fs {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// mhdOf is a MetaImage header of a 4×4×4 int16 volume whose data is in
// dataFile, and that data.
func mhdOf(dataFile string) ([]byte, []byte) {
	data := make([]byte, 2*64)
	for i := range 64 {
		data[2*i] = byte(i)
	}
	return meta(nil, "ObjectType = Image", "NDims = 3", "DimSize = 4 4 4", "ElementType = MET_SHORT", "ElementDataFile = "+dataFile), data
}

// dicomSeriesOf writes a DICOM series of 8×8 slices into dir, named
// im0.dcm …
func dicomSeriesOf(t *testing.T, dir string, slices int) {
	t.Helper()
	fs := map[string][]byte{}
	for k := range slices {
		s := testutil.DICOMSlice{Series: "1.2.826.0.1.3680043.8.498.77", Description: "paths", Instance: k + 1,
			IPP: [3]float64{-8, -8, 2 * float64(k)}, IOP: [6]float64{1, 0, 0, 0, 1, 0}, PixelSpacing: [2]float64{2, 2},
			Rows: 8, Cols: 8, Signed: true, Slope: 1, Intercept: -1000}
		s.Pixels = make([]int16, 64)
		for i := range s.Pixels {
			s.Pixels[i] = int16(1000 + i)
		}
		fs[fmt.Sprintf("im%d.dcm", k)] = testutil.DICOMFile(s)
	}
	writeFiles(t, dir, fs)
}

// TestPathsOutputIsAFileOfTheVolume: an output that is a MetaImage's data
// file or a slice of the DICOM series read is refused, as one that is the
// named volume is, and the file is left as it was.
func TestPathsOutputIsAFileOfTheVolume(t *testing.T) {
	inputs := func(t *testing.T) string {
		dir := t.TempDir()
		hdr, data := mhdOf("v.raw")
		writeFiles(t, dir, map[string][]byte{"vol/w.mhd": hdr, "vol/v.raw": data})
		dicomSeriesOf(t, filepath.Join(dir, "dcm"), 6)
		if err := os.Symlink("vol/v.raw", filepath.Join(dir, "link.csv")); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	wv := []string{"wavelet", "--quiet", "--theta", "0", "--phi", "0", "--xi", "1", "--a", "0.5"}
	dr := []string{"drr", "--quiet", "--orbit", "2", "--detector", "4x4"}
	const destroys = "writing it would destroy the input"
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(wv, "--volume", "vol/w.mhd", "--out", "vol/v.raw"), "--out vol/v.raw: is vol/v.raw, a file of the input --volume vol/w.mhd; " + destroys},
		{append(dr, "--volume", "vol/w.mhd", "--report", "vol/v.raw"), "--report vol/v.raw: is vol/v.raw, a file of the input --volume vol/w.mhd"},
		{append(wv, "--volume", "vol/w.mhd", "--out", "link.csv"), "--out link.csv: is vol/v.raw, a file of the input --volume vol/w.mhd"},
		{append(wv, "--volume", "dcm", "--out", "dcm/im3.dcm"), "--out dcm/im3.dcm: is dcm/im3.dcm, a file of the input --volume dcm; " + destroys},
		{append(dr, "--volume", "dcm/im0.dcm", "--report", "dcm/im5.dcm"), "--report dcm/im5.dcm: is dcm/im5.dcm, a file of the input --volume dcm/im0.dcm"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) { refusedUnchanged(t, inputs(t), c.want, c.args...) })
	}
}

// TestPathsDRROutputsChecked: every file a DRR run writes into --out is
// checked as drr.npy is: geometry.json or a PNG that links to the volume
// is refused, and so is another output that takes a PNG's name.
func TestPathsDRROutputsChecked(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string][]byte{"v.npy": npyOf(npy.Float32, []int{4, 4, 4}, make([]float64, 64))})
	for _, d := range []string{"g", "p"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../v.npy", filepath.Join(dir, "g", "geometry.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../v.npy", filepath.Join(dir, "p", "drr_0001.png")); err != nil {
		t.Fatal(err)
	}
	dr := []string{"drr", "--quiet", "--volume", "v.npy", "--orbit", "2", "--detector", "4x4"}
	refusedUnchanged(t, dir, "--out g/geometry.json: is the input --volume v.npy", append(dr, "--out", "g")...)
	refusedUnchanged(t, dir, "--out p/drr_0001.png: is the input --volume v.npy", append(dr, "--out", "p", "--png")...)
	refusedUnchanged(t, dir, "--report q/drr_0001.png: is also a file of --out q", append(dr, "--out", "q", "--png", "--report", "q/drr_0001.png")...)
	refusedUnchanged(t, dir, "--report q/geometry.json: is also --out", append(dr, "--out", "q", "--report", "q/geometry.json")...)
	// A PNG past the run's poses is not written: that link stays, and
	// so does the volume.
	if _, se, code := (outputsRun{args: append(dr[:len(dr)-4], "--orbit", "1", "--detector", "4x4", "--out", "p", "--png"), dir: dir, fsize: -1}).run(t); code != 0 {
		t.Fatalf("one pose into p: exit %d: %s", code, se)
	}
	if l, err := os.Readlink(filepath.Join(dir, "p", "drr_0001.png")); err != nil || l != "../v.npy" {
		t.Errorf("p/drr_0001.png: %q, %v", l, err)
	}
}

// TestPathsDRRCleanupKeepsInputs: the removal of an earlier run's outputs
// from --out leaves alone a file the run reads that is named as an output
// of another format: the volume itself (drr.mha), or a MetaImage's data
// file (drr.tiff).
func TestPathsDRRCleanupKeepsInputs(t *testing.T) {
	dir := t.TempDir()
	hdr, data := mhdOf("LOCAL")
	mha := append(hdr, data...)
	hdr2, data2 := mhdOf("drr.tiff")
	writeFiles(t, dir, map[string][]byte{"dm/drr.mha": mha, "dt/v.mhd": hdr2, "dt/drr.tiff": data2})
	for _, c := range []struct{ volume, out, kept string }{
		{"dm/drr.mha", "dm", "dm/drr.mha"},
		{"dt/v.mhd", "dt", "dt/drr.tiff"},
	} {
		want, err := os.ReadFile(filepath.Join(dir, c.kept))
		if err != nil {
			t.Fatal(err)
		}
		args := []string{"drr", "--quiet", "--volume", c.volume, "--orbit", "2", "--detector", "4x4", "--out", c.out}
		if _, se, code := (outputsRun{args: args, dir: dir, fsize: -1}).run(t); code != 0 {
			t.Fatalf("tapeloop %s: exit %d: %s", strings.Join(args, " "), code, se)
		}
		if got, err := os.ReadFile(filepath.Join(dir, c.kept)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("tapeloop %s: the input %s is gone or changed: %v", strings.Join(args, " "), c.kept, err)
		}
		if _, err := os.Stat(filepath.Join(dir, c.out, "drr.npy")); err != nil {
			t.Errorf("tapeloop %s: no drr.npy: %v", strings.Join(args, " "), err)
		}
	}
}

// TestPathsDRRStaleNotRemovedWarns: once the run's outputs are in place,
// an earlier run's file that cannot be removed (immutable) is a warning
// naming it: the run succeeds, exit 0, its checkpoint gone.
func TestPathsDRRStaleNotRemovedWarns(t *testing.T) {
	dir := t.TempDir()
	base := []string{"drr", "--quiet", "--size", "8", "--detector", "4x4", "--png", "--out", "di"}
	if _, se, code := (outputsRun{args: append(base, "--orbit", "5"), dir: dir, fsize: -1}).run(t); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, se)
	}
	stale := filepath.Join(dir, "di", "drr_0004.png")
	if out, err := exec.Command("chattr", "+i", stale).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", stale).Run() })
	args := append(base, "--orbit", "3")
	_, stderr, code := outputsRun{args: args, dir: dir, fsize: -1}.run(t)
	if code != 0 || strings.Count(stderr, "\n") != 1 ||
		!strings.HasPrefix(stderr, "tapeloop: warning: ") || !strings.Contains(stderr, "di/drr_0004.png") {
		t.Fatalf("tapeloop %s: exit %d, stderr %q; want 0 and one warning naming di/drr_0004.png", strings.Join(args, " "), code, stderr)
	}
	got := dirContents(t, filepath.Join(dir, "di"))
	for _, name := range []string{"drr.npy", "geometry.json", "drr_0000.png", "drr_0001.png", "drr_0002.png", "drr_0004.png"} {
		if _, ok := got[name]; !ok {
			t.Errorf("di: no %s", name)
		}
		delete(got, name)
	}
	if len(got) != 0 {
		t.Errorf("di also holds %q (a checkpoint, a temporary file, drr_0003.png?)", keys(got))
	}
}

// TestPathsWriteErrorsNameTheOutput: a write that fails (ulimit -f) names
// the file given, not the temporary file it goes through.
func TestPathsWriteErrorsNameTheOutput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"drr", "--quiet", "--size", "16", "--orbit", "20", "--detector", "32x32", "--out", "qd"}, "--out: write qd/drr.npy: file too large"},
		{[]string{"wavelet", "--quiet", "--size", "16x16x16", "--theta", "0", "--phi", "0", "--xi", "1", "--save-response", "0,0,1:g.npy"}, "--save-response: write g.npy: file too large"},
	} {
		dir := t.TempDir()
		_, stderr, code := outputsRun{args: c.args, dir: dir, fsize: 20}.run(t)
		failsWithOneLine(t, c.args, stderr, code, c.want)
		if strings.Contains(stderr, ".tmp-") {
			t.Errorf("tapeloop %s: names a temporary file: %q", strings.Join(c.args, " "), stderr)
		}
	}
}
