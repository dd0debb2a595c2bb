// Package wavelet provides the wavelet sweep: a volume convolved with a
// stretched, rotated Mexican hat ψ = (3 − q)·exp(−q/2) (or the user's
// kernel) for every (θ, φ, ξ) of a grid, each response reduced to its
// statistics.
//
// Config holds what a user sets for the computation (the kernel scale,
// the boundary, the formulas), the same for the command line, the C ABI
// and Python. The volume and the sweep's values are data: Job runs one
// sweep of one volume under package engine, and Program (Compile) keeps
// one volume compiled in process and sweeps a new grid on each call.
// Files, shards, checkpoints and resuming are package filejob's layer
// around this one: the Job's hooks (SetCSV, SetSaver, Restorer) are
// where it writes and restores.
package wavelet
