"""Helper of scripts/test-arm64.sh: compares the outputs of the arm64 CLI
with the amd64 CLI's, case by case.

    arm64_compare.py DIR_AMD64 DIR_ARM64 [RTOL]

Each case directory holds the files one command wrote, and its standard
output as stdout.txt. Text files (stdout, CSV) must match token by token,
numbers within RTOL of the larger of the two (integers exactly);
.npy and .npz arrays must have the same shape and dtype, floating-point
values within RTOL of the array's largest magnitude (norm-wise, as the ops'
conformance suites compare a CPU's float32 against float64), integers
exactly, except top-k indices, which may differ only where the values they
pick tie within that tolerance. JSON reports are left out (timings).
Exit status 0 when every case agrees; one line per file either way.
"""

import io
import os
import re
import sys

NUM = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf|nan)\b", re.I)


def text_diff(a, b, rtol):
    ta, tb = NUM.split(a), NUM.split(b)
    na, nb = NUM.findall(a), NUM.findall(b)
    if ta != tb or len(na) != len(nb):
        return "the text differs"
    for x, y in zip(na, nb):
        if x == y:
            continue
        if re.fullmatch(r"[-+]?\d+", x) and re.fullmatch(r"[-+]?\d+", y):
            return "integer %s vs %s" % (x, y)
        fx, fy = float(x), float(y)
        if fx != fx and fy != fy:
            continue
        if abs(fx - fy) > rtol * max(abs(fx), abs(fy), 1e-30):
            return "number %s vs %s (relative %.2g)" % (x, y, abs(fx - fy) / max(abs(fx), abs(fy)))
    return None


def array_diff(name, a, b, rtol, np, peers=None):
    if a.shape != b.shape or a.dtype != b.dtype:
        return "%s: shape/dtype %s %s vs %s %s" % (name, a.shape, a.dtype, b.shape, b.dtype)
    if a.dtype.kind in "fc":
        scale = float(np.nanmax(np.abs(a))) if a.size else 0.0
        if not np.array_equal(np.isnan(a), np.isnan(b)):
            return "%s: NaN in different places" % name
        err = float(np.nanmax(np.abs(a - b))) if a.size else 0.0
        if err > rtol * max(scale, 1e-30):
            return "%s: largest difference %.3g, %.2g of the largest value" % (name, err, err / max(scale, 1e-30))
        return None
    if np.array_equal(a, b):
        return None
    if peers is not None:  # top-k indices: a swap of values that tie
        va, vb = peers
        scale = float(np.nanmax(np.abs(va))) if va.size else 0.0
        bad = (a != b) & (np.abs(va - vb) > rtol * max(scale, 1e-30))
        if not bad.any():
            return None
    return "%s: %d integers differ" % (name, int((a != b).sum()))


def main():
    da, db = sys.argv[1], sys.argv[2]
    rtol = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-5
    try:
        import numpy as np
    except ImportError:
        np = None
        print("note: no NumPy: arrays are not compared, only the text outputs")
    failed = 0
    for case in sorted(os.listdir(da)):
        pa, pb = os.path.join(da, case), os.path.join(db, case)
        if not os.path.isdir(pa):
            continue
        for root, _, files in os.walk(pa):
            for f in sorted(files):
                fa = os.path.join(root, f)
                rel = os.path.relpath(fa, da)
                fb = os.path.join(db, rel)
                if not os.path.exists(fb):
                    print("%-44s only on amd64" % rel)
                    failed += 1
                    continue
                msg = None
                if f.endswith(".json") or f.endswith(".png") or f.endswith(".ckpt"):
                    continue
                if f.endswith(".npy") or f.endswith(".npz"):
                    if np is None:
                        continue
                    with open(fa, "rb") as x, open(fb, "rb") as y:
                        A, B = np.load(io.BytesIO(x.read())), np.load(io.BytesIO(y.read()))
                    if f.endswith(".npy"):
                        msg = array_diff(rel, A, B, rtol, np)
                    else:
                        if sorted(A.files) != sorted(B.files):
                            msg = "members %s vs %s" % (A.files, B.files)
                        else:
                            for k in sorted(A.files):
                                if isinstance(A[k], bytes):  # a member that is not an array (metadata)
                                    msg = text_diff(A[k].decode(errors="replace"), B[k].decode(errors="replace"), rtol)
                                    if msg:
                                        msg = rel + ":" + k + ": " + msg
                                        break
                                    continue
                                peers = None
                                if k == "indices" and "values" in A.files:
                                    peers = (A["values"], B["values"])
                                msg = array_diff(rel + ":" + k, A[k], B[k], rtol, np, peers)
                                if msg:
                                    break
                else:
                    with open(fa, errors="replace") as x, open(fb, errors="replace") as y:
                        msg = text_diff(x.read(), y.read(), rtol)
                print("%-44s %s" % (rel, msg or "agrees"))
                failed += bool(msg)
    if failed:
        print("%d file(s) differ beyond the tolerance" % failed)
    sys.exit(1 if failed else 0)


main()
