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
  auto run = [&](auto f) { emu_launch(gx, gy, block, f); };
  if (k == "interp1d_f32")
    run([] { interp1d_f32((const float *)Pa(0), La(1), Da(2), Da(3), Da(4), La(5), La(6), La(7), (const double *)Pa(8),
                          (const double *)Pa(9), (const float *)Pa(10), (float *)Pa(11)); });
  else if (k == "drr")
    run([] { drr((const float *)Pa(0), La(1), La(2), La(3), Da(4), Da(5), Da(6), Da(7), Da(8), Da(9), (const double *)Pa(10),
                 La(11), La(12), La(13), Da(14), (float *)Pa(15)); });
  else if (k.rfind("pairwise_", 0) == 0) {
    auto fn = k == "pairwise_l1" ? pairwise_l1 : k == "pairwise_l2" ? pairwise_l2 : k == "pairwise_dot" ? pairwise_dot : pairwise_cosine;
    run([fn] { fn((const float *)Pa(0), La(1), (const float *)Pa(2), La(3), La(4), (float *)Pa(5), La(6),
                  (const double *)Pa(7), (const double *)Pa(8)); });
  } else if (k == "cosine_scale")
    run([] { cosine_scale((float *)Pa(0), La(1), La(2), La(3), (const double *)Pa(4), (const double *)Pa(5)); });
  else if (k == "hat_scatter")
    run([] { hat_scatter((float *)Pa(0), La(1), La(2), La(3), La(4), La(5), La(6), Da(7), Da(8), Da(9), Da(10), Da(11), Da(12), Da(13),
                         Da(14), Da(15), Da(16), Da(17), (double *)Pa(18)); });
  else if (k == "cmul")
    run([] { cmul((float2 *)Pa(0), (const float2 *)Pa(1), La(2)); });
  else if (k == "crop_stats")
    run([] { crop_stats((const float *)Pa(0), La(1), La(2), La(3), La(4), La(5), La(6), La(7), La(8), Da(9), (double *)Pa(10)); });
  else
    return 5;
  for (int i = 0; i < n; i++) {
    if (files[i].empty()) continue;
    FILE *f = fopen(files[i].c_str(), "wb");
    fwrite(bufs[i].data(), 1, bufs[i].size() - 64, f);
    fclose(f);
  }
  return 0;
}
