"""The package's version and its build (setup.py): the version is the
repository's internal/version/VERSION, and a build without a usable Go
stops with one line naming the version it needs."""
import importlib.util
import os

import pytest

import tapeloop

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def read(*path):
    with open(os.path.join(ROOT, *path)) as f:
        return f.read()


@pytest.fixture(scope="module")
def setup_py():
    """python/setup.py as a module (its setup() runs only as __main__)."""
    spec = importlib.util.spec_from_file_location("tapeloop_setup", os.path.join(ROOT, "python", "setup.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_version_is_the_file():
    want = read("internal", "version", "VERSION").strip()
    assert tapeloop.__version__ == want
    assert tapeloop.release() == want
    assert tapeloop.version() == tapeloop._lib.ABI  # the ABI's, a different thing


def test_setup_reads_the_versions(setup_py):
    root = setup_py.source()
    assert setup_py.version() == read("internal", "version", "VERSION").strip()
    gomod = read("go.mod")
    assert f"\ngo {setup_py.go_needed(root)}\n" in gomod


def fake_go(tmp_path, printed):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    go = bin_dir / "go"
    go.write_text(f"#!/bin/sh\necho '{printed}'\n")
    go.chmod(0o755)
    return str(bin_dir)


def test_go_missing(setup_py, tmp_path):
    root = setup_py.source()
    with pytest.raises(setup_py.BuildError) as e:
        setup_py.check_go(root, {"PATH": str(tmp_path)})
    needed = setup_py.go_needed(root)
    assert str(e.value) == (f"tapeloop: building libtapeloop.so needs Go {needed} or newer (https://go.dev/dl/); "
                            "go was not found on PATH")


def test_go_too_old(setup_py, tmp_path):
    root = setup_py.source()
    path = fake_go(tmp_path, "go version go1.21.3 linux/amd64")
    with pytest.raises(setup_py.BuildError) as e:
        setup_py.check_go(root, {"PATH": path})
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"tapeloop: building libtapeloop.so needs Go {setup_py.go_needed(root)} or newer")
    assert msg.endswith(f"{path}/go is go1.21.3")


def test_go_new_enough(setup_py, tmp_path):
    root = setup_py.source()
    major, minor = (int(p) for p in setup_py.go_needed(root).split(".")[:2])
    path = fake_go(tmp_path, f"go version go{major}.{minor + 1} linux/amd64")
    assert setup_py.check_go(root, {"PATH": path}) == os.path.join(path, "go")


def test_source_missing(setup_py, tmp_path, monkeypatch):
    monkeypatch.setenv("TAPELOOP_SOURCE", str(tmp_path))
    with pytest.raises(setup_py.BuildError, match="needs tapeloop's Go sources"):
        setup_py.source()
