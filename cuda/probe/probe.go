//go:build tapeloop_cuda

// Package probe initialises the CUDA driver before gorgonia.org/cu does,
// so that the GPU build started where there is no usable GPU ends with
// tapeloop's one-line error instead of cu's message and exit. Go
// initialises packages in import-path order where their imports allow, and
// this package's path sorts before gorgonia.org/cu's; package cuda imports
// it for that side effect.
package probe

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
static int tl_probe(const char **name, const char **text) {
	CUresult r = cuInit(0);
	if (r != CUDA_SUCCESS) {
		cuGetErrorName(r, name);
		cuGetErrorString(r, text);
	}
	return (int)r;
}
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
)

func init() {
	var name, text *C.char
	if r := C.tl_probe(&name, &text); r != 0 {
		n, t := fmt.Sprint("error ", int(r)), ""
		if name != nil {
			n = C.GoString(name)
		}
		if text != nil {
			t = " (" + C.GoString(text) + ")"
		}
		fmt.Fprintf(os.Stderr, "%s: this is tapeloop's GPU build and the CUDA driver cannot start: cuInit: %s%s; "+
			"on machines without an NVIDIA GPU use the default build (make build)\n", filepath.Base(os.Args[0]), n, t)
		os.Exit(1)
	}
}
