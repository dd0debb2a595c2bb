// Package rigid holds rigid transforms of 3-D space parametrised as
// registration optimises them: a rotation vector ω (axis times angle, in
// radians) about a centre c, then a translation t (mm),
//
//	T(x) = R(ω)·(x − c) + c + t,
//
// with R(ω) from Rodrigues' formula, its inverse, its 4×4 matrix, and the
// derivatives of T⁻¹(y) with respect to the six parameters (ω, t), which
// carry a rendered image's gradient from the rays to the pose.
package rigid
