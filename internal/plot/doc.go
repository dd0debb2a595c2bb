// Package plot draws figures of what tapeloop writes: a run's --report
// (time per batch and resident memory over the run), a wavelet sweep's CSV
// (one statistic over θ × φ, one panel per ξ), an affinity matrix or its
// top-k values, a stack of DRRs (a contact sheet), a registration's trace
// and a table of timings (series, iteration, seconds).
//
// Draw reads a file, tells its kind from its extension and content, and
// writes the figure as PNG or SVG, whole or not at all. Each kind of
// figure has its own file.
package plot
