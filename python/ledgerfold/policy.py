"""`CompactionPolicy` (SPEC §13): how and when a conversation is compacted."""

from __future__ import annotations

from dataclasses import dataclass

from ledgerfold import _validate
from ledgerfold.errors import InvalidInput
from ledgerfold.tokens import TokenCounter, approx_tokens

__all__ = ["CompactionPolicy"]


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """How to compact: `version` (recorded on every summary; a summary of another version
    is not used), the `keep_tail` newest turns always kept raw, and when compaction is due:
    when the context as assembled now costs more than `trigger_tokens` (always, when None),
    counted with `token_counter` (default `ledgerfold.tokens.approx_tokens`)."""

    version: str
    keep_tail: int = 8
    trigger_tokens: int | None = None
    token_counter: TokenCounter | None = None

    def __post_init__(self) -> None:
        _validate.text("version", self.version)
        _validate.integer("keep_tail", self.keep_tail, minimum=1)
        if self.trigger_tokens is not None:
            _validate.integer("trigger_tokens", self.trigger_tokens, minimum=1)
        if self.token_counter is not None and not callable(self.token_counter):
            raise InvalidInput(
                "token_counter: must be a callable str -> int",
                field="token_counter",
                problem="wrong-type",
            )

    @property
    def counter(self) -> TokenCounter:
        """The token counter in effect."""
        return self.token_counter if self.token_counter is not None else approx_tokens
