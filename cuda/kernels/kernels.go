// Package kernels holds the CUDA C sources of the GPU backend's kernels
// (*.cu, each committed with its PTX beside it), embedded for the CUDA
// emulator (internal/kernelemu), which compiles them with g++.
package kernels

import "embed"

// Sources holds *.cu.
//
//go:embed *.cu
var Sources embed.FS
