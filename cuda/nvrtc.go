//go:build tapeloop_cuda

package cuda

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"sync"

	"gorgonia.org/cu"

	"github.com/tapeloop/tapeloop/internal/nvrtc"
)

// ptxCache holds the PTX of every source compiled, by the hash of its
// source, options and architecture: a second device of the same kind, or
// a second op with the same formula, does not compile again.
var ptxCache sync.Map // [32]byte → string

// loadSource compiles src for the device's compute capability, loads it
// (once per device) and registers its kernels.
func (drv *driver) loadSource(d *Device, src string, opts []string) ([]string, error) {
	drv.rtMu.Lock()
	defer drv.rtMu.Unlock()
	arch, err := nvrtc.ArchFor(drv.cc)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDevice, err)
	}
	opts = append([]string{arch}, opts...)
	key := sha256.Sum256([]byte(strings.Join(opts, "\x00") + "\x00\x00" + src))
	if names, ok := drv.loaded[key]; ok {
		return names, nil
	}
	var ptx string
	if p, ok := ptxCache.Load(key); ok {
		ptx = p.(string)
	} else {
		if ptx, err = nvrtc.Compile(src, "formula.cu", opts); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrDevice, err)
		}
		ptxCache.Store(key, ptx)
	}
	names := entries(ptx)
	err = d.Do(func() error {
		for _, name := range names {
			if _, ok := drv.funcs[name]; ok {
				return fmt.Errorf("%w: kernel %s is loaded already, from another source", ErrDevice, name)
			}
		}
		mod, err := cu.LoadData(ptx)
		if err != nil {
			return fmt.Errorf("%w: loading a kernel compiled at run time (%s): %v", ErrDevice, arch, err)
		}
		drv.mods = append(drv.mods, mod)
		for _, name := range names {
			fn, err := mod.Function(name)
			if err != nil {
				return fmt.Errorf("%w: kernel %s: %v", ErrDevice, name, err)
			}
			drv.funcs[name] = fn
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	drv.loaded[key] = names
	return names, nil
}
