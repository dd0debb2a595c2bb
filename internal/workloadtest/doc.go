// Package workloadtest holds what the tests of the workloads
// (graphs/affinity, graphs/drr, graphs/interp, graphs/wavelet) and of the
// file layer around them (internal/filejob) share: the devices their
// compiled programs run on, the comparison of a GPU's results with the
// CPU's, and the table tests of a Validate method.
package workloadtest
