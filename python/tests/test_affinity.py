"""tapeloop.Affinity against NumPy, the CLI, and itself over 1,000 calls."""
import os
import re
import subprocess

import numpy as np
import pytest

import tapeloop
from helpers import CLI, calls_over_time


def reference(x, metric=None, s=None):
    x = x.astype(np.float64)
    if metric == "dot":
        return x @ x.T
    if metric == "cosine":
        n = np.linalg.norm(x, axis=1)
        return (x @ x.T) / np.outer(n, n)
    diff = x[:, None, :] - x[None, :, :]
    if metric == "l1":
        return -np.abs(diff).sum(-1)
    if metric == "l2":
        return -(diff * diff).sum(-1)
    return np.exp(-(diff * diff).sum(-1) / (2 * s * s))  # the formula below


FORMULA = "exp(-sum((a-b)^2)/(2*s^2))"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("metric", ["dot", "cosine", "l1", "l2", "formula"])
def test_numpy_reference(metric, dtype):
    rng = np.random.default_rng()
    b, d = 37, 53
    x = rng.standard_normal((b, d)).astype(dtype)
    s = 7.5
    if metric == "formula":
        r = tapeloop.Affinity(formula=FORMULA, params={"s": s}, shape=(b, d), dtype=dtype)
    else:
        r = tapeloop.Affinity(metric, shape=(b, d), dtype=dtype)
    with r:
        for _ in range(2):  # a second batch replaces the first
            x = rng.standard_normal((b, d)).astype(dtype)
            got = r(x)
            want = reference(x, metric, s)
            assert got.shape == (b, b) and got.dtype == np.dtype(dtype)
            tol = 1e-4 if dtype == "float32" else 1e-10
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


def test_one_shot_out_and_strided():
    x = np.random.default_rng().standard_normal((29, 8, 5)).astype(np.float32)
    want = tapeloop.affinity(x)
    np.testing.assert_allclose(want, reference(x.reshape(29, 40), "dot"), rtol=1e-4, atol=1e-3)
    with tapeloop.Affinity(shape=(29, 40)) as r:
        out = np.empty((29, 29), np.float32)
        assert r(x.reshape(29, 40), out=out) is out
        np.testing.assert_array_equal(out, want)
        fortran = np.asfortranarray(x.reshape(29, 40))
        np.testing.assert_array_equal(r(fortran), want)  # copied once


@pytest.mark.skipif(not os.access(CLI, os.X_OK), reason="bin/tapeloop not built")
@pytest.mark.parametrize("metric", ["dot", "l2", "formula"])
def test_same_as_cli(tmp_path, metric):
    x = np.random.default_rng().standard_normal((71, 33)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    args = ["--formula", FORMULA, "--param", "s=6"] if metric == "formula" else ["--metric", metric]
    subprocess.run([CLI, "affinity", "--images", str(tmp_path / "x.npy"), "--block", "71",
                    "--out", str(tmp_path / "out.npy")] + args, check=True, capture_output=True)
    want = np.load(tmp_path / "out.npy")
    if metric == "formula":
        got = tapeloop.affinity(x, formula=FORMULA, params={"s": 6})
    else:
        got = tapeloop.affinity(x, metric)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)  # bit-identical: the same kernels


def test_wrong_shape_dtype_and_values():
    x = np.random.default_rng().standard_normal((16, 9)).astype(np.float32)
    with tapeloop.Affinity("cosine", shape=(16, 9)) as r:
        with pytest.raises(tapeloop.Error, match=r"X: shape \(16, 8\), the compiled shape is \(16, 9\)"):
            r(x[:, :8])
        with pytest.raises(tapeloop.Error, match=r"X: dtype float64, the compiled dtype is float32"):
            r(x.astype(np.float64))
        bad = x.copy()
        bad[3, 4] = np.nan
        with pytest.raises(tapeloop.Error, match="image 3, value 4 is NaN"):
            r(bad)
        bad = x.copy()
        bad[5] = 0
        with pytest.raises(tapeloop.Error, match="image 5 is all zeros"):
            r(bad)
        np.testing.assert_allclose(r(x), reference(x, "cosine"), rtol=1e-4, atol=1e-5)  # still usable


# The CLI's flags and the package's keywords for the same options: the
# library's errors name the keywords where the CLI's name the flags.
KEYWORDS = {"formula": "formula=", "metric": "metric=", "param": "params=", "fail-on-nonfinite": "fail_on_nonfinite=",
            "tf32": "tf32=", "device": "device="}


def in_keywords(cli_message):
    """The CLI's message with each option named by its keyword."""
    return re.sub(r"--([a-z][a-z0-9-]*)", lambda m: KEYWORDS.get(m.group(1), m.group(0)), cli_message)


@pytest.mark.parametrize("formula", ["-sum(abs(a-c))", "d = a - b; e = 2; -sum(abs(d))",
                                     "h = hist(a, 0, 1, 8); sum(h - b)", "sum(hist(a, 0, 1, 0))"])
def test_bad_formula_is_the_cli_message(formula):
    with pytest.raises(tapeloop.Error) as e:
        tapeloop.Affinity(formula=formula, shape=(4, 4))
    msg = str(e.value)
    assert msg.startswith("formula=") and "\n" not in msg
    if os.access(CLI, os.X_OK):
        cli = subprocess.run([CLI, "affinity", "--n", "4", "--height", "2", "--width", "2",
                              "--formula", formula], capture_output=True, text=True)
        assert cli.returncode == 1 and msg in in_keywords(cli.stderr)
    with pytest.raises(tapeloop.Error, match="^metric=: "):
        tapeloop.Affinity("manhattan", shape=(4, 4))
    with pytest.raises(tapeloop.Error, match="^metric= and formula=: give one"):
        tapeloop.Affinity("dot", formula="sum(a*b)", shape=(4, 4))


def nonfinite_images():
    """(16, 5) float64 images whose log(sum(a*b)) is NaN for some pairs (a
    negative dot product) and finite for the others, and its reference."""
    x = np.random.default_rng(11).uniform(0.5, 2, (16, 5))
    x[3] = -x[3]  # image 3 against any other: a negative dot product
    with np.errstate(invalid="ignore"):
        return x, np.log(x @ x.T)


def test_fail_on_nonfinite_raises_as_the_cli_does(tmp_path):
    x, want = nonfinite_images()
    good = np.abs(x)
    # Without it, the NaN are the values, as NumPy gives them.
    got = tapeloop.affinity(x, formula="log(sum(a*b))", dtype="float64", block=4)
    assert np.isnan(got).sum() == np.isnan(want).sum() > 0
    np.testing.assert_allclose(got, want, rtol=1e-12)
    with tapeloop.Affinity(formula="log(sum(a*b))", shape=x.shape, dtype="float64", block=4,
                           fail_on_nonfinite=True) as r:
        np.testing.assert_allclose(r(good), np.log(good @ good.T), rtol=1e-12)
        with pytest.raises(tapeloop.Error) as e:
            r(x)
        msg = str(e.value)
        assert re.fullmatch(r"formula= gave \d+ non-finite values \(NaN or ±Inf\) and fail_on_nonfinite= is set", msg)
        np.testing.assert_allclose(r(good), np.log(good @ good.T), rtol=1e-12)  # the next call counts its own
    with pytest.raises(tapeloop.Error, match="^formula= gave"):
        tapeloop.affinity(x, formula="log(sum(a*b))", dtype="float64", block=4, fail_on_nonfinite=True)
    with pytest.raises(tapeloop.Error, match="^method= and fail_on_nonfinite=: they are for a formula="):
        tapeloop.Affinity("dot", shape=(4, 4), fail_on_nonfinite=True)
    if os.access(CLI, os.X_OK):
        np.save(tmp_path / "x.npy", x)
        cli = subprocess.run([CLI, "affinity", "-q", "--images", str(tmp_path / "x.npy"), "--dtype", "float64",
                              "--block", "4", "--formula", "log(sum(a*b))", "--fail-on-nonfinite"],
                             capture_output=True, text=True)
        assert cli.returncode != 0 and msg in in_keywords(cli.stderr)


def test_tf32_needs_a_gpu():
    with pytest.raises(tapeloop.Error) as e:
        tapeloop.Affinity("dot", shape=(4, 4), tf32=True)
    msg = str(e.value)
    assert msg == "tf32=: needs device= cuda"
    with pytest.raises(tapeloop.Error, match="^tf32=: needs device= cuda$"):
        tapeloop.affinity(np.ones((4, 4)), tf32=True)
    with pytest.raises(tapeloop.Error, match="^tf32=: not used with formula=$"):
        tapeloop.Affinity(formula="sum(a*b)", shape=(4, 4), tf32=True)
    if os.access(CLI, os.X_OK):
        cli = subprocess.run([CLI, "affinity", "-q", "--n", "4", "--height", "2", "--width", "2", "--tf32"],
                             capture_output=True, text=True)
        assert cli.returncode != 0 and msg in in_keywords(cli.stderr)


def test_one_shot_against_columns():
    rng = np.random.default_rng()
    xr, yc = rng.standard_normal((19, 4, 6)), rng.standard_normal((7, 4, 6))
    got = tapeloop.affinity(xr, "l1", dtype="float64", Y=yc)
    both = reference(np.concatenate([xr, yc]).reshape(26, 24), "l1")
    assert got.shape == (19, 7)
    np.testing.assert_allclose(got, both[:19, 19:], rtol=1e-12)
    with tapeloop.Affinity("l1", shape=(19, 24), cols=7, dtype="float64") as r:
        np.testing.assert_array_equal(got, r(xr.reshape(19, 24), yc.reshape(7, 24)))
    with pytest.raises(tapeloop.Error, match="Y: shape"):
        tapeloop.affinity(xr, Y=np.ones(3))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["normal", "offset", "uint8"])
def test_y_equal_to_x_is_the_matrix_of_x(dtype, kind):
    """affinity(X, Y=X) is affinity(X) bit for bit, for every metric and for
    formulas (rewritten over dot products or not, symmetric or not), on
    random images of odd sizes, with two identical images among them;
    and the l2 of the two identical images is exactly 0, as NumPy's is."""
    rng = np.random.default_rng()
    if kind == "uint8":
        X = rng.integers(0, 256, (37, 23), dtype=np.uint8)
    else:
        X = rng.standard_normal((37, 23)) * 3 + (1000 if kind == "offset" else 0)
    X[11] = X[4]
    for metric, formula, params, method in [("dot", None, None, None), ("cosine", None, None, None),
                                            ("l1", None, None, None), ("l2", None, None, None),
                                            (None, "-sum((a-b)^2)", None, "auto"),
                                            (None, "-sum((a-b)^2)", None, "direct"),
                                            (None, FORMULA, {"s": 20.0}, "auto"),
                                            (None, "sum(a*b)/sqrt(sum(a^2))/sqrt(sum(b^2))", None, "auto"),
                                            (None, "sum(min(a,b))/sum(max(a,b)) - sum(a)", None, "auto")]:
        kw = dict(metric=metric, formula=formula, params=params, method=method, dtype=dtype)
        alone, against = tapeloop.affinity(X, **kw), tapeloop.affinity(X, Y=X, **kw)
        assert np.array_equal(alone, against), (metric, formula, np.abs(alone - against).max())
        for block in (5, 16):  # several blocks: the pairs below the diagonal are mirrored
            assert np.array_equal(tapeloop.affinity(X, block=block, **kw), tapeloop.affinity(X, Y=X, block=block, **kw))
        if metric in ("l1", "l2"):
            assert alone[4, 11] == alone[11, 4] == 0 and np.all(np.diag(alone) == 0)
            np.testing.assert_allclose(alone, reference(X.astype(dtype), metric), rtol=1e-4, atol=1e-2)


def test_thousand_calls_flat_memory():
    x = np.random.default_rng().standard_normal((64, 1024)).astype(np.float32)
    with tapeloop.Affinity(shape=x.shape) as r:
        out = np.empty((64, 64), np.float32)
        first = r(x).copy()
        early, late, rss0, rss1 = calls_over_time(lambda i: r(x, out=out), "affinity (64, 1024)", warm=2000)
    np.testing.assert_array_equal(out, first)
    assert rss1 - rss0 <= 4 << 20  # a copy of X kept per call would be 256 MiB


def topk_reference(x, metric, k):
    a = reference(x, metric)
    np.fill_diagonal(a, -np.inf)  # self excluded
    idx = np.argsort(-a, axis=1, kind="stable")[:, :k]
    return idx, np.take_along_axis(a, idx, 1)


@pytest.mark.parametrize("metric", ["dot", "l2"])
def test_topk_numpy_and_cli(tmp_path, metric):
    rng = np.random.default_rng()
    x = rng.standard_normal((83, 29))  # float64: ties are unlikely, the order is the reference's
    want_i, want_v = topk_reference(x, metric, 7)
    got_i, got_v = tapeloop.affinity(x, metric, topk=7, block=10, dtype="float64")
    assert got_i.dtype == np.int64 and got_v.dtype == np.float64 and got_i.shape == (83, 7)
    np.testing.assert_array_equal(got_i, want_i)
    np.testing.assert_allclose(got_v, want_v, rtol=1e-12, atol=1e-12 * np.abs(want_v).max())
    if os.access(CLI, os.X_OK):
        np.save(tmp_path / "x.npy", x)
        subprocess.run([CLI, "affinity", "--images", str(tmp_path / "x.npy"), "--dtype", "float64", "--metric", metric,
                        "--topk", "7", "--out", str(tmp_path / "top.npz")], check=True, capture_output=True)
        cli = np.load(tmp_path / "top.npz")
        np.testing.assert_array_equal(got_i, cli["indices"])
        np.testing.assert_array_equal(got_v, cli["values"])


@pytest.mark.parametrize("metric", ["cosine", "l1", "formula"])
def test_rows_against_columns(metric):
    rng = np.random.default_rng()
    xr, yc = rng.standard_normal((19, 41)), rng.standard_normal((27, 41))
    kw = {"formula": FORMULA, "params": {"s": 9.0}} if metric == "formula" else {"metric": metric}
    with tapeloop.Affinity(**kw, shape=xr.shape, cols=27, dtype="float64", block=8) as r:
        for _ in range(2):
            xr, yc = rng.standard_normal((19, 41)), rng.standard_normal((27, 41))
            both = reference(np.concatenate([xr, yc]), metric, 9.0)
            got = r(xr, yc)
            assert got.shape == (19, 27)
            np.testing.assert_allclose(got, both[:19, 19:], rtol=1e-10, atol=1e-10 * np.abs(both).max())
        with pytest.raises(tapeloop.Error, match=r"Y: shape \(26, 41\), the compiled shape is \(27, 41\)"):
            r(xr, yc[:26])
        with pytest.raises(tapeloop.Error, match="call it with"):
            r(xr)
    with pytest.raises(tapeloop.Error, match="^topk= with cols"):
        tapeloop.Affinity("dot", shape=(4, 4), cols=3, topk=2)


def test_block_and_memory_limit_give_the_same_matrix():
    x = np.random.default_rng().standard_normal((101, 57)).astype(np.float32)
    want = tapeloop.affinity(x, "l2")
    for kw in [{"block": 1}, {"block": 13}, {"mem_limit": "1MiB"}, {"mem_limit": 1 << 30}]:
        with tapeloop.Affinity("l2", shape=x.shape, **kw) as r:
            np.testing.assert_array_equal(r(x), want)
            plan = r.report()["plan"]
            if "block" in kw:
                assert plan["batch"] == kw["block"] and plan["forced"]
            else:
                assert plan["planned_bytes"] <= plan["mem_limit_bytes"]
    with pytest.raises(tapeloop.Error, match="over the memory limit"):
        tapeloop.Affinity("l2", shape=(5000, 64), mem_limit="1KiB")


def test_formula_that_is_a_builtin_runs_the_builtin():
    """The author's -sum(abs(a-b)) is --metric l1: the same kernel, the
    same values bit for bit (and so for l2, dot, cosine)."""
    x = np.random.default_rng(28007).standard_normal((83, 5, 7)).astype(np.float32)
    for metric, f in (("l1", "-sum(abs(a-b))"), ("l2", "-sum((a - b)^2)"), ("dot", "sum(a*b)"),
                      ("cosine", "sum(a*b)/sqrt(sum(a^2)*sum(b^2))")):
        np.testing.assert_array_equal(tapeloop.affinity(x, formula=f), tapeloop.affinity(x, metric=metric))
