"""`ledgerfold.testing`: the shipped `Store` contract suite runs with one
command against a backend's factory, passes for `SQLiteStore`, and fails for a store that
breaks the contract."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

FACTORIES = '''
import ledgerfold as lf


def sqlite_store(tmp_path):
    return lf.SQLiteStore(tmp_path / "contract.db")


class ForgetfulStore(lf.SQLiteStore):
    """Breaks one rule: a retraction does not take the turn out of the ledger view."""

    def retract(self, conversation_id, turn_id, **kwargs):
        self.load(conversation_id).get(turn_id)  # still validates nothing


def forgetful_store(tmp_path):
    return ForgetfulStore(tmp_path / "contract.db")
'''


def run_kit(tmp_path: Path, factory: str, *extra: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "my_backend.py").write_text(textwrap.dedent(FACTORIES), encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "ledgerfold.testing", f"my_backend:{factory}", "-q", *extra],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_contract_suite_passes_for_the_sqlite_store(tmp_path: Path) -> None:
    result = run_kit(tmp_path, "sqlite_store")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "failed" not in result.stdout


def test_the_contract_suite_fails_a_store_that_breaks_a_rule(tmp_path: Path) -> None:
    result = run_kit(tmp_path, "forgetful_store")
    assert result.returncode == 1, result.stdout[-2000:]
    assert "test_retract_removes_from_view_and_bumps_revision FAILED" in result.stdout or (
        "FAILED" in result.stdout and "test_retract_removes_from_view" in result.stdout
    )


def test_a_bad_factory_spec_is_a_usage_error(tmp_path: Path) -> None:
    for spec in ("no_colon", "my_backend:missing", "no_such_module:factory"):
        result = subprocess.run(
            [sys.executable, "-m", "ledgerfold.testing", spec],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode != 0 and "error:" in result.stderr, spec
        assert "Traceback" not in result.stderr
