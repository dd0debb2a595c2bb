"""docs/python.md's matplotlib example runs as shown."""
import os
import re

import pytest


def test_docs_matplotlib_example_runs(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    path = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "python.md")
    with open(path) as f:
        text = f.read()
    section = text.split("## Drawing calls and sweeps with matplotlib", 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    monkeypatch.chdir(tmp_path)
    ns = {}
    exec(compile(code, "docs/python.md", "exec"), ns)
    assert (tmp_path / "report.png").stat().st_size > 0
    assert (tmp_path / "sweep.png").stat().st_size > 0
    assert len(ns["seconds"]) == 20 and ns["energy"].shape == (8, 6, 3)
