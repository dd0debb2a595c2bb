// Runs CUDA kernels (cuda/kernels' and those written for users' formulas) on the CPU, for tests on machines
// without a GPU: a block's threads are fibers on the launching thread
// (each with its own stack; __syncthreads switches to the next one until
// every thread of the block has reached it), __shared__ arrays function
// statics (blocks run one at a time), atomicAdd an atomic_ref. Slow and
// only as faithful as that: it checks the kernels' arithmetic, indexing
// and barriers, not their speed or the GPU's rounding. internal/kernelemu
// compiles the kernels against it and launches them.
#pragma once
#include <atomic>
#include <cmath>
#include <csetjmp>
#include <cstring>
#include <new>
#include <sys/mman.h>
#include <ucontext.h>
#include <vector>

struct emu_dim3 {
  unsigned x = 1, y = 1, z = 1;
};
// The running thread's and block's indices: one thread runs at a time,
// and the launcher sets them before it switches to a thread.
inline emu_dim3 threadIdx, blockIdx;
inline emu_dim3 blockDim, gridDim;
inline void emu_yield(int state);

#define __global__
#define __launch_bounds__(...)
#define __device__
#define __shared__ static
#define __syncthreads() emu_yield(emu_at_barrier)

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

// A fiber is one of a block's threads: its stack, where it stopped, and
// why (it has not started, it waits at a barrier, or it finished the
// block and will run the next one when switched to again). The fibers of
// a launch run one at a time on the launching thread, each until it
// reaches __syncthreads or the end of the block; a launcher switches back
// with _longjmp, which saves no signal mask, so a switch makes no system
// call (a fiber's first start goes through swapcontext, once a launch).
enum { emu_fresh, emu_at_barrier, emu_block_done };
struct emu_fiber {
  ucontext_t start;
  jmp_buf at;
  char *stack;
  int state;
};
inline constexpr size_t emu_stack_bytes = 256 << 10, emu_guard_bytes = 64 << 10;
inline std::vector<emu_fiber> emu_fibers; // grown to the largest block, kept
inline jmp_buf emu_launcher;
inline unsigned emu_current;
inline void (*emu_kernel)();

// emu_yield stops the running fiber in state and returns to the launcher;
// it returns when the launcher switches back. The memory clobber makes
// the kernel read __shared__ arrays again after a barrier.
__attribute__((noinline)) inline void emu_yield(int state) {
  emu_fiber &me = emu_fibers[emu_current];
  me.state = state;
  if (!_setjmp(me.at)) _longjmp(emu_launcher, 1);
  asm volatile("" ::: "memory");
}

// emu_fiber_main is every fiber's body: the kernel, once per block.
inline void emu_fiber_main() {
  for (;;) {
    emu_kernel();
    emu_yield(emu_block_done);
  }
}

// emu_resume runs thread t until it yields.
__attribute__((noinline)) inline void emu_resume(unsigned t) {
  emu_current = t;
  threadIdx = {t, 0, 0};
  emu_fiber &f = emu_fibers[t];
  asm volatile("" ::: "memory");
  if (!_setjmp(emu_launcher)) {
    if (f.state == emu_fresh) {
      ucontext_t here; // never resumed: the fiber comes back by _longjmp
      swapcontext(&here, &f.start);
    } else {
      _longjmp(f.at, 1);
    }
  }
  asm volatile("" ::: "memory");
}

// emu_prepare readies block fresh fibers, mapping stacks (each above an
// inaccessible guard, so an overflow faults) for those not mapped before;
// it throws std::bad_alloc when the stacks cannot be mapped.
inline void emu_prepare(unsigned block) {
  while (emu_fibers.size() < block) {
    void *m = mmap(nullptr, emu_guard_bytes + emu_stack_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    if (mprotect(m, emu_guard_bytes, PROT_NONE) != 0) {
      munmap(m, emu_guard_bytes + emu_stack_bytes);
      throw std::bad_alloc();
    }
    emu_fibers.push_back(emu_fiber{});
    emu_fibers.back().stack = (char *)m + emu_guard_bytes;
  }
  for (unsigned t = 0; t < block; t++) {
    emu_fiber &f = emu_fibers[t];
    if (getcontext(&f.start) != 0) throw std::bad_alloc();
    f.start.uc_stack.ss_sp = f.stack;
    f.start.uc_stack.ss_size = emu_stack_bytes;
    f.start.uc_link = nullptr;
    makecontext(&f.start, emu_fiber_main, 0);
    f.state = emu_fresh;
  }
}

// emu_launch runs the grid's blocks in turn. In a block, it switches to
// each thread in turn, which runs to its first __syncthreads or its end;
// then, while any thread waits at a barrier, to each waiting one in turn,
// so that no thread passes a barrier before every thread still running
// has reached it. f is the kernel with its arguments bound.
template <class F> void emu_launch(unsigned gx, unsigned gy, unsigned block, F f) {
  blockDim = {block, 1, 1};
  gridDim = {gx, gy, 1};
  emu_kernel = f;
  emu_prepare(block);
  for (unsigned by = 0; by < gy; by++)
    for (unsigned bx = 0; bx < gx; bx++) {
      blockIdx = {bx, by, 0};
      for (unsigned t = 0; t < block; t++) emu_resume(t);
      for (bool waiting = true; waiting;) {
        waiting = false;
        for (unsigned t = 0; t < block; t++)
          if (emu_fibers[t].state == emu_at_barrier) {
            waiting = true;
            emu_resume(t);
          }
      }
    }
}
