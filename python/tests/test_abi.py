"""The Python package's ctypes table against the C ABI's header."""
import ctypes
import os
import re

from tapeloop import _lib

HEADER = os.path.join(os.path.dirname(__file__), "..", "..", "capi", "tapeloop.h")

SCALARS = {"int64_t": ctypes.c_int64, "int": ctypes.c_int, "double": ctypes.c_double}


def prototypes():
    """name → (result, [parameter types]) as tapeloop.h declares them."""
    with open(HEADER) as f:
        text = f.read()
    out = {}
    for res, name, params in re.findall(r"^(char|void)\s*\*?\s*(tl_\w+)\(([^)]*)\);", text, re.M):
        types = []
        for p in params.split(","):
            p = re.sub(r"\s*\*\s*", "* ", p.strip())
            types.append(p.rsplit(" ", 1)[0].replace(" ", ""))
        out[name] = ("char*" if res == "char" else "void", types)
    return out


def fits(c, t):
    """Whether ctypes type t passes a C argument of type c as the ABI means."""
    if not c.endswith("*"):
        return t is SCALARS[c]
    pointee = c[:-1]
    if t is ctypes.c_void_p or (t is ctypes.c_char_p and c == "char*"):
        return True
    target = getattr(t, "_type_", None)
    if pointee.endswith("*"):
        return target is ctypes.c_void_p
    return target is SCALARS.get(pointee)


def test_every_function_declared_and_typed_as_the_header_says():
    protos = prototypes()
    assert len(protos) >= 19, protos
    assert set(protos) == set(_lib.PROTOS), (set(protos) ^ set(_lib.PROTOS))
    for name, (args, res) in _lib.PROTOS.items():
        cres, cargs = protos[name]
        assert (res is None) == (cres == "void"), name
        assert len(args) == len(cargs), f"{name}: {len(args)} arguments in _lib, {len(cargs)} in tapeloop.h"
        for i, (t, c) in enumerate(zip(args, cargs)):
            assert fits(c, t), f"{name} argument {i}: {t} in _lib, {c} in tapeloop.h"


def test_abi_version():
    with open(HEADER) as f:
        assert f'#define TAPELOOP_ABI "{_lib.ABI}"' in f.read()


def test_fits_can_fail():
    assert not fits("int64_t", ctypes.c_int)
    assert not fits("int*", ctypes.POINTER(ctypes.c_int64))
    assert not fits("char**", ctypes.POINTER(ctypes.c_int64))
    assert fits("char**", ctypes.POINTER(ctypes.c_void_p))


def test_objects_made_and_closed_leave_nothing():
    """Objects made, called and closed one after another, as a loop over
    volumes or image sets makes them, hold no memory once closed: the RSS
    after 400 of each workload is within a few MiB of that after the
    first 40 (each held a few hundred KiB that stayed)."""
    import gc

    import numpy as np

    import tapeloop
    from helpers import rss_bytes

    rng = np.random.default_rng()
    f, x = rng.standard_normal((20, 201)), rng.uniform(0, 1, 3001).astype(np.float32)
    images = rng.standard_normal((50, 64)).astype(np.float32)
    vol = rng.uniform(0, 1, (16, 17, 15)).astype(np.float32)
    made = {
        "Interp": lambda: tapeloop.Interp(f, mem_limit="64MiB"),
        "Affinity": lambda: tapeloop.Affinity("l2", shape=images.shape, mem_limit="64MiB"),
        "DRR": lambda: tapeloop.DRR(vol, detector=(16, 16), mem_limit="64MiB", filter="gauss:sigma_px=1"),
        "Wavelet": lambda: tapeloop.Wavelet(vol, mem_limit="64MiB"),
    }
    calls = {
        "Interp": lambda r: r(x),
        "Affinity": lambda r: r(images),
        "DRR": lambda r: r(r.orbit(2)),
        "Wavelet": lambda r: r([0, 1], [0], [1, 2]),
    }
    for name, make in made.items():
        for i in range(400):
            with make() as r:
                calls[name](r)
            if i == 39:
                gc.collect()
                before = rss_bytes()
        gc.collect()
        grew = (rss_bytes() - before) / 2**20
        assert grew < 24, f"{name}: RSS grew {grew:.1f} MiB over 360 objects made, called and closed"
