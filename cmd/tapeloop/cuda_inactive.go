//go:build !tapeloop_cuda && !tapeloop_cudaemu

package main

import "github.com/tapeloop/tapeloop/ops"

// cudaBuild is false in the default build: --device cuda says how to get
// the GPU flavour.
const cudaBuild = false

// cudaInfo is what `tapeloop info` says of the GPU backend.
const cudaInfo = "not in this build (make build-cuda)"

func openDevice(int) (ops.Device, error) { return nil, ops.ErrNoDevice }
