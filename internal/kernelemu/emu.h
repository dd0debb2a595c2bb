// Runs CUDA kernels (cuda/kernels' and those written for users' formulas) on the CPU, for tests on machines
// without a GPU: a block's threads are std::threads, __syncthreads a
// barrier, __shared__ arrays function statics (blocks run one at a time),
// atomicAdd an atomic_ref. Slow and only as faithful as that: it checks the
// kernels' arithmetic and indexing, not their speed or the GPU's rounding.
// internal/kernelemu compiles the kernels against it and launches them.
#pragma once
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

struct emu_dim3 {
  unsigned x = 1, y = 1, z = 1;
};
inline thread_local emu_dim3 threadIdx, blockIdx;
inline emu_dim3 blockDim, gridDim;
inline thread_local std::barrier<> *emu_bar;

#define __global__
#define __launch_bounds__(...)
#define __device__
#define __shared__ static
#define __syncthreads() emu_bar->arrive_and_wait()

struct float2 {
  float x, y;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float atomicAdd(float *p, float v) { return std::atomic_ref<float>(*p).fetch_add(v); }
inline double atomicAdd(double *p, double v) { return std::atomic_ref<double>(*p).fetch_add(v); }
template <class T> inline T __ldg(const T *p) { return *p; } // the read-only cache load
// a + b rounded down (a float's sum with a float is exact in double at the
// kernels' magnitudes), and a float's bits.
inline float __fadd_rd(float a, float b) {
  double s = (double)a + (double)b;
  float f = (float)s;
  return (double)f > s ? std::nextafter(f, -INFINITY) : f;
}
inline int __float_as_int(float f) {
  int i;
  std::memcpy(&i, &f, sizeof i);
  return i;
}
using std::exp;
using std::fabs;
using std::floor;
using std::fmax;
using std::fmin;
using std::sqrt;
using std::ceil; // floorf, fmaf, fminf, fmaxf: the C library's, from <cmath>

// emu_launch starts the block's threads once per launch; they run the
// blocks in turn, meeting at a barrier after each, so that no thread
// starts a block (and touches its __shared__ arrays) before all finish
// the one before.
template <class F> void emu_launch(unsigned gx, unsigned gy, unsigned block, F f) {
  blockDim = {block, 1, 1};
  gridDim = {gx, gy, 1};
  std::barrier<> bar((std::ptrdiff_t)block);
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < block; t++)
    ts.emplace_back([&, t] {
      threadIdx = {t, 0, 0};
      emu_bar = &bar;
      for (unsigned by = 0; by < gy; by++)
        for (unsigned bx = 0; bx < gx; bx++) {
          blockIdx = {bx, by, 0};
          f();
          bar.arrive_and_wait();
        }
    });
  for (auto &th : ts) th.join();
}
