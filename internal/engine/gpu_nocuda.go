//go:build !tapeloop_cuda && !tapeloop_cudaemu

package engine

import "github.com/tapeloop/tapeloop/ops"

// GPUBuild is false in the default build: Device "cuda" says how to get the
// GPU flavour.
const GPUBuild = false

// GPUBackend says what this build's GPU backend is, for `tapeloop info`.
const GPUBackend = "not in this build (make build-cuda)"

func openGPU(int) (ops.Device, error) { return nil, ops.ErrNoDevice }
