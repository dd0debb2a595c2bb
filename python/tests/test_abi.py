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
