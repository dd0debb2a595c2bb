//go:build !tapeloop_cuda

package main

import "github.com/tapeloop/tapeloop/ops"

// cudaBuild is false in the default build: --device cuda says how to get
// the GPU flavour.
const cudaBuild = false

func openDevice(int) (ops.Device, error) { return nil, ops.ErrNoDevice }
