"""`ledgerfold import DB <(zcat train.jsonl.gz)` named the conversations of OpenAI
fine-tuning lines after the pipe's file, `/dev/fd/63`: `63:1`, `63:2`, ... A pipe other than
stdin now names them `pipe:<line>` (`pipe-2:<line>` for a second one); stdin keeps `stdin`;
and `--name NAME` names them `NAME:<line>`. Real transcripts, made fine-tuning lines."""

from __future__ import annotations

import gzip
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli_support import run

DATA = Path(__file__).resolve().parent / "data" / "transcripts" / "tau_bench.jsonl"


def _fine_tuning(tmp_path: Path) -> Path:
    """Three real conversations as fine-tuning lines (`{"messages": [...]}`), gzipped."""
    lines = []
    for line in DATA.read_text(encoding="utf-8").splitlines()[:3]:
        turns = json.loads(line)["turns"]
        messages = [
            {"role": turn["role"], "content": turn["body"]}
            for turn in turns
            if turn["role"] in ("system", "user", "assistant") and not turn["tool_call_ids"]
        ]
        lines.append(json.dumps({"messages": messages}))
    path = tmp_path / "train.jsonl.gz"
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    return path


def _ids(db: Path) -> list[str]:
    result = run("list", str(db), "--json")
    assert result.exit_code == 0, result.output
    return [row["conversation"] for row in json.loads(result.stdout)]


#: `zcat FILE`, wherever gzip is missing.
ZCAT = (
    f"{shlex.quote(sys.executable)} -c"
    " 'import gzip, sys; sys.stdout.buffer.write(gzip.open(sys.argv[1]).read())'"
)


def _bash(command: str, stdin: str | None = None) -> str:
    """`command` run by bash as a user types it, `ledgerfold` being this interpreter's."""
    ledgerfold = f"{shlex.quote(sys.executable)} -m ledgerfold"
    done = subprocess.run(
        ["bash", "-c", command.replace("ledgerfold", ledgerfold, 1)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash's <(...)")
def test_a_process_substitution_is_named_as_a_pipe(tmp_path: Path) -> None:
    gz = shlex.quote(str(_fine_tuning(tmp_path)))
    db = tmp_path / "agent.db"
    out = _bash(f"ledgerfold import {shlex.quote(str(db))} <({ZCAT} {gz}) <({ZCAT} {gz})")
    assert out.startswith("imported 6 conversations")
    assert _ids(db) == [f"{p}:{n}" for p in ("pipe-2", "pipe") for n in (1, 2, 3)]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash's <(...)")
def test_name_names_them(tmp_path: Path) -> None:
    gz = _fine_tuning(tmp_path)
    db = shlex.quote(str(tmp_path / "agent.db"))
    _bash(f"ledgerfold import {db} --name train <({ZCAT} {shlex.quote(str(gz))})")
    text = gzip.decompress(gz.read_bytes()).decode()
    _bash(f"ledgerfold import {db} -", stdin=text)  # stdin keeps its name
    _bash(f"ledgerfold import {db} --name q3 -", stdin=text)
    assert _ids(tmp_path / "agent.db") == [
        f"{p}:{n}" for p in ("q3", "stdin", "train") for n in (1, 2, 3)
    ]


def test_name_takes_one_file_and_a_name(tmp_path: Path) -> None:
    plain = tmp_path / "train.jsonl"
    plain.write_bytes(gzip.decompress(_fine_tuning(tmp_path).read_bytes()))
    db = tmp_path / "agent.db"
    for options, message in (
        (["--name", "x", str(plain), str(plain)], "--name: give one FILE"),
        (["--name", " ", str(plain)], "--name: empty"),
    ):
        result = run("import", str(db), *options)
        assert result.exit_code == 2 and message in result.stderr, result.output
        assert not db.exists()
    result = run("import", str(db), "--name", "x", str(plain))
    assert result.exit_code == 0, result.output
    assert _ids(db) == ["x:1", "x:2", "x:3"]
