package cpukern

// #include "drrgrad.h"
import "C"

import "unsafe"

// DRRGrad sets out[r] to the line integral of vol from src[3r:3r+3] to
// dst[3r:3r+3] in float64, as DRR computes it in float32 (same volume
// frame, Siddon when step ≤ 0, trilinear samples otherwise, same lref),
// and, when gsrc and gdst are not nil (3 per ray), the derivatives of
// out[r] with respect to the ray's source and end point, each sample's
// weight and the segment's length held fixed (the caller moves both ends
// rigidly, which keeps the length):
//
//   - trilinear: with samples at q_k = src + f_k·(dst − src) weighing w,
//     gsrc = Σ_k w·(1 − f_k)·∇V(q_k) and gdst = Σ_k w·f_k·∇V(q_k), ∇V the
//     gradient (per mm) of the trilinear interpolant (zero outside);
//   - Siddon: out = len·Σ_k V_k·(a_{k+1} − a_k) over the voxels crossed;
//     a crossing of the plane x_a = p at fraction a adds
//     len·(V_before − V_after)·(−(1 − a), −a)/(dst_a − src_a) to
//     (gsrc_a, gdst_a), the box's entry and exit included (the value
//     outside is 0).
//
// It is serial (one call into C over the rays) and safe to call
// concurrently on disjoint outputs. A padded volume (vol.Padded) takes the
// trilinear fast path, which needs no bounds tests.
func DRRGrad(vol *Grid, src, dst []float64, out, gsrc, gdst []float64, step, lref float64) {
	n := len(out)
	if len(src) < 3*n || len(dst) < 3*n {
		panic("cpukern: DRRGrad: short ray arrays")
	}
	if (gsrc == nil) != (gdst == nil) || (gsrc != nil && (len(gsrc) < 3*n || len(gdst) < 3*n)) {
		panic("cpukern: DRRGrad: gsrc and gdst must both be nil or hold 3 values per ray")
	}
	checkVolume(vol)
	if n == 0 {
		return
	}
	var gs, gd *C.double
	if gsrc != nil {
		gs, gd = (*C.double)(unsafe.Pointer(&gsrc[0])), (*C.double)(unsafe.Pointer(&gdst[0]))
	}
	C.tl_drr_grad((*C.float)(unsafe.Pointer(&vol.V[0])), (*C.int64_t)(unsafe.Pointer(&vol.N[0])),
		(*C.double)(unsafe.Pointer(&vol.Corner[0])), (*C.double)(unsafe.Pointer(&vol.Spacing[0])), cbool(vol.Padded),
		C.int64_t(n), (*C.double)(unsafe.Pointer(&src[0])), (*C.double)(unsafe.Pointer(&dst[0])),
		(*C.double)(unsafe.Pointer(&out[0])), gs, gd, C.double(step), C.double(lref))
}

// DRRBackProject adds Σ_r g[r]·∂out[r]/∂vol.V to grad (float64, len(vol.V),
// vol.V's layout): the adjoint of DRRGrad's map from the volume's values
// to the line integrals, over the rays of g. The volume's values are not
// read. Serial, and safe to call concurrently on disjoint grads.
func DRRBackProject(vol *Grid, src, dst, g, grad []float64, step, lref float64) {
	n := len(g)
	if len(src) < 3*n || len(dst) < 3*n {
		panic("cpukern: DRRBackProject: short ray arrays")
	}
	if len(grad) != len(vol.V) {
		panic("cpukern: DRRBackProject: grad does not match the volume")
	}
	checkVolume(vol)
	if n == 0 {
		return
	}
	C.tl_drr_backproject((*C.int64_t)(unsafe.Pointer(&vol.N[0])), (*C.double)(unsafe.Pointer(&vol.Corner[0])),
		(*C.double)(unsafe.Pointer(&vol.Spacing[0])), cbool(vol.Padded), C.int64_t(n),
		(*C.double)(unsafe.Pointer(&src[0])), (*C.double)(unsafe.Pointer(&dst[0])), (*C.double)(unsafe.Pointer(&g[0])),
		(*C.double)(unsafe.Pointer(&grad[0])), C.double(step), C.double(lref))
}
