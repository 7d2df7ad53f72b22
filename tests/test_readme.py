"""The README's examples run, in order, in one namespace; so do those of the docs pages that
hold examples (docs/integrations.md), each page in a namespace of its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
#: The docs pages with examples; tests/wheel_test.sh copies them beside the README.
EXAMPLE_PAGES = (README.parent / "docs" / "integrations.md",)


def python_blocks(page: Path = README) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)


def test_readme_has_examples() -> None:
    assert len(python_blocks()) >= 4


def test_readme_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "readme"}
    for block in python_blocks():
        exec(compile(block, str(README), "exec"), namespace)


def test_readme_examples_run_again_in_the_same_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newcomer runs the tour twice, or after `ledgerfold import agent.db ...` (the command
    line section's file) in the same folder: the examples' files are their own each time."""
    import tempfile

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # what the examples make: here
    (tmp_path / "agent.db").write_bytes(b"")  # someone else's file of that name
    for _ in range(2):
        namespace: dict[str, object] = {"__name__": "readme"}
        for block in python_blocks():
            exec(compile(block, str(README), "exec"), namespace)
        monkeypatch.chdir(tmp_path)
    assert (tmp_path / "agent.db").read_bytes() == b""


@pytest.mark.parametrize("page", EXAMPLE_PAGES, ids=lambda page: page.name)
def test_docs_page_examples_run(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = python_blocks(page)
    assert blocks, page
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": page.stem}
    for block in blocks:
        exec(compile(block, str(page), "exec"), namespace)


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


def test_docs_links_inside_the_checkout_resolve() -> None:
    """The docs pages link to each other, to the README and to the checkout's files."""
    docs = README.parent / "docs"
    missing = []
    for page in sorted(docs.glob("*.md")):
        for target in re.findall(r"\]\(([^)#\s]+)\)", page.read_text(encoding="utf-8")):
            if "://" not in target and not (docs / target).exists():
                missing.append(f"{page.name}: {target}")
    assert missing == []


def test_readme_integrations_say_what_runs_off_the_loop_and_show_the_hook() -> None:
    """The issue's "done when": the README's Integrations section names the async entry
    points whose store work runs off the event loop, and an example there passes `on_event`."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Integrations") : text.index("## Command line")]
    assert "Off the event loop" in section
    for name in ("add_items", "awrap_model_call", "acompact", "acontext", "recall"):
        assert name in section, name
    (example,) = re.findall(r"```python\n(.*?)```", section, re.S)
    assert "on_event=" in example
