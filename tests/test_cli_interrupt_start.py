"""Ctrl-C while the `ledgerfold` console script is still importing the command line (click,
rich, the commands), before any command runs: one line on stderr, exit status 130, no
traceback, as Ctrl-C in a command. The real script runs in a child process; a
`sitecustomize` on its path holds the import of `ledgerfold._cli` until the test has sent
it a real SIGINT, so the signal lands inside that import every time, without sleeping on
chance. (Ctrl-C while Python imports the `ledgerfold` package itself, before the script's
module runs, cannot be caught there: see `ledgerfold._entry`.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).with_name("ledgerfold")

# Runs in the child at start. SIGINT acts as in a terminal (a suite run in a background job
# starts its children with it ignored); the finder says "ready" on stdout when the command
# line's import begins and waits there for the test's SIGINT.
SITECUSTOMIZE = """
import signal, sys, time

signal.signal(signal.SIGINT, signal.default_int_handler)


class HoldTheImport:
    def find_spec(self, name, path=None, target=None):
        if name == "ledgerfold._cli":
            sys.meta_path.remove(self)
            sys.stdout.write("ready\\n")
            sys.stdout.flush()
            time.sleep(60)  # the SIGINT ends this
        return None


sys.meta_path.insert(0, HoldTheImport())
"""


@pytest.mark.skipif(not SCRIPT.is_file(), reason="no ledgerfold console script beside python")
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_while_the_command_line_is_imported(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    with subprocess.Popen(
        [str(SCRIPT), "list", str(tmp_path / "missing.db")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as child:
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"
        child.send_signal(signal.SIGINT)
        stdout, stderr = child.communicate(timeout=60)
    assert child.returncode == 130, stderr
    assert stderr == "ledgerfold: error: interrupted\n"
    assert stdout == ""
