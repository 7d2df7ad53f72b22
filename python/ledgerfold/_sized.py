"""How a repr shows a value it hides (a body, a summary's text, turns, IDs, raw bytes): by
its size, the word agreeing with the count."""

from __future__ import annotations

__all__ = ["sized"]


def sized(count: int, word: str) -> str:
    """`<1 char>`, `<3 chars>`, `<0 turns>`."""
    return f"<1 {word}>" if count == 1 else f"<{count} {word}s>"
