"""Ctrl-C while the `ledgerfold` console script (or `python -m ledgerfold`) is still
starting, before any command runs: one line on stderr, exit status 130, no traceback, as
Ctrl-C in a command. That holds from the script's first line: while it imports the command
line (click, rich, the commands) and while it imports the library itself (the Rust
extension, the store), which `import ledgerfold` leaves to the first use of a public name.
The real script runs in a child process; a `sitecustomize` on its path holds one module's
import until the test has sent it a real SIGINT, so the signal lands inside that import
every time, without sleeping on chance."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).with_name("ledgerfold")

# Runs in the child at start. SIGINT acts as in a terminal (a suite run in a background job
# starts its children with it ignored); the finder says "ready" on stdout when the import
# of HELD begins and waits there for the test's SIGINT.
SITECUSTOMIZE = """
import signal, sys, time

signal.signal(signal.SIGINT, signal.default_int_handler)
HELD = {held!r}


class HoldTheImport:
    def find_spec(self, name, path=None, target=None):
        if name == HELD:
            sys.meta_path.remove(self)
            sys.stdout.write("ready\\n")
            sys.stdout.flush()
            time.sleep(60)  # the SIGINT ends this
        return None


sys.meta_path.insert(0, HoldTheImport())
"""

#: The command line, the Rust extension and the store: all but the first were imported by
#: `import ledgerfold`, before the script's own module could catch anything.
HELD_MODULES = ["ledgerfold._cli", "ledgerfold._native", "ledgerfold.store._sqlite"]


def _interrupted(tmp_path: Path, command: list[str], held: str) -> tuple[int, str, str]:
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE.format(held=held), "utf-8")
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    with subprocess.Popen(
        [*command, "list", str(tmp_path / "missing.db")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as child:
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"
        child.send_signal(signal.SIGINT)
        stdout, stderr = child.communicate(timeout=60)
    return child.returncode, stdout, stderr


@pytest.mark.skipif(not SCRIPT.is_file(), reason="no ledgerfold console script beside python")
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("held", HELD_MODULES)
def test_ctrl_c_while_the_script_starts(tmp_path: Path, held: str) -> None:
    status, stdout, stderr = _interrupted(tmp_path, [str(SCRIPT)], held)
    assert status == 130, stderr
    assert stderr == "ledgerfold: error: interrupted\n"
    assert stdout == ""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_while_python_m_ledgerfold_imports_the_library(tmp_path: Path) -> None:
    status, stdout, stderr = _interrupted(
        tmp_path, [sys.executable, "-m", "ledgerfold"], "ledgerfold._native"
    )
    assert status == 130, stderr
    assert stderr == "ledgerfold: error: interrupted\n"
    assert stdout == ""
