// emu KERNEL GX GY BLOCK ARG…: runs one kernel of cuda/kernels on the CPU
// (emu.h). ARG is p:FILE (a buffer read from FILE and written back to it
// after the kernel), l:INT (64-bit integer) or d:FLOAT (double).
#include "emu.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../drr.cu"
#include "../interp.cu"
#include "../pairwise.cu"
#include "../wavelet.cu"

static std::vector<std::vector<char>> bufs;
static std::vector<std::string> files;
static std::vector<long> longs;
static std::vector<double> dbls;

static void *Pa(int i) { return bufs[i].data(); }
static long La(int i) { return longs[i]; }
static double Da(int i) { return dbls[i]; }

#include "dispatch.h"

int main(int argc, char **argv) {
  if (argc < 5) return 2;
  std::string k = argv[1];
  unsigned gx = atoi(argv[2]), gy = atoi(argv[3]), block = atoi(argv[4]);
  int n = argc - 5;
  bufs.resize(n);
  files.resize(n);
  longs.resize(n);
  dbls.resize(n);
  for (int i = 0; i < n; i++) {
    const char *a = argv[5 + i];
    if (a[0] == 'p') {
      files[i] = a + 2;
      FILE *f = fopen(a + 2, "rb");
      if (!f) return 3;
      fseek(f, 0, SEEK_END);
      long sz = ftell(f);
      fseek(f, 0, SEEK_SET);
      bufs[i].resize(sz + 64);
      if (fread(bufs[i].data(), 1, sz, f) != (size_t)sz) return 4;
      fclose(f);
    } else if (a[0] == 'l') {
      longs[i] = atol(a + 2);
    } else {
      dbls[i] = atof(a + 2);
    }
  }
  switch (emu_dispatch(k, gx, gy, block, n)) {
  case -1: return 5; // no such kernel
  case -2: return 6; // wrong number of arguments
  }
  for (int i = 0; i < n; i++) {
    if (files[i].empty()) continue;
    FILE *f = fopen(files[i].c_str(), "wb");
    fwrite(bufs[i].data(), 1, bufs[i].size() - 64, f);
    fclose(f);
  }
  return 0;
}
