"""Arguments a user can get wrong: each raises tapeloop.Error with one line
naming the argument, never a bare ValueError or TypeError from inside."""
import numpy as np
import pytest

import tapeloop

V = np.ones((4, 5, 6), np.float32)

CASES = [
    ("spacing of two", lambda: tapeloop.DRR(V, (1, 1), detector=(3, 3)), r"^spacing: want 3 numbers, got \(1, 1\)$"),
    ("spacing as text", lambda: tapeloop.DRR(V, "1,1,1", detector=(3, 3)), r"^spacing: want 3 numbers"),
    ("origin of None", lambda: tapeloop.DRR(V, origin=None, detector=(3, 3)), r"^origin: want 3 numbers"),
    ("detector of one", lambda: tapeloop.DRR(V, detector=(3,)), r"^detector: want 2 integers"),
    ("detector of halves", lambda: tapeloop.DRR(V, detector=(3.5, 3)), r"^detector: want 2 integers"),
    ("detector below 1", lambda: tapeloop.DRR(V, detector=(-3, 3)), r"^detector= -3x3: want R, C ≥ 1$"),
    ("direction 2×2", lambda: tapeloop.DRR(V, detector=(3, 3), direction=np.eye(2)), r"^direction: shape \(2, 2\)"),
    ("direction not a rotation", lambda: tapeloop.DRR(V, detector=(3, 3), direction=np.ones((3, 3))),
     r"direction of index axis 0 is not a unit vector"),
    ("pose of text", lambda: tapeloop.DRR(V, detector=(3, 3))([{"source": "far", "center": [0, 0, 0], "u": [1, 0, 0],
                                                                 "v": [0, 1, 0], "pixel": [1, 1]}]),
     r"^pose 0: source: <U3 values; want real numbers"),
    ("pose of another detector", lambda: tapeloop.DRR(V, detector=(3, 4))([{"source": [0, 0, 900], "center": [0, 0, -100],
                                                                          "u": [1, 0, 0], "v": [0, 1, 0], "pixel": [1, 1],
                                                                          "rows": 3, "cols": 5}]),
     r"^geometry: pose 0 has cols 5, the object's detector is 3x4$"),
    ("orbit of none", lambda: tapeloop.drr(V, orbit=0, detector=(3, 3)), r"^geometry: --orbit 0: need at least one pose$"),
    ("poses and orbit", lambda: tapeloop.drr(V, poses=np.zeros((1, 14)), orbit=3, detector=(3, 3)), r"give poses or orbit"),
    ("volume 2-D", lambda: tapeloop.DRR(V[0], detector=(3, 3)), r"^volume=: shape \(5, 6\), want \(X, Y, Z\)$"),
    ("volume of text", lambda: tapeloop.DRR(np.array([["a"]]), detector=(3, 3)), r"^volume: cannot be read as float32"),
    ("shape of three", lambda: tapeloop.Affinity(shape=(1, 2, 3)), r"^shape: want 2 integers"),
    ("shape below 1", lambda: tapeloop.Affinity(shape=(-1, 4)), r"^shape \(-1, 4\): need N ≥ 1 images of D ≥ 1 values$"),
    ("block below 1", lambda: tapeloop.affinity(np.ones((5, 3)), block=-2), r"^block= -2: must be at least 1$"),
    ("param of text", lambda: tapeloop.Affinity(formula="sum(a*b)*s", params={"s": "x"}, shape=(3, 3)),
     r"^params= s='x': not a number$"),
    ("images of text", lambda: tapeloop.affinity([["a", "b"]]), r"^X: cannot be read as float32"),
    ("queries of text", lambda: tapeloop.interp(np.ones((2, 8)), ["a", "b"]), r"^x: cannot be read as float32"),
    ("table 1-D", lambda: tapeloop.interp(np.ones(5), np.zeros(3)), r"^f=: the table has shape \(5,\), want \(M, G\)$"),
    ("theta NaN", lambda: tapeloop.wavelet(V, [np.nan], 0, 1), r"wavelet: angles θ = NaN, φ = 0 must be finite"),
    ("theta 2-D", lambda: tapeloop.wavelet(V, np.zeros((2, 2)), 0, 1), r"^theta=: shape \(2, 2\)"),
    ("boundary", lambda: tapeloop.Wavelet(V, boundary="mirror"), r'^boundary=: unknown boundary "mirror"'),
    ("mem_limit", lambda: tapeloop.affinity(np.ones((5, 3)), mem_limit="-5"), r'^mem_limit= "-5": bad size'),
    ("dtype", lambda: tapeloop.Affinity(shape=(3, 3), dtype="int8"), r"dtype"),
    ("device", lambda: tapeloop.DRR(V, detector=(2, 2), device="tpu"), r'^device= "tpu": want cpu or cuda$'),
    ("mem_limit of words", lambda: tapeloop.Interp(np.ones((2, 5)), mem_limit="lots"), r"^mem_limit="),
    # sizes over the memory limit: refused before anything is allocated
    ("affinity of 2⁴⁰ images", lambda: tapeloop.Affinity("dot", shape=(2**40, 2**40)),
     r"^plan: affinity's images and matrix needs more than 8 EiB, over the memory limit"),
    ("affinity over 1 GiB", lambda: tapeloop.Affinity("dot", shape=(20000, 10000), mem_limit="1GiB"),
     r"^plan: affinity's images and matrix needs 2\.2 GiB .* over the memory limit of 1\.0 GiB"),
    ("volume over the limit", lambda: tapeloop.DRR(np.ones((32, 32, 32), np.float32), detector=(4, 4), mem_limit="64KiB"),
     r"^plan: drr's volume needs 128 KiB .* over the memory limit of 64 KiB"),
    ("table over the limit", lambda: tapeloop.Interp(np.ones((64, 1024)), mem_limit="100KiB"), r"^plan: interp's table needs"),
]
if "not in this build" in tapeloop.build():
    CASES.append(("cuda in a CPU build", lambda: tapeloop.Affinity("dot", shape=(4, 4), device="cuda"),
                  r"^device= cuda: this tapeloop was built without CUDA"))


@pytest.mark.parametrize("name,call,message", CASES, ids=[c[0] for c in CASES])
def test_bad_argument(name, call, message):
    with pytest.raises(tapeloop.Error, match=message) as e:
        call()
    assert "\n" not in str(e.value)


# NaN and ±Inf in every numeric keyword of every object and one-shot
# function: refused in Python, before any JSON is written, naming the
# keyword as the caller wrote it.
X = np.ones((5, 3), np.float32)
F = np.ones((2, 8))


KEYWORDS = [
    ("Interp", "a", lambda v: tapeloop.Interp(F, a=v)),
    ("Interp", "dx", lambda v: tapeloop.Interp(F, dx=v)),
    ("Interp", "params", lambda v: tapeloop.Interp(F, reduce="max(v)*s", params={"s": v})),
    ("Interp", "batch", lambda v: tapeloop.Interp(F, batch=v)),
    ("interp", "a", lambda v: tapeloop.interp(F, [0.5], a=v)),
    ("interp", "dx", lambda v: tapeloop.interp(F, [0.5], dx=v)),
    ("interp", "params", lambda v: tapeloop.interp(F, [0.5], reduce="max(v)*s", params={"s": v})),
    ("Affinity", "params", lambda v: tapeloop.Affinity(formula="sum(a*b)*s", params={"s": v}, shape=(3, 3))),
    ("Affinity", "block", lambda v: tapeloop.Affinity("dot", shape=(3, 3), block=v)),
    ("Affinity", "topk", lambda v: tapeloop.Affinity("dot", shape=(3, 3), topk=v)),
    ("Affinity", "cols", lambda v: tapeloop.Affinity("dot", shape=(3, 3), cols=v)),
    ("Affinity", "shape", lambda v: tapeloop.Affinity("dot", shape=(v, 3))),
    ("affinity", "params", lambda v: tapeloop.affinity(X, formula="sum(a*b)*s", params={"s": v})),
    ("affinity", "block", lambda v: tapeloop.affinity(X, block=v)),
    ("DRR", "spacing", lambda v: tapeloop.DRR(V, spacing=(v, 1, 1), detector=(3, 3))),
    ("DRR", "origin", lambda v: tapeloop.DRR(V, origin=(0, 0, v), detector=(3, 3))),
    ("DRR", "direction", lambda v: tapeloop.DRR(V, direction=[[1, 0, 0], [0, v, 0], [0, 0, 1]], detector=(3, 3))),
    ("DRR", "step", lambda v: tapeloop.DRR(V, method="trilinear", step=v, detector=(3, 3))),
    ("DRR", "mu_water", lambda v: tapeloop.DRR(V, hu=True, mu_water=v, detector=(3, 3))),
    ("DRR", "params", lambda v: tapeloop.DRR(V, post="p*s", params={"s": v}, detector=(3, 3))),
    ("DRR", "detector", lambda v: tapeloop.DRR(V, detector=(v, 3))),
    ("DRR", "batch", lambda v: tapeloop.DRR(V, detector=(3, 3), batch=v)),
    ("DRR.orbit", "orbit", lambda v: tapeloop.DRR(V, detector=(3, 3)).orbit(v)),
    ("DRR.orbit", "sdd", lambda v: tapeloop.DRR(V, detector=(3, 3)).orbit(2, sdd=v)),
    ("DRR.orbit", "sid", lambda v: tapeloop.DRR(V, detector=(3, 3)).orbit(2, sid=v)),
    ("DRR.orbit", "pixel", lambda v: tapeloop.DRR(V, detector=(3, 3)).orbit(2, pixel=v)),
    ("drr", "spacing", lambda v: tapeloop.drr(V, (1, v, 1), orbit=2, detector=(3, 3))),
    ("drr", "origin", lambda v: tapeloop.drr(V, origin=(v, 0, 0), orbit=2, detector=(3, 3))),
    ("drr", "sdd", lambda v: tapeloop.drr(V, orbit=2, detector=(3, 3), sdd=v)),
    ("drr", "sid", lambda v: tapeloop.drr(V, orbit=2, detector=(3, 3), sid=v)),
    ("drr", "pixel", lambda v: tapeloop.drr(V, orbit=2, detector=(3, 3), pixel=v)),
    ("drr", "step", lambda v: tapeloop.drr(V, orbit=2, detector=(3, 3), method="trilinear", step=v)),
    ("drr", "orbit", lambda v: tapeloop.drr(V, orbit=v, detector=(3, 3))),
    ("Wavelet", "a", lambda v: tapeloop.Wavelet(V, a=v)),
    ("Wavelet", "params", lambda v: tapeloop.Wavelet(V, stats={"m": "max(g)*s"}, params={"s": v})),
    ("Wavelet", "batch", lambda v: tapeloop.Wavelet(V, batch=v)),
    ("wavelet", "a", lambda v: tapeloop.wavelet(V, 0, 0, 1, a=v)),
    ("wavelet", "params", lambda v: tapeloop.wavelet(V, 0, 0, 1, stats={"m": "max(g)*s"}, params={"s": v})),
    ("any", "gpu", lambda v: tapeloop.Affinity("dot", shape=(3, 3), gpu=v)),
    ("any", "mem_limit", lambda v: tapeloop.Interp(F, mem_limit=v)),
]


NONFINITE = [(f"{where} {kw}={v}", kw, v, call) for v in (float("nan"), float("inf"), float("-inf"), np.float32("nan"))
             for where, kw, call in KEYWORDS]


@pytest.mark.parametrize("name,keyword,value,call", NONFINITE, ids=[c[0] for c in NONFINITE])
def test_nonfinite_keyword(name, keyword, value, call):
    with pytest.raises(tapeloop.Error) as e:
        call(value)
    msg = str(e.value)
    assert msg.startswith(f"{keyword}=: {float(value)!r} is not a finite number"), msg
    assert "\n" not in msg and "invalid character" not in msg


# The data arguments (the wavelet's angles and stretches, poses, tables)
# are refused by the library with its own messages.
@pytest.mark.parametrize("name,call,message", [
    ("xi NaN", lambda: tapeloop.wavelet(V, 0, 0, float("nan")), r"stretch ξ = NaN must be positive"),
    ("phi Inf", lambda: tapeloop.wavelet(V, 0, float("inf"), 1), r"angles θ = 0, φ = \+Inf must be finite"),
    ("pose NaN", lambda: tapeloop.DRR(V, detector=(3, 3))(np.full((1, 14), np.nan)), r"NaN or infinite coordinate"),
    ("table NaN", lambda: tapeloop.interp(np.full((2, 5), np.nan), [0.5]), r"^interp: f\[0, 0\] is NaN"),
], ids=lambda c: c if isinstance(c, str) else "")
def test_nonfinite_data(name, call, message):
    with pytest.raises(tapeloop.Error, match=message):
        call()
