// Package finite finds the first NaN or ±Inf in a slice of floats, at a
// few gigabytes a second, for the checks every input passes before a run.
package finite
