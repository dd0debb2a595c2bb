package cpukern

// #include "drr.h"
import "C"

import "unsafe"

// Grid is a volume as the ray kernels take it: in its own frame,
// axis-aligned (ops.DRR maps rays into that frame), V holding
// N[0]·N[1]·N[2] values with the last index fastest, voxels Spacing mm
// apart and the box's low corner at Corner (the centre of voxel 0 less
// half a voxel). Padded says V carries a border of one zero voxel on
// every side, which is no part of the data: the trilinear paths then need
// no bounds tests.
type Grid struct {
	V       []float32
	N       [3]int64
	Corner  [3]float64
	Spacing [3]float64
	Padded  bool
}

// DRR sets out[r] to the line integral of vol along the segment from
// src[3r:3r+3] to dst[3r:3r+3]: exact (Siddon's radiological path) when
// step ≤ 0, else the sum of trilinear samples (zero outside) at the
// fractions (k + ½)·step/lref of the segment, each weighing step·len/lref
// mm on a segment len mm long. The samples are step mm apart on a segment
// lref mm long and closer on shorter ones; lref ≤ 0 stands for each
// segment's own length, which places them every step mm.
func DRR(vol *Grid, src, dst []float64, out []float32, step, lref float64) {
	n := len(out)
	if len(src) < 3*n || len(dst) < 3*n {
		panic("cpukern: DRR: short ray arrays")
	}
	checkVolume(vol)
	if n == 0 {
		return
	}
	C.tl_drr((*C.float)(unsafe.Pointer(&vol.V[0])), (*C.int64_t)(unsafe.Pointer(&vol.N[0])),
		(*C.double)(unsafe.Pointer(&vol.Corner[0])), (*C.double)(unsafe.Pointer(&vol.Spacing[0])), cbool(vol.Padded),
		C.int64_t(n), (*C.double)(unsafe.Pointer(&src[0])), (*C.double)(unsafe.Pointer(&dst[0])),
		(*C.float)(unsafe.Pointer(&out[0])), C.double(step), C.double(lref))
}

// A Fan is the run of N rays from Src to Dst0 + r·DD, r = 0 … N−1, whose
// line integrals DRRFans writes to out[Off + r·Stride]; LRef is the lref
// of DRR. Its layout is C's tl_fan (checked at start-up).
type Fan struct {
	Src, Dst0, DD  [3]float64
	N, Stride, Off int
	LRef           float64
}

func init() {
	var f Fan
	var got [5]C.int64_t
	C.tl_fan_layout(&got[0])
	want := [5]uintptr{unsafe.Sizeof(f), unsafe.Offsetof(f.Dst0), unsafe.Offsetof(f.N), unsafe.Offsetof(f.Off), unsafe.Offsetof(f.LRef)}
	for i := range want {
		if int64(got[i]) != int64(want[i]) {
			panic("cpukern: Fan and tl_fan differ in layout")
		}
	}
}

// DRRFans renders the rays of every fan, in one call into C (each call
// costs the Go scheduler a hand-off when it runs long, so fans go in
// groups). Fans whose end points step along z (DD[0] = DD[1] = 0) take
// faster paths that share the rays' x and y: for Siddon always, for
// trilinear in a padded volume.
func DRRFans(vol *Grid, fans []Fan, out []float32, step float64) {
	for i := range fans {
		f := &fans[i]
		if f.N < 0 || f.Stride < 1 || f.Off < 0 || (f.N > 0 && len(out) < f.Off+(f.N-1)*f.Stride+1) {
			panic("cpukern: DRRFans: a fan reaches past the output")
		}
	}
	checkVolume(vol)
	if len(fans) == 0 || len(out) == 0 {
		return
	}
	C.tl_drr_fans((*C.float)(unsafe.Pointer(&vol.V[0])), (*C.int64_t)(unsafe.Pointer(&vol.N[0])),
		(*C.double)(unsafe.Pointer(&vol.Corner[0])), (*C.double)(unsafe.Pointer(&vol.Spacing[0])), cbool(vol.Padded),
		(*C.tl_fan)(unsafe.Pointer(&fans[0])), C.int64_t(len(fans)), (*C.float)(unsafe.Pointer(&out[0])), C.double(step))
}

func checkVolume(vol *Grid) {
	if int64(len(vol.V)) != vol.N[0]*vol.N[1]*vol.N[2] || len(vol.V) == 0 {
		panic("cpukern: DRR: volume size does not match its shape")
	}
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
