// Package graphstest holds what the tests of package graphs and of its
// workload packages (graphs/affinity, graphs/drr, graphs/interp,
// graphs/wavelet) share: the devices their compiled programs run on, the
// comparison of a GPU's results with the CPU's, and the table tests of a
// Validate method.
package graphstest
