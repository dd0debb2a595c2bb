package engine

// The memory limit checked against the process's own limits.

import (
	"fmt"
	"strings"
	"sync"

	"github.com/tapeloop/tapeloop/internal/sysmem"
)

// capMemLimit checks a memory limit given by the user against the limits
// set on the process: its cgroup's (a batch system's, such as SLURM's
// --mem, or a container's), whose excess the kernel meets by killing the
// process without a word, and its own address-space and data limits
// (ulimit -v, ulimit -d), whose excess the Go runtime meets with a crash.
// A limit above what the tightest of them leaves (after what the process
// uses already and, for a ulimit, a margin for its threads and C heaps) is
// lowered to that, and warning says so in one line (without the
// "tapeloop: warning: " prefix); a plan refused under it says so too.
func capMemLimit(limit int64) (lowered int64, warning string, err error) {
	if ownLimit(limit) {
		return limit, "", nil
	}
	var tight sysmem.Bound
	found := false
	for _, b := range sysmem.Limits() {
		if !found || b.Left < tight.Left {
			tight, found = b, true
		}
	}
	if !found || limit <= tight.Left {
		return limit, "", nil
	}
	lowered = max(tight.Left, 1)
	if tight.Rlimit {
		flag := strings.Join(strings.Fields(tight.Name)[:2], " ") // "ulimit -v"
		if tight.Left <= 0 {
			noteLimit(lowered, nothingLeft(tight))
			return lowered, fmt.Sprintf("--mem-limit %s: %s leaves this process nothing (%s mapped already, %s kept for its threads and C heaps); raise %s",
				sysmem.Format(limit), tight.Name, sysmem.Format(tight.Used), sysmem.Format(tight.Margin), flag), nil
		}
		noteLimit(lowered, fmt.Sprintf(" (lowered from --mem-limit %s to what %s leaves this process; raise %s)", sysmem.Format(limit), tight.Name, flag))
		return lowered, fmt.Sprintf("--mem-limit %s is more than %s (%s) leaves this process after the %s it has mapped and %s kept for its threads and C heaps: lowered to %s",
			sysmem.Format(limit), tight.Name, sysmem.Format(tight.Limit), sysmem.Format(tight.Used), sysmem.Format(tight.Margin), sysmem.Format(lowered)), nil
	}
	noteLimit(lowered, fmt.Sprintf(" (lowered from --mem-limit %s to what the %s leaves)", sysmem.Format(limit), tight.Name))
	return lowered, fmt.Sprintf("--mem-limit %s is more than the %s (%s, %s in use) leaves: lowered to %s",
		sysmem.Format(limit), tight.Name, sysmem.Format(tight.Limit), sysmem.Format(tight.Used), sysmem.Format(lowered)), nil
}

// nothingLeft is the note of a limit b that leaves the process no memory
// for its work: what it has mapped already (most of it the Go runtime's
// reservations of address space) and keeps back.
func nothingLeft(b sysmem.Bound) string {
	return fmt.Sprintf(" (%s leaves this process nothing: it has %s mapped already and keeps %s for its threads and C heaps; raise %s)",
		b.Name, sysmem.Format(b.Used), sysmem.Format(b.Margin), strings.Join(strings.Fields(b.Name)[:2], " "))
}

// limitNote is the last memory limit tapeloop worked out itself (the
// default, or a --mem-limit lowered), and why when a cgroup or ulimit set
// it: a plan refused under it says so. A limit worked out once, at Open,
// is not lowered again when a run resolves it: what the process has mapped
// since (the inputs) is counted by the plan.
var limitNote struct {
	sync.Mutex
	limit int64
	note  string
	set   bool
}

// noteLimit records limit and its note ("" for none).
func noteLimit(limit int64, note string) {
	limitNote.Lock()
	defer limitNote.Unlock()
	limitNote.limit, limitNote.note, limitNote.set = limit, note, true
}

// ownLimit reports whether limit is the one tapeloop last worked out.
func ownLimit(limit int64) bool {
	limitNote.Lock()
	defer limitNote.Unlock()
	return limitNote.set && limit == limitNote.limit
}

// noteDefaultLimit records the default limit, worked out as half of what
// b leaves.
func noteDefaultLimit(limit int64, b sysmem.Bound) {
	switch {
	case b.Rlimit && b.Left <= 0:
		noteLimit(limit, nothingLeft(b))
	case b.Rlimit:
		noteLimit(limit, fmt.Sprintf(" (the default: half of what %s leaves this process; raise %s)", b.Name, strings.Join(strings.Fields(b.Name)[:2], " ")))
	case strings.HasPrefix(b.Name, "cgroup"):
		noteLimit(limit, fmt.Sprintf(" (the default: half of what the %s leaves)", b.Name))
	default:
		noteLimit(limit, "")
	}
}

// limitNoteFor explains a memory limit of limit bytes set by a cgroup or
// ulimit: "" for any other.
func limitNoteFor(limit int64) string {
	limitNote.Lock()
	defer limitNote.Unlock()
	if limit != limitNote.limit {
		return ""
	}
	return limitNote.note
}
