"""Every option of a workload's Config reaches the library from Python.

The library lists each workload's options (tl_options): the keys of the
JSON config its create call decodes into the workload's Config. Each must
be a keyword of the compiled class and of the one-shot function, and a
value given for it must arrive in that JSON. A Config field added without
its keyword fails here."""
import ctypes
import importlib
import json

import numpy as np
import pytest

import tapeloop
from tapeloop import _lib

# A value for each option that differs from its default; per workload where
# the same key takes other values.
SAMPLES = {
    "a": 0.5, "dx": 0.25, "reduce": "sum", "params": {"s": 2.0}, "fail_on_nonfinite": True,
    "method": "direct", "metric": "l1", "formula": "sum(a*b)", "topk": 2, "tf32": True,
    "boundary": "wrap", "kernel": "x", "reach": 3, "indexing": "xy", "stats": ["l1=sum(abs(g))"], "columns": ["energy", "std"],
    "spacing": (2.0, 2.0, 2.0), "origin": (1.0, 2.0, 3.0), "frame": "ras", "hu": True, "mu_water": 0.03, "strict": True,
    "mu": "h", "post": "p", "step": 0.5, "filter": "box:3",
    "device": "cuda", "gpu": 1, "batch": 7, "mem_limit": "1GiB", "dtype": "float64",
}
PER_WORKLOAD = {"drr": {"method": "trilinear", "rows": (5, 3), "cols": (5, 3),
                        "direction": [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]}}
PER_WORKLOAD["affinity"] = {"n": 5, "d": 2, "cols": 2, "shard": (1, 2)}
# A keyword the Python package spells otherwise than the config's key.
KEYWORD = {"affinity": {"batch": "block"}, "drr": {"rows": "detector", "cols": "detector"}}

VOL = np.ones((4, 4, 4), np.float32)
POSE = {"source": [0, -100, 0], "center": [0, 100, 0], "u": [1, 0, 0], "v": [0, 0, 1], "pixel": [1, 1]}

# workload → (module, the class called with the data, the one-shot function
# called with the data)
WORKLOADS = {
    "interp": (importlib.import_module("tapeloop.interp"), lambda **kw: tapeloop.Interp(np.ones((2, 5)), **kw),
               lambda **kw: tapeloop.interp(np.ones((2, 5)), np.zeros(3), **kw)),
    # n, d and cols are the images' shapes: shape=(n, d) and cols, or X of
    # (n, d) and Y of (cols, d)
    "affinity": (importlib.import_module("tapeloop.affinity"),
                 lambda n=4, d=3, **kw: tapeloop.Affinity(shape=(n, d), **kw),
                 lambda n=4, d=3, cols=None, **kw: tapeloop.affinity(
                     np.ones((n, d)), Y=None if cols is None else np.ones((cols, d)), **kw)),
    "drr": (importlib.import_module("tapeloop.drr"), lambda **kw: tapeloop.DRR(VOL, **kw),
            lambda **kw: tapeloop.drr(VOL, poses=[POSE], **kw)),
    "wavelet": (importlib.import_module("tapeloop.wavelet"), lambda **kw: tapeloop.Wavelet(VOL, **kw),
                lambda **kw: tapeloop.wavelet(VOL, 0.0, 0.0, 1.0, **kw)),
}


def options(workload):
    out = ctypes.c_void_p()
    _lib.check(_lib.lib.tl_options(workload.encode(), ctypes.byref(out)))
    try:
        return json.loads(ctypes.string_at(out).decode())["options"]
    finally:
        _lib.lib.tl_free(out)


class Sent(Exception):
    """Raised by the stand-in config: the call got as far as the library."""


def sent(monkeypatch, module, make, **kw):
    """The JSON config make(**kw) would hand the library."""
    got = {}

    def record(**cfg):
        got.update(json.loads(_lib.config(**cfg)))
        raise Sent

    monkeypatch.setattr(module, "config", record)
    with pytest.raises(Sent):
        make(**kw)
    return got


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_every_option_is_a_keyword_that_reaches_the_library(workload, monkeypatch):
    module, cls, fn = WORKLOADS[workload]
    opts = options(workload)
    assert opts, "the library lists no options"
    for make in (cls, fn):
        base = sent(monkeypatch, module, make)
        for o in opts:
            key = o["key"]
            kw = KEYWORD.get(workload, {}).get(key, key)
            value = PER_WORKLOAD.get(workload, {}).get(key, SAMPLES.get(key))
            assert value is not None, f"{workload}: add a sample value for the option {key!r} to SAMPLES"
            got = sent(monkeypatch, module, make, **{kw: value})
            assert key in got and got.get(key) != base.get(key), \
                f"{workload}: {kw}={value!r} does not reach the config's {key!r} (sent {got.get(key)!r})"


def test_errors_name_keywords_not_flags():
    with pytest.raises(tapeloop.Error, match=r"dx="):
        tapeloop.Interp(np.ones((2, 5)), dx=-1.0)
    with pytest.raises(tapeloop.Error, match=r"params="):
        tapeloop.Interp(np.ones((2, 5)), params={"s": 1.0})
