// Package warnings writes tapeloop's warnings as every one of them is
// printed: a line that opens with "tapeloop: warning: ", as an error's
// opens with "tapeloop: ".
package warnings

import (
	"fmt"
	"io"
)

// Prefix opens every warning line.
const Prefix = "tapeloop: warning: "

// Line is msg as a warning line, its newline included.
func Line(msg string) string { return Prefix + msg + "\n" }

// Printf writes the warning line of the message format and args make
// (as fmt.Sprintf makes it) to w.
func Printf(w io.Writer, format string, args ...any) {
	fmt.Fprint(w, Line(fmt.Sprintf(format, args...)))
}
