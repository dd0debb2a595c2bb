// Package interp provides the interpolation workload: M cubic
// interpolants on a shared uniform grid, each query point evaluated
// against all of them and the M values reduced (Σ v², Σ v, all of them,
// or a formula of the user's).
//
// # Overview
//
// Config holds the options a user sets, the same for the command line, the
// C ABI and Python: each field's flag and json tags name it for each.
// Job is the workload as package engine runs it: its graph (queries →
// Interp1D → BatchStats), its batches fed from a Queries and its results
// passed to a Results. Program is the in-process object: a Job compiled
// once for an in-memory table and replayed over the queries of each call.
//
// The package reads and writes no files: the command line's layer in
// package filejob opens the table, the queries and the output around a
// Config.
package interp
