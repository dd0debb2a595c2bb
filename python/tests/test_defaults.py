"""The package's defaults and limits are the library's (tl_options).

Each keyword of a workload's class and one-shot function that is an option
of the library defaults to the library's default of it, to None (left to
the library) or to LIBRARY_DEFAULT (read from the library when the call is
made); the DRR's orbit and detector take the CLI's defaults, and the
largest sizes are refused with the library's messages."""
import inspect

import numpy as np
import pytest

import tapeloop
from tapeloop import _lib
from tapeloop._lib import LIBRARY_DEFAULT

CALLABLES = {
    "interp": (tapeloop.Interp, tapeloop.interp),
    "affinity": (tapeloop.Affinity, tapeloop.affinity),
    "drr": (tapeloop.DRR, tapeloop.drr),
    "wavelet": (tapeloop.Wavelet, tapeloop.wavelet),
}


@pytest.mark.parametrize("workload", sorted(CALLABLES))
def test_keyword_defaults_are_the_librarys(workload):
    lib = {o["key"]: o["default"] for o in _lib.options(workload)["options"]}
    for fn in CALLABLES[workload]:
        for name, p in inspect.signature(fn).parameters.items():
            if name not in lib or p.default is inspect.Parameter.empty:
                continue
            d = p.default
            if d is None or d is LIBRARY_DEFAULT or lib[name] is None:
                continue
            assert d == lib[name], f"{workload}: {fn.__name__}({name}={d!r}), the library's default is {lib[name]!r}"


def test_drr_orbit_and_detector_defaults_are_the_librarys():
    d = _lib.options("drr")["defaults"]
    assert set(d) == {"sdd", "sid", "pixel", "detector"}
    for fn, names in ((tapeloop.DRR.orbit, ("sdd", "sid", "pixel")), (tapeloop.drr, ("sdd", "sid", "pixel", "detector")),
                      (tapeloop.DRR, ("detector",))):
        for name in names:
            assert inspect.signature(fn).parameters[name].default is LIBRARY_DEFAULT, f"{fn.__name__}({name}=)"
    v = np.ones((4, 4, 4), np.float32)
    with tapeloop.DRR(v) as r:
        assert r.detector == tuple(d["detector"])
        np.testing.assert_array_equal(r.orbit(3), r.orbit(3, sdd=d["sdd"], sid=d["sid"], pixel=d["pixel"]))
        assert not np.array_equal(r.orbit(3), r.orbit(3, sdd=d["sdd"] + 1))


def test_limits_are_the_librarys():
    poses, combos = _lib.limit("drr", "poses"), _lib.limit("wavelet", "combinations")
    assert poses == 1 << 20 and combos == 1 << 24
    with tapeloop.DRR(np.ones((4, 4, 4), np.float32), detector=(3, 3)) as r:
        with pytest.raises(tapeloop.Error, match=f"at most {poses}"):
            r.orbit(poses + 1)
    with tapeloop.Wavelet(np.ones((4, 4, 4), np.float32)) as w:
        big = np.zeros(1 << 12)
        with pytest.raises(tapeloop.Error, match="combinations"):
            w(big, big, np.ones(2))


def test_library_default_pickles_as_itself():
    import copy
    import pickle
    assert pickle.loads(pickle.dumps(LIBRARY_DEFAULT)) is LIBRARY_DEFAULT
    assert copy.deepcopy(LIBRARY_DEFAULT) is LIBRARY_DEFAULT
