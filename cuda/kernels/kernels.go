// Package kernels holds the CUDA C sources of the GPU backend's kernels
// (*.cu, each committed with its PTX beside it) and the header that runs
// them on the CPU (emu/emu.h), embedded for the CUDA emulator
// (internal/kernelemu), which compiles them with g++.
package kernels

import "embed"

// Sources holds *.cu and emu/emu.h.
//
//go:embed *.cu emu/emu.h
var Sources embed.FS
