// Package affinity provides the pairwise-affinity workload: the affinity
// A[i, j] of every pair of N flattened images (a built-in metric or the
// user's formula), computed one block of rows at a time against all N
// images, so that memory is O(block·N + N·D), never (N, N, D).
//
// Config is what the user chooses for the computation, shared by the
// command line (package filejob reads the images and writes the outputs
// around it), the C ABI and the Python package. Job is the computation as
// an engine.Job: its graph, fed a block of row indices and consumed block
// by block, in one of three modes (streamed rows, the K largest of each
// row, or the whole matrix computing each pair once). Program is the
// in-process object: compiled once for N images of D values, each Run
// computing the affinities of the caller's images into the caller's
// arrays.
//
// The package reads and writes no files: a Job hands its rows to a
// RowWriter.
package affinity
