package main

/*
#include <stdint.h>
*/
import "C"

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unsafe"

	"github.com/tapeloop/tapeloop/graphs/wavelet"
	"github.com/tapeloop/tapeloop/internal/engine"
)

// waveletConfig is the JSON config of tl_wavelet_create: the engine's
// fields but the dtype (the volume is float32, the statistics float64, as
// the CLI's wavelet has no --dtype) and the wavelet's Config (the volume
// comes as an array, the sweep with each tl_wavelet_run). An option left
// out keeps its value in wavelet.DefaultConfig.
type waveletConfig struct {
	deviceFields
	wavelet.Config
}

func init() {
	configs["wavelet"] = waveletConfig{}
	defaultConfigs["wavelet"] = waveletConfig{Config: wavelet.DefaultConfig()}
	limits["wavelet"] = map[string]any{"combinations": wavelet.MaxCombos}
}

// UnmarshalJSON decodes the config over wavelet.DefaultConfig, refusing
// unknown fields as decode does.
func (c *waveletConfig) UnmarshalJSON(b []byte) error {
	type jsonConfig waveletConfig // without this method
	j := jsonConfig{Config: wavelet.DefaultConfig()}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&j); err != nil {
		return err
	}
	*c = waveletConfig(j)
	return nil
}

// tl_wavelet_create compiles the wavelet sweep of the (nx, ny, nz) float32
// volume v (C order, copied); *handle receives the object.
//
//export tl_wavelet_create
func tl_wavelet_create(config *C.char, v *C.float, nx, ny, nz C.int64_t, handle *C.int64_t) *C.char {
	return create(config, handle, func(c waveletConfig, dev *engine.Device) (program, error) {
		vol, err := volumeOf(v, nx, ny, nz)
		if err != nil {
			return nil, err
		}
		return wavelet.Compile(c.Config, vol, [3]int{int(nx), int(ny), int(nz)}, dev) // vol copied
	})
}

// tl_wavelet_columns sets *text to the names of a result row's columns,
// comma-separated (the CLI's CSV header), for the caller to free with
// tl_free.
//
//export tl_wavelet_columns
func tl_wavelet_columns(h C.int64_t, text **C.char) *C.char {
	return guard(func() error {
		return call(h, "a wavelet sweep", 0, func(p *wavelet.Program) error {
			if text == nil {
				return fmt.Errorf("wavelet: NULL text")
			}
			*text = C.CString(strings.Join(p.Columns(), ","))
			return nil
		})
	})
}

// tl_wavelet_run sweeps the combinations [lo, hi) of the nt values of
// theta, the np of phi and the nxi of xi (θ outermost, then φ, then ξ;
// hi = 0: all of them) into out: outLen = (hi − lo)·columns values, a row
// per combination, the columns of tl_wavelet_columns. A range (a shard)
// gives each combination the number the whole sweep gives it. The arrays
// are used only during the call.
//
//export tl_wavelet_run
func tl_wavelet_run(h C.int64_t, theta *C.double, nt C.int64_t, phi *C.double, np C.int64_t, xi *C.double, nxi C.int64_t,
	lo, hi C.int64_t, out *C.double, outLen C.int64_t, interruptible C.int) *C.char {
	return guard(func() error {
		return call(h, "a wavelet sweep", interruptible, func(p *wavelet.Program) error {
			if nt < 0 || np < 0 || nxi < 0 || outLen < 0 || (theta == nil && nt > 0) || (phi == nil && np > 0) ||
				(xi == nil && nxi > 0) || (out == nil && outLen > 0) {
				return fmt.Errorf("wavelet: NULL or negative arrays")
			}
			return p.RunRange(doubles(theta, nt), doubles(phi, np), doubles(xi, nxi), int(lo), int(hi), doubles(out, outLen))
		})
	})
}

// doubles is the caller's n values at x (nil when n is 0).
// tl_wavelet_response writes the response G of the combination theta,
// phi, xi into out: outLen = nx·ny·nz float32 values, the volume's shape
// as given to tl_wavelet_create, C order.
//
//export tl_wavelet_response
func tl_wavelet_response(h C.int64_t, theta, phi, xi C.double, out *C.float, outLen C.int64_t, interruptible C.int) *C.char {
	return guard(func() error {
		return call(h, "a wavelet sweep", interruptible, func(p *wavelet.Program) error {
			if out == nil || outLen < 0 {
				return fmt.Errorf("wavelet: NULL or negative arrays")
			}
			return p.Response(float64(theta), float64(phi), float64(xi), unsafe.Slice((*float32)(unsafe.Pointer(out)), int(outLen)))
		})
	})
}

func doubles(x *C.double, n C.int64_t) []float64 {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(x)), int(n))
}
