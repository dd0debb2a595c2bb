"""The shared library, its errors, and what every compiled object shares."""
import _signal
import _thread
import copy
import ctypes
import json
import math
import os
import signal
import threading
import warnings
import weakref
import zlib
from collections.abc import Mapping

import numpy as np

ABI = "tapeloop-capi 6"


class Error(ValueError):
    """An error from tapeloop: its message is the CLI's for the same mistake."""


# The C ABI's functions as ctypes sees them (capi/tapeloop.h declares them;
# tests/test_abi.py checks this table against it).
_err, _i64 = ctypes.c_void_p, ctypes.c_int64  # _err: a C string the caller frees with tl_free
_p64, _ptr, _txt = ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
PROTOS = {
    "tl_free": ([_ptr], None),
    "tl_version": ([ctypes.c_char_p, _i64], _err),
    "tl_release": ([ctypes.c_char_p, _i64], _err),
    "tl_build": ([ctypes.c_char_p, _i64], _err),
    "tl_close": ([_i64], _err),
    "tl_interrupt": ([_i64], _err),
    "tl_selftest": ([ctypes.c_int], _err),
    "tl_options": ([ctypes.c_char_p, _txt], _err),
    "tl_dot": ([_i64, _txt], _err),
    "tl_report": ([_i64, _txt], _err),
    "tl_interp_create": ([ctypes.c_char_p, _ptr, _i64, _i64, _p64], _err),
    "tl_interp_shape": ([_i64, _p64, _p64, _p64], _err),
    "tl_interp_run": ([_i64, _ptr, _i64, _ptr, _i64, _i64, ctypes.c_int], _err),
    "tl_interp_grad": ([_i64, _ptr, _i64, _ptr, _i64, _ptr, _ptr, _i64, _i64], _err),
    "tl_affinity_create": ([ctypes.c_char_p, _p64], _err),
    "tl_affinity_run": ([_i64, _ptr, _i64, _ptr, _i64, _ptr, _ptr, _ptr, _i64, _i64, ctypes.c_int], _err),
    "tl_drr_create": ([ctypes.c_char_p, _ptr, _i64, _i64, _i64, _p64], _err),
    "tl_drr_orbit": ([_i64, _i64, ctypes.c_double, ctypes.c_double, ctypes.c_double, _ptr, ctypes.c_double, _ptr, _ptr,
                      _i64], _err),
    "tl_drr_run": ([_i64, _ptr, _i64, _ptr, _i64, _txt, ctypes.c_int], _err),
    "tl_register_transform": ([_i64, ctypes.c_char_p, _ptr, _ptr], _err),
    "tl_register_create": ([_i64, ctypes.c_char_p, _ptr, _i64, _ptr, _i64, _p64], _err),
    "tl_register_eval": ([_i64, _ptr, _ptr, _ptr, ctypes.c_int], _err),
    "tl_register_run": ([_i64, _ptr, _txt, ctypes.c_int], _err),
    "tl_wavelet_create": ([ctypes.c_char_p, _ptr, _i64, _i64, _i64, _p64], _err),
    "tl_wavelet_columns": ([_i64, _txt], _err),
    "tl_wavelet_run": ([_i64, _ptr, _i64, _ptr, _i64, _ptr, _i64, _i64, _i64, _ptr, _i64, ctypes.c_int], _err),
    "tl_wavelet_response": ([_i64, ctypes.c_double, ctypes.c_double, ctypes.c_double, _ptr, _i64, ctypes.c_int], _err),
}


def _path():
    return os.environ.get("TAPELOOP_LIB") or os.path.join(os.path.dirname(__file__), "libtapeloop.so")


class _Library:
    """The shared library, loaded at its first use rather than at import:
    a process that imports tapeloop and forks before it makes any object
    (multiprocessing's forkserver with tapeloop preloaded, a fork pool whose
    workers make their own objects) gives its children a library they can
    load. Its attributes are the library's functions, typed as PROTOS says."""

    _lock = threading.Lock()
    _cdll = None

    def _load(self):
        with self._lock:
            if self._cdll is not None:
                return self._cdll
            if forked:  # loaded by the parent: its runtime did not survive the fork
                raise Error(FORKED)
            path = _path()
            try:
                cdll = ctypes.CDLL(path)  # CDLL: the GIL is released during each call
            except OSError as e:
                raise Error(f"tapeloop: cannot load {path} ({e}); reinstall the package (pip install "
                            "./python) or build it with `make python`, or set TAPELOOP_LIB") from e
            for name, (args, res) in PROTOS.items():
                fn = getattr(cdll, name, None)
                if fn is not None:
                    fn.argtypes, fn.restype = args, res
            buf = ctypes.create_string_buffer(256)
            err = cdll.tl_version(buf, len(buf))
            got = buf.value.decode() if not err else "unknown"
            if got != ABI:
                raise Error(f"tapeloop: library ABI {got!r}, this package wants {ABI!r}; reinstall the "
                            "package (pip install ./python) or rebuild it with `make python`")
            self._cdll = cdll
            return cdll

    @property
    def loaded(self):
        return self._cdll is not None

    def __getattr__(self, name):  # the first use of each function
        fn = getattr(self._load(), name)
        setattr(self, name, fn)
        return fn


if not os.path.exists(_path()):
    raise ImportError(f"tapeloop: cannot load {_path()} (no such file); install the package "
                      "with pip (pip install ./python) or build it with `make python`, or set TAPELOOP_LIB")
lib = _Library()


def check(ptr):
    """Raise Error with the message behind ptr (NULL: success), then free it.
    A message that begins "interrupted: " raises KeyboardInterrupt (Ctrl-C,
    or interrupt() from another thread; its text says which)."""
    if ptr:
        msg = ctypes.string_at(ptr).decode("utf-8", "replace")
        lib.tl_free(ptr)
        if msg.startswith("interrupted: "):
            raise KeyboardInterrupt(msg[len("interrupted: "):])
        raise Error(msg)


def taken(ptr):
    """The text a call returned through a char ** argument (ptr: its
    address, NULL: none), freed; "" for NULL."""
    if not ptr:
        return ""
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        lib.tl_free(ptr)


def _text(fn, *args):
    """The string a tl_ function returns through its last argument."""
    out = ctypes.c_void_p()
    check(fn(*args, ctypes.byref(out)))
    try:
        return ctypes.string_at(out).decode("utf-8")
    finally:
        lib.tl_free(out)


_options = {}


def options(workload):
    """What the library knows of workload's options (tl_options), read once:
    {"options": [{"key", "flag", "default"}], "defaults": {...}, "limits":
    {...}}. The package takes its defaults and limits from here rather
    than writing them again."""
    got = _options.get(workload)
    if got is None:
        got = _options[workload] = json.loads(_text(lib.tl_options, workload.encode()))
    return got


def limit(workload, name):
    """The library's limit name of workload (tl_options)."""
    return options(workload)["limits"][name]


class _LibraryDefault:
    """The default of a keyword that the library holds: read when the call
    is made, since the library is loaded at its first use."""

    def __repr__(self):
        return "<the library's default>"

    def __reduce__(self):  # pickled and copied as the one LIBRARY_DEFAULT
        return "LIBRARY_DEFAULT"


LIBRARY_DEFAULT = _LibraryDefault()


def default(workload, name, v):
    """v, or the library's default of workload's argument name (tl_options'
    "defaults") when v is LIBRARY_DEFAULT."""
    if v is LIBRARY_DEFAULT:
        return options(workload)["defaults"][name]
    return v


def _string(fn):
    buf = ctypes.create_string_buffer(256)
    check(fn(buf, len(buf)))
    return buf.value.decode()


def version():
    """The C ABI's version string."""
    return _string(lib.tl_version)


def release():
    """The tapeloop release the library was built from, as `tapeloop
    --version` prints it: tapeloop.__version__."""
    return _string(lib.tl_release)


def build():
    """The library's GPU backend, as `tapeloop info` prints it."""
    return _string(lib.tl_build)


MAIN_THREAD = threading.main_thread().ident
# _signal.getsignal, not signal.getsignal: the latter maps the handler to an
# enum through a ValueError, tens of µs on caches a call has just used.
get_ident, getsignal, SIGINT, DEFAULT_INT = _thread.get_ident, _signal.getsignal, int(signal.SIGINT), signal.default_int_handler


def interruptible():
    """1 when Ctrl-C should stop the call: made from the main thread while
    Python's own SIGINT handler (KeyboardInterrupt) is installed. Ctrl-C
    then also ends its wait for the object while a call from another thread
    has it. Only the main thread receives KeyboardInterrupt: a call from
    another thread runs to its end unless interrupt() stops it."""
    return 1 if get_ident() == MAIN_THREAD and getsignal(SIGINT) is DEFAULT_INT else 0


def as_array(name, x):
    """x as a NumPy array without a copy where it can be: an ndarray, an
    object with __array_interface__ or the buffer protocol, or a CPU DLPack
    tensor. A GPU array raises Error: the library runs on the host."""
    if isinstance(x, np.ndarray):
        return x
    dev = getattr(x, "__dlpack_device__", None)
    if dev is not None:
        kind = dev()[0]
        if kind != 1:  # kDLCPU
            raise Error(f"{name}: a GPU array (DLPack device type {kind}); tapeloop takes host arrays (GPU backend: "
                        f"{build()}; with device=\"cuda\" it computes on the GPU from host arrays): copy it to the "
                        f"host first, e.g. x.get() for CuPy, numpy.asarray(x) for JAX, x.cpu().numpy() for PyTorch")
        if not hasattr(x, "__array_interface__") and not hasattr(x, "__array__"):
            return np.from_dlpack(x)
    return np.asarray(x)


def compiled_input(name, x, dtype, shape=None, ndim=None):
    """x for a compiled object: an array of its dtype (and shape, or number
    of dimensions), passed by pointer when C-contiguous, else copied once
    (numpy.ascontiguousarray). Another dtype or shape raises Error."""
    a = as_array(name, x)
    if shape is not None and a.shape != tuple(shape):
        raise Error(f"{name}: shape {a.shape}, the compiled shape is {tuple(shape)}")
    if ndim is not None and a.ndim != ndim:
        raise Error(f"{name}: shape {a.shape}, want {ndim} dimension{'s' if ndim > 1 else ''}")
    if a.dtype != dtype:
        raise Error(f"{name}: dtype {a.dtype}, the compiled dtype is {dtype} (convert with .astype)")
    return np.ascontiguousarray(a)


def output(out, dtype, shape):
    """A new array, or the caller's out= when it is a writeable C-contiguous
    array of dtype and shape."""
    if out is None:
        return np.empty(shape, dtype)
    if not isinstance(out, np.ndarray) or out.shape != tuple(shape) or out.dtype != dtype \
            or not out.flags.c_contiguous or not out.flags.writeable:
        got = f"{getattr(out, 'shape', None)} {getattr(out, 'dtype', type(out).__name__)}"
        if isinstance(out, np.ndarray) and out.shape == tuple(shape) and out.dtype == dtype:
            got += " (not C-contiguous)" if not out.flags.c_contiguous else " (read-only)"
        raise Error(f"out: want a writeable C-contiguous {np.dtype(dtype)} array of shape {tuple(shape)}, got {got}")
    return out


FORKED = ("tapeloop: this process was forked after it loaded tapeloop's library, and the library's runtime does not "
          "survive a fork; start worker processes with multiprocessing's \"spawn\" or \"forkserver\" method, "
          "or make tapeloop's objects only in the workers (objects passed to them travel by pickling)")
forked = False
live = weakref.WeakSet()  # the compiled objects, for a forked child to disown


def _after_fork_in_child():
    """In a forked child of a process that loaded the library, the Go
    runtime's threads are gone: a call would hang. Every object, creator and
    unpickling refuses from now on, with FORKED. A process that forked
    before it loaded the library leaves its children free to load it."""
    global forked
    if not lib.loaded:
        return
    forked = True
    for obj in list(live):
        obj._h = 0


os.register_at_fork(after_in_child=_after_fork_in_child)


# The config's options that are text: another type is refused by name.
TEXT = ("device", "dtype", "reduce", "method", "metric", "formula", "kernel", "boundary", "indexing", "mu", "post",
        "frame")


def config(device="cpu", gpu=None, **kw):
    """The JSON config of a create call, leaving out unset (None) values:
    the workload's settings and the engine's (device: "cpu" or "cuda", gpu:
    its number, batch, mem_limit, dtype). Every number in it is finite: the
    callers check theirs by name, and one that slips through is refused
    here rather than written as JSON's NaN, which the library cannot read.
    A text option (TEXT) that is not a str raises Error."""
    if forked:
        raise Error(FORKED)
    kw.update(device=device, gpu=integer("gpu", gpu))
    kw = {k: v for k, v in kw.items() if v is not None}
    for k in TEXT:
        if k in kw and not isinstance(kw[k], str):
            raise Error(f"{k}=: want a string, got {kw[k]!r}")
    for k, v in kw.items():
        try:
            json.dumps(v, allow_nan=False)
        except ValueError:
            raise Error(f"{k}=: {v!r} holds a number that is not finite") from None
    return json.dumps(kw, allow_nan=False).encode()


def boolean(name, v):
    """v as a bool: a bool (Python's or NumPy's) or the integer 0 or 1, None
    being False, the default of every yes/no keyword; any other value
    ("no" among them) raises Error naming the keyword."""
    if v is None:
        return False
    if isinstance(v, (bool, np.bool_)) or (isinstance(v, (int, np.integer)) and v in (0, 1)):
        return bool(v)
    raise Error(f"{name}=: want True or False, got {v!r}")


def not_finite(name, v, where=""):
    """Error: v, given for the keyword name (at where in it), is NaN or infinite."""
    return Error(f"{name}=: {float(v)!r} is not a finite number{where}")


def not_a_number(v):
    """Whether v is a bool or text, which float() would take for a number
    (True as 1, "5" as 5) though no one means it as one."""
    return isinstance(v, (bool, np.bool_, str, bytes))


def finite(name, v):
    """v as a finite float, or Error naming the keyword (None stays None)."""
    if v is None:
        return None
    if not_a_number(v):
        raise Error(f"{name}=: want a number, got {v!r}")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise Error(f"{name}=: want a number, got {v!r}") from None
    except OverflowError:
        raise Error(f"{name}=: {v!r} is too large") from None
    if not math.isfinite(f):
        raise not_finite(name, f)
    return f


# The largest magnitude of an integer option: the library reads them as
# 64-bit integers.
MAX_INT = 2**62


def number(name, v):
    """v as a finite float, for a number the call cannot do without: None
    raises Error too."""
    if v is None:
        raise Error(f"{name}=: want a number, got None")
    return finite(name, v)


def integer(name, v):
    """v as an int, or Error naming the keyword when it is not a whole
    number or its magnitude is over MAX_INT (None stays None)."""
    if v is None:
        return None
    if not_a_number(v):
        raise Error(f"{name}=: want a whole number, got {v!r}")
    if isinstance(v, (float, np.floating)) and not math.isfinite(v):
        raise not_finite(name, v)
    if isinstance(v, (int, np.integer)):  # exact, however large
        i, whole = int(v), True
    else:
        try:
            i = int(v)
            whole = float(v) == i
        except (TypeError, ValueError, OverflowError):
            whole = False
    if not whole:
        raise Error(f"{name}=: want a whole number, got {v!r}")
    if abs(i) > MAX_INT:
        raise Error(f"{name}=: {i} is too large")
    return i


def params_of(params):
    """params as the library takes them: names to finite numbers (--param k=v);
    what is not a mapping raises Error."""
    if params is None:
        return None
    if not isinstance(params, Mapping):
        raise Error(f"params=: want a dict of names to numbers, e.g. {{'s': 2.5}}, got {params!r}")
    if not params:
        return None
    out = {}
    for k, v in params.items():
        try:
            if not_a_number(v):
                raise TypeError
            out[str(k)] = float(v)
        except (TypeError, ValueError):
            raise Error(f"params= {k}={v!r}: not a number") from None
        except OverflowError:
            raise Error(f"params= {k}={v!r}: too large") from None
        if not math.isfinite(out[str(k)]):
            raise not_finite("params", v, f" (parameter {str(k)!r})")
    return out


def converted(name, x, dtype):
    """x as a C-contiguous array of dtype: x itself when it already is one,
    else one converted copy; what is not real numbers or bools (complex,
    text, dates, objects) raises Error rather than being converted."""
    try:
        a = as_array(name, x)
    except (TypeError, ValueError) as e:
        if isinstance(e, Error):
            raise
        raise Error(f"{name}=: cannot be read as {np.dtype(dtype)} values ({e})") from None
    if a.dtype.kind not in "fiub":
        raise Error(f"{name}=: {a.dtype} values: want real numbers")
    return np.ascontiguousarray(a, dtype=dtype)


def numbers(name, v, n, kind=float):
    """v as n finite numbers of kind (float or int), or Error naming the
    argument."""
    try:
        items = list(v)
        if any(not_a_number(x) for x in items):
            raise TypeError
        f = [float(x) for x in items]
    except (TypeError, ValueError):
        items, f = [], []
    except OverflowError:
        raise Error(f"{name}=: {v!r} holds a number too large") from None
    for i, x in enumerate(f):
        if not math.isfinite(x):
            shown = tuple(float(y) if isinstance(y, (float, np.floating)) else y for y in items)
            raise not_finite(name, x, f" (item {i} of {shown!r})")
    try:
        t = tuple(kind(x) for x in items)
    except (TypeError, ValueError, OverflowError):
        t = ()
    whole = [y == x if isinstance(x, (int, np.integer)) else fx == y for x, fx, y in zip(items, f, t)]
    if len(t) != n or (kind is int and not all(whole)):
        raise Error(f"{name}=: want {n} {'integers' if kind is int else 'numbers'}, got {v!r}")
    for x, y in zip(items, t):
        if kind is int and abs(y) > MAX_INT:
            raise Error(f"{name}=: {x!r} is too large")
    return t


def dtype_of(dtype, default="float32"):
    """dtype= as the library takes it, a name: from a name ("float32") or a
    NumPy type (np.float32); None is the default."""
    if dtype is None:
        return default
    try:
        return str(np.dtype(dtype))
    except (TypeError, ValueError):
        raise Error(f'dtype=: {dtype!r} is not a dtype such as "float32"') from None


def mem_limit_of(mem_limit):
    """mem_limit as the library takes it: bytes (int) or a size ("2GiB")."""
    if mem_limit is None:
        return None
    if isinstance(mem_limit, (bool, np.bool_)):
        raise Error(f"mem_limit=: want bytes or a size such as \"2GiB\", got {mem_limit!r}")
    if isinstance(mem_limit, (float, np.floating)):
        return str(integer("mem_limit", mem_limit))
    return str(int(mem_limit)) if isinstance(mem_limit, (int, np.integer)) else str(mem_limit)


def digest(a):
    """What tells a C-contiguous array's values from others: its shape,
    dtype and a CRC-32 of its bytes (a checksum, for arrays changed in place,
    not a defence against forgery)."""
    return a.shape, a.dtype.str, zlib.crc32(memoryview(a).cast("B")) if a.size else 0


def _rebuild(cls, kw, arrays):
    """Unpickling: the object built anew from what the original was built
    from (Compiled.__reduce__). In a forked child of a process that loaded
    the library it is an object without a program, whose every call raises
    Error(FORKED): unpickling itself does not fail, since a failure there
    would end a multiprocessing worker and leave its task unanswered."""
    if forked:
        return cls.__new__(cls)
    return cls(**kw, **arrays)


class Compiled:
    """What every compiled object shares: its handle, close, dot, report,
    interrupt and pickling. Calls on one object from several threads take
    turns; what a call warns about it warns in its own thread, as it
    returns.

    An object pickles (and copy.copy and copy.deepcopy copy it) as what it
    was built from: its keywords and the arrays the library was given.
    Unpickling builds a new object, in the receiving process, with its own
    handle: no handle number crosses a process, and closing a copy leaves
    the original open. An array the library took without a copy (the
    caller's own C-contiguous array of the right dtype) is checked when the
    object is pickled: changed in place since, it would send values the
    object was not built from, and pickling refuses."""

    _h = 0
    _what = "object"
    _recipe = None

    def _keep(self, params, **arrays):
        """Remember what the object is built from, for pickling: params,
        __init__'s locals() at its start (its arguments), with each of
        arrays (name → the array the library was given) in place of the
        argument of that name."""
        kw = {k: v for k, v in params.items() if k not in ("self", "__class__") and k not in arrays}
        kept = {}
        for name, a in arrays.items():
            if a is None:
                kept[name] = (None, None)
                continue
            # The caller's own memory, unless a conversion made a is private.
            shared = a is params.get(name) or not a.flags.owndata or a.base is not None
            view = a.view()
            view.flags.writeable = False
            kept[name] = (view, digest(a) if shared else None)
        self._recipe = (copy.deepcopy(kw), kept)
        if kw.get("mem_limit") is not None:  # lowered to what the cgroup or ulimit leaves: say so, as the CLI does
            said = self.report().get("mem_limit_warning")
            if said:
                warnings.warn(said.replace("--mem-limit ", "mem_limit=", 1), stacklevel=3)

    def __reduce__(self):
        if not self._h or self._recipe is None:
            raise Error(FORKED if forked else f"{self._what}: the object is closed; a closed object cannot be pickled")
        kw, kept = self._recipe
        arrays = {}
        for name, (a, d) in kept.items():
            if d is not None and digest(a) != d:
                raise Error(f"{self._what}: {name}= was changed in place after the object was built from it; pickled, "
                            f"the object would compute with other values than this one: build a new object from the "
                            f"array as it is now, or pass a copy (numpy.array(a)) when you build it")
            arrays[name] = a
        return _rebuild, (type(self), kw, arrays)

    def _own(self, h):
        """Take the handle h the library made."""
        self._h = h
        live.add(self)

    def _handle(self):
        if not self._h:
            raise Error(FORKED if forked else f"{self._what}: the object is closed")
        return self._h

    def dot(self):
        """The compiled graph as Graphviz DOT text (as `tapeloop … --dot`)."""
        return _text(lib.tl_dot, self._handle())

    def report(self):
        """The calls so far as a dict: the plan (batch, planned bytes), the
        number of calls, the last call's items, batches and seconds, a summary
        over the calls (median_ms, drift: the last tenth's median over the
        first's), items per second, and the process's RSS and peak RSS."""
        return json.loads(_text(lib.tl_report, self._handle()))

    def interrupt(self):
        """Stop the call in progress on this object, made from another
        thread, at its next check (between blocks of work): that call raises
        KeyboardInterrupt, in its own thread, saying interrupt() was called,
        and the object stays usable. Calls waiting for their turn on the
        object then run as usual. With no call in progress, or on a closed
        object, it does nothing. It does not wait for the call to end."""
        h = self._h
        if h:
            check(lib.tl_interrupt(h))

    def close(self):
        """Release the compiled program, and the arrays it was built from
        that it kept for pickling; closing twice does nothing."""
        self._recipe = None
        if self._h:
            h, self._h = self._h, 0
            check(lib.tl_close(h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
