package engine

import "github.com/tapeloop/tapeloop/ops"

// GPUBuild is true in the GPU flavour (build tags tapeloop_cuda and
// tapeloop_cudaemu): Device "cuda" opens GPUs. In the default build it is
// false, and Device "cuda" says how to get the GPU flavour.
const GPUBuild = ops.GPUBuild

// GPUBackend says what this build's GPU backend is, for `tapeloop info`.
var GPUBackend = ops.GPUBackend

func openGPU(ordinal int) (ops.Device, error) { return ops.OpenGPU(ordinal) }
