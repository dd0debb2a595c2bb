// Package bench holds tapeloop's benchmarks: each workload's Program at the
// full sizes of the cases behind it, and side-by-side runs against the peers its users would
// otherwise run (bench/peers: NumPy/SciPy scripts), reported as ratios
// measured in the same run. Run them with make bench.
package bench
