// emu_dispatch runs the kernel named k over gx×gy blocks of block threads
// on the CPU, with the arguments the includer's Pa (pointer), La (64-bit
// integer) and Da (double) return by position. It returns 0, -1 for an
// unknown kernel, or -2 when nargs is not the kernel's number of
// parameters. Include it after emu.h, the kernels, and Pa, La, Da.
#pragma once
#include <string>

static int emu_dispatch(const std::string &k, unsigned gx, unsigned gy, unsigned block, int nargs) {
  auto run = [&](int want, auto f) {
    if (nargs != want) return -2;
    emu_launch(gx, gy, block, f);
    return 0;
  };
  if (k == "interp1d_f32")
    return run(12, [] {
      interp1d_f32((const float *)Pa(0), La(1), Da(2), Da(3), Da(4), La(5), La(6), La(7), (const double *)Pa(8),
                   (const double *)Pa(9), (const float *)Pa(10), (float *)Pa(11));
    });
  if (k == "drr")
    return run(16, [] {
      drr((const float *)Pa(0), La(1), La(2), La(3), Da(4), Da(5), Da(6), Da(7), Da(8), Da(9), (const double *)Pa(10), La(11),
          La(12), La(13), Da(14), (float *)Pa(15));
    });
  if (k == "pairwise_l1" || k == "pairwise_l2" || k == "pairwise_dot" || k == "pairwise_cosine") {
    auto fn = k == "pairwise_l1"    ? pairwise_l1
              : k == "pairwise_l2"  ? pairwise_l2
              : k == "pairwise_dot" ? pairwise_dot
                                    : pairwise_cosine;
    return run(9, [fn] {
      fn((const float *)Pa(0), La(1), (const float *)Pa(2), La(3), La(4), (float *)Pa(5), La(6), (const double *)Pa(7),
         (const double *)Pa(8));
    });
  }
  if (k == "cosine_scale")
    return run(6, [] { cosine_scale((float *)Pa(0), La(1), La(2), La(3), (const double *)Pa(4), (const double *)Pa(5)); });
  if (k == "hat_scatter")
    return run(19, [] {
      hat_scatter((float *)Pa(0), La(1), La(2), La(3), La(4), La(5), La(6), Da(7), Da(8), Da(9), Da(10), Da(11), Da(12), Da(13),
                  Da(14), Da(15), Da(16), Da(17), (double *)Pa(18));
    });
  if (k == "hat_spectrum")
    return run(18, [] {
      hat_spectrum((float2 *)Pa(0), (const float2 *)Pa(1), La(2), La(3), La(4), Da(5), Da(6), Da(7), Da(8), Da(9), Da(10),
                   Da(11), Da(12), Da(13), Da(14), Da(15), Da(16), (double *)Pa(17));
    });
  if (k == "cmul") return run(3, [] { cmul((float2 *)Pa(0), (const float2 *)Pa(1), La(2)); });
  if (k == "crop_stats")
    return run(11, [] {
      crop_stats((const float *)Pa(0), La(1), La(2), La(3), La(4), La(5), La(6), La(7), La(8), Da(9), (double *)Pa(10));
    });
  if (k == "topk_rows" || k == "topk_rows128") {
    auto fn = k == "topk_rows" ? topk_rows : topk_rows128;
    return run(7, [fn] { fn((const float *)Pa(0), La(1), La(2), La(3), La(4), (double *)Pa(5), (double *)Pa(6)); });
  }
  if (k == "transpose")
    return run(6, [] { transpose((const float *)Pa(0), La(1), La(2), La(3), (float *)Pa(4), La(5)); });
  if (k == "finish_stats")
    return run(5, [] { finish_stats((const double *)Pa(0), La(1), (const double *)Pa(2), La(3), (double *)Pa(4)); });
  if (k == "reflect_extend")
    return run(11, [] {
      reflect_extend((const float *)Pa(0), La(1), La(2), La(3), (float *)Pa(4), La(5), La(6), La(7), La(8), La(9), La(10));
    });
  return -1;
}
