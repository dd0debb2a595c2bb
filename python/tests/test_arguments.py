"""Arguments a user can get wrong: each raises tapeloop.Error with one line
naming the argument, never a bare ValueError or TypeError from inside."""
import numpy as np
import pytest

import tapeloop

V = np.ones((4, 5, 6), np.float32)
X = np.ones((5, 3), np.float32)
F = np.ones((2, 8))

CASES = [
    ("spacing of two", lambda: tapeloop.DRR(V, (1, 1), detector=(3, 3)), r"^spacing=: want 3 numbers, got \(1, 1\)$"),
    ("spacing as text", lambda: tapeloop.DRR(V, "1,1,1", detector=(3, 3)), r"^spacing=: want 3 numbers"),
    ("origin of None", lambda: tapeloop.DRR(V, origin=None, detector=(3, 3)), r"^origin=: want 3 numbers"),
    ("detector of one", lambda: tapeloop.DRR(V, detector=(3,)), r"^detector=: want 2 integers"),
    ("detector of halves", lambda: tapeloop.DRR(V, detector=(3.5, 3)), r"^detector=: want 2 integers"),
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
    ("volume of text", lambda: tapeloop.DRR(np.array([["a"]]), detector=(3, 3)), r"^volume=: <U1 values: want real numbers$"),
    ("shape of three", lambda: tapeloop.Affinity(shape=(1, 2, 3)), r"^shape=: want 2 integers"),
    ("shape below 1", lambda: tapeloop.Affinity(shape=(-1, 4)), r"^shape \(-1, 4\): need N ≥ 1 images of D ≥ 1 values$"),
    ("block below 1", lambda: tapeloop.affinity(np.ones((5, 3)), block=-2), r"^block= -2: must be at least 1$"),
    ("param of text", lambda: tapeloop.Affinity(formula="sum(a*b)*s", params={"s": "x"}, shape=(3, 3)),
     r"^params= s='x': not a number$"),
    ("images of text", lambda: tapeloop.affinity([["a", "b"]]), r"^X=: <U1 values: want real numbers$"),
    ("queries of text", lambda: tapeloop.interp(np.ones((2, 8)), ["a", "b"]), r"^x=: <U1 values: want real numbers$"),
    ("images ragged", lambda: tapeloop.affinity([[1, 2], [3]]), r"^X=: cannot be read as float32"),
    ("table 1-D", lambda: tapeloop.interp(np.ones(5), np.zeros(3)), r"^f=: the table has shape \(5,\), want \(M, G\)$"),
    ("theta NaN", lambda: tapeloop.wavelet(V, [np.nan], 0, 1), r"wavelet: angles θ = NaN, φ = 0 must be finite"),
    ("theta 2-D", lambda: tapeloop.wavelet(V, np.zeros((2, 2)), 0, 1), r"^theta=: shape \(2, 2\)"),
    ("boundary", lambda: tapeloop.Wavelet(V, boundary="mirror"), r'^boundary=: unknown boundary "mirror"'),
    ("mem_limit", lambda: tapeloop.affinity(np.ones((5, 3)), mem_limit="-5"), r'^mem_limit=: bad size "-5"'),
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
    # an all-zero direction is not the identity (None is)
    ("direction of zeros", lambda: tapeloop.DRR(V, detector=(6, 5), direction=np.zeros((3, 3))),
     r"^direction=: all zeros; want the world directions of the index axes as columns, or None for the identity$"),
    # what is not real numbers is refused, not converted
    ("queries complex", lambda: tapeloop.interp(F, np.array([0.5 + 1j], np.complex64)), r"^x=: complex64 values: want real numbers$"),
    ("table of text", lambda: tapeloop.Interp(np.array([["1", "2", "3", "4"]] * 2)), r"^f=: <U1 values: want real numbers$"),
    ("table complex", lambda: tapeloop.Interp(F + 0j), r"^f=: complex128 values: want real numbers$"),
    ("queries of dates", lambda: tapeloop.interp(F, np.array(["2020-01-01"], "datetime64[D]")),
     r"^x=: datetime64\[D\] values: want real numbers$"),
    ("queries of durations", lambda: tapeloop.interp(F, np.array([1], "timedelta64[s]")),
     r"^x=: timedelta64\[s\] values: want real numbers$"),
    ("queries of bytes", lambda: tapeloop.interp(F, np.array([b"1"])), r"^x=: \|S1 values: want real numbers$"),
    ("images of objects", lambda: tapeloop.affinity(np.ones((3, 2), object)), r"^X=: object values: want real numbers$"),
    ("columns complex", lambda: tapeloop.affinity(X, Y=np.ones((2, 3), complex)), r"^Y=: complex128 values: want real numbers$"),
    ("volume complex", lambda: tapeloop.DRR(V + 0j, detector=(3, 3)), r"^volume=: complex64 values: want real numbers$"),
    ("volume of void", lambda: tapeloop.Wavelet(np.zeros((4, 4, 4), "V8")), r"^volume=: \|V8 values: want real numbers$"),
    ("theta complex", lambda: tapeloop.wavelet(V, [1j], 0, 1), r"^theta=: complex128 values: want real numbers$"),
    ("phi of text", lambda: tapeloop.wavelet(V, 0, "0", 1), r"^phi=: <U1 values: want real numbers$"),
    ("xi of objects", lambda: tapeloop.wavelet(V, 0, 0, [None, 1]), r"^xi=: object values: want real numbers$"),
    ("theta None", lambda: tapeloop.wavelet(V, None, 0, 1), r"^theta=: want a number or a 1-D list of numbers, got None$"),
    ("direction complex", lambda: tapeloop.DRR(V, detector=(3, 3), direction=np.eye(3) + 0j),
     r"^direction=: complex128 values: want real numbers$"),
    # dtype: None is the default, what is not a dtype says so
    ("Interp dtype bogus", lambda: tapeloop.Interp(F, dtype="bogus"), r"^dtype=: 'bogus' is not a dtype such as \"float32\"$"),
    ("Affinity dtype bogus", lambda: tapeloop.Affinity(shape=(3, 3), dtype=5), r"^dtype=: 5 is not a dtype such as \"float32\"$"),
    ("DRR dtype bogus", lambda: tapeloop.DRR(V, detector=(3, 3), dtype="bogus"), r"^dtype=: 'bogus' is not a dtype"),
    ("DRR dtype float64", lambda: tapeloop.DRR(V, detector=(3, 3), dtype=np.float64), r'^dtype= "float64": a DRR renders float32'),
    # numbers a call cannot do without
    ("response theta None", lambda: tapeloop.Wavelet(V).response(None, 0, 1), r"^theta=: want a number, got None$"),
    ("response xi None", lambda: tapeloop.Wavelet(V).response(0, 0, None), r"^xi=: want a number, got None$"),
    ("orbit None", lambda: tapeloop.DRR(V, detector=(3, 3)).orbit(None), r"^orbit=: want a whole number, got None$"),
    ("orbit start None", lambda: tapeloop.DRR(V, detector=(3, 3)).orbit(3, start=None), r"^start=: want a number, got None$"),
    ("orbit sdd None", lambda: tapeloop.DRR(V, detector=(3, 3)).orbit(3, sdd=None), r"^sdd=: want a number, got None$"),
    ("orbit sid None", lambda: tapeloop.DRR(V, detector=(3, 3)).orbit(3, sid=None), r"^sid=: want a number, got None$"),
    ("orbit pixel None", lambda: tapeloop.DRR(V, detector=(3, 3)).orbit(3, pixel=None), r"^pixel=: want a number, got None$"),
    ("drr pixel None", lambda: tapeloop.drr(V, orbit=2, detector=(3, 3), pixel=None), r"^pixel=: want a number, got None$"),
    ("orbit of 2⁴⁰", lambda: tapeloop.DRR(V, detector=(3, 3)).orbit(2**40),
     r"^geometry: --orbit 1099511627776: at most 1048576 \(2²⁰\) poses in one run$"),
    # integers beyond what the library takes
    ("batch of 2⁶³", lambda: tapeloop.Interp(F, batch=2**63), r"^batch=: 9223372036854775808 is too large$"),
    ("block of 2⁶³", lambda: tapeloop.Affinity(shape=(3, 3), block=2**63), r"^block=: 9223372036854775808 is too large$"),
    ("topk of -2⁶³", lambda: tapeloop.Affinity(shape=(3, 3), topk=-2**63), r"^topk=: -9223372036854775808 is too large$"),
    ("detector of 1e300", lambda: tapeloop.DRR(V, detector=(1e300, 1)), r"^detector=: 1e\+300 is too large$"),
    ("shape of 2⁶³", lambda: tapeloop.Affinity(shape=(2**63, 3)), r"^shape=: 9223372036854775808 is too large$"),
    # images: at least one of at least one value
    ("no images", lambda: tapeloop.affinity(np.ones((0, 5))), r"^X=: shape \(0, 5\): need N ≥ 1 images of D ≥ 1 values$"),
    ("images of no values", lambda: tapeloop.affinity(np.ones((3, 0, 2))),
     r"^X=: shape \(3, 0, 2\): need N ≥ 1 images of D ≥ 1 values$"),
    ("columns of no values", lambda: tapeloop.affinity(X, Y=np.ones((2, 0))),
     r"^Y=: shape \(2, 0\): need C ≥ 1 images of D ≥ 1 values$"),
    ("no column images", lambda: tapeloop.affinity(X, Y=np.ones((0, 3))), r"^Y=: shape \(0, 3\): need C ≥ 1 images"),
    ("stats of a number", lambda: tapeloop.Wavelet(V, stats=5), r"^stats=5: want a dict of name → formula"),
    # params: a mapping of names to numbers
    ("params of a list", lambda: tapeloop.Interp(F, reduce="max(v)*s", params=[1, 2]),
     r"^params=: want a dict of names to numbers, e.g. \{'s': 2.5\}, got \[1, 2\]$"),
    ("params of text", lambda: tapeloop.Affinity(formula="sum(a*b)*s", params="abc", shape=(3, 3)),
     r"^params=: want a dict of names to numbers, e.g. \{'s': 2.5\}, got 'abc'$"),
    ("params of a number", lambda: tapeloop.DRR(V, detector=(3, 3), post="p*s", params=5),
     r"^params=: want a dict of names to numbers, e.g. \{'s': 2.5\}, got 5$"),
    ("stats of numbers", lambda: tapeloop.Wavelet(V, stats=[5]), r"^stats=: 5 is not a statistic such as 'l1=sum\(abs\(g\)\)'$"),
    # the sweep's errors name theta=, phi=, xi=
    ("sweep too large", lambda: tapeloop.Wavelet(V)(np.zeros(300), np.zeros(300), np.zeros(300)),
     r"^theta= × phi= × xi=: 300 × 300 × 300 combinations; at most"),
    ("theta empty", lambda: tapeloop.Wavelet(V)([], 0, 1), r"^theta=: empty list$"),
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


# Boolean keywords take a bool (Python's or NumPy's) or 0/1; anything else,
# "no" among them, is refused rather than read as True.
BOOLEANS = [
    ("Interp", "fail_on_nonfinite", lambda v: tapeloop.Interp(F, reduce="max(v)", fail_on_nonfinite=v)),
    ("interp", "fail_on_nonfinite", lambda v: tapeloop.interp(F, [0.5], reduce="max(v)", fail_on_nonfinite=v)),
    ("Affinity", "fail_on_nonfinite", lambda v: tapeloop.Affinity(formula="sum(a*b)", shape=(3, 3), fail_on_nonfinite=v)),
    ("Affinity", "tf32", lambda v: tapeloop.Affinity("dot", shape=(3, 3), tf32=v)),
    ("affinity", "tf32", lambda v: tapeloop.affinity(X, tf32=v)),
    ("DRR", "hu", lambda v: tapeloop.DRR(V, detector=(3, 3), hu=v)),
    ("DRR", "strict", lambda v: tapeloop.DRR(V, detector=(3, 3), strict=v)),
    ("DRR", "fail_on_nonfinite", lambda v: tapeloop.DRR(V, detector=(3, 3), post="p", fail_on_nonfinite=v)),
    ("Wavelet", "fail_on_nonfinite", lambda v: tapeloop.Wavelet(V, stats={"m": "max(g)"}, fail_on_nonfinite=v)),
]
NOT_BOOLEAN = [(f"{where} {kw}={v!r}", kw, v, call) for v in ("no", "False", 2, 0.5, [1])
               for where, kw, call in BOOLEANS]


@pytest.mark.parametrize("name,keyword,value,call", NOT_BOOLEAN, ids=[c[0] for c in NOT_BOOLEAN])
def test_boolean_keyword_refuses_others(name, keyword, value, call):
    with pytest.raises(tapeloop.Error) as e:
        call(value)
    assert str(e.value) == f"{keyword}=: want True or False, got {value!r}"


@pytest.mark.parametrize("value", [True, False, 1, 0, np.bool_(True), np.bool_(False), np.int64(1), None])
def test_boolean_keyword_takes_bools(value, monkeypatch):
    """A bool or 0/1; None is the default, False, as for every keyword."""
    from test_config import sent, WORKLOADS
    module, cls, _ = WORKLOADS["drr"]
    got = sent(monkeypatch, module, cls, hu=value, strict=value, fail_on_nonfinite=value)
    assert got["hu"] is got["strict"] is got["fail_on_nonfinite"] is bool(value)


# Numbers given as what float() would take but no one means as a number,
# or too large for a float or for the library's 64-bit integers: refused
# by keyword, as tapeloop.Error (a ValueError), never a bare OverflowError.
@pytest.mark.parametrize("call,message", [
    (lambda: tapeloop.interp(F, [0.5], batch=2**62 + 1), r"^batch=: 4611686018427387905 is too large$"),
    (lambda: tapeloop.interp(F, [0.5], batch=10**30), r"^batch=: 10{30} is too large$"),
    (lambda: tapeloop.interp(F, [0.5], batch=2**53 + 1), r"^plan: interp needs"),  # a whole number: on to the planner
    (lambda: tapeloop.interp(F, [0.5], batch=True), r"^batch=: want a whole number, got True$"),
    (lambda: tapeloop.interp(F, [0.5], batch="12"), r"^batch=: want a whole number, got '12'$"),
    (lambda: tapeloop.interp(F, [0.5], a=10**400), r"^a=: 10{400} is too large$"),
    (lambda: tapeloop.interp(F, [0.5], a="0.5"), r"^a=: want a number, got '0.5'$"),
    (lambda: tapeloop.interp(F, [0.5], reduce="sum(v*s)", params={"s": 10**400}), r"^params= s=10{400}: too large$"),
    (lambda: tapeloop.interp(F, [0.5], reduce="sum(v*s)", params={"s": True}), r"^params= s=True: not a number$"),
    (lambda: tapeloop.DRR(V, detector=(3, 3), method="trilinear", step=True), r"^step=: want a number, got True$"),
    (lambda: tapeloop.Interp(F, mem_limit=True), r'^mem_limit=: want bytes or a size such as "2GiB", got True$'),
    (lambda: tapeloop.DRR(V, spacing=(10**400, 1, 1), detector=(3, 3)), r"^spacing=: .* holds a number too large$"),
    (lambda: tapeloop.DRR(V, detector=(2**62 + 1, 4)), r"^detector=: 4611686018427387905 is too large$"),
    (lambda: tapeloop.DRR(V, detector=(True, 4)), r"^detector=: want 2 integers, got \(True, 4\)$"),
    (lambda: tapeloop.wavelet(V, 0, 0, 1, stats={"l1": 3}), r"^stats=: 'l1': 3 is not a statistic"),
    (lambda: tapeloop.wavelet(V, 0, 0, 1, stats={"l1": None}), r"^stats=: 'l1': None is not a statistic"),
    (lambda: tapeloop.wavelet(V, 0, 0, 1, stats=b"l1=sum(g)"), r"^stats=: b'l1=sum\(g\)' is bytes"),
], ids=lambda c: "" if callable(c) else c)
def test_numbers_and_statistics_by_type(call, message):
    with pytest.raises(tapeloop.Error, match=message):
        call()


# String options: another type is refused in Python, naming the keyword.
STRINGS = [
    ("reduce", lambda v: tapeloop.Interp(F, reduce=v)),
    ("method", lambda v: tapeloop.Interp(F, method=v)),
    ("metric", lambda v: tapeloop.Affinity(v, shape=(3, 3))),
    ("formula", lambda v: tapeloop.Affinity(formula=v, shape=(3, 3))),
    ("method", lambda v: tapeloop.Affinity(formula="sum(a*b)", method=v, shape=(3, 3))),
    ("kernel", lambda v: tapeloop.Wavelet(V, kernel=v)),
    ("boundary", lambda v: tapeloop.Wavelet(V, boundary=v)),
    ("indexing", lambda v: tapeloop.Wavelet(V, indexing=v)),
    ("mu", lambda v: tapeloop.DRR(V, detector=(3, 3), mu=v)),
    ("post", lambda v: tapeloop.DRR(V, detector=(3, 3), post=v)),
    ("frame", lambda v: tapeloop.DRR(V, detector=(3, 3), frame=v)),
    ("method", lambda v: tapeloop.DRR(V, detector=(3, 3), method=v)),
    ("device", lambda v: tapeloop.Interp(F, device=v)),
    ("device", lambda v: tapeloop.drr(V, orbit=1, detector=(3, 3), device=v)),
]
NOT_STRING = [(f"{kw}={v!r} {i}", kw, v, call) for v in (5, 3.5, ["sum"]) for i, (kw, call) in enumerate(STRINGS)]


@pytest.mark.parametrize("name,keyword,value,call", NOT_STRING, ids=[c[0] for c in NOT_STRING])
def test_string_keyword_refuses_others(name, keyword, value, call):
    with pytest.raises(tapeloop.Error) as e:
        call(value)
    assert str(e.value) == f"{keyword}=: want a string, got {value!r}"


def test_dtype_none_is_the_default():
    assert tapeloop.Interp(F, dtype=None).dtype == np.float32
    assert tapeloop.Affinity(shape=(3, 3), dtype=None).dtype == np.float32
    assert tapeloop.interp(F, [0.5], dtype=None).dtype == np.float32
    assert tapeloop.affinity(X, dtype=None).dtype == np.float32


@pytest.mark.parametrize("dtype", [None, "float32", np.float32, np.dtype(np.float32)])
def test_drr_takes_its_dtype_as_interp_does(dtype):
    assert tapeloop.drr(V, orbit=1, detector=(3, 3), dtype=dtype).dtype == np.float32


def test_stats_of_one_string():
    w = tapeloop.Wavelet(V, stats="l1=sum(abs(g))")
    assert w.columns[-1] == "l1"
    assert tapeloop.wavelet(V, 0, 0, 1, stats="l1=sum(abs(g))")["l1"].shape == (1,)


def test_bool_arrays_are_numbers():
    assert tapeloop.interp(F, np.array([True, False])).shape == (2,)


# The library's own reading of a config (a C caller's JSON): a value of the
# wrong type names the key, not a Go struct.
@pytest.mark.parametrize("config,message", [
    ('{"reduce": 5}', "reduce=: want a string, got a number"),
    ('{"device": 1}', "device=: want a string, got a number"),
    ('{"batch": 9223372036854775808}', "batch=: want a 64-bit integer, got 9223372036854775808"),
    ('{"batch": 1.5}', "batch=: want a 64-bit integer, got 1.5"),
    ('{"batch": "7"}', "batch=: want a 64-bit integer, got a string"),
    ('{"fail_on_nonfinite": "no"}', "fail_on_nonfinite=: want true or false, got a string"),
    ('{"params": {"s": "x"}}', "params=: want a finite number, got a string"),
    ('{"params": [1]}', "params=: want an object, got an array"),
    ('{"a": 1e999}', "a=: want a finite number, got 1e999"),
])
def test_config_type_errors_name_the_key(config, message):
    import ctypes
    from tapeloop import _lib
    f = np.ones((2, 8))
    h = ctypes.c_int64(0)
    with pytest.raises(tapeloop.Error) as e:
        _lib.check(_lib.lib.tl_interp_create(config.encode(), f.ctypes.data, 2, 8, ctypes.byref(h)))
    msg = str(e.value)
    assert "Go struct" not in msg and "interpConfig" not in msg and "\n" not in msg
    if message is not None:
        assert msg == message


def test_config_zero_direction_is_refused():
    import ctypes
    from tapeloop import _lib
    h = ctypes.c_int64(0)
    with pytest.raises(tapeloop.Error, match=r"^direction=: all zeros"):
        _lib.check(_lib.lib.tl_drr_create(b'{"rows": 3, "cols": 3, "direction": [[0,0,0],[0,0,0],[0,0,0]]}',
                                          V.ctypes.data, *V.shape, ctypes.byref(h)))


@pytest.mark.parametrize("config,message", [
    ('{"rows": 3, "cols": 3, "spacing": [1, 1, 1, 7]}', "spacing=: want 3 numbers"),
    ('{"rows": 3, "cols": 3, "origin": [0, 0]}', "origin=: want 3 numbers"),
    ('{"rows": 3, "cols": 3, "direction": [[1,0,0],[0,1,0],[0,0,1],[0,0,0]]}', "direction=: want 3 lists of 3 numbers"),
    ('{"rows": 3, "cols": 3, "direction": [[1,0,0,5],[0,1,0],[0,0,1]]}', "direction=: want 3 lists of 3 numbers"),
    ('{"rows": 3, "cols": 3, "direction": []}', "direction=: want 3 lists of 3 numbers"),
])
def test_config_fixed_lists_are_whole(config, message):
    """A C caller's list of another length than its fixed one (spacing,
    origin, direction) is refused by key: JSON decoding alone would drop
    the values past the end, or make the missing ones 0, without a word."""
    import ctypes
    from tapeloop import _lib
    h = ctypes.c_int64(0)
    with pytest.raises(tapeloop.Error) as e:
        _lib.check(_lib.lib.tl_drr_create(config.encode(), V.ctypes.data, *V.shape, ctypes.byref(h)))
    assert str(e.value) == message


@pytest.mark.parametrize("config", ["[]", '"x"', "3", "true"])
def test_config_not_an_object(config):
    import ctypes
    from tapeloop import _lib
    h = ctypes.c_int64(0)
    with pytest.raises(tapeloop.Error, match=r"^config: want a JSON object of options, got (an? )?(array|string|number|bool)"):
        _lib.check(_lib.lib.tl_interp_create(config.encode(), F.ctypes.data, *F.shape, ctypes.byref(h)))


def test_config_fixed_lists_of_their_length_pass():
    import ctypes
    from tapeloop import _lib
    h = ctypes.c_int64(0)
    cfg = b'{"rows": 3, "cols": 3, "spacing": [1, 2, 3], "origin": null, "direction": [[0,1,0],[1,0,0],[0,0,-1]]}'
    _lib.check(_lib.lib.tl_drr_create(cfg, V.ctypes.data, *V.shape, ctypes.byref(h)))
    _lib.check(_lib.lib.tl_close(h))
