package graphs

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
// a lock; every output has temporary files.
func checkSideFiles(outputs []Path) error {
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return filepath.Clean(p)
	}
	for _, o := range outputs {
		if o.Path == "" || o.Dir {
			continue
		}
		ckpt := checkpoint.Path(o.Path)
		side := map[string]string{}
		if o.Flag == "out" {
			side[abs(ckpt)] = "the checkpoint"
			side[abs(checkpoint.LockPath(ckpt))] = "the lock file"
		}
		target, err := atomicfile.Target(o.Path)
		if err != nil {
			target = o.Path
		}
		tmpDir, tmpPrefix := abs(filepath.Dir(target)), "."+filepath.Base(target)+".tmp-"
		for _, q := range outputs {
			if q.Path == "" || q.Path == o.Path {
				continue
			}
			what, ok := side[abs(q.Path)]
			if !ok && abs(filepath.Dir(q.Path)) == tmpDir && strings.HasPrefix(filepath.Base(q.Path), tmpPrefix) {
				what, ok = "named as a temporary file", true
			}
			if ok {
				return pathErrorf("--%s %s: is %s of --%s %s, which tapeloop keeps beside it while it writes it; name another file", q.Flag, q.Path, what, o.Flag, o.Path)
			}
		}
	}
	return nil
}
