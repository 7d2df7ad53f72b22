"""The README's command-line block runs as written: each `ledgerfold` line, in order, on a
copy of a database the real transcripts were imported into, once without its optional
`[...]` parts and once with all of them, its placeholders (CONVERSATION, SEQ, TEXT, DIR,
N, ...) filled in. A renamed option or command fails here, not in a newcomer's shell."""

from __future__ import annotations

import glob
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from cli_support import run

ROOT = Path(__file__).resolve().parents[1]
CONVERSATION = "tau-bench/gpt-4o-airline/task0/trial0"
PLACEHOLDERS = {
    "CONVERSATION": CONVERSATION,
    "ID": CONVERSATION,
    "SEQ": "5",
    "TEXT": "retention",
    "DIR": "parquet-out",
    "N": "2",
    "PATH": "demo.db",
    "V": "v1",
    "OUT.html": "page.html",
}


def readme_lines() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text[text.index("## Command line") :]
    block = block[block.index("```sh\n") + 6 : block.index("```", block.index("```sh") + 5)]
    return [
        line.split("  #")[0].strip()
        for line in block.splitlines()
        if line.startswith("ledgerfold ")
    ]


def arguments(line: str, optional: bool) -> list[str]:
    line = re.sub(r"\[([^\]]*)\]", r"\1" if optional else "", line)
    words = [PLACEHOLDERS.get(word, word) for word in shlex.split(line)[1:]]
    expanded: list[str] = []
    for word in words:
        expanded += sorted(glob.glob(str(ROOT / word))) if "*" in word else [word]
    return expanded


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("readme-cli") / "agent.db"
    files = sorted(glob.glob(str(ROOT / "tests/data/transcripts/*.jsonl")))
    assert run("import", str(db), *files).exit_code == 0
    return db


def test_the_block_has_every_command() -> None:
    assert len(readme_lines()) >= 15


@pytest.mark.parametrize("optional", [False, True], ids=["bare", "with-options"])
@pytest.mark.parametrize("line", readme_lines())
def test_each_readme_line_runs(
    line: str, optional: bool, imported: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    if not line.startswith("ledgerfold import"):
        shutil.copy(imported, tmp_path / "agent.db")
    message = {
        "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]
    }
    (tmp_path / "train.jsonl").write_text(json.dumps(message) + "\n", encoding="utf-8")
    args = arguments(line, optional)
    result = run(*args)
    assert result.exit_code == 0, (args, result.output)
    if "--json" in args:
        json.loads(result.stdout)
