#!/usr/bin/env bash
# make test-pip: the Python package installed as a user installs it. In a
# temporary directory, a fresh virtual environment (python3 -m venv
# --system-site-packages: NumPy, setuptools and wheel from Debian) gets
# `pip install --no-index --no-build-isolation ./python`, which builds
# libtapeloop.so with Go; then, from outside the repository, the installed
# package computes pairwise L2 affinities of random images against NumPy,
# its __version__ is checked against internal/version/VERSION and its
# wheel's tag against this platform. Skipped with one note where python3's
# venv (python3-venv), NumPy, setuptools or wheel is missing. The
# environment and the build directories it made (python/build,
# python/tapeloop.egg-info) are removed afterwards. PYTHON: the
# interpreter (default /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
py=${PYTHON:-/usr/bin/python3}

if ! "$py" -c 'import numpy, setuptools, wheel' 2>/dev/null; then
	echo "note: $py with numpy, setuptools and wheel (python3-numpy, python3-setuptools, python3-wheel) not found; the pip install is not tested"
	exit 0
fi
tmp=$(mktemp -d)
made=()
for d in python/build python/tapeloop.egg-info; do
	[ -e "$d" ] || made+=("$repo/$d")
done
cleanup() { rm -rf "$tmp" "${made[@]}"; }
trap cleanup EXIT
if ! "$py" -m venv --system-site-packages "$tmp/venv" >"$tmp/venv.log" 2>&1; then
	echo "note: $py -m venv failed (python3-venv missing?); the pip install is not tested: $(tail -n 1 "$tmp/venv.log")"
	exit 0
fi

set -x
"$tmp/venv/bin/python" -m pip install -q --no-index --no-build-isolation ./python
set +x
mkdir "$tmp/elsewhere"
cd "$tmp/elsewhere"
env -u PYTHONPATH -u TAPELOOP_LIB VERSION_FILE="$repo/internal/version/VERSION" VENV="$tmp/venv" \
	"$tmp/venv/bin/python" - <<'EOF'
import glob
import os
import platform

import numpy as np

import tapeloop

venv = os.environ["VENV"]
assert tapeloop.__file__.startswith(venv + os.sep), f"tapeloop imported from {tapeloop.__file__}, not the venv"
with open(os.environ["VERSION_FILE"]) as f:
    want = f.read().strip()
assert tapeloop.__version__ == want, (tapeloop.__version__, want)

rng = np.random.default_rng()
x = rng.standard_normal((45, 300))
got = tapeloop.affinity(x, "l2", dtype="float64")
ref = -((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())

wheel, = glob.glob(os.path.join(os.path.dirname(os.path.dirname(tapeloop.__file__)), f"tapeloop-{want}.dist-info", "WHEEL"))
with open(wheel) as f:
    meta = f.read()
machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine())
assert f"Tag: py3-none-linux_{machine}\n" in meta and "Root-Is-Purelib: false\n" in meta, meta
print(f"pip install ./python: tapeloop {tapeloop.__version__} ({tapeloop.version()}), "
      f"{os.path.basename(os.path.dirname(wheel))} tagged py3-none-linux_{machine}; "
      f"L2 affinities of {x.shape} match NumPy")
EOF
