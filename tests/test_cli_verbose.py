"""`-v` logs ledgerfold's records to the stderr of the call that asked for them: in one
process (an application or a test calling the CLI's main twice) each call's records go to
its own stream, and a call without `-v` prints none; the logging setup is left as found."""

from __future__ import annotations

import logging
from pathlib import Path

from click.testing import CliRunner

from ledgerfold import SQLiteStore
from ledgerfold._cli import cli


def _db(path: Path) -> str:
    with SQLiteStore(path) as store:
        store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(12)])
    return str(path)


def test_each_call_logs_to_its_own_stream(tmp_path: Path) -> None:
    logger = logging.getLogger("ledgerfold")
    handlers, level = list(logger.handlers), logger.level
    first = CliRunner().invoke(cli, ["-v", "compact", _db(tmp_path / "a.db"), "--keep-tail", "2"])
    assert first.exit_code == 0, first.output
    assert "INFO ledgerfold" in first.stderr
    second = CliRunner().invoke(cli, ["-v", "compact", _db(tmp_path / "b.db"), "--keep-tail", "2"])
    assert second.exit_code == 0, second.output
    assert "INFO ledgerfold" in second.stderr  # its own records, in its own stream
    quiet = CliRunner().invoke(cli, ["compact", _db(tmp_path / "c.db"), "--keep-tail", "2"])
    assert quiet.exit_code == 0, quiet.output
    assert "INFO" not in quiet.stderr
    assert (list(logger.handlers), logger.level) == (handlers, level)
