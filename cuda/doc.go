// Package cuda is tapeloop's GPU backend, built only with the
// tapeloop_cuda build tag (gorgonia.org/cu's package init ends the process
// on a machine with no GPU, so the default build never imports it).
//
// A Device is one GPU: a CUDA context on its own locked OS thread (every
// call goes through Device.Do), the kernels of kernels/*.cu loaded from
// their PTX (committed beside the sources, embedded, JIT-compiled by the
// driver for the GPU at hand), and a pair of CUDA events that time every
// kernel, GEMM and FFT (BusySeconds). Most work goes on the context's
// default stream and every call waits for it, so errors surface at the
// call that caused them. Streams (stream.go) let an op overlap its copies
// back with its kernels, ordered by events (After) and waited for with
// End or Sync; the affinity op does.
//
// An Arena is one plain device allocation made once per Program, sized by
// the planner under --mem-limit, from which the ops take their buffers:
// device memory is bounded the way CuPy's mempool.set_limit bounds it, and
// nothing is allocated per batch.
// Every driver call's result is checked; there is no silent fallback to
// the CPU.
//
// The driver sits behind a small seam (driver.go: gorgonia.org/cu, and
// cublas.go, cufft.go, pinned.go). With the tapeloop_cudaemu tag instead,
// the same API runs on a CPU emulator (driver_emu.go, cublas_emu.go,
// cufft_emu.go, pinned_emu.go): the kernels of kernels/*.cu compiled with
// g++ by internal/kernelemu at the first launch, cuBLAS and cuFFT as
// reference loops, with checks a GPU does not make (allocation bounds,
// guard zones, NaN-filled fresh memory, streams that run work in the least
// favourable order allowed). It lets CI run the GPU flavour's whole host
// side.
//
// `make generate` rebuilds the PTX with nvcc (compute_80, which the A100,
// H100 and H200 generation JIT-compiles); TestPTXCurrent fails when the
// committed PTX is stale and skips where nvcc is missing or differs from
// the version that wrote it.
package cuda
