"""The `ledgerfold` console script in an installation without its compiled core (a source
checkout not built, a wheel of another platform): one line that says what is missing and
how to get it, exit status 2, no traceback. The real script runs in a child process whose
`sitecustomize` makes `ledgerfold._native` not found, as it is then."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(sys.executable).with_name("ledgerfold")

SITECUSTOMIZE = """
import sys


class NoCompiledCore:
    def find_spec(self, name, path=None, target=None):
        if name == "ledgerfold._native":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NoCompiledCore())
"""


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE, "utf-8")
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
        timeout=60,
    )


def test_a_missing_compiled_core_is_one_line(tmp_path: Path) -> None:
    done = _run(tmp_path, "list", str(tmp_path / "x.db"))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "ledgerfold._native" in lines[0] and "make dev" in lines[0]


def test_another_missing_module_keeps_its_traceback(tmp_path: Path) -> None:
    # Only the compiled core is named: a missing module of another kind is a bug to see.
    (tmp_path / "sitecustomize.py").write_text(
        SITECUSTOMIZE.replace("ledgerfold._native", "ledgerfold._cli.render"), "utf-8"
    )
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [str(SCRIPT), "list", str(tmp_path / "x.db")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
        timeout=60,
    )
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "ledgerfold._cli.render" in done.stderr
