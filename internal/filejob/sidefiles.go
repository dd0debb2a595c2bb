package filejob

import (
	"path/filepath"
	"strings"

	"github.com/tapeloop/tapeloop/internal/atomicfile"
	"github.com/tapeloop/tapeloop/internal/checkpoint"
)

// checkSideFiles refuses an output that is one of the files tapeloop keeps
// beside another output while it writes it: its checkpoint (NAME.ckpt),
// its lock (NAME.lock) or a temporary file (.NAME.tmp-…). Such an output
// would be taken for the run's own file and replaced, refused or removed
// by the next run. Only the workload's --out files have a checkpoint and
// a lock; every output has temporary files. The outputs are looked up by
// name, not compared pairwise: a DRR's directory may hold many thousand
// PNGs among them.
func checkSideFiles(outputs []Path) error {
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return filepath.Clean(p)
	}
	type owner struct {
		what string
		o    Path
	}
	side := map[string]owner{}   // the checkpoints and locks, by absolute path
	targets := map[string]Path{} // every output by the absolute path its temporary files are named after
	for _, o := range outputs {
		if o.Path == "" || o.Dir {
			continue
		}
		if o.Flag == "out" {
			ckpt := checkpoint.Path(o.Path)
			side[abs(ckpt)] = owner{"the checkpoint", o}
			side[abs(checkpoint.LockPath(ckpt))] = owner{"the lock file", o}
		}
		target, err := atomicfile.Target(o.Path)
		if err != nil {
			target = o.Path
		}
		targets[filepath.Join(abs(filepath.Dir(target)), filepath.Base(target))] = o
	}
	for _, q := range outputs {
		if q.Path == "" {
			continue
		}
		qa := abs(q.Path)
		if s, ok := side[qa]; ok && s.o.Path != q.Path {
			return sideFileError(q, s.what, s.o)
		}
		// .NAME.tmp-…: NAME is what precedes one of its ".tmp-".
		dir, base := filepath.Dir(qa), filepath.Base(qa)
		if !strings.HasPrefix(base, ".") {
			continue
		}
		for i := 1; ; {
			j := strings.Index(base[i:], ".tmp-")
			if j < 0 {
				break
			}
			i += j
			if o, ok := targets[filepath.Join(dir, base[1:i])]; ok && o.Path != q.Path {
				return sideFileError(q, "named as a temporary file", o)
			}
			i++
		}
	}
	return nil
}

func sideFileError(q Path, what string, o Path) error {
	return pathErrorf("--%s %s: is %s of --%s %s, which tapeloop keeps beside it while it writes it; name another file", q.Flag, q.Path, what, o.Flag, o.Path)
}
