"""Assembling the model context (SPEC §8): the current summary in its slot, every other
ledger turn raw, or every turn raw with the reason when the summary cannot be used."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from ledgerfold import _native, _validate
from ledgerfold._native import Conversation, SourceIds, TurnItem
from ledgerfold._sized import sized
from ledgerfold._summary import SummaryEnvelope, _sealed_arg

__all__ = [
    "RECALL_PROMISE",
    "AssembledContext",
    "ContextItem",
    "HistoryBoundary",
    "SummaryItem",
    "TurnItem",
    "assemble_context",
    "with_purge",
    "with_purged_summary",
]


#: How the extractive summarizer's marker of omitted turn lines says that recall returns
#: them (`[57 earlier turn lines omitted: sequences 2–58; recall_history returns them]`,
#: SPEC §16.5; after a purge `...; recall_history returns only those after sequence 10]`):
#: a sealed summary keeps it as written, though a later purge may make it wrong, and the
#: framing then says for which sequences it still holds (`adapters._chat.summary_framing`).
RECALL_PROMISE = "recall_history returns"


class _WeaklyReferable:
    # A slotted value has no `__weakref__` unless a base gives it one (`weakref_slot=True`
    # needs Python 3.11).
    __slots__ = ("__weakref__",)


@dataclass(frozen=True, slots=True, repr=False)
class SummaryItem(_WeaklyReferable):
    """A summary in the context: a derived data item, never a user turn or an instruction.
    Weakly referable: what is made from it for one integration (its escaped message,
    `adapters._summary_contents`) lives no longer than the item."""

    id: str
    text: str
    through_sequence: int
    source_ids: tuple[str, ...] | SourceIds
    # The sequence of its first source (sources are in ledger order), for the slot's framing
    # (SPEC §16.5); None when unknown. Not part of the item's identity.
    first_sequence: int | None = field(default=None, compare=False)
    # The ledger's history boundary (SPEC §15.5): the turns through this sequence were
    # purged, so only the summary remains of them and recall cannot return them (the
    # framing says so); None when nothing was purged. Not part of the item's identity.
    purged_through: int | None = field(default=None, compare=False)

    @property
    def kind(self) -> str:
        return "summary"

    def __repr__(self) -> str:
        return (
            f"SummaryItem(id={self.id!r}, text={sized(len(self.text), 'char')}, "
            f"through_sequence={self.through_sequence}, "
            f"source_ids={sized(len(self.source_ids), 'id')})"
        )


ContextItem = SummaryItem | TurnItem


@dataclass(frozen=True, slots=True)
class HistoryBoundary:
    """Raw turns through `through_sequence` were purged by retention (SPEC §9)."""

    through_sequence: int
    reason: str
    purged_at: str


@dataclass(frozen=True, slots=True)
class AssembledContext:
    """What goes to the model. `fallback` is None when the summary was used, else why not
    (`no-summary`, `stale-summary:<reason>`, `preserved-missing`, `duplicate-id`);
    `fallback_id` names the turn or summary ID behind the fallback, where there is one.
    `dropped` counts the items chat messages leave out (SPEC §17.2): a tool turn answering
    no call before it (or answering one a second time), an assistant turn whose calls lack
    results while later items follow (with the results it got). A result that came after
    other items is not dropped: chat messages send it right after its call. It is derived
    from `items`, never passed."""

    items: tuple[ContextItem, ...]
    fallback: str | None = None
    history_boundary: HistoryBoundary | None = None
    fallback_id: str | None = None
    dropped: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        # One rule (the Rust core's) for this count and for what `to_chat_messages` leaves out.
        object.__setattr__(self, "dropped", _native.unsendable_count(self.items))

    @property
    def summary(self) -> SummaryItem | None:
        """The summary item, if the summary was used."""
        for item in self.items:
            if isinstance(item, SummaryItem):
                return item
        return None

    @property
    def ids(self) -> tuple[str, ...]:
        """Item IDs in context order."""
        return tuple(item.id for item in self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[ContextItem]:
        return iter(self.items)


def with_purge(item: SummaryItem, boundary: HistoryBoundary | None) -> SummaryItem:
    """`item` carrying `boundary` as its `purged_through` (the same object when it already
    does), so that its framing says which originals are gone."""
    purged = None if boundary is None else boundary.through_sequence
    if item.purged_through == purged:
        return item
    return SummaryItem(
        item.id, item.text, item.through_sequence, item.source_ids, item.first_sequence, purged
    )


def with_purged_summary(
    items: tuple[ContextItem, ...], boundary: HistoryBoundary | None
) -> tuple[ContextItem, ...]:
    """`items` with their summary item carrying `boundary` (`with_purge`)."""
    for at, item in enumerate(items):
        if isinstance(item, SummaryItem):
            marked = with_purge(item, boundary)
            if marked is item:
                return items
            return (*items[:at], marked, *items[at + 1 :])
    return items


def assemble_context(
    conversation: Conversation,
    summary: SummaryEnvelope | None,
    policy_version: str,
    preserved_ids: Iterable[str] | None = None,
    *,
    sealed: Mapping[str, bytes] | None = None,
) -> AssembledContext:
    """One summary item plus every ledger turn not among its sources (turns appended after
    the plan included), in sequence order with the summary at its last source; or every turn
    raw when the summary is missing, stale, or the layout would be ambiguous. `sealed`: as
    for `check_summary` (a summary whose sources are all sealed goes before every turn)."""
    conversation = _validate.conversation(conversation)
    if summary is not None:
        _validate.instance("summary", summary, SummaryEnvelope)
    policy_version = _validate.text("policy_version", policy_version)

    # No pause of the cycle collector here (a process-wide switch in a library call could be
    # left off for good by two threads interleaving): the native side does not track the
    # TurnItems it makes, which cannot be part of a cycle, so they trigger no collections.
    turns, summary_at, through_sequence, fallback, fallback_id, dropped = _native.assemble(
        conversation, summary, policy_version, preserved_ids, _sealed_arg(sealed)
    )
    items: tuple[ContextItem, ...] = turns
    if summary_at is not None:
        assert summary is not None and through_sequence is not None  # the summary was used
        first = conversation.get(summary.source_ids[0]) if summary.source_ids else None
        item = SummaryItem(
            summary.id,
            summary.text,
            through_sequence,
            summary.source_ids,
            None if first is None else first.sequence,
        )
        items = (*turns[:summary_at], item, *turns[summary_at:])
    return _assembled(items, fallback, fallback_id, dropped)


def _assembled(
    items: tuple[ContextItem, ...], fallback: str | None, fallback_id: str | None, dropped: int
) -> AssembledContext:
    """`AssembledContext(items, fallback, None, fallback_id)` with `dropped` as the native
    assembly counted it, by the same rule, from the ledger's turns (on a large context the
    count over the new items costs a fifth of the assembly)."""
    context = object.__new__(AssembledContext)
    for name, value in (
        ("items", items),
        ("fallback", fallback),
        ("history_boundary", None),
        ("fallback_id", fallback_id),
        ("dropped", dropped),
    ):
        object.__setattr__(context, name, value)
    return context
