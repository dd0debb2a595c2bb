"""Shards in Python: shard=(i, n) on every workload's call, tapeloop.merge,
and the CLI's shards of the same ranges, compared bit for bit."""
import io
import json
import os
import pickle
import random
import subprocess
import zipfile

import numpy as np
import pytest

import tapeloop
from helpers import CLI

WAVE = dict(theta=[0.0, 0.4, 1.1], phi=[0.0, 0.9], xi=[1.0, 1.6])


def data(kind, rng):
    """An object of kind on fresh random data of odd sizes, and the
    arguments of its call."""
    if kind == "interp":
        return tapeloop.Interp(rng.standard_normal((5, 29)), -1.0, 0.13), (rng.uniform(-1, 2.6, 101).astype(np.float32),)
    if kind == "interp-none":
        return tapeloop.Interp(rng.standard_normal((4, 17)), reduce="none"), (rng.uniform(0, 1, 37),)
    if kind == "drr":
        vol = rng.uniform(0, 0.03, (11, 9, 13)).astype(np.float32)
        r = tapeloop.DRR(vol, (1.5, 1.0, 1.2), (-8.0, -4.0, -7.0), detector=(7, 9))
        return r, (r.orbit(7, sdd=300.0, sid=150.0, pixel=3.0),)
    if kind == "wavelet":
        return tapeloop.Wavelet(rng.standard_normal((10, 9, 11)).astype(np.float32), a=1.2,
                                stats={"l1": "sum(abs(g))"}), (WAVE["theta"], WAVE["phi"], WAVE["xi"])
    raise ValueError(kind)


def same(got, want, what):
    if isinstance(want, dict):
        assert list(got) == list(want), what
        for k in want:
            same(got[k], want[k], f"{what}, column {k}")
    elif isinstance(want, tuple):
        for g, w in zip(got, want):
            same(g, w, what)
    else:
        assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape)
        np.testing.assert_array_equal(got, want, err_msg=what)


@pytest.mark.parametrize("kind", ["interp", "interp-none", "drr", "wavelet"])
def test_merged_shards_are_the_whole_call(kind):
    rng = np.random.default_rng()
    obj, args = data(kind, rng)
    whole = obj(*args)
    for n in (1, 2, 3, 7):
        parts = [obj(*args, shard=(i, n)) for i in range(n)]
        assert all(isinstance(p, tapeloop.Shard) for p in parts)
        assert [p.lo for p in parts][1:] == [p.hi for p in parts][:-1]
        random.shuffle(parts)
        parts = [pickle.loads(pickle.dumps(p)) for p in parts]  # as they come back from workers
        same(tapeloop.merge(parts), whole, f"{kind}, {n} shards")
    same(tapeloop.merge([obj(*args, shard=f"{i}/3") for i in range(3)]), whole, f"{kind}, shards as 'i/3'")
    obj.close()


@pytest.mark.parametrize("metric", ["dot", "cosine", "l1", "l2", "formula"])
def test_affinity_shards(metric):
    rng = np.random.default_rng()
    x = rng.standard_normal((23, 11)).astype(np.float32)
    kw = dict(formula="exp(-sum((a-b)^2)/s)", params={"s": 9.0}) if metric == "formula" else dict(metric=metric)
    whole = tapeloop.affinity(x, **kw)
    top = tapeloop.affinity(x, topk=4, **kw)
    for n in (1, 4, 6):
        same(tapeloop.merge([tapeloop.affinity(x, shard=(i, n), **kw) for i in range(n)]), whole, f"{metric}/{n}")
        with tapeloop.Affinity(shape=x.shape, topk=4, shard=(n - 1, n), **kw) as r:
            last = r(x)
        parts = [tapeloop.affinity(x, topk=4, shard=(i, n), **kw) for i in range(n - 1)] + [last]
        same(tapeloop.merge(parts), top, f"{metric}/{n} top-k")


def test_merge_names_every_gap_and_refuses_mixed_calls():
    rng = np.random.default_rng()
    obj, args = data("drr", rng)
    parts = [obj(*args, shard=(i, 7)) for i in range(7)]
    with pytest.raises(tapeloop.Error, match=r"merge: 2 of 7 shards missing: 3, 5 \(compute shard=\(i, 7\) for i in "
                                             r"\[3, 5\]\); given more than once: 1 \(2 times\)"):
        tapeloop.merge([p for p in parts if p.index not in (3, 5)] + [parts[1]])
    other = obj(args[0][::-1].copy(), shard=(3, 7))  # the same object, other poses
    with pytest.raises(tapeloop.Error, match=r"come from different calls \(their object, settings or input differs"):
        tapeloop.merge(parts[:3] + [other] + parts[4:])
    with pytest.raises(tapeloop.Error, match=r"shard count differs"):
        tapeloop.merge(parts[:6] + [obj(*args, shard=(6, 8))])
    with pytest.raises(tapeloop.Error, match=r"merge: no shards"):
        tapeloop.merge([])
    with pytest.raises(tapeloop.Error, match=r"item 0 is a ndarray"):
        tapeloop.merge([parts[0].value])
    for bad in [(7, 7), (-1, 3), (1,), "2/1", "a/b", (0, 0), (0.5, 2)]:
        with pytest.raises(tapeloop.Error, match=r"shard="):
            obj(*args, shard=bad)
    with pytest.raises(tapeloop.Error, match=r"shard=\(0, 10\): no poses \(the call has 7, fewer than the shard count\)"):
        obj(*args, shard=(0, 10))
    obj.close()


def npz_member(path, name):
    with zipfile.ZipFile(path) as z:
        return z.read(name)


def cli(*args, cwd):
    p = subprocess.run([CLI, *args, "--quiet"], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return p


@pytest.mark.skipif(not os.path.exists(CLI), reason="bin/tapeloop not built (make build)")
def test_python_shards_are_the_cli_shards(tmp_path):
    """The same ranges through the CLI's --shard i/n: the same rows, bit for
    bit (the affinity's matrix rows and top k, a DRR's images, a wavelet
    sweep's CSV rows)."""
    rng = np.random.default_rng()
    x = rng.standard_normal((19, 13)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    for metric in ("l2", "cosine"):
        for i in range(3):
            cli("affinity", "--images", "x.npy", "--metric", metric, "--shard", f"{i}/3", "--out", "s.npz", cwd=tmp_path)
            got = tapeloop.affinity(x, metric, shard=(i, 3))
            meta = json.loads(npz_member(tmp_path / "s.npz", "meta.json"))
            assert (meta["lo"], meta["hi"]) == (got.lo, got.hi)
            same(got.value, np.load(io.BytesIO(npz_member(tmp_path / "s.npz", "affinity.npy"))), f"affinity {metric} {i}/3")

    obj, (poses,) = data("drr", rng)
    np.save(tmp_path / "v.npy", obj._recipe[1]["volume"][0])
    doc = {"poses": [dict(source=list(p[0:3]), center=list(p[3:6]), u=list(p[6:9]), v=list(p[9:12]),
                          pixel=list(p[12:14]), rows=7, cols=9) for p in poses]}
    (tmp_path / "g.json").write_text(json.dumps(doc))
    for i in range(4):
        cli("drr", "--volume", "v.npy", "--spacing", "1.5,1,1.2", "--origin=-8,-4,-7", "--geometry", "g.json",
            "--shard", f"{i}/4", "--out", "d.npz", cwd=tmp_path)
        same(obj(poses, shard=(i, 4)).value, np.load(io.BytesIO(npz_member(tmp_path / "d.npz", "drr.npy"))), f"drr {i}/4")

    vol = rng.standard_normal((10, 9, 11)).astype(np.float32)
    np.save(tmp_path / "w.npy", vol)
    with tapeloop.Wavelet(vol, a=1.2) as w:
        for i in range(5):
            cli("wavelet", "--volume", "w.npy", "--a", "1.2", "--theta", "0,0.4,1.1", "--phi", "0,0.9", "--xi", "1,1.6",
                "--shard", f"{i}/5", "--out", "w.npz", cwd=tmp_path)
            got = w(**WAVE, shard=(i, 5)).value
            rows = npz_member(tmp_path / "w.npz", "rows.csv").decode().split()
            want = np.array([[float(v) for v in r.split(",")] for r in rows])
            same(np.stack([got[c] for c in w.columns], axis=1), want, f"wavelet {i}/5")
