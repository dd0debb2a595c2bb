// Command capi is tapeloop's C ABI, built as a shared library for the
// Python package (go build -buildmode=c-shared -o
// python/tapeloop/libtapeloop.so ./capi).
//
// Every function returns NULL on success or an error message the caller
// frees with tl_free; handles are positive integers. A caller's buffers are
// read and written only during the call that receives them and are never
// kept. A Go panic becomes an error; nothing exits the process.
package main

/*
#include <stdint.h>
#include <stdlib.h>
*/
import "C"

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"unsafe"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs"
)

// Version is the ABI's version: the Python package checks it.
const Version = "tapeloop-capi 1"

func main() {}

// object is one compiled workload behind a handle; mu serializes its runs.
type object struct {
	mu       sync.Mutex
	closed   bool
	interp   *graphs.InterpProgram
	affinity *graphs.AffinityProgram
}

var (
	objMu   sync.Mutex
	objects = map[int64]*object{}
	nextID  int64
)

func register(o *object) int64 {
	objMu.Lock()
	defer objMu.Unlock()
	nextID++
	objects[nextID] = o
	return nextID
}

func lookup(h int64) (*object, error) {
	objMu.Lock()
	defer objMu.Unlock()
	o, ok := objects[h]
	if !ok {
		return nil, fmt.Errorf("handle %d: no such object (closed?)", h)
	}
	return o, nil
}

// guard runs f, turning its error or panic into a C string for the caller
// to free (NULL: no error).
func guard(f func() error) (msg *C.char) {
	defer func() {
		if r := recover(); r != nil {
			msg = C.CString(fmt.Sprintf("internal error (a bug in tapeloop): %v", r))
		}
	}()
	if err := f(); err != nil {
		return C.CString(err.Error())
	}
	return nil
}

// decode reads a JSON config into v, refusing unknown fields.
func decode(cfg *C.char, v any) error {
	if cfg == nil {
		return fmt.Errorf("config: NULL")
	}
	d := json.NewDecoder(bytes.NewReader([]byte(C.GoString(cfg))))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

func parseDtype(s string) (tensor.Dtype, error) {
	switch s {
	case "", "float32":
		return tensor.Float32, nil
	case "float64":
		return tensor.Float64, nil
	}
	return tensor.Dtype{}, fmt.Errorf("--dtype %q: want float32 or float64", s)
}

// tl_version writes the ABI version into buf (at most n bytes with the
// terminating NUL).
//
//export tl_version
func tl_version(buf *C.char, n C.int64_t) *C.char {
	return guard(func() error {
		if buf == nil || int(n) < len(Version)+1 {
			return fmt.Errorf("version: buffer of %d bytes, need %d", n, len(Version)+1)
		}
		b := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
		copy(b, Version)
		b[len(Version)] = 0
		return nil
	})
}

// tl_free frees an error message returned by any tl_ function.
//
//export tl_free
func tl_free(p *C.char) { C.free(unsafe.Pointer(p)) }

// tl_close releases the object behind h.
//
//export tl_close
func tl_close(h C.int64_t) *C.char {
	return guard(func() error {
		objMu.Lock()
		o, ok := objects[int64(h)]
		delete(objects, int64(h))
		objMu.Unlock()
		if !ok {
			return nil // closing twice is harmless
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		o.closed = true
		switch {
		case o.interp != nil:
			return o.interp.Close()
		case o.affinity != nil:
			return o.affinity.Close()
		}
		return nil
	})
}
