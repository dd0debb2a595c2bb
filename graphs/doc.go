// Package graphs is the layer of files around tapeloop's four workloads,
// which the CLI uses: each workload's spec (its Config from package
// interp, affinity, drr or wavelet, and the paths, built-in data, shards
// and resume the command line adds), the readers of its inputs, its
// outputs written whole, shards and their merge, checkpoints and resume,
// and the demo's cases. The workloads themselves, their graphs, Jobs and
// in-process Programs, know no files.
package graphs
