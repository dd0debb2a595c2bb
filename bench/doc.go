// Package bench holds tapeloop's benchmarks: each workload's Program at the
// full sizes of the cases behind it, and side-by-side runs against the peers its users would
// otherwise run (bench/peers: NumPy/SciPy scripts, and the field's own tools,
// FAISS for nearest neighbours and plastimatch for DRRs), reported as ratios
// measured in the same run. Run them with make bench; make compare runs
// compare.py, every peer at its best on the same inputs, in one table
// (PLOT=DIR also draws each row's times). With TAPELOOP_FLATCOST=DIR the
// naive/planned pairs write their time per iteration instead of
// benchmarking (flatcost_test.go), for tapeloop plot.
package bench
