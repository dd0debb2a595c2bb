//go:build tapeloop_cuda || tapeloop_cudaemu

package engine

import (
	"github.com/tapeloop/tapeloop/cuda"
	"github.com/tapeloop/tapeloop/ops"
)

// GPUBuild is true in the GPU flavour: Device "cuda" opens GPUs.
const GPUBuild = true

// GPUBackend says what this build's GPU backend is, for `tapeloop info`.
var GPUBackend = map[bool]string{
	false: "built in (--device cuda, --devices; cuFFT and cuBLAS loaded at run time)",
	true:  "EMULATED on the CPU (tapeloop_cudaemu test build: correct results, no speed)",
}[cuda.Emulated]

func openGPU(ordinal int) (ops.Device, error) { return cuda.Open(ordinal) }
