"""tapeloop.DRR against the CLI, an analytic reference, bad input, and itself over 1,000 calls."""
import json
import os
import subprocess
import warnings

import numpy as np
import pytest

import tapeloop
from helpers import CLI, calls_over_time

needs_cli = pytest.mark.skipif(not os.access(CLI, os.X_OK), reason="bin/tapeloop not built")


def random_poses(rng, centre, n, rows, cols):
    """n poses looking at centre from random directions, tilted detectors:
    as dicts in the geometry file's layout."""
    poses = []
    for _ in range(n):
        d = rng.standard_normal(3)
        d /= np.linalg.norm(d)
        sid, sdd = rng.uniform(300, 500), rng.uniform(700, 900)
        u = np.cross(d, rng.standard_normal(3))
        u /= np.linalg.norm(u)
        v = np.cross(d, u)
        poses.append({"source": list(centre + sid * d), "center": list(centre - (sdd - sid) * d),
                      "u": list(u), "v": list(v), "rows": rows, "cols": cols,
                      "pixel": [rng.uniform(0.8, 2.5), rng.uniform(0.8, 2.5)]})
    return poses


def chord(src, dst, lo, hi):
    """Length of the segment src→dst inside the box [lo, hi] (slab method)."""
    d = dst - src
    with np.errstate(divide="ignore", invalid="ignore"):
        t0, t1 = (lo - src) / d, (hi - src) / d
    tmin = np.nanmax(np.minimum(t0, t1), axis=-1).clip(0, 1)
    tmax = np.nanmin(np.maximum(t0, t1), axis=-1).clip(0, 1)
    return np.maximum(tmax - tmin, 0) * np.linalg.norm(d, axis=-1)


@pytest.mark.parametrize("method", ["siddon", "trilinear"])
def test_uniform_box_is_mu_times_the_chord(method):
    """In a volume of one value μ every line integral is μ times the ray's
    path through the volume's box, computed here by the slab method."""
    rng = np.random.default_rng()
    shape = (23, 31, 17)
    spacing, origin = np.array([1.3, 0.9, 2.1]), rng.uniform(-40, 40, 3)
    mu = 0.0173
    lo, hi = origin - spacing / 2, origin + (np.array(shape) - 0.5) * spacing
    rows, cols = 13, 11
    poses = random_poses(rng, (lo + hi) / 2, 6, rows, cols)
    step = 0.05 if method == "trilinear" else None
    with tapeloop.DRR(np.full(shape, mu, np.float32), spacing, origin, detector=(rows, cols), method=method,
                      step=step) as r:
        img = r(poses)
    assert img.shape == (6, rows, cols) and img.dtype == np.float32
    for k, p in enumerate(poses):
        src, c = np.array(p["source"]), np.array(p["center"])
        u, v = np.array(p["u"]), np.array(p["v"])
        jj, ii = np.meshgrid(np.arange(cols) - (cols - 1) / 2, np.arange(rows) - (rows - 1) / 2)
        pix = c + jj[..., None] * p["pixel"][0] * u + ii[..., None] * p["pixel"][1] * v
        want = mu * chord(src, pix, lo, hi)
        # trilinear: the box edge is blurred over one voxel and sampled at step
        tol = 1e-5 * want.max() if method == "siddon" else 0.02 * want.max()
        assert want.max() > 0
        np.testing.assert_allclose(img[k], want, rtol=1e-4, atol=tol)


@needs_cli
@pytest.mark.parametrize("method", ["siddon", "trilinear"])
def test_same_as_cli(tmp_path, method):
    rng = np.random.default_rng()
    vol = rng.uniform(-1000, 2000, (19, 24, 15)).astype(np.float32)
    spacing, origin = (1.25, 0.75, 2.0), (-11.5, 3.25, 40.0)
    centre = np.array(origin) + (np.array(vol.shape) - 1) / 2 * np.array(spacing)
    poses = random_poses(rng, centre, 9, 21, 18)
    np.save(tmp_path / "v.npy", vol)
    (tmp_path / "g.json").write_text(json.dumps({"poses": poses}))
    mu, post = "where(h < -900, 0, 0.02*(1+h/k))", "1-exp(-p)"
    subprocess.run([CLI, "drr", "--volume", str(tmp_path / "v.npy"), "--spacing", ",".join(map(repr, spacing)),
                    "--origin", ",".join(map(repr, origin)), "--geometry", str(tmp_path / "g.json"),
                    "--method", method, "--mu", mu, "--post", post, "--param", "k=1000", "--batch", "4",
                    "--out", str(tmp_path / "out"), "-q"], check=True, capture_output=True)
    want = np.load(tmp_path / "out" / "drr.npy")
    with tapeloop.DRR(vol, spacing, origin, detector=(21, 18), method=method, mu=mu, post=post,
                      params={"k": 1000}) as r:
        got = r(poses)
        np.testing.assert_array_equal(got, want)  # bit-identical: the same kernels
        as_array = np.array([p["source"] + p["center"] + p["u"] + p["v"] + p["pixel"] for p in poses])
        np.testing.assert_array_equal(r(as_array), want)
        np.testing.assert_array_equal(r(poses[4]), want[4:5])  # one pose: a dict

    # The orbit is the CLI's --orbit, about the volume's centre.
    subprocess.run([CLI, "drr", "--volume", str(tmp_path / "v.npy"), "--spacing", ",".join(map(repr, spacing)),
                    "--hu", "--orbit", "7", "--detector", "9x14", "--pixel", "3.5", "--sdd", "900", "--sid", "450",
                    "--method", method, "--out", str(tmp_path / "orbit"), "-q"], check=True, capture_output=True)
    want = np.load(tmp_path / "orbit" / "drr.npy")
    got = tapeloop.drr(vol, spacing, orbit=7, detector=(9, 14), pixel=3.5, sdd=900, sid=450, method=method, hu=True)
    np.testing.assert_array_equal(got, want)


@needs_cli
def test_frame_as_the_cli_names_it(tmp_path):
    """frame= is the CLI's --frame: for an array, as for an .npy file, it names
    the frame of the spacing, origin and poses and converts nothing, so each
    frame gives the CLI's images of the .npy file in it, the same in both."""
    rng = np.random.default_rng()
    vol = rng.uniform(0, 0.03, (11, 9, 13)).astype(np.float32)
    spacing, origin = (1.5, 2.0, 0.75), (20.0, -35.5, 7.25)
    centre = np.array(origin) + (np.array(vol.shape) - 1) / 2 * np.array(spacing)
    poses = random_poses(rng, centre, 4, 10, 12)
    np.save(tmp_path / "v.npy", vol)
    (tmp_path / "g.json").write_text(json.dumps({"poses": poses}))
    got = {}
    for frame in ("lps", "ras"):
        out = tmp_path / frame
        subprocess.run([CLI, "drr", "--volume", str(tmp_path / "v.npy"), "--spacing", ",".join(map(repr, spacing)),
                        "--origin", ",".join(map(repr, origin)), "--geometry", str(tmp_path / "g.json"),
                        "--frame", frame, "--out", str(out), "-q"], check=True, capture_output=True)
        with tapeloop.DRR(vol, spacing, origin, detector=(10, 12), frame=frame, dtype="float32") as r:
            got[frame] = r(poses)
        np.testing.assert_array_equal(got[frame], np.load(out / "drr.npy"))
    assert got["lps"].max() > 0
    np.testing.assert_array_equal(got["lps"], got["ras"])
    with pytest.raises(tapeloop.Error, match=r'^frame= "RAS": want lps or ras$'):
        tapeloop.DRR(vol, detector=(4, 4), frame="RAS")
    with pytest.raises(tapeloop.Error, match=r'^dtype= "float64": a DRR renders float32 images$'):
        tapeloop.DRR(vol, detector=(4, 4), dtype="float64")


@needs_cli
def test_errors_are_the_cli_messages(tmp_path):
    vol = np.ones((5, 6, 7), np.float32)
    with pytest.raises(tapeloop.Error) as e:
        tapeloop.DRR(vol, detector=(4, 4), post="exp(-q)")
    msg = str(e.value)
    assert msg.startswith('post= "exp(-q)"') and "\n" not in msg
    # The CLI's message, naming the keywords where it names the flags.
    cli = subprocess.run([CLI, "drr", "--size", "8", "--post", "exp(-q)"], capture_output=True, text=True)
    assert cli.returncode != 0 and msg in cli.stderr.replace("--post ", "post= ").replace("--param ", "params= ")
    bad = vol.copy()
    bad[1, 2, 3] = np.nan
    with pytest.raises(tapeloop.Error, match=r"voxel \(1, 2, 3\) is NaN"):
        tapeloop.DRR(bad, detector=(4, 4))
    with pytest.raises(tapeloop.Error, match=r'^method= "raymarch": want siddon or trilinear$'):
        tapeloop.DRR(vol, detector=(4, 4), method="raymarch")
    with pytest.raises(tapeloop.Error, match="spacing"):
        tapeloop.DRR(vol, (1, 0, 1), detector=(4, 4))
    with pytest.raises(tapeloop.Error, match=r"volume=: shape \(5, 42\)"):
        tapeloop.DRR(vol.reshape(5, 42), detector=(4, 4))
    with tapeloop.DRR(vol, detector=(4, 4)) as r:
        p = r.orbit(2)
        with pytest.raises(tapeloop.Error, match=r"poses: shape \(2, 13\)"):
            r(p[:, :13])
        p[1, 12] = 0
        with pytest.raises(tapeloop.Error, match="geometry: pose 1 has pixel size"):
            r(p)
        p[1, 12], p[0, 0] = 2, np.inf
        with pytest.raises(tapeloop.Error, match="geometry: pose 0 has a NaN or infinite coordinate"):
            r(p)
        with pytest.raises(tapeloop.Error, match="pose 0 lacks source"):
            r([{"center": [0, 0, 0]}])
        assert r(r.orbit(1)).shape == (1, 4, 4)  # still usable


def test_all_rays_missed_warns():
    with tapeloop.DRR(np.ones((4, 4, 4), np.float32), detector=(3, 3)) as r:
        far = {"source": [1000, 1000, 1000], "center": [1000, 1000, 900], "u": [1, 0, 0], "v": [0, 1, 0],
               "pixel": [1, 1]}
        with pytest.warns(UserWarning, match="every ray missed the volume"):
            assert not r(far).any()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            r(r.orbit(2))


def test_step_against_volume():
    """A trilinear step longer than the largest voxel is a warning, as the
    CLI's; one so long that no ray takes two samples in the volume (10
    voxels of 2 mm, 34.6 mm across) is an Error."""
    rng = np.random.default_rng()
    v = rng.uniform(0.01, 0.02, (10, 10, 10)).astype(np.float32)
    pose = {"source": [9, -491, 9], "center": [9, 509, 9], "u": [1, 0, 0], "v": [0, 0, 1], "pixel": [1, 1]}
    with tapeloop.DRR(v, (2, 2, 2), detector=(3, 3), method="trilinear", step=1.5) as r:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert r(pose).max() > 0
    with tapeloop.DRR(v, (2, 2, 2), detector=(3, 3), method="trilinear", step=30) as r:
        with pytest.warns(UserWarning, match=r"^step= 30 mm is longer than the largest voxel size \(2 mm\)"):
            r(pose)
    with tapeloop.DRR(v, (2, 2, 2), detector=(3, 3), method="trilinear", step=40) as r:
        with pytest.raises(tapeloop.Error, match="so no ray takes two samples in it"):
            r(pose)


def test_geometry_faults_warn_or_fail():
    """A detector reaching into the volume (the orbit's sid mistaken for
    radiography's SID) is a warning naming the distance, as the CLI's; with
    strict=True an Error, and nothing is rendered."""
    v = np.ones((20, 20, 20), np.float32)  # a 20 mm box about (9.5, 9.5, 9.5)
    with tapeloop.DRR(v, detector=(4, 4)) as r:
        poses = r.orbit(3, sdd=1020.0, sid=1015.0, pixel=1.0)  # the detector 5 mm past the centre: 5 mm inside
        with pytest.warns(UserWarning, match=r"^3 of 3 poses have their detector reaching into the volume "
                                             r"\(pose 0: 5 mm inside its nearest face\)"):
            r(poses)
    with tapeloop.DRR(v, detector=(4, 4), strict=True) as r:
        with pytest.raises(tapeloop.Error, match=r"^geometry: strict=: 3 of 3 poses have their detector reaching"):
            r(r.orbit(3, sdd=1020.0, sid=1015.0, pixel=1.0))
        far = {"source": [1000, 1000, 1000], "center": [1000, 1000, 900], "u": [1, 0, 0], "v": [0, 1, 0],
               "pixel": [1, 1]}
        with pytest.raises(tapeloop.Error, match="every ray missed the volume"):
            r(far)
        assert r(r.orbit(2)).shape == (2, 4, 4)  # a sound geometry: no warning, no error


def test_thousand_poses_one_per_call_flat_memory():
    """The DRR loop: one volume, one pose per iteration."""
    rng = np.random.default_rng()
    vol = rng.uniform(0, 0.03, (48, 48, 48)).astype(np.float32)
    with tapeloop.DRR(vol, detector=(32, 32)) as r:
        poses = r.orbit(1000, pixel=1.5)
        out = np.empty((1, 32, 32), np.float32)
        early, late, rss0, rss1 = calls_over_time(lambda i: r(poses[i], out=out), "drr 48³ → 32², one pose")
        assert rss1 - rss0 <= 4 << 20
        np.testing.assert_array_equal(out[0], r(poses[-1])[0])
        rep = r.report()
        assert rep["calls"] >= 1200 and rep["summary"]["drift"] < 2

def test_orbit_about_an_axis():
    """orbit() takes the CLI's --isocenter, --start and --axis: about y
    through (1, 2, 3) from 90°, the sources where the angle puts them (0° on
    +z, 90° on +x), the detector beyond the isocentre, v = −y; about z
    through the centre from 0° it is the default orbit."""
    with tapeloop.DRR(np.ones((6, 6, 6), np.float32), detector=(3, 3)) as r:
        p = r.orbit(4, sdd=160.0, sid=100.0, isocenter=(1, 2, 3), axis="y", start=90)
        np.testing.assert_allclose(p[:, 0:3], [[101, 2, 3], [1, 2, -97], [-99, 2, 3], [1, 2, 103]], atol=1e-9)
        np.testing.assert_allclose(p[:, 3:6] - [1, 2, 3], -0.6 * (p[:, 0:3] - [1, 2, 3]), atol=1e-9)
        np.testing.assert_array_equal(p[:, 9:12], np.tile([0.0, -1.0, 0.0], (4, 1)))
        np.testing.assert_array_equal(r.orbit(5), r.orbit(5, isocenter=(2.5, 2.5, 2.5), axis=(0, 0, 1), start=0))
        with pytest.raises(tapeloop.Error, match="axis="):
            r.orbit(2, axis=(1, 0))


def test_filter_matches_scipy_and_refuses_bad_stages():
    """filter= is the same DRR filtered by scipy.ndimage: σ in mm over
    anisotropic pixels (1.5×2.5 mm: 2 pixels along a row, 1.2 down a column)
    after post, then a derivative down the columns per mm; poses of another
    pixel size take their own σ in pixels; bad stages are one-line errors
    naming filter=."""
    ndimage = pytest.importorskip("scipy.ndimage")
    rng = np.random.default_rng(5)
    vol = rng.uniform(0, 0.02, (20, 22, 18)).astype(np.float32)
    centre = np.array([9.5, 10.5, 8.5])
    poses = random_poses(rng, centre, 3, 37, 53)
    for p in poses:
        p["pixel"] = [0.3, 0.5]
    stages = ["gauss:sigma_mm=0.6", "deriv:y"]
    with tapeloop.DRR(vol, detector=(37, 53), post="exp(-p)") as r:
        plain = r(poses).astype(np.float64)
    with tapeloop.DRR(vol, detector=(37, 53), post="exp(-p)", filter=stages) as r:
        got = r(poses)
        want = ndimage.gaussian_filter(plain, sigma=(0, 1.2, 2.0), mode="reflect", truncate=4.0)
        want = ndimage.correlate1d(want, np.array([-1.0, 0, 1.0]), axis=1, mode="reflect")
        assert np.max(np.abs(got - want)) <= 1e-5 * np.max(np.abs(want))
        for p in poses:
            p["pixel"] = [0.6, 0.5]  # σ 1 pixel along a row now
        got = r(poses)
    with tapeloop.DRR(vol, detector=(37, 53), post="exp(-p)") as r:
        plain = r(poses).astype(np.float64)
    want = ndimage.gaussian_filter(plain, sigma=(0, 1.2, 1.0), mode="reflect", truncate=4.0)
    want = ndimage.correlate1d(want, np.array([-1.0, 0, 1.0]), axis=1, mode="reflect")
    assert np.max(np.abs(got - want)) <= 1e-5 * np.max(np.abs(want))
    with tapeloop.DRR(vol, detector=(37, 53), filter="box:3") as r:
        assert r(poses).shape == (3, 37, 53)
    for bad, say in [("gauss:sigma=1", 'filter= "gauss:sigma=1": unknown setting "sigma"'), (["box:0"], "size 0"),
                     ([3], "is not a stage")]:
        with pytest.raises(tapeloop.Error) as e:
            tapeloop.DRR(vol, detector=(4, 4), filter=bad)
        assert say in str(e.value) and "\n" not in str(e.value)


def test_pose_dicts_and_dtypes(tmp_path):
    """A pose dict or geometry document with a key the CLI's --geometry
    refuses is refused too (a misspelt "soruce" is not silently dropped);
    pose numbers of any real dtype are converted, and complex, boolean,
    text or object values are refused, not converted."""
    vol = np.random.default_rng(3).random((6, 5, 7)).astype(np.float32)
    with tapeloop.DRR(vol, detector=(4, 5)) as r:
        p = r.orbit(1)[0]
        pose = {"source": p[0:3], "center": p[3:6], "u": p[6:9], "v": p[9:12], "pixel": p[12:14]}
        want = r(p)
        for dt in (np.float32, np.int64, np.float16):
            q = {k: (np.round(v) if dt is np.int64 else v).astype(dt) for k, v in pose.items()}
            got = r(q)
            assert got.shape == want.shape
            if dt is np.float32:
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        assert np.array_equal(r([dict(pose, rows=4, cols=5)]), want)
        with pytest.raises(tapeloop.Error, match=r"^geometry: pose 0 has an unknown key 'soruce'"):
            r(dict(pose, soruce=[1, 2, 3]))
        with pytest.raises(tapeloop.Error, match=r"^geometry: unknown key 'franme'"):
            r({"poses": [pose], "franme": "lps"})
        for bad, kind in ((pose["u"].astype(np.complex128), "complex128"), (np.array([True, False, True]), "bool"),
                          (["1", "0", "0"], "<U1"), ([1, None, 0], "object")):
            with pytest.raises(tapeloop.Error, match=rf"^pose 0: u: {kind} values; want real numbers"):
                r(dict(pose, u=bad))
        with pytest.raises(tapeloop.Error, match=r"^poses: complex128 values"):
            r(np.asarray(p, np.complex128))
    # The CLI refuses the same keys in a geometry file.
    g = tmp_path / "g.json"
    g.write_text(json.dumps({"poses": [dict({k: list(map(float, v)) for k, v in pose.items()}, soruce=[1, 2, 3])]}))
    cli = subprocess.run([CLI, "drr", "--size", "8", "--geometry", str(g)], capture_output=True, text=True)
    assert cli.returncode == 1 and 'unknown field "soruce"' in cli.stderr
