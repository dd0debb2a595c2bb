//go:build tapeloop_cuda

package main

import (
	"github.com/tapeloop/tapeloop/cuda"
	"github.com/tapeloop/tapeloop/ops"
)

// cudaBuild is true in the GPU build: --device cuda opens GPU 0.
const cudaBuild = true

func openDevice(ordinal int) (ops.Device, error) { return cuda.Open(ordinal) }
