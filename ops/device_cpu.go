//go:build !tapeloop_cuda && !tapeloop_cudaemu

package ops

import G "gorgonia.org/gorgonia"

func onDevice(G.Op, Device) (G.Op, error) { return nil, ErrNoDevice }
