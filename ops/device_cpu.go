//go:build !tapeloop_cuda && !tapeloop_cudaemu

package ops

import G "gorgonia.org/gorgonia"

// GPUBuild is false in the default build, which has no GPU backend.
const GPUBuild = false

// GPUBackend says what this build's GPU backend is, for `tapeloop info`.
const GPUBackend = "not in this build (make build-cuda)"

// OpenGPU returns ErrNoDevice: the default build opens no GPU.
func OpenGPU(int) (Device, error) { return nil, ErrNoDevice }

func onDevice(G.Op, Device) (G.Op, error) { return nil, ErrNoDevice }
