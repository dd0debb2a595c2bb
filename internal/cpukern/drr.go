package cpukern

// #include "drr.h"
import "C"

import (
	"unsafe"

	"github.com/tapeloop/tapeloop/internal/sysmem"
)

// Volume is a voxel volume for ray casting: V holds N[0]·N[1]·N[2] values
// in C order, voxel (i, j, k) spanning [Origin + (i, j, k)⊙Spacing,
// Origin + (i+1, j+1, k+1)⊙Spacing) in mm.
type Volume struct {
	V       []float32
	N       [3]int64
	Origin  [3]float64
	Spacing [3]float64
	// Padded says V carries a border of one zero voxel on every side that
	// is not part of the data (see PadVolume).
	Padded bool
}

// PadVolume returns a copy of v with a border of zero voxels on every side,
// origin moved out by one voxel: the same line integrals, but trilinear
// sampling needs no boundary tests. Padding a padded volume returns it.
func PadVolume(v *Volume) *Volume {
	if v.Padded {
		return v
	}
	nx, ny, nz := v.N[0], v.N[1], v.N[2]
	p := &Volume{N: [3]int64{nx + 2, ny + 2, nz + 2}, Spacing: v.Spacing, Padded: true}
	for a := range 3 {
		p.Origin[a] = v.Origin[a] - v.Spacing[a]
	}
	p.V = make([]float32, p.N[0]*p.N[1]*p.N[2])
	sysmem.AdviseHugePagesOf(p.V)
	for i := range nx {
		for j := range ny {
			copy(p.V[((i+1)*(ny+2)+j+1)*(nz+2)+1:], v.V[(i*ny+j)*nz:(i*ny+j+1)*nz])
		}
	}
	return p
}

// DRR sets out[r] to the line integral of vol along the segment from
// src[3r:3r+3] to dst[3r:3r+3]: exact (Siddon's radiological path) when
// step ≤ 0, else the sum of trilinear samples (zero outside) at the
// fractions (k + ½)·step/lref of the segment, each weighing step·len/lref
// mm on a segment len mm long. The samples are step mm apart on a segment
// lref mm long and closer on shorter ones; lref ≤ 0 stands for each
// segment's own length, which places them every step mm.
func DRR(vol *Volume, src, dst []float64, out []float32, step, lref float64) {
	n := len(out)
	if len(src) < 3*n || len(dst) < 3*n {
		panic("cpukern: DRR: short ray arrays")
	}
	checkVolume(vol)
	if n == 0 {
		return
	}
	os := volumeGeometry(vol)
	C.tl_drr((*C.float)(unsafe.Pointer(&vol.V[0])), (*C.int64_t)(unsafe.Pointer(&vol.N[0])), (*C.double)(unsafe.Pointer(&os[0])), cbool(vol.Padded),
		C.int64_t(n), (*C.double)(unsafe.Pointer(&src[0])), (*C.double)(unsafe.Pointer(&dst[0])),
		(*C.float)(unsafe.Pointer(&out[0])), C.double(step), C.double(lref))
}

// DRRFan is DRR for the n rays from src to dst0 + r·dd, r = 0 … n−1,
// writing out[r·stride]. Trilinear fans whose end points step along z
// (dd[0] = dd[1] = 0) in a padded volume take a faster path that shares
// each sample's x and y across the fan.
func DRRFan(vol *Volume, src, dst0, dd [3]float64, n int, out []float32, stride int, step, lref float64) {
	if n < 0 || stride < 1 || (n > 0 && len(out) < (n-1)*stride+1) {
		panic("cpukern: DRRFan: short output")
	}
	checkVolume(vol)
	if n == 0 {
		return
	}
	os := volumeGeometry(vol)
	C.tl_drr_fan((*C.float)(unsafe.Pointer(&vol.V[0])), (*C.int64_t)(unsafe.Pointer(&vol.N[0])), (*C.double)(unsafe.Pointer(&os[0])), cbool(vol.Padded),
		(*C.double)(unsafe.Pointer(&src[0])), (*C.double)(unsafe.Pointer(&dst0[0])), (*C.double)(unsafe.Pointer(&dd[0])),
		C.int64_t(n), (*C.float)(unsafe.Pointer(&out[0])), C.int64_t(stride), C.double(step), C.double(lref))
}

func checkVolume(vol *Volume) {
	if int64(len(vol.V)) != vol.N[0]*vol.N[1]*vol.N[2] || len(vol.V) == 0 {
		panic("cpukern: DRR: volume size does not match its shape")
	}
}

// volumeGeometry is the origin and spacing as the C side takes them.
func volumeGeometry(vol *Volume) [6]float64 {
	return [6]float64{vol.Origin[0], vol.Origin[1], vol.Origin[2], vol.Spacing[0], vol.Spacing[1], vol.Spacing[2]}
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
