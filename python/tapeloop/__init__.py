"""tapeloop in-process: the Go engine as a shared library, driven through ctypes.

A compiled object (Interp) prepares its table and compiles its graph once; each
call replays the same program over the same buffers. Inputs that are C-contiguous
arrays of the compiled dtype pass by pointer, without a copy; anything else is
converted once with numpy.ascontiguousarray. Outputs are allocated by NumPy, or
written into a caller's ``out=``. Errors raise tapeloop.Error with the message the
CLI prints for the same mistake.
"""
import ctypes
import json
import os

import numpy as np

__all__ = ["Error", "Interp", "interp", "Affinity", "affinity", "version"]

_ABI = "tapeloop-capi 1"


class Error(ValueError):
    """An error from tapeloop: its message is the CLI's for the same mistake."""


def _load():
    path = os.environ.get("TAPELOOP_LIB") or os.path.join(os.path.dirname(__file__), "libtapeloop.so")
    try:
        lib = ctypes.CDLL(path)  # CDLL: the GIL is released during each call
    except OSError as e:
        raise ImportError(f"tapeloop: cannot load {path} ({e}); build it with `make python` or set TAPELOOP_LIB") from e
    err = ctypes.c_void_p  # a C string the caller frees with tl_free
    i64, p64 = ctypes.c_int64, ctypes.POINTER(ctypes.c_int64)
    lib.tl_free.argtypes, lib.tl_free.restype = [ctypes.c_void_p], None
    lib.tl_version.argtypes, lib.tl_version.restype = [ctypes.c_char_p, i64], err
    lib.tl_close.argtypes, lib.tl_close.restype = [i64], err
    lib.tl_interp_create.argtypes = [ctypes.c_char_p, ctypes.c_void_p, i64, i64, p64]
    lib.tl_interp_create.restype = err
    lib.tl_interp_shape.argtypes, lib.tl_interp_shape.restype = [i64, p64, p64, p64], err
    lib.tl_interp_run.argtypes = [i64, ctypes.c_void_p, i64, ctypes.c_void_p, i64, i64]
    lib.tl_interp_run.restype = err
    lib.tl_affinity_create.argtypes, lib.tl_affinity_create.restype = [ctypes.c_char_p, p64], err
    lib.tl_affinity_run.argtypes = [i64, ctypes.c_void_p, i64, ctypes.c_void_p, i64, i64]
    lib.tl_affinity_run.restype = err
    return lib


_lib = _load()


def _check(ptr):
    """Raise Error with the message behind ptr (NULL: success), then free it."""
    if ptr:
        msg = ctypes.string_at(ptr).decode("utf-8", "replace")
        _lib.tl_free(ptr)
        raise Error(msg)


def version():
    """The C ABI's version string."""
    buf = ctypes.create_string_buffer(64)
    _check(_lib.tl_version(buf, len(buf)))
    return buf.value.decode()


if version() != _ABI:
    raise ImportError(f"tapeloop: library ABI {version()!r}, this package wants {_ABI!r}")


def _input(name, arr, dtype, shape):
    """arr as a C-contiguous array of dtype and shape: the array itself when it
    already is one (passed by pointer), else one converted copy. A shape that
    differs raises Error."""
    a = np.asarray(arr)
    if a.shape != shape:
        raise Error(f"{name}: shape {a.shape}, the compiled shape is {shape}")
    if a.dtype != dtype:
        raise Error(f"{name}: dtype {a.dtype}, the compiled dtype is {dtype} (convert with .astype)")
    return np.ascontiguousarray(a)


def _output(out, dtype, shape):
    if out is None:
        return np.empty(shape, dtype)
    if not isinstance(out, np.ndarray) or out.shape != shape or out.dtype != dtype \
            or not out.flags.c_contiguous or not out.flags.writeable:
        got = f"{getattr(out, 'shape', None)} {getattr(out, 'dtype', type(out).__name__)}"
        raise Error(f"out: want a writeable C-contiguous {dtype} array of shape {shape}, got {got}")
    return out


class Interp:
    """M cubic interpolants on the shared grid a + i·dx (i = 0…G−1), values f[j, i],
    compiled once for batches of `batch` query points.

    f: (M, G) table, copied once at creation (as float64). dx: the grid spacing
    (default 1/(G−1)). reduce: "sumsq" (Σ v²), "sum", "none" (all M values) or a
    formula over the M values v at x, e.g. "max(v)", with params={...}. dtype:
    "float32" (default) or "float64". method: "auto" or "direct".

    Call with x, a (batch,) array of dtype: it returns a (batch,) array, or
    (batch, M) for reduce="none". A C-contiguous x of the compiled dtype is passed
    by pointer (no copy here; the library copies it into the compiled program's
    input buffer during the call); a non-contiguous x of that dtype is copied once
    (numpy.ascontiguousarray); another dtype or shape raises Error. out= takes a
    C-contiguous array of the result's shape and dtype, written in place.
    """

    def __init__(self, f, a=0.0, dx=None, *, batch, reduce="sumsq", params=None,
                 dtype="float32", method="auto", fail_on_nonfinite=False):
        f = np.ascontiguousarray(f, dtype=np.float64)
        if f.ndim != 2:
            raise Error(f"--f: the table has shape {f.shape}, want (M, G)")
        cfg = {"a": float(a), "reduce": reduce, "method": method, "batch": int(batch),
               "dtype": str(np.dtype(dtype)), "fail_on_nonfinite": bool(fail_on_nonfinite)}
        if dx is not None:
            cfg["dx"] = float(dx)
        if params:
            cfg["params"] = {str(k): float(v) for k, v in params.items()}
        h = ctypes.c_int64(0)
        _check(_lib.tl_interp_create(json.dumps(cfg).encode(), f.ctypes.data, f.shape[0], f.shape[1],
                                     ctypes.byref(h)))
        self._h = h.value
        b, c, s = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64()
        _check(_lib.tl_interp_shape(self._h, ctypes.byref(b), ctypes.byref(c), ctypes.byref(s)))
        self.batch, self.dtype = b.value, np.dtype(cfg["dtype"])
        self.out_shape = (b.value, c.value) if c.value else (b.value,)

    def __call__(self, x, out=None):
        if not self._h:
            raise Error("interp: the object is closed")
        x = _input("x", x, self.dtype, (self.batch,))
        y = _output(out, self.dtype, self.out_shape)
        _check(_lib.tl_interp_run(self._h, x.ctypes.data, x.size, y.ctypes.data, y.size, self.dtype.itemsize))
        return y

    def close(self):
        """Release the compiled program; closing twice does nothing."""
        if getattr(self, "_h", 0):
            h, self._h = self._h, 0
            _check(_lib.tl_close(h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def interp(f, x, a=0.0, dx=None, reduce="sumsq", params=None, dtype="float32", method="auto"):
    """One-shot Interp: f (M, G) evaluated at every point of x (N,), in one batch
    of N; x is converted to dtype once when it is not already a C-contiguous array
    of it."""
    x = np.ascontiguousarray(x, dtype=dtype)
    if x.ndim != 1:
        raise Error(f"x: shape {x.shape}, want (N,)")
    with Interp(f, a, dx, batch=x.shape[0], reduce=reduce, params=params, dtype=dtype, method=method) as r:
        return r(x)


class Affinity:
    """The (B, B) affinity matrix of a batch of B flattened images of D values
    against itself, compiled once for shape=(B, D) and dtype.

    metric: "dot" (default), "cosine", "l1" (−Σ|xi−xj|) or "l2" (−Σ(xi−xj)²);
    or formula: your own affinity of images a and b, e.g.
    "exp(-sum((a-b)^2)/(2*s^2))", with params={"s": 40}, and method "auto" or
    "direct" — the CLI's --metric, --formula, --param and --method. dtype:
    "float32" (default) or "float64".

    Call with X, a (B, D) array of dtype: it returns the (B, B) matrix. A
    C-contiguous X of the compiled dtype is passed by pointer (no copy here; the
    library copies it into the compiled program's buffers during the call); a
    non-contiguous one of that dtype is copied once (numpy.ascontiguousarray);
    another dtype or shape raises Error. out= takes a C-contiguous (B, B)
    array of dtype, written in place.
    """

    def __init__(self, metric=None, formula=None, params=None, *, shape, dtype="float32", method=None):
        b, d = (int(v) for v in shape)
        cfg = {"n": b, "d": d, "dtype": str(np.dtype(dtype))}
        if metric is not None or formula is None:
            cfg["metric"] = metric or "dot"
        if formula is not None:
            cfg["formula"] = formula
        if params:
            cfg["params"] = {str(k): float(v) for k, v in params.items()}
        if method is not None:
            cfg["method"] = method
        h = ctypes.c_int64(0)
        _check(_lib.tl_affinity_create(json.dumps(cfg).encode(), ctypes.byref(h)))
        self._h = h.value
        self.shape, self.dtype = (b, d), np.dtype(cfg["dtype"])

    def __call__(self, X, out=None):
        if not self._h:
            raise Error("affinity: the object is closed")
        X = _input("X", X, self.dtype, self.shape)
        b = self.shape[0]
        y = _output(out, self.dtype, (b, b))
        _check(_lib.tl_affinity_run(self._h, X.ctypes.data, X.size, y.ctypes.data, y.size, self.dtype.itemsize))
        return y

    close = Interp.close
    __enter__ = Interp.__enter__
    __exit__ = Interp.__exit__
    __del__ = Interp.__del__


def affinity(X, metric=None, formula=None, params=None, dtype="float32", method=None):
    """One-shot Affinity: the (N, N) matrix of X, (N, D) or (N, H, W) images
    (flattened); X is converted to dtype once when it is not already a
    C-contiguous array of it."""
    X = np.ascontiguousarray(X, dtype=dtype)
    if X.ndim < 2:
        raise Error(f"X: shape {X.shape}, want (N, D) or (N, H, W)")
    X = X.reshape(X.shape[0], -1)
    with Affinity(metric, formula, params, shape=X.shape, dtype=dtype, method=method) as r:
        return r(X)
