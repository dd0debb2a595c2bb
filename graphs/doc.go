// Package graphs holds tapeloop's four workloads (interp, affinity, drr,
// wavelet): each one's graph and Job, run by package engine, and the
// layer around them that the CLI and the in-process objects use: their
// specs and validation, input files, outputs written whole, shards,
// checkpoints and resume.
package graphs
