// Package filejob is the file layer around tapeloop's workloads, which the
// command line uses: each workload's spec (its Config from package interp,
// affinity, drr, wavelet or register, and the paths, built-in data, shards
// and resume the command line adds), the readers of its inputs, its outputs
// written whole, shards and their merge, checkpoints and resume, the
// transform and geometry files of registration, and the demo's cases. The
// workloads themselves (graphs/...), their graphs, Jobs and in-process
// Programs, know no files; the engine (internal/engine) that runs them
// knows no workload.
package filejob
