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


def test_readme_links_inside_the_checkout_resolve() -> None:
    """The README sends readers to docs/ for the bad-input table, performance and the rest."""
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)\)", text)
    local = [t for t in targets if "://" not in t and not t.startswith("../")]
    assert "docs/bad-input.md" in local and "docs/performance.md" in local
    missing = [t for t in local if not (README.parent / t).exists()]
    assert missing == []
