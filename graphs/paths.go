package graphs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tapeloop/tapeloop/internal/atomicfile"
	"github.com/tapeloop/tapeloop/internal/npy"
)

// Path is a file a run reads or writes, with the flag that named it.
type Path struct {
	Flag, Path string
	// Dir marks an output directory (made if missing) rather than a file.
	Dir bool
}

// notFileOutput says why an output must be a file (or a directory, for
// a directory output).
const notFileOutput = "tapeloop writes each output to a temporary file beside it and renames it into place when the run succeeds; name a file (or leave the flag out to write nothing)"

// ErrPath is matched (errors.Is) by errors about input and output paths.
var ErrPath = errors.New("bad path")

// pathError is an error about a path; it matches ErrPath.
type pathError struct{ msg string }

func (e pathError) Error() string        { return e.msg }
func (e pathError) Is(target error) bool { return target == ErrPath }

func pathErrorf(format string, a ...any) error { return pathError{fmt.Sprintf(format, a...)} }

// CheckPaths refuses, before any work, an input that is not a regular file
// (a pipe or FIFO, a device, a socket, or "-" for standard input: the rule
// of npy.CheckInput, which every reader applies again when it opens the
// file), an output that is (or links to) something other than a file or
// directory (a pipe, /dev/stdout or /dev/null, a device, a socket, or "-"
// for standard output: renaming a file over it would replace it), an
// output that is (or links to) an input or another output, a
// file output that names an existing directory, and a file output whose
// directory does not exist (an output directory is made when the run
// succeeds). An input that is missing or a directory (a DICOM series is
// one) is left to its reader to explain. It also names each input after
// its flag for the report of a mapped input truncated during the run
// (npy.NameInput). Empty paths are skipped.
func CheckPaths(inputs, outputs []Path) error {
	type seen struct {
		p  Path
		fi fs.FileInfo
	}
	var ins []seen
	for _, in := range inputs {
		if in.Path == "" {
			continue
		}
		if err := npy.CheckStdin(in.Path); err != nil {
			return pathErrorf("--%s %v", in.Flag, err)
		}
		fi, err := os.Stat(in.Path)
		if err != nil {
			continue
		}
		if err := npy.CheckInput(in.Path, fi.Mode()); err != nil && !fi.IsDir() {
			return pathErrorf("--%s %v", in.Flag, err)
		}
		npy.NameInput(in.Path, "--"+in.Flag+" "+in.Path)
		ins = append(ins, seen{in, fi})
	}
	var outs []seen
	for _, out := range outputs {
		if out.Path == "" {
			continue
		}
		if out.Path == "-" {
			if _, err := os.Lstat(out.Path); err != nil {
				return pathErrorf("--%s -: standard output is not written to: %s", out.Flag, notFileOutput)
			}
		}
		if _, err := atomicfile.Target(out.Path); errors.Is(err, atomicfile.ErrProcFile) {
			return pathErrorf("--%s %s: %v: %s", out.Flag, out.Path, err, notFileOutput)
		}
		fi, err := os.Stat(out.Path)
		switch {
		case err == nil && !fi.IsDir() && !fi.Mode().IsRegular():
			return pathErrorf("--%s %s: is %s: %s", out.Flag, out.Path, npy.Kind(fi.Mode()), notFileOutput)
		case err == nil && fi.IsDir() && !out.Dir:
			return pathErrorf("--%s %s: is a directory; name a file", out.Flag, out.Path)
		case err == nil && !fi.IsDir() && out.Dir:
			return pathErrorf("--%s %s: is a file; name a directory", out.Flag, out.Path)
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return pathErrorf("--%s %s: %v", out.Flag, out.Path, err)
		}
		if err == nil {
			for _, in := range ins {
				if os.SameFile(fi, in.fi) {
					return pathErrorf("--%s %s: is the input --%s %s; writing it would destroy the input", out.Flag, out.Path, in.p.Flag, in.p.Path)
				}
			}
			for _, o := range outs {
				if o.fi != nil && os.SameFile(fi, o.fi) {
					return pathErrorf("--%s %s: is also --%s; name two different files", out.Flag, out.Path, o.p.Flag)
				}
			}
		}
		// A missing output is still the same file as another output or an
		// input when both name the same path through different spellings.
		abs, aerr := filepath.Abs(out.Path)
		for _, o := range outs {
			if oabs, err := filepath.Abs(o.p.Path); aerr == nil && err == nil && oabs == abs {
				return pathErrorf("--%s %s: is also --%s; name two different files", out.Flag, out.Path, o.p.Flag)
			}
		}
		dir := filepath.Dir(out.Path)
		made := false // the directory is an output directory, made on success
		for _, o := range outs {
			made = made || (o.p.Dir && filepath.Clean(o.p.Path) == dir)
		}
		if di, err := os.Stat(dir); !out.Dir && !made && (err != nil || !di.IsDir()) {
			return pathErrorf("--%s %s: directory %s does not exist", out.Flag, out.Path, dir)
		}
		if err != nil {
			fi = nil
		}
		outs = append(outs, seen{out, fi})
	}
	return checkSideFiles(outputs)
}

// Paths is implemented by workload specs: the files they read and write.
type Paths interface {
	InputPaths() []Path
	OutputPaths() []Path
}

// InputPaths are the interpolation's input files.
func (s InterpSpec) InputPaths() []Path {
	return []Path{{Flag: "f", Path: s.F}, {Flag: "x", Path: s.X}}
}

// OutputPaths is the results file.
func (s InterpSpec) OutputPaths() []Path { return []Path{{Flag: "out", Path: s.Out}} }

// InputPaths is the image stack.
func (s AffinitySpec) InputPaths() []Path { return []Path{{Flag: "images", Path: s.Images}} }

// OutputPaths is the matrix, top-k or shard file.
func (s AffinitySpec) OutputPaths() []Path { return []Path{{Flag: "out", Path: s.Out}} }

// InputPaths are the shards.
func (s MergeSpec) InputPaths() []Path {
	p := make([]Path, len(s.Shards))
	for i, sh := range s.Shards {
		p[i] = Path{Flag: "shard", Path: sh}
	}
	return p
}

// OutputPaths is the merged file.
func (s MergeSpec) OutputPaths() []Path { return []Path{{Flag: "out", Path: s.Out}} }

// InputPaths are the volume and the geometry.
func (s DRRSpec) InputPaths() []Path {
	return []Path{{Flag: "volume", Path: s.Volume}, {Flag: "geometry", Path: s.Geometry}}
}

// OutputPaths is the output directory and the stacks written into it
// (drr.npy, drr.mha, drr.tiff, as Format asks), or a shard's file.
func (s DRRSpec) OutputPaths() []Path {
	if s.Out == "" {
		return nil
	}
	if s.Shard != nil || s.Shards != nil {
		return []Path{{Flag: "out", Path: s.Out}} // a shard's archive
	}
	out := []Path{{Flag: "out", Path: s.Out, Dir: true}}
	formats, err := parseFormats(s.Format)
	if err != nil {
		formats = []string{"npy"} // refused when the spec is validated
	}
	for _, f := range formats {
		out = append(out, Path{Flag: "out", Path: filepath.Join(s.Out, "drr."+f)})
	}
	return out
}

// InputPaths is the volume.
func (s WaveletSpec) InputPaths() []Path { return []Path{{Flag: "volume", Path: s.Volume}} }

// OutputPaths is the CSV file and the files of --save-response.
func (s WaveletSpec) OutputPaths() []Path {
	out := []Path{{Flag: "out", Path: s.Out}}
	for _, r := range s.SaveResponses {
		if _, file, ok := strings.Cut(r, ":"); ok {
			out = append(out, Path{Flag: "save-response", Path: strings.TrimSpace(file)})
		}
	}
	return out
}
