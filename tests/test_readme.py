"""The README's examples run, in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_has_examples() -> None:
    assert len(python_blocks()) >= 4


def test_readme_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "readme"}
    for block in python_blocks():
        exec(compile(block, str(README), "exec"), namespace)


def test_readme_states_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert "make demo" in text and "make test" in text


def test_readme_bad_input_table_matches_the_generated_one() -> None:
    text = README.read_text(encoding="utf-8")
    block = text.split("<!-- bad-input:start", 1)[1].split("<!-- bad-input:end -->", 1)[0]
    generated = (README.parent / "docs" / "bad-input.md").read_text(encoding="utf-8")

    def rows(markdown: str) -> list[str]:
        return [line for line in markdown.splitlines() if line.startswith("|")]

    assert rows(block) == rows(generated)
    assert len(rows(block)) > 50
