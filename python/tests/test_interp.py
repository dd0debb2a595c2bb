"""tapeloop.Interp against a NumPy reference, the CLI, and itself over 1,000 calls."""
import os
import re
import subprocess
import threading

import numpy as np
import pytest

import tapeloop
from helpers import CLI, calls_over_time

# The cubic weights of docs/interp.md, as in bench/peers/interp_numpy.py.
WA = np.array([-1 / 16, 9 / 16, 9 / 16, -1 / 16])
WB = np.array([1 / 24, -9 / 8, 9 / 8, -1 / 24])
WC = np.array([1 / 4, -1 / 4, -1 / 4, 1 / 4])
WD = np.array([-1 / 6, 1 / 2, -1 / 2, 1 / 6])


def reference(f, a, dx, x):
    """The (N, M) interpolated values, in float64."""
    fp = np.pad(f, ((0, 0), (1, 1)))
    g = fp.shape[1] - 2
    xc = np.clip(x.astype(np.float64), a, a + (g + 1) * dx) - a
    ix = np.floor(xc / dx)
    t = (xc / dx - (ix + 0.5))[:, None]
    w = WA + t * (WB + t * (WC + t * WD))
    start = np.clip(ix.astype(np.int64), 0, g - 2)
    cols = fp[:, start[:, None] + np.arange(4)]
    return np.einsum("mck,ck->cm", cols, w)


def case(rng, m=37, g=101, n=1013, dtype=np.float32):
    f = rng.standard_normal((m, g))
    a, dx = -0.75, 0.0125
    x = rng.uniform(a, a + (g - 1) * dx, n).astype(dtype)
    return f, a, dx, x


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduce", ["sumsq", "sum", "none", "max(v)", "mean(exp(-v^2/s))"])
def test_numpy_reference(reduce, dtype):
    rng = np.random.default_rng()
    f, a, dx, x = case(rng, dtype=dtype)
    v = reference(f, a, dx, x)
    want = {"sumsq": (v * v).sum(1), "sum": v.sum(1), "none": v, "max(v)": v.max(1),
            "mean(exp(-v^2/s))": np.exp(-v * v / 2.5).mean(1)}[reduce]
    params = {"s": 2.5} if "s)" in reduce else None
    with tapeloop.Interp(f, a, dx, batch=len(x), reduce=reduce, params=params, dtype=dtype) as r:
        got = r(x)
    assert got.dtype == np.dtype(dtype) and got.shape == want.shape
    tol = 2e-4 if dtype == "float32" else 1e-9
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


def test_one_shot_and_out_and_strided():
    rng = np.random.default_rng()
    f, a, dx, x = case(rng, n=517)
    want = tapeloop.interp(f, x, a, dx)
    with tapeloop.Interp(f, a, dx, batch=len(x)) as r:
        out = np.full(len(x), np.nan, np.float32)
        assert r(x, out=out) is out
        np.testing.assert_array_equal(out, want)
        wide = np.empty(2 * len(x), np.float32)
        wide[::2] = x
        np.testing.assert_array_equal(r(wide[::2]), want)  # strided: copied once


@pytest.mark.skipif(not os.access(CLI, os.X_OK), reason="bin/tapeloop not built")
@pytest.mark.parametrize("reduce", ["sumsq", "none", "max(v)"])
def test_same_as_cli(tmp_path, reduce):
    rng = np.random.default_rng()
    f, a, dx, x = case(rng, n=2049)
    np.save(tmp_path / "f.npy", f)
    np.save(tmp_path / "x.npy", x)
    subprocess.run([CLI, "interp", "--f", str(tmp_path / "f.npy"), "--x", str(tmp_path / "x.npy"),
                    "--a", repr(a), "--dx", repr(dx), "--reduce", reduce, "--out", str(tmp_path / "out.npy")],
                   check=True, capture_output=True)
    want = np.load(tmp_path / "out.npy")
    got = tapeloop.interp(f, x, a, dx, reduce=reduce)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)  # bit-identical: the same kernels


@pytest.mark.skipif(not os.access(CLI, os.X_OK), reason="bin/tapeloop not built")
def test_fail_on_nonfinite_as_the_cli(tmp_path):
    """fail_on_nonfinite, of the class and of the one-shot function, fails
    where the CLI's --fail-on-nonfinite does, counting the same values;
    without it the non-finite values come back as the CLI writes them."""
    rng = np.random.default_rng()
    f, a, dx, x = case(rng, m=3, n=2049)
    reduce = "log(max(v))"  # NaN where all three values are negative
    np.save(tmp_path / "f.npy", f)
    np.save(tmp_path / "x.npy", x)
    args = [CLI, "interp", "--f", str(tmp_path / "f.npy"), "--x", str(tmp_path / "x.npy"), "--a", repr(a),
            "--dx", repr(dx), "--reduce", reduce, "--batch", str(len(x))]
    subprocess.run(args + ["--out", str(tmp_path / "out.npy")], check=True, capture_output=True)
    want = np.load(tmp_path / "out.npy")
    ok = np.isfinite(want)
    bad = len(x) - int(ok.sum())
    assert 0 < bad < len(x)
    np.testing.assert_array_equal(tapeloop.interp(f, x, a, dx, reduce=reduce), want)
    cli = subprocess.run(args + ["--fail-on-nonfinite"], capture_output=True, text=True)
    assert cli.returncode != 0
    assert f"--reduce gave {bad} non-finite values (NaN or ±Inf) and --fail-on-nonfinite is set" in cli.stderr
    msg = re.escape(f"reduce= gave {bad} non-finite values (NaN or ±Inf) and fail_on_nonfinite= is set")
    with pytest.raises(tapeloop.Error, match=msg):
        tapeloop.interp(f, x, a, dx, reduce=reduce, batch=len(x), fail_on_nonfinite=True)
    with tapeloop.Interp(f, a, dx, batch=len(x), reduce=reduce, fail_on_nonfinite=True) as r:
        with pytest.raises(tapeloop.Error, match=msg):
            r(x)
        np.testing.assert_array_equal(r(x[ok]), want[ok])  # still usable, and the finite values pass


def test_wrong_shape_and_dtype():
    f, a, dx, x = case(np.random.default_rng(), n=64)
    with tapeloop.Interp(f, a, dx, batch=64) as r:
        with pytest.raises(tapeloop.Error, match=r"x: shape \(8, 8\), want 1 dimension"):
            r(x.reshape(8, 8))
        np.testing.assert_array_equal(r(x.astype(np.float64)), r(x))  # float64 x: the same points, placed in float64
        with pytest.raises(tapeloop.Error, match=r"x: dtype int64, the compiled dtype is float32"):
            r(np.arange(64))
        with pytest.raises(tapeloop.Error, match=r"out: want a writeable C-contiguous float32 array of shape \(64,\)"):
            r(x, out=np.empty(64, np.float64))
        with pytest.raises(tapeloop.Error, match=r"out: .* shape \(63,\)"):
            r(x[:63], out=np.empty(64, np.float32))
        with pytest.raises(tapeloop.Error, match=r"out: .*, got \(64,\) float32 \(not C-contiguous\)$"):
            r(x, out=np.empty(128, np.float32)[::2])
        ro = np.empty(64, np.float32)
        ro.flags.writeable = False
        with pytest.raises(tapeloop.Error, match=r"out: .*, got \(64,\) float32 \(read-only\)$"):
            r(x, out=ro)
        with pytest.raises(tapeloop.Error, match="no query points"):
            r(x[:0])
        bad = x.copy()
        bad[40] = np.nan
        with pytest.raises(tapeloop.Error, match=r"^interp: bad query: x\[40\] is NaN$"):
            r(bad)  # as the CLI: "interp: bad query: FILE: x[40] is NaN"
        bad[40] = -np.inf
        with pytest.raises(tapeloop.Error, match=r"x\[40\] is -Inf"):
            r(bad)
        np.testing.assert_array_equal(r(x), tapeloop.interp(f, x, a, dx))  # still usable
    with pytest.raises(tapeloop.Error, match="closed"):
        r(x)


@pytest.mark.parametrize("a, dx", [(1.7e9, 0.37), (1e3, 1e-5)])
def test_float32_far_from_zero(a, dx):
    """float64 x on a grid far from zero: a float32 Interp places each point
    in float64 (as x − a) before rounding, and agrees with the float64
    reference to float32's precision; so does the one-shot interp, which
    keeps float64 x as it is."""
    rng = np.random.default_rng()
    m, g, n = 5, 29, 1001
    f = rng.standard_normal((m, g))
    x = a + rng.uniform(-2 * dx, (g - 1.5) * dx, n)  # up to the last node, past which the scheme jumps at each node
    want = reference(f, a, dx, x).sum(1)
    with tapeloop.Interp(f, a, dx, reduce="sum", batch=256) as r:
        got = r(x)
    tol = 1e-5 * np.abs(want).max()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=tol)
    np.testing.assert_array_equal(tapeloop.interp(f, x, a, dx, reduce="sum", batch=256), got)
    with tapeloop.Interp(f, 0.0, dx, reduce="sum", batch=256) as r:  # a = 0: the points taken as they are
        np.testing.assert_array_equal(r(x - a), r((x - a).astype(np.float32)))


@pytest.mark.parametrize("reduce", ["sumsq", "none"])
def test_any_number_of_points_in_blocks(reduce):
    """A call of n points runs in blocks of the compiled batch, the last one
    short; every point's value is the one it has alone in a full block."""
    rng = np.random.default_rng()
    f, a, dx, x = case(rng, n=3 * 97 + 41)
    want = tapeloop.interp(f, x, a, dx, reduce=reduce)  # one block of all the points
    with tapeloop.Interp(f, a, dx, batch=97, reduce=reduce) as r:
        got = r(x)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(r(x[:5]), want[:5])
        rep = r.report()
        assert rep["calls"] == 2 and rep["last_items"] == 5 and rep["last_batches"] == 1
        assert rep["plan"]["batch"] == 97 and rep["items"] == len(x) + 5
    with tapeloop.Interp(f, a, dx, mem_limit="64MiB", reduce=reduce) as r:  # the batch planned
        np.testing.assert_array_equal(r(x), want)
        assert 1 <= r.report()["plan"]["batch"] and r.report()["plan"]["planned_bytes"] <= 64 << 20


def test_dot_and_report():
    f, a, dx, x = case(np.random.default_rng(), n=100)
    with tapeloop.Interp(f, a, dx, batch=50, reduce="max(v)") as r:
        dot = r.dot()
        assert dot.startswith('digraph "interp"') and "(50) float32" in dot
        r(x)
        rep = r.report()
        assert rep["workload"] == "interp" and rep["calls"] == 1 and rep["last_batches"] == 2
        assert rep["summary"]["batches"] == 1 and rep["rss_bytes"] > 0 and rep["peak_rss_bytes"] >= rep["rss_bytes"]


def test_gpu_array_names_the_build():
    class DeviceArray:  # what CuPy, JAX and PyTorch GPU arrays answer
        def __dlpack_device__(self):
            return (2, 0)  # kDLCUDA, device 0

        def __dlpack__(self, stream=None):
            raise AssertionError("must not be read")

    f, a, dx, x = case(np.random.default_rng(), n=8)
    with tapeloop.Interp(f, a, dx, batch=8) as r:
        with pytest.raises(tapeloop.Error, match=r"x: a GPU array .*GPU backend: " + tapeloop.build()[:10]):
            r(DeviceArray())


def test_buffer_protocol_array_interface_and_dlpack():
    f, a, dx, x = case(np.random.default_rng(), n=16, dtype=np.float64)
    want = tapeloop.interp(f, x, a, dx, dtype="float64")

    class Iface:
        __array_interface__ = x.__array_interface__

    class CPUDLPack:  # a CPU tensor known only through DLPack
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, stream=None):
            return self.a.__dlpack__()

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    with tapeloop.Interp(f, a, dx, batch=16, dtype="float64") as r:
        np.testing.assert_array_equal(r(memoryview(x)), want)
        np.testing.assert_array_equal(r(Iface()), want)
        np.testing.assert_array_equal(r(CPUDLPack(x)), want)


def test_bad_formula_is_the_cli_message():
    f = np.ones((3, 8))
    with pytest.raises(tapeloop.Error) as e:
        tapeloop.Interp(f, batch=4, reduce="max(w)")
    msg = str(e.value)
    assert isinstance(e.value, ValueError) and msg.startswith('reduce= "max(w)"') and "\n" not in msg
    if os.access(CLI, os.X_OK):
        cli = subprocess.run([CLI, "interp", "--points", "10", "--interpolants", "3", "--grid", "8",
                              "--reduce", "max(w)"], capture_output=True, text=True)
        # the same message, naming the options as flags
        assert cli.returncode != 0 and msg.replace("reduce= ", "--reduce ").replace("params= ", "--param ") in cli.stderr
    with pytest.raises(tapeloop.Error, match=r'^method=: unknown method "fast"'):
        tapeloop.Interp(f, batch=4, method="fast")
    with pytest.raises(tapeloop.Error, match=r'^dtype= "int16"'):
        tapeloop.Interp(f, batch=4, dtype="int16")


def test_thousand_calls_flat_memory():
    f, a, dx, x = case(np.random.default_rng(), m=128, g=257, n=16384)
    with tapeloop.Interp(f, a, dx, batch=len(x), reduce="sumsq") as r:
        out = np.empty(len(x), np.float32)
        first = r(x).copy()
        early, late, rss0, rss1 = calls_over_time(lambda i: r(x, out=out), "interp (16384 points)", warm=300)
    np.testing.assert_array_equal(out, first)
    assert rss1 - rss0 <= 4 << 20


def test_two_threads():
    rng = np.random.default_rng()
    cases = [case(rng, n=2048) for _ in range(2)]
    objs = [tapeloop.Interp(f, a, dx, batch=len(x)) for f, a, dx, x in cases]
    want = [o(c[3]) for o, c in zip(objs, cases)]
    bad = []

    def loop(i):
        for _ in range(200):
            if not np.array_equal(objs[i](cases[i][3]), want[i]):
                bad.append(i)

    ts = [threading.Thread(target=loop, args=(i,)) for i in range(2)] + \
         [threading.Thread(target=loop, args=(0,))]  # two threads on one object too
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for o in objs:
        o.close()
    assert not bad
