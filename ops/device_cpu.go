//go:build !tapeloop_cuda

package ops

import G "gorgonia.org/gorgonia"

func onDevice(G.Op, Device) (G.Op, error) { return nil, ErrNoDevice }
