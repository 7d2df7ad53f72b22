"""Every relative link of the project's Markdown pages (README.md, ARCHITECTURE.md,
CHANGELOG.md, docs/*.md) resolves: the file it names exists, and its `#anchor` is one of
that page's headings (GitHub's slugs). Links that leave the checkout (`../shared/...`)
and web links are not checked: the checkout cannot promise them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = (
    ROOT / "README.md",
    ROOT / "ARCHITECTURE.md",
    ROOT / "CHANGELOG.md",
    *sorted((ROOT / "docs").glob("*.md")),
)

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE_SPAN = re.compile(r"(`+).+?\1", re.S)
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)


def _prose(text: str) -> str:
    """The text without code blocks and code spans, where `[x](y)` is not a link."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: link text kept, markup and punctuation dropped,
    lower case, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found: set[str] = set()
    for heading in _HEADING.findall(_FENCE.sub("", page.read_text(encoding="utf-8"))):
        base = slug(heading)
        count = seen.get(base, 0)
        found.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return found


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """`page`'s relative links whose file is missing or whose anchor is no heading."""
    broken = []
    for target in _LINK.findall(_prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.is_relative_to(root.resolve()):
            continue
        if not resolved.exists():
            broken.append(f"{page.name}: {target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{page.name}: {target} (no such heading)")
    return broken


def test_the_pages_hold_links_with_anchors() -> None:
    """The check sees the links it is meant to check (anchors included)."""
    links = [t for page in PAGES for t in _LINK.findall(_prose(page.read_text(encoding="utf-8")))]
    assert "docs/cli.md#the-html-inspector" in links
    assert "../README.md#command-line" in links


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_relative_links_and_anchors_resolve(page: Path) -> None:
    assert broken_links(page) == []


def test_a_missing_file_or_heading_is_reported(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## The `--json` keys\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md#the---json-keys) [self](#page) [web](https://example.org)\n"
        "[gone](missing.md) [bad](other.md#nowhere) [bad self](#nope)\n"
        "`[code](not-a-link.md)`\n\n```\n[fenced](not-a-link.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(page, tmp_path) == [
        "page.md: missing.md (no such file)",
        "page.md: other.md#nowhere (no such heading)",
        "page.md: #nope (no such heading)",
    ]
