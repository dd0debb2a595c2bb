"""Interpolation: M cubic interpolants on a shared grid."""
import ctypes

import numpy as np

from . import shards
from ._lib import (Compiled, Error, as_array, boolean, check, compiled_input, config, converted, dtype_of, finite,
                   integer, interruptible, lib, mem_limit_of, output, params_of)


class Interp(Compiled):
    """M cubic interpolants on the shared grid a + i·dx (i = 0…G−1), values
    f[j, i], compiled once and evaluated in blocks of `batch` query points.

    f: (M, G) table, copied once at creation (as float64). dx: the grid spacing
    (default 1/(G−1)). reduce: "sumsq" (Σ v², the default), "sum", "none" (all
    M values) or a formula over the M values v at x, e.g. "max(v)", with
    params={...}; fail_on_nonfinite=True makes a NaN or ±Inf value of the
    formula an error (by default such values are returned). dtype: "float32"
    (default; None is the same) or "float64". method: "auto" or "direct". batch: the points per
    block (default: planned under mem_limit, bytes or a size such as "2GiB"; by
    default half the memory available).
    device: "cpu" (default) or "cuda" (a library built with CUDA; gpu: its
    number), as the CLI's --device.

    Call with x, a 1-D array of any length n: it returns an (n,) array, or
    (n, M) for reduce="none", computed block by block over the same buffers. A
    C-contiguous x of the compiled dtype is passed by pointer (no copy here;
    the library copies each block into the compiled program's input); any
    other x of that dtype (strided, or through __array_interface__ or the
    buffer protocol) is copied once (numpy.ascontiguousarray); another dtype
    raises Error, except float64 x for dtype="float32": each point is then
    placed on the grid in float64, as x − a, before anything is rounded to
    float32, which keeps its digits on a grid far from zero (timestamps,
    say); float32 x there keeps only what float32 held of it. out= takes a
    C-contiguous array of the result's shape and dtype, written in place.
    shard=(i, n) computes the points of shard i of n only, as a
    tapeloop.Shard for tapeloop.merge (see docs/python.md).
    """

    _what = "interp"

    def __init__(self, f, a=0.0, dx=None, *, batch=None, reduce="sumsq", params=None,
                 dtype="float32", method="auto", fail_on_nonfinite=False, mem_limit=None, device="cpu", gpu=None):
        built_from = dict(locals())
        f, dtype = converted("f", f, np.float64), dtype_of(dtype)
        if f.ndim != 2:
            raise Error(f"f=: the table has shape {f.shape}, want (M, G)")
        cfg = config(a=finite("a", a), dx=finite("dx", dx), reduce=reduce, method=method,
                     batch=integer("batch", batch) or 0, dtype=dtype,
                     fail_on_nonfinite=boolean("fail_on_nonfinite", fail_on_nonfinite),
                     params=params_of(params), mem_limit=mem_limit_of(mem_limit), device=device, gpu=gpu)
        h = ctypes.c_int64(0)
        check(lib.tl_interp_create(cfg, f.ctypes.data, f.shape[0], f.shape[1], ctypes.byref(h)))
        self._own(h.value)
        self._keep(built_from, f=f)
        b, c, s = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64()
        check(lib.tl_interp_shape(self._h, ctypes.byref(b), ctypes.byref(c), ctypes.byref(s)))
        self.batch, self.cols, self.dtype = b.value, c.value, np.dtype(dtype)
        self._values_shape = f.shape

    def __call__(self, x, out=None, *, shard=None):
        h = self._handle()
        wide = self.dtype == np.float32 and _dtype_of(x) == np.float64
        x = compiled_input("x", x, np.dtype(np.float64) if wide else self.dtype, ndim=1)
        if x.size == 0:
            raise Error("x: no query points")
        if shard is not None:
            i, n, lo, hi = shards.split(shard, x.size, "query points")
            return shards.Shard("interp", i, n, lo, hi, x.size, shards.fingerprint(self, x), self(x[lo:hi], out))
        y = output(out, self.dtype, (x.size, self.cols) if self.cols else (x.size,))
        check(lib.tl_interp_run(h, x.ctypes.data, x.size, y.ctypes.data, y.size, x.itemsize, interruptible()))
        return y

    def grad(self, x, upstream):
        """The gradients of a cost with respect to the query points and to the
        table's values, as JAX's vjp gives them: upstream is the cost's gradient
        with respect to self(x) (its shape, (n,) or (n, M) for reduce="none");
        returns (d_x, d_values): d_x, (n,) of the compiled dtype, is upstream
        times the derivative of the output with respect to each point (the
        interpolants' derivative at it, the cubic of the point's cell, from the
        right at a node; 0 where the point is clamped, below a and from
        a + (G+1)·dx on); d_values, (M, G)
        float64 as f was copied, is the transpose of the interpolation weights
        applied to upstream (the output is linear in the values, or quadratic
        for "sumsq"). x is taken as __call__ takes it; upstream is converted
        to the compiled dtype. Computed on the CPU, block by block, the blocks'
        d_values added in float64 in order. A formula reduction raises Error.
        """
        h = self._handle()
        wide = self.dtype == np.float32 and _dtype_of(x) == np.float64
        x = compiled_input("x", x, np.dtype(np.float64) if wide else self.dtype, ndim=1)
        if x.size == 0:
            raise Error("x: no query points")
        shape = (x.size, self.cols) if self.cols else (x.size,)
        up = converted("upstream", upstream, self.dtype)
        if up.shape != shape:
            raise Error(f"upstream: shape {up.shape}, want {shape} (the shape of the output for x)")
        d_x = np.empty(x.size, self.dtype)
        d_values = np.empty(self._values_shape, np.float64)
        check(lib.tl_interp_grad(h, x.ctypes.data, x.size, up.ctypes.data, up.size, d_x.ctypes.data,
                                 d_values.ctypes.data, d_values.size, x.itemsize))
        return d_x, d_values


def interp(f, x, a=0.0, dx=None, reduce="sumsq", params=None, dtype="float32", method="auto",
           batch=None, mem_limit=None, device="cpu", gpu=None, fail_on_nonfinite=False, shard=None):
    """One-shot Interp: f (M, G) evaluated at every point of x (N,); x is
    converted once when it is not already a C-contiguous array of dtype: to
    dtype, or for dtype="float32" from another numeric type to float64, which
    Interp places on the grid before rounding (see Interp)."""
    dtype, d = dtype_of(dtype), _dtype_of(x)
    wide = d is not None and d.kind in "biuf" and d != np.dtype(dtype)
    x = converted("x", x, np.float64 if wide else dtype)
    if x.ndim != 1:
        raise Error(f"x: shape {x.shape}, want (N,)")
    with Interp(f, a, dx, batch=batch, reduce=reduce, params=params, dtype=dtype, method=method,
                fail_on_nonfinite=fail_on_nonfinite, mem_limit=mem_limit, device=device, gpu=gpu) as r:
        return r(x, shard=shard)


def _dtype_of(x):
    """The dtype x has as an array, None where it cannot be read as one (the
    conversion then says why); a GPU array raises Error."""
    try:
        return as_array("x", x).dtype
    except Error:
        raise
    except (TypeError, ValueError):
        return None
