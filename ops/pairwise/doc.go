// Package pairwise holds tapeloop's affinity ops: Pairwise (the built-in
// metrics), PairwiseFormula and PairMap (a user's formula per pair),
// PairwiseU8 (8-bit images), TopK and Mirror, the fused passes
// PairwiseTopK (GPU) and PairwiseMatrix (GPU, and the CPU's float32 dot
// products), and PairData, the images they share.
//
// They follow package ops's conventions (see its doc): each op owns its
// output buffer, and its CUDA twin lives beside it in NAME_cuda.go under
// the tapeloop_cuda (or tapeloop_cudaemu) build tag. ops.OnDevice picks the
// twin through the op's OnDevice method, since package ops cannot import
// this one. The kernels' launch argument lists are in kernels.go.
package pairwise
