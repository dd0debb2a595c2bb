"""Pairwise affinities of flattened images."""
import ctypes

import numpy as np

from . import shards
from ._lib import (DEFAULT_INT, MAIN_THREAD, SIGINT, Compiled, Error, boolean, check, compiled_input, config,
                   converted, dtype_of, get_ident, getsignal, integer, interruptible, lib, mem_limit_of, numbers,
                   output, params_of)


class Affinity(Compiled):
    """The affinities of a batch of B flattened images of D values, against
    itself or against C other images, compiled once for shape=(B, D) and dtype.

    metric: "dot" (default), "cosine", "l1" (−Σ|xi−xj|) or "l2" (−Σ(xi−xj)²);
    or formula: your own affinity of images a and b, e.g.
    "exp(-sum((a-b)^2)/(2*s^2))", with params={"s": 40}, and method "auto" or
    "direct" — the CLI's --metric, --formula, --param and --method;
    fail_on_nonfinite=True raises Error when the formula gives NaN or ±Inf
    (the CLI's --fail-on-nonfinite). dtype: "float32" (default; None is the
    same) or "float64".
    topk=K keeps each row's K largest affinities, self excluded (the CLI's
    --topk). cols=C compiles rows against C column images. block: rows per
    replay (the CLI's --block; default planned under mem_limit, bytes or a
    size such as "2GiB"). device: "cpu" (default) or "cuda" (a library built
    with CUDA; gpu: its number), as the CLI's --device; tf32=True lets the
    GPU's dot products (dot and cosine) use TF32 tensor cores (the CLI's
    --tf32; it needs device="cuda").

    Call with X, a (B, D) array of dtype: it returns the (B, B) matrix, or with
    topk the pair (indices, values), int64 and float64 (B, K), best first.
    With cols=C call with (X, Y), Y a (C, D) array: it returns the (B, C)
    matrix; each row is computed against its own batch too (B·(B+C) pairs).
    A C-contiguous X of the compiled dtype is passed by pointer (no copy here;
    the library copies it into the compiled program's buffers during the
    call); any other X of that dtype is copied once
    (numpy.ascontiguousarray); another dtype or shape raises Error. out=
    takes a C-contiguous output array (without topk), written in place.

    shard=(i, n) compiles the rows of shard i of n only, split as the CLI's
    --shard i/n splits them: each call then returns a tapeloop.Shard whose
    value is those rows of the matrix (or their top k), the CLI's shard's
    numbers bit for bit; tapeloop.merge puts the shards together into the
    whole call's result.
    """

    _what = "affinity"
    _plain = False

    def __init__(self, metric=None, formula=None, params=None, *, shape, dtype="float32", method=None,
                 cols=None, topk=None, block=None, mem_limit=None, device="cpu", gpu=None, tf32=False,
                 fail_on_nonfinite=False, shard=None):
        built_from = dict(locals())
        b, d = numbers("shape", shape, 2, int)
        dtype = dtype_of(dtype)
        block, cols, topk = integer("block", block), integer("cols", cols), integer("topk", topk)
        if block is not None and block < 1:
            raise Error(f"block= {block}: must be at least 1")
        self._shard = None
        if shard is not None:
            i, n, lo, hi = shards.split(shard, b, "rows")
            self._shard = (i, n, lo, hi)
        cfg = config(n=b, d=d, dtype=dtype, metric=(metric or "dot") if (metric or not formula) else None,
                     formula=formula, params=params_of(params), method=method, cols=cols,
                     topk=topk, batch=block or 0, mem_limit=mem_limit_of(mem_limit),
                     device=device, gpu=gpu, tf32=boolean("tf32", tf32),
                     fail_on_nonfinite=boolean("fail_on_nonfinite", fail_on_nonfinite),
                     shard=None if self._shard is None else list(self._shard[:2]))
        h = ctypes.c_int64(0)
        check(lib.tl_affinity_create(cfg, ctypes.byref(h)))
        self._own(h.value)
        self._keep(built_from)
        self.shape, self.dtype = (b, d), np.dtype(dtype)
        self.cols, self.topk = int(cols or 0), int(topk or 0)
        self._run, self._size = lib.tl_affinity_run, b * d
        # the call's fast path: X and out exactly as compiled
        self._plain = not self.cols and not self.topk and shard is None
        self._typestr, self._oshape = self.dtype.str, (b, b)

    def __call__(self, X, Y=None, out=None):
        # The fast path: X and out C-contiguous arrays exactly as compiled,
        # read from one __array_interface__ each (strides None: C order).
        if self._plain and type(X) is np.ndarray and type(out) is np.ndarray and Y is None and self._h:
            xi, oi = X.__array_interface__, out.__array_interface__
            if (xi["strides"] is None and oi["strides"] is None and xi["typestr"] == self._typestr
                    and oi["typestr"] == self._typestr and xi["shape"] == self.shape and oi["shape"] == self._oshape
                    and not oi["data"][1]):
                it = 1 if get_ident() == MAIN_THREAD and getsignal(SIGINT) is DEFAULT_INT else 0
                err = self._run(self._h, xi["data"][0], self._size, None, 0, oi["data"][0], None, None,
                                self._oshape[0] * self._oshape[1], self.dtype.itemsize, it)
                if err:
                    check(err)
                return out
        h = self._handle()
        X = compiled_input("X", X, self.dtype, shape=self.shape)
        b, d = self.shape
        if self.cols:
            if Y is None:
                raise Error(f"Y: the object was compiled for {self.cols} column images: call it with (X, Y)")
            Y = compiled_input("Y", Y, self.dtype, shape=(self.cols, d))
            y, ylen = Y.ctypes.data, Y.size
        elif Y is not None:
            raise Error("Y: the object computes a batch against itself: compile it with cols=C for column images")
        else:
            y, ylen = None, 0
        it = interruptible()
        rows = b if self._shard is None else self._shard[3] - self._shard[2]
        if self.topk:
            if out is not None:
                raise Error("out: not taken with topk")
            idx, vals = np.empty((rows, self.topk), np.int64), np.empty((rows, self.topk), np.float64)
            check(lib.tl_affinity_run(h, X.ctypes.data, X.size, y, ylen, None, idx.ctypes.data, vals.ctypes.data,
                                      idx.size, self.dtype.itemsize, it))
            res = idx, vals
        else:
            res = output(out, self.dtype, (rows, self.cols or b))
            check(lib.tl_affinity_run(h, X.ctypes.data, X.size, y, ylen, res.ctypes.data, None, None, res.size,
                                      self.dtype.itemsize, it))
        if self._shard is None:
            return res
        i, n, lo, hi = self._shard
        return shards.Shard("affinity", i, n, lo, hi, b, shards.fingerprint(self, X), res)


def affinity(X, metric=None, formula=None, params=None, topk=None, block=None, mem_limit=None,
             dtype="float32", method=None, device="cpu", gpu=None, tf32=False, fail_on_nonfinite=False, Y=None,
             shard=None):
    """One-shot Affinity: the (N, N) matrix of X, (N, D) or (N, H, W) images
    (flattened), or with topk=K the pair (indices, values), each (N, K); with
    Y=, (C, D) or (C, H, W) column images, the (N, C) affinities of X's
    images against Y's (Affinity's cols=C); Y=X gives the (N, N) matrix of X
    alone, bit for bit. X and Y are converted to dtype
    once when they are not already C-contiguous arrays of it. block and
    mem_limit: as the CLI's --block and --mem-limit. shard=(i, n): the rows of
    shard i of n only, as a tapeloop.Shard (see Affinity)."""
    dtype = dtype_of(dtype)
    X = converted("X", X, dtype)
    if X.ndim < 2:
        raise Error(f"X: shape {X.shape}, want (N, D) or (N, H, W)")
    if X.size == 0:
        raise Error(f"X=: shape {X.shape}: need N ≥ 1 images of D ≥ 1 values")
    X = X.reshape(X.shape[0], -1)
    if Y is not None:
        Y = converted("Y", Y, dtype)
        if Y.ndim < 2:
            raise Error(f"Y: shape {Y.shape}, want (C, D) or (C, H, W) with C ≥ 1")
        if Y.size == 0:
            raise Error(f"Y=: shape {Y.shape}: need C ≥ 1 images of D ≥ 1 values")
        Y = Y.reshape(Y.shape[0], -1)
    with Affinity(metric, formula, params, shape=X.shape, dtype=dtype, method=method, topk=topk, block=block,
                  mem_limit=mem_limit, device=device, gpu=gpu, tf32=tf32, fail_on_nonfinite=fail_on_nonfinite,
                  cols=None if Y is None else len(Y), shard=shard) as r:
        return r(X) if Y is None else r(X, Y)
