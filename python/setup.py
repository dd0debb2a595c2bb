"""The build of the tapeloop package: pyproject.toml holds its metadata,
this file what pip cannot say there. Building the package (pip install
./python, pip wheel ./python) builds the engine too: `go build
-buildmode=c-shared -trimpath ./capi`, run from the repository (this
directory's parent, or TAPELOOP_SOURCE), writes libtapeloop.so into the
package, which needs Go (go.mod's version or newer) and gcc. The wheel is
tagged for this platform and any Python 3 (py3-none-linux_x86_64): the
library is machine code but no Python extension. Its version is
internal/version/VERSION's, the release `tapeloop --version` prints.

check_go and the constants here are imported by tests/test_packaging.py;
setup() runs only when pip (or python setup.py) runs this file.
"""
import os
import re
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py
from setuptools.errors import BaseError

try:  # setuptools 70.1 and later have their own
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    try:
        from wheel.bdist_wheel import bdist_wheel  # Debian: python3-wheel
    except ImportError:
        bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY = "libtapeloop.so"
DOWNLOAD = "https://go.dev/dl/"


class BuildError(BaseError):
    """What stops the build, one line (setuptools prints it as "error: …")."""


def source():
    """The repository the library is built from: TAPELOOP_SOURCE, or this
    directory's parent (pip builds ./python in place)."""
    root = os.path.abspath(os.environ.get("TAPELOOP_SOURCE") or os.path.join(HERE, ".."))
    if not (os.path.isfile(os.path.join(root, "go.mod")) and os.path.isdir(os.path.join(root, "capi"))):
        raise BuildError(f"tapeloop: building {LIBRARY} needs tapeloop's Go sources (go.mod and capi/), "
                         f"which {root} lacks; install from a checkout (pip install ./python) or set "
                         "TAPELOOP_SOURCE to one")
    return root


def go_needed(root):
    """The Go version go.mod's `go` line names, such as "1.26.8"."""
    with open(os.path.join(root, "go.mod")) as f:
        m = re.search(r"^go\s+([0-9]+(?:\.[0-9]+)*)\s*$", f.read(), re.M)
    if not m:
        raise BuildError(f"tapeloop: {os.path.join(root, 'go.mod')} has no `go` line")
    return m.group(1)


def _numbers(v):
    return tuple(int(p) for p in v.split(".")) + (0,) * (3 - v.count(".") - 1)


def check_go(root, env=None):
    """The go command to build with (GO, or go on env's PATH) when it is
    go.mod's version or newer; otherwise BuildError, one line naming the
    version needed and what was found."""
    env = os.environ if env is None else env
    needed = go_needed(root)
    want = f"tapeloop: building {LIBRARY} needs Go {needed} or newer ({DOWNLOAD})"
    name = env.get("GO") or "go"
    go = shutil.which(name, path=env.get("PATH", os.defpath))
    if go is None:
        where = "on PATH" if name == "go" else f"(GO={name})"
        raise BuildError(f"{want}; {name} was not found {where}")
    try:  # GOTOOLCHAIN=local: the version of this go, not of one it would download
        out = subprocess.run([go, "version"], env={**env, "GOTOOLCHAIN": "local"}, capture_output=True,
                             text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise BuildError(f"{want}; {go} did not run ({e})") from e
    m = re.search(r"\bgo([0-9]+)\.([0-9]+)(?:\.([0-9]+))?", out)
    if not m:
        raise BuildError(f"{want}; `{go} version` printed {out.strip()!r}")
    have = tuple(int(p or 0) for p in m.groups())
    if have < _numbers(needed):
        raise BuildError(f"{want}; {go} is go{'.'.join(p for p in m.groups() if p)}")
    return go


def build_library(out):
    """Builds the C ABI (./capi) as the shared library out."""
    root = source()
    go = check_go(root)
    out = os.path.abspath(out)  # go build runs in root
    os.makedirs(os.path.dirname(out), exist_ok=True)
    cmd = [go, "build", "-buildmode=c-shared", "-trimpath", "-o", out, "./capi"]
    print(f"tapeloop: {' '.join(cmd)} (in {root})", flush=True)
    r = subprocess.run(cmd, cwd=root, env={**os.environ, "CGO_ENABLED": "1"})
    if r.returncode != 0:
        raise BuildError(f"tapeloop: go build of {LIBRARY} failed (exit status {r.returncode}); its "
                         "errors are above")
    header = os.path.splitext(out)[0] + ".h"  # cgo's; C callers use capi/tapeloop.h
    if os.path.exists(header):
        os.remove(header)


def version():
    """internal/version/VERSION, or, building from an sdist, its PKG-INFO."""
    try:
        with open(os.path.join(source(), "internal", "version", "VERSION")) as f:
            return f.read().strip()
    except (BuildError, OSError):
        info = os.path.join(HERE, "PKG-INFO")
        if not os.path.exists(info):
            raise
        with open(info) as f:
            return re.search(r"^Version:\s*(\S+)", f.read(), re.M).group(1)


class BuildPy(build_py):
    """build_py, then the library beside the modules: in the build
    directory, or in the package itself for an editable install."""

    def run(self):
        super().run()
        lib_dir = HERE if getattr(self, "editable_mode", False) else self.build_lib
        build_library(os.path.join(lib_dir, "tapeloop", LIBRARY))


class BinaryDistribution(Distribution):
    """A distribution that holds machine code: installed to platlib and
    never tagged pure."""

    def has_ext_modules(self):
        return True


cmdclass = {"build_py": BuildPy}
if bdist_wheel is not None:
    class PlatformWheel(bdist_wheel):
        """Tagged py3-none-<platform>: any Python 3 on this platform loads
        the library through ctypes."""

        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            return "py3", "none", super().get_tag()[2]

    cmdclass["bdist_wheel"] = PlatformWheel

if __name__ == "__main__":
    try:
        v = version()
    except BuildError as e:
        sys.exit(f"error: {e}")
    setup(version=v, cmdclass=cmdclass, distclass=BinaryDistribution)
