//go:build tapeloop_cuda || tapeloop_cudaemu

package main

import (
	"github.com/tapeloop/tapeloop/cuda"
	"github.com/tapeloop/tapeloop/ops"
)

// cudaBuild is true in the GPU build: --device cuda opens GPU 0.
const cudaBuild = true

// cudaInfo is what `tapeloop info` says of the GPU backend.
var cudaInfo = map[bool]string{
	false: "built in (--device cuda, --devices; cuFFT and cuBLAS loaded at run time)",
	true:  "EMULATED on the CPU (tapeloop_cudaemu test build: correct results, no speed)",
}[cuda.Emulated]

func openDevice(ordinal int) (ops.Device, error) { return cuda.Open(ordinal) }
