//go:build tapeloop_cudaemu && !tapeloop_cuda

// The kernels of kernels/*.cu compiled for the CPU emulator (kernels/emu),
// called by driver_emu.go in place of cuLaunchKernel. Arguments come as
// the 8-byte words cuLaunchKernel would be given.
#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/emu/emu.h"

#include "kernels/drr.cu"
#include "kernels/interp.cu"
#include "kernels/pairwise.cu"
#include "kernels/wavelet.cu"

static const uint64_t *emu_words; // the launch's arguments (launches are serialised)

static void *Pa(int i) { return (void *)(uintptr_t)emu_words[i]; }
static long La(int i) { return (long)emu_words[i]; }
static double Da(int i) {
  double d;
  memcpy(&d, &emu_words[i], sizeof d);
  return d;
}

#include "kernels/emu/dispatch.h"

extern "C" int tl_emu_launch(const char *kernel, unsigned gx, unsigned gy, unsigned block, const uint64_t *words, int nargs) {
  emu_words = words;
  try {
    return emu_dispatch(kernel, gx, gy, block, nargs);
  } catch (...) { // std::thread could not start one of the block's threads
    return -3;
  }
}
