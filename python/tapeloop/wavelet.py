"""Wavelet sweeps: a volume convolved with a stretched, rotated Mexican hat per (θ, φ, ξ)."""
import ctypes
import warnings

import numpy as np

from . import shards
from ._lib import (Compiled, Error, _text, boolean, check, config, converted, finite, integer, interruptible, lib, limit,
                   mem_limit_of, number, params_of)


def _values(name, x):
    """x, a number or a 1-D sequence, as a C-contiguous float64 array."""
    if x is None:
        raise Error(f"{name}=: want a number or a 1-D list of numbers, got None")
    a = converted(name, x, np.float64)
    if a.ndim > 1:
        raise Error(f"{name}=: shape {a.shape}, want a number or a 1-D list")
    return a.reshape(-1)


def _columns(columns):
    """columns=: None (all), a comma-separated string or a sequence of names."""
    if columns is None:
        return None
    if isinstance(columns, str):
        return columns.split(",")
    return _texts("columns", columns, "a list of column names, e.g. ['energy', 'std']", "a column name, e.g. 'energy'")


def _texts(name, v, want_list, want_item):
    """v, a sequence of str, as a list; anything else raises Error naming
    the keyword and what it wants (want_list of v, want_item of an item)."""
    try:
        items = list(v)
    except TypeError:
        raise Error(f"{name}={v!r}: want {want_list}") from None
    for x in items:
        if not isinstance(x, str):
            raise Error(f"{name}=: {x!r} is not {want_item}")
    return items


def _stats(stats):
    """stats=: None, a dict name → formula, or "name=formula" strings (one,
    or a list of them)."""
    if not stats:
        return None
    if isinstance(stats, dict):
        for name, formula in stats.items():
            if not isinstance(name, str) or not isinstance(formula, str):
                raise Error(f"stats=: {name!r}: {formula!r} is not a statistic such as {{'l1': 'sum(abs(g))'}}")
        stats = [f"{name}={formula}" for name, formula in stats.items()]
    elif isinstance(stats, bytes):
        raise Error(f"stats=: {stats!r} is bytes: want text such as 'l1=sum(abs(g))'")
    elif isinstance(stats, str):
        stats = [stats]
    return _texts("stats", stats, "a dict of name → formula, e.g. {'l1': 'sum(abs(g))'}",
                  "a statistic such as 'l1=sum(abs(g))'")


def _reach(reach):
    """reach=: None, a number of voxels, or "volume"."""
    if isinstance(reach, str):
        if reach != "volume":
            raise Error(f'reach={reach!r}: want a half-width in voxels, or "volume" (a grid the size of the volume)')
        return reach
    return integer("reach", reach)


class Wavelet(Compiled):
    """The wavelet sweep of one volume, compiled once; each call sweeps a
    (θ, φ, ξ) grid, batch by batch, over the same buffers and the volume's
    transform, made once per padding.

    volume: an (X, Y, Z) array of any real dtype, converted once to float32
    (numpy.ascontiguousarray; no copy here when it is already a C-contiguous
    float32 array) and copied by the library at creation. a: the kernel scale
    in voxels (default 1). boundary: "reflect" (half-sample symmetric, the
    default) or "wrap" (periodic), as scipy.ndimage.convolve. kernel: your own
    kernel formula over x, y, z, u, v, w, q and theta, phi, xi, a (default:
    the hat, (3 - q)*exp(-q/2)), sampled over its own reach (where it falls
    below 1e-7 of its largest value; it must be within the volume) or, with
    reach, over reach voxels from its centre along every axis, or with
    reach="volume" over the volume's grid (as a kernel made with np.meshgrid
    over the volume's shape, centred as scipy.ndimage centres it); indexing:
    which axes the kernel's x and y run along, as np.meshgrid's indexing:
    "ij" (the default: x along the volume's first axis) or "xy" (x along its
    second, y its first, as np.meshgrid(x, y, z) makes them; the built-in hat
    turns too); stats: your own statistics of each response
    g (which may also read theta, phi, xi and a), a dict name → formula,
    e.g. {"l1": "sum(abs(g))", "wt_max": "max(g)/sqrt(xi^2 + 2*a^2)"} (or the CLI's
    "name=formula" strings, one or a list), each an extra column with a name of its own (not
    theta, phi, xi or a built-in column's); params: their parameters; fail_on_nonfinite: a NaN
    or infinite value of your kernel or statistics fails the call (default: it
    is kept as the value); columns: the built-in statistics to return, some
    of "energy", "std", "max", "wavelet_energy" (a list, or a comma-separated
    string; default all four; theta, phi, xi and your statistics always come
    back): what only the others need is not computed (with boundary="wrap",
    energy and std alone need no inverse transform). The CLI's wavelet flags
    of the same names (docs/wavelet.md).
    batch: combinations per replay (default planned under mem_limit, bytes or
    a size such as "2GiB"). device: "cpu" (default) or "cuda" (a library
    built with CUDA; gpu: its number; the formulas run on the CPU only).

    Call with theta, phi and xi, each a number or a 1-D sequence or array: it
    returns a dict mapping each column of the CLI's CSV (theta, phi, xi,
    energy, std, max, wavelet_energy or those of columns=, then your
    statistics; the attribute columns names them) to a
    1-D float64 array of one value per combination, θ outermost, then φ, then
    ξ, as the CLI's rows: the same numbers, bit for bit. shard=(i, n) sweeps
    the combinations of shard i of n only (as the CLI's --shard i/n: the
    same numbers, bit for bit), as a tapeloop.Shard for tapeloop.merge. Calls of one
    combination each (a NumPy loop's) cost about what one call of them all
    does, and agree with it to rounding: the object keeps the volume's
    transforms for the paddings it used lately (up to a quarter of
    mem_limit) and each kernel's statistics. In reflect mode a sweep with a
    wider kernel than any before it recompiles the object for the larger
    padding; after 32 calls in a row that need at most half of it, it
    shrinks to what they need.
    """

    _what = "wavelet"

    def __init__(self, volume, *, a=1.0, boundary="reflect", kernel=None, reach=None, indexing="ij", stats=None,
                 params=None, batch=None, mem_limit=None, fail_on_nonfinite=False, device="cpu", gpu=None, columns=None):
        built_from = dict(locals())
        v = converted("volume", volume, np.float32)
        if v.ndim != 3:
            raise Error(f"volume=: the array has shape {v.shape}, want a 3-D volume")
        stats = _stats(stats)
        # The kernel's Σ ψ² column, where a kernel of the user's may be 0
        # everywhere.
        self._kernel_may_vanish = kernel is not None
        cfg = config(a=finite("a", a), boundary=boundary, kernel=kernel, reach=_reach(reach), indexing=indexing,
                     stats=stats,
                     params=params_of(params), fail_on_nonfinite=boolean("fail_on_nonfinite", fail_on_nonfinite),
                     batch=integer("batch", batch) or 0,
                     mem_limit=mem_limit_of(mem_limit), device=device, gpu=gpu, columns=_columns(columns))
        h = ctypes.c_int64(0)
        check(lib.tl_wavelet_create(cfg, v.ctypes.data, *v.shape, ctypes.byref(h)))
        self._own(h.value)
        self._keep(built_from, volume=v)
        self.shape = v.shape
        self.columns = tuple(_text(lib.tl_wavelet_columns, self._h).split(","))

    def __call__(self, theta, phi, xi, *, shard=None):
        h = self._handle()
        t, p, x = _values("theta", theta), _values("phi", phi), _values("xi", xi)
        total = t.size * p.size * x.size
        if total > limit("wavelet", "combinations"):  # refused with the CLI's message, before the output is made
            check(lib.tl_wavelet_run(h, t.ctypes.data, t.size, p.ctypes.data, p.size, x.ctypes.data, x.size,
                                     0, 0, None, 0, 0))
        lo, hi = 0, 0
        if shard is not None and total:
            k, n, lo, hi = shards.split(shard, total, "combinations")
        out = np.empty((hi - lo if hi else total, len(self.columns)), np.float64)
        check(lib.tl_wavelet_run(h, t.ctypes.data, t.size, p.ctypes.data, p.size, x.ctypes.data, x.size,
                                 lo, hi, out.ctypes.data, out.size, interruptible()))
        if self._kernel_may_vanish and "wavelet_energy" in self.columns:
            zero = np.flatnonzero(out[:, self.columns.index("wavelet_energy")] == 0)
            if zero.size:  # as the CLI's warning
                i = lo + zero[0]
                first = t[i // (p.size * x.size)], p[i // x.size % p.size], x[i % x.size]
                warnings.warn(f"{zero.size} of {len(out)} combinations have a kernel that is 0 at every sample "
                              f"(the first: θ = {first[0]:.4g}, φ = {first[1]:.4g}, ξ = {first[2]:.4g}): their "
                              "statistics are those of a response of zeros; check kernel=", stacklevel=2)
        res = {name: np.ascontiguousarray(out[:, i]) for i, name in enumerate(self.columns)}
        if hi:
            return shards.Shard("wavelet", k, n, lo, hi, total, shards.fingerprint(self, t, p, x), res)
        return res

    def response(self, theta, phi, xi):
        """The response G of one combination (θ, φ, ξ: numbers): the volume
        convolved with its kernel, a float32 array of the volume's shape,
        the convolution whose statistics a call gives (the author's G_Ixy)."""
        h = self._handle()
        out = np.empty(self.shape, np.float32)
        check(lib.tl_wavelet_response(h, number("theta", theta), number("phi", phi), number("xi", xi),
                                      out.ctypes.data, out.size, interruptible()))
        return out


def wavelet(volume, theta, phi, xi, a=1.0, boundary="reflect", kernel=None, reach=None, indexing="ij", stats=None,
            params=None, batch=None, mem_limit=None, fail_on_nonfinite=False, device="cpu", gpu=None, columns=None,
            shard=None):
    """One-shot Wavelet: the statistics of volume, (X, Y, Z), for every
    combination of theta, phi and xi, as a dict of column → 1-D float64
    array (see Wavelet), or with shard=(i, n) shard i of n of it; the volume
    is converted to float32 once."""
    with Wavelet(volume, a=a, boundary=boundary, kernel=kernel, reach=reach, indexing=indexing, stats=stats,
                 params=params, batch=batch,
                 mem_limit=mem_limit, fail_on_nonfinite=fail_on_nonfinite, device=device, gpu=gpu, columns=columns) as w:
        return w(theta, phi, xi, shard=shard)
