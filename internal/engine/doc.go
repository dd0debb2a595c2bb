// Package engine compiles a workload, given as a Gorgonia expression
// graph, once into a TapeMachine for a fixed batch shape, and runs it
// batch after batch over buffers allocated once. It knows no workload by
// name: each is a Workload (its graph) and a Job (its batches).
//
// # Overview
//
// A Workload builds its graph for a given batch size. Compile turns it into
// a Program whose input nodes are bound to preallocated tensors; Plan picks
// the batch size from the graph's static shapes under a memory limit; Run
// drives a Job (a Workload that also feeds batches and consumes results)
// through every batch, recording per-batch telemetry.
//
// # Invariants
//
// After the first batch a replay allocates almost nothing: inputs are copied
// into the bound tensors, the ops that carry the work own their outputs
// (see package ops), and outputs are copied into result buffers allocated
// at compile time. A short last batch is padded with zeros and the padding
// is discarded. Each batch's tape runs on the goroutine that runs the
// batch (RunOnCaller, which tapeloop's copy of gorgonia adds), not on a
// goroutine of its own as gorgonia's RunAll starts, so that a batch is not
// handed to another thread and back.
package engine
