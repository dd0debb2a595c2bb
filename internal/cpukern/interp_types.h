// interp.c includes this file once per instruction set, with the set's
// D_ macros defined: it builds interp_impl.h's kernels for float and
// double, then undefines the set's macros (interp_undef.h).
#define T float
#define TS f32
#define IT int32_t
#include "interp_impl.h"
#undef T
#undef TS
#undef IT
#define T double
#define TS f64
#define IT int64_t
#include "interp_impl.h"
#undef T
#undef TS
#undef IT
#include "interp_undef.h"
