package filejob

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/tapeloop/tapeloop/internal/atomicfile"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/volume"
)

// Path is a file a run reads or writes, with the flag that named it.
type Path struct {
	Flag, Path string
	// Dir marks an output directory (made if missing) rather than a file.
	Dir bool
	// Of, on an input, is the path given to Flag when Path is another
	// file read for it: a MetaImage header's data file, a DICOM series'
	// slices (volume.Files).
	Of string
	// Names, on an output directory, matches the names of the files the
	// run writes into it besides those listed (a DRR's PNGs, one a pose):
	// those there already are outputs like the listed ones, and no other
	// output may take such a name in it.
	Names func(name string) bool
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

// fileID is what makes two names one file (os.SameFile): its device and
// inode.
type fileID struct{ dev, ino uint64 }

func idOf(fi fs.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{uint64(st.Dev), uint64(st.Ino)}, true
}

// CheckPaths refuses, before any work, an input that is not a regular file
// (a pipe or FIFO, a device, a socket, or "-" for standard input: the rule
// of npy.CheckInput, which every reader applies again when it opens the
// file), an output that is (or links to) something other than a file or
// directory (a pipe, /dev/stdout or /dev/null, a device, a socket, or "-"
// for standard output: renaming a file over it would replace it), an
// output that is (or links to) an input, or another file read for one
// (Path.Of), or another output, a file output that names an existing
// directory, and a file output whose directory does not exist (an output
// directory is made when the run succeeds). An input that is missing or a
// directory (a DICOM series is one) is left to its reader to explain. It
// also names each input after its flag for the report of a mapped input
// truncated during the run (npy.NameInput). Empty paths are skipped.
func CheckPaths(inputs, outputs []Path) error {
	type seen struct {
		p  Path
		fi fs.FileInfo
	}
	var ins []seen
	inIDs := map[fileID]Path{}
	for _, in := range inputs {
		if in.Path == "" {
			continue
		}
		if in.Of == "" {
			if err := npy.CheckStdin(in.Path); err != nil {
				return pathErrorf("--%s %v", in.Flag, err)
			}
		}
		fi, err := os.Stat(in.Path)
		if err != nil {
			continue
		}
		if in.Of == "" {
			if err := npy.CheckInput(in.Path, fi.Mode()); err != nil && !fi.IsDir() {
				return pathErrorf("--%s %v", in.Flag, err)
			}
			npy.NameInput(in.Path, "--"+in.Flag+" "+in.Path)
		}
		if id, ok := idOf(fi); ok {
			if _, dup := inIDs[id]; !dup {
				inIDs[id] = in
			}
		} else {
			ins = append(ins, seen{in, fi})
		}
	}
	isInput := func(fi fs.FileInfo) (Path, bool) {
		if id, ok := idOf(fi); ok {
			p, is := inIDs[id]
			return p, is
		}
		for _, in := range ins {
			if os.SameFile(fi, in.fi) {
				return in.p, true
			}
		}
		return Path{}, false
	}
	listed := outputs
	outputs = withNamed(outputs)
	byAbs := map[string]Path{} // every output by its absolute path
	byID := map[fileID]Path{}  // the existing ones by their file
	dirs := map[string]bool{}  // the output directories, cleaned
	var outs []seen            // the existing ones, where there is no fileID
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
			if in, ok := isInput(fi); ok {
				if in.Of != "" {
					return pathErrorf("--%s %s: is %s, a file of the input --%s %s; writing it would destroy the input", out.Flag, out.Path, in.Path, in.Flag, in.Of)
				}
				return pathErrorf("--%s %s: is the input --%s %s; writing it would destroy the input", out.Flag, out.Path, in.Flag, in.Path)
			}
			if id, ok := idOf(fi); ok {
				if o, dup := byID[id]; dup {
					return pathErrorf("--%s %s: is also --%s; name two different files", out.Flag, out.Path, o.Flag)
				}
				byID[id] = out
			} else {
				for _, o := range outs {
					if os.SameFile(fi, o.fi) {
						return pathErrorf("--%s %s: is also --%s; name two different files", out.Flag, out.Path, o.p.Flag)
					}
				}
				outs = append(outs, seen{out, fi})
			}
		}
		// A missing output is still the same file as another output or an
		// input when both name the same path through different spellings.
		if abs, err := filepath.Abs(out.Path); err == nil {
			if o, dup := byAbs[abs]; dup {
				return pathErrorf("--%s %s: is also --%s; name two different files", out.Flag, out.Path, o.Flag)
			}
			byAbs[abs] = out
		}
		dir := filepath.Dir(out.Path)
		made := dirs[dir] // the directory is an output directory, made on success
		if di, err := os.Stat(dir); !out.Dir && !made && (err != nil || !di.IsDir()) {
			return pathErrorf("--%s %s: directory %s does not exist", out.Flag, out.Path, dir)
		}
		if out.Dir {
			dirs[filepath.Clean(out.Path)] = true
		}
	}
	// An output that does not exist yet but takes one of the names the
	// run writes into an output directory.
	for _, d := range listed {
		if !d.Dir || d.Names == nil || d.Path == "" {
			continue
		}
		dabs, err := filepath.Abs(d.Path)
		if err != nil {
			continue
		}
		for _, out := range listed {
			if out.Dir || out.Path == "" {
				continue
			}
			if abs, err := filepath.Abs(out.Path); err == nil && filepath.Dir(abs) == dabs && d.Names(filepath.Base(abs)) {
				return pathErrorf("--%s %s: is also a file of --%s %s; name another file", out.Flag, out.Path, d.Flag, d.Path)
			}
		}
	}
	return checkSideFiles(outputs)
}

// withNamed is outputs with, after each output directory with Names, the
// files of those names it holds (Path.Names).
func withNamed(outputs []Path) []Path {
	var out []Path
	for _, o := range outputs {
		out = append(out, o)
		if !o.Dir || o.Names == nil || o.Path == "" {
			continue
		}
		entries, err := os.ReadDir(o.Path)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if o.Names(e.Name()) {
				out = append(out, Path{Flag: o.Flag, Path: filepath.Join(o.Path, e.Name())})
			}
		}
	}
	return out
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

// InputPaths are the volume, with the other files read for it (a
// MetaImage's data file, a DICOM series' files), and the geometry.
func (s DRRSpec) InputPaths() []Path {
	in := volumePaths(s.Volume, volume.Options{Series: s.Series})
	return append(in, Path{Flag: "geometry", Path: s.Geometry})
}

// volumePaths are the volume file and the other files read for it
// (volume.Files).
func volumePaths(vol string, opt volume.Options) []Path {
	in := []Path{{Flag: "volume", Path: vol}}
	for _, f := range volume.Files(vol, opt) {
		in = append(in, Path{Flag: "volume", Path: f, Of: vol})
	}
	return in
}

// OutputPaths is the output directory and the files written into it
// (drr.npy, drr.mha, drr.tiff, as Format asks, geometry.json and, with
// PNG, the PNGs: those of the poses of the orbit, or of any pose with a
// geometry file), or a shard's file.
func (s DRRSpec) OutputPaths() []Path {
	if s.Out == "" {
		return nil
	}
	if s.Shard != nil || s.Shards != nil {
		return []Path{{Flag: "out", Path: s.Out}} // a shard's archive
	}
	dir := Path{Flag: "out", Path: s.Out, Dir: true}
	if s.PNG {
		poses := -1 // any
		if s.Geometry == "" {
			poses = s.Orbit
		}
		dir.Names = func(name string) bool {
			i, ok := pngIndex(name)
			return ok && (poses < 0 || i < poses) && name == pngName(i)
		}
	}
	out := []Path{dir}
	formats, err := parseFormats(s.Format)
	if err != nil {
		formats = []string{"npy"} // refused when the spec is validated
	}
	for _, f := range formats {
		out = append(out, Path{Flag: "out", Path: filepath.Join(s.Out, "drr."+f)})
	}
	return append(out, Path{Flag: "out", Path: filepath.Join(s.Out, "geometry.json")})
}

// InputPaths is the volume, with the other files read for it.
func (s WaveletSpec) InputPaths() []Path {
	return volumePaths(s.Volume, volume.Options{Series: s.Series})
}

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

// fileError is err, from doing verb (create, write, read back) to the
// output path through its temporary file, naming path alone: "write
// PATH: cause". The file system's own errors name the temporary file,
// which means nothing to the user; they are replaced by their cause.
func fileError(verb, path string, err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	case strings.HasPrefix(err.Error(), verb+" "+path+": "):
		return err // said already
	}
	return fmt.Errorf("%s %s: %w", verb, path, err)
}
