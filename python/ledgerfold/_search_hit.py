"""`SearchHit`: one result of `SQLiteStore.search` (SPEC §16.1, §16.5)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["SearchHit"]


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A turn that matched a search, with its best passage.

    `text` is that passage: a slice of the turn's current body (at most 600 characters);
    `score` is larger for better matches and comparable only within one call (−BM25);
    `summary_id` is the ID of the current summary covering the turn, or None. The repr
    leaves `text` out: passages are stored text and never go to logs.
    """

    turn_id: str
    sequence: int
    role: str
    text: str = field(repr=False)
    score: float
    summary_id: str | None
