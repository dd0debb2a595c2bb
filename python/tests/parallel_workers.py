"""What the parallel tests' worker processes run: importable by name, so
that spawn, forkserver and Dask workers find it (test_parallel.py)."""
import os
import pickle
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import tapeloop  # noqa: E402

KINDS = ("interp", "affinity", "drr", "wavelet")


def make(kind, seed):
    """An object of kind built from fresh random data of odd sizes (seeded
    by seed), and an input to call it with."""
    rng = np.random.default_rng(seed)
    if kind == "interp":
        f = rng.standard_normal((7, 23))
        return tapeloop.Interp(f, 0.5, 0.1, reduce="none"), rng.uniform(0.4, 2.9, 41).astype(np.float32)
    if kind == "affinity":
        x = rng.standard_normal((19, 13)).astype(np.float32)
        return tapeloop.Affinity("l2", params=None, shape=x.shape), x
    if kind == "drr":
        vol = rng.uniform(0, 0.03, (11, 9, 13)).astype(np.float32)
        r = tapeloop.DRR(vol, (1.5, 1.0, 1.2), (-8.0, -4.0, -7.0), detector=(7, 9), mu="h*1.5")
        return r, r.orbit(5, sdd=300.0, sid=150.0, pixel=3.0)
    if kind == "wavelet":
        vol = rng.standard_normal((10, 9, 11)).astype(np.float32)
        return tapeloop.Wavelet(vol, a=1.2, stats={"l1": "sum(abs(g))"}), ([0.0, 0.7], [0.3], [1.0, 1.7])
    raise ValueError(kind)


def call(obj, inp):
    """obj's result on inp, as plain arrays (a wavelet's columns stacked)."""
    if isinstance(obj, tapeloop.Wavelet):
        res = obj(*inp)
        return np.stack([res[c] for c in obj.columns])
    return obj(inp)


HELD = []


def hold_own():
    """Build an object of every kind from other data and keep it, so that
    this worker holds objects of its own before any arrives from the parent
    (their handles are the ones a copied handle number would name)."""
    for i, kind in enumerate(KINDS):
        obj, inp = make(kind, 1000 + i)
        call(obj, inp)
        HELD.append(obj)
    return [o._h for o in HELD]


def held_and_call(obj, inp):
    """In a worker: the objects held (hold_own, once), then obj's result."""
    if not HELD:
        hold_own()
    return call(obj, inp)


def call_pair(args):
    obj, inp = args
    return held_and_call(obj, inp)


def call_and_close(obj, inp):
    """obj's result, then obj closed (a task that closes what it got)."""
    try:
        return call(obj, inp)
    finally:
        obj.close()


def make_and_call(kind, seed):
    obj, inp = make(kind, seed)
    with obj:
        return call(obj, inp)


GLOBAL = None  # an object a forking parent made before the fork


def call_global(inp):
    return call(GLOBAL, inp)


def call_unpickled(blob, inp):
    return call(pickle.loads(blob), inp)
