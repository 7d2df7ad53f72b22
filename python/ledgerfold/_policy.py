"""`CompactionPolicy` (SPEC §13): how and when a conversation is compacted."""

from __future__ import annotations

from dataclasses import dataclass, field

from ledgerfold import _validate
from ledgerfold._plan import preserve_roles_arg
from ledgerfold.tokens import TokenCounter, approx_tokens

__all__ = ["CompactionPolicy"]


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """How to compact (SPEC §13, §15.2).

    - `version` is recorded on every summary; a summary of another version is not used.
    - The `keep_tail` newest turns always stay raw, and so do turns whose role is in
      `preserve_roles` (system prompts, by default) and their groups.
    - Compaction is due when at least `min_new_turns` compactable turns are not yet covered
      by the current summary and, when `trigger_tokens` is set, the assembled context (summary
      plus raw turns) costs more than that, counted with `token_counter` (default
      `ledgerfold.tokens.approx_tokens`). After k consecutive failures it needs
      `min_new_turns * 2**min(k, 6)` new turns.
    - No summarizer request carries more than `max_input_tokens` of turn text (a backlog is
      folded in chunks, one per `compact()` call); `max_summary_tokens` bounds the summary
      text, which custom summarizers are asked to honour.
    - After each accepted summary, versions other than the current one beyond the newest
      `keep_versions` are pruned (None keeps every version); up to `keep_checkpoints`
      older ancestors of the current summary are kept beyond them, spaced so their coverage
      ends lie about 1/2, 1/4, 1/8 … of the covered turns back: after an edit of a covered
      turn the next compaction rebuilds from the newest one the edit left unchanged instead
      of summarising everything again (SPEC §17.5).
    - Retention (SPEC §15.5): with `retain_turns` and/or `retain_days`, after each accepted
      summary the raw turns beyond the newest `retain_turns` or written more than
      `retain_days` ago are purged, but only those the new summary covers; the summary is
      sealed, so the context keeps what they said. Protected turns and turns of
      `preserve_roles` (the system prompt) are never purged this way.
    """

    version: str
    keep_tail: int = 8
    trigger_tokens: int | None = None
    token_counter: TokenCounter | None = None
    min_new_turns: int = field(default=8, kw_only=True)
    max_input_tokens: int = field(default=8000, kw_only=True)
    max_summary_tokens: int = field(default=1000, kw_only=True)
    keep_versions: int | None = field(default=4, kw_only=True)
    keep_checkpoints: int = field(default=8, kw_only=True)
    preserve_roles: tuple[str, ...] = field(default=("system",), kw_only=True)
    retain_turns: int | None = field(default=None, kw_only=True)
    retain_days: float | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        _validate.text("version", self.version)
        _validate.integer("keep_tail", self.keep_tail, minimum=1)
        if self.trigger_tokens is not None:
            _validate.integer("trigger_tokens", self.trigger_tokens, minimum=1)
        _validate.integer("min_new_turns", self.min_new_turns, minimum=1)
        _validate.integer("max_input_tokens", self.max_input_tokens, minimum=1)
        _validate.integer("max_summary_tokens", self.max_summary_tokens, minimum=1)
        if self.keep_versions is not None:
            _validate.integer("keep_versions", self.keep_versions, minimum=0)
        _validate.integer("keep_checkpoints", self.keep_checkpoints, minimum=0)
        object.__setattr__(self, "preserve_roles", preserve_roles_arg(self.preserve_roles))
        if self.retain_turns is not None:
            _validate.integer("retain_turns", self.retain_turns, minimum=0)
        _validate.duration("retain_days", self.retain_days, unit="days")
        _validate.callback("token_counter", self.token_counter, "str -> int")

    @property
    def retains(self) -> bool:
        """Whether the policy states a retention limit."""
        return self.retain_turns is not None or self.retain_days is not None

    @property
    def counter(self) -> TokenCounter:
        """The token counter in effect."""
        return self.token_counter if self.token_counter is not None else approx_tokens
