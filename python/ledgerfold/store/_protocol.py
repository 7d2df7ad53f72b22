"""The `Store` protocol (SPEC §12): the persistence hook for applications with their own database.

`SQLiteStore` is the embedded implementation. An application that keeps its conversations in
another database implements these methods with the same behaviour and passes its object
wherever ledgerfold takes a store (e.g. `Compactor`). The contract suite ships with the
package: `python -m ledgerfold.testing package.module:make_store` runs it against yours.

Rules every implementation keeps:

- The ledger is append-only: compaction deletes no turn; edits keep the earlier version;
  a retracted turn leaves the ledger view but not the database.
- Revisions start at 0 for an unknown conversation; every `append`, `append_many` (once per
  call), `edit`, `retract` and `purge_through` adds 1. Sequences start at 1 and are never
  reused (the next is one more than the highest ever written, retracted included).
- `commit_summary` is one transaction: it re-reads the ledger, checks the active plan and the
  sources, and writes the version, its source index and the current pointer together, or
  only a `rejected` record. A database failure raises `StoreError` and writes nothing.
- An edit or retraction of a turn marks every summary citing it `stale` in the same
  transaction (`source-modified` / `source-missing`), so `context` may trust the stored
  status instead of re-hashing summarised turns.
- Bad input raises `InvalidInput` naming the field; messages never contain turn bodies or
  summary text.

Extras of `SQLiteStore` that are not part of the protocol: `import_legacy(conversation_id,
records)` (legacy records without a role or provenance come in protected as
`unverified-provenance`) and `close()` / the context-manager protocol.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ledgerfold._context import AssembledContext, HistoryBoundary
from ledgerfold._model import Conversation, Turn
from ledgerfold._native import SourceDigests
from ledgerfold._plan import CompactionPlan
from ledgerfold._search_hit import SearchHit
from ledgerfold._summary import SummaryEnvelope, SummaryWrite
from ledgerfold.store._schema import SUMMARY_STATUSES

__all__ = [
    "PROTOCOL_VERSION",
    "SUMMARY_STATUSES",
    "CompactionWork",
    "SearchableStore",
    "Store",
    "SummaryRecord",
    "refused_keyword",
    "takes_keyword",
]

#: The store protocol's version (SPEC §17.9): 1 is v1.1's `Store`; 2 adds `SearchableStore`
#: (recall) and `Store.begin_compaction(only_due_at_once=)`. `Compactor` and the integrations
#: work with a v1 store and then offer no recall (and ask it nothing below the trigger).
PROTOCOL_VERSION = 2


def takes_keyword(method: object, name: str) -> bool:
    """Whether a store's method takes the keyword `name`: one added to the protocol after
    v1.1 (`begin_compaction(only_due_at_once=)`, `prune_versions(keep_checkpoints=)`), which a
    store of your own written to v1.1's may lack. A proxy forwarding ``**kwargs`` counts as
    taking it."""
    if not callable(method):
        return False
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters or any(
        parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values()
    )


def refused_keyword(error: TypeError, name: str) -> bool:
    """Whether `error` is Python refusing the keyword `name` in a call (the method behind a
    ``**kwargs`` proxy does not take it: a store of v1.1's protocol), rather than a
    `TypeError` from inside the method."""
    return f"unexpected keyword argument '{name}'" in str(error)


@dataclass(frozen=True, slots=True)
class SummaryRecord:
    """One summary attempt in a conversation's history.

    `envelope` is None for `failed` attempts (there was no result); `reason` says why a
    version is `stale` (`source-modified`, `source-missing`), why a result was `rejected`
    (the `SummaryWrite.detail`, e.g. `superseded-plan`) or why an attempt `failed`.
    `created_at` is ISO-8601 UTC; `plan_id` is always set.
    """

    envelope: SummaryEnvelope | None
    status: str
    reason: str | None
    created_at: str
    plan_id: str


@dataclass(frozen=True, slots=True)
class CompactionWork:
    """What the store hands a compactor for one compaction (`SQLiteStore.begin_compaction`).

    `status` is ``ready`` (a plan was registered), ``not-due`` (fewer new turns than asked
    for; nothing registered) or ``nothing-to-compact``. When ready: `plan`, the `parent` the
    summary may extend (None: a rebase), its stored source digests (32 bytes each, source
    order) and the compactable turns it does not cover, in sequence order.

    `SQLiteStore` hands the digests as a `SourceDigests` fingerprint state rather than the
    bytes: `extended_fingerprint` over it costs O(new + log covered), not O(covered). A store
    of your own may hand either.
    """

    status: str
    plan: CompactionPlan | None = None
    parent: SummaryEnvelope | None = None
    parent_digests: bytes | SourceDigests = b""
    new_turns: tuple[Turn, ...] = ()
    failures: int = 0
    #: The store built `plan.compacted_ids` as `parent.source_ids + new IDs` (that very
    #: tuple): the compactor then reuses it without comparing O(covered) IDs. False when
    #: unknown (a store of your own may leave it).
    extends_parent: bool = False
    #: The plan rebases a stale summary that held purged turns with no checkpoint of them
    #: left (SPEC §17.5): once accepted, their summary is gone (the compactor reports it).
    sealed_lost: bool = False
    #: The sequence the conversation's turns were purged through (its history boundary,
    #: SPEC §15.5), read with the plan, or None: the `parent`'s text may describe turns whose
    #: originals are gone, which recall cannot return (the summarizer is told,
    #: `SummaryRequest.purged_through`). A store of your own may leave it None.
    purged_through: int | None = None


@runtime_checkable
class Store(Protocol):
    """A versioned ledger store. Every method is atomic: it changes all it says or nothing."""

    def append(
        self,
        conversation_id: str,
        role: str,
        body: str,
        *,
        id: str | None = None,
        protected: bool = False,
        protection_reason: str | None = None,
        group: str | None = None,
        meta: Mapping[str, str] | None = None,
    ) -> Turn:
        """Append one turn at the next sequence; new revision. `id` defaults to a fresh
        unique ID; a turn ID already used in the conversation raises `DuplicateId`."""
        ...

    def append_many(self, conversation_id: str, turns: Iterable[Mapping[str, Any]]) -> list[Turn]:
        """Append several turns (mappings with the `append` keywords) in one transaction:
        all or nothing, one new revision."""
        ...

    def edit(self, conversation_id: str, turn_id: str, **changes: Any) -> Turn:
        """Change any field but `id` and `sequence` of a live turn; new revision. The earlier
        version is kept; summaries citing the turn become `stale` (`source-modified`) in the
        same transaction when its digest changed."""
        ...

    def retract(self, conversation_id: str, turn_id: str, *, erase: bool = False) -> None:
        """Remove a live turn from the ledger view (the row stays, flagged); new revision;
        summaries citing it become `stale` (`source-missing`). `erase=True` also erases its
        body and earlier versions (SPEC §15.5), also of a turn retracted before."""
        ...

    def load(self, conversation_id: str) -> Conversation:
        """The live ledger. An unknown ID gives an empty conversation at revision 0."""
        ...

    def get_turns(self, conversation_id: str, turn_ids: Iterable[str]) -> list[Turn]:
        """The live turns with these IDs, in sequence order; IDs not in the ledger view are
        left out. Reads only those turns (the compactor gives a summarizer its input this
        way, without loading the whole conversation)."""
        ...

    def conversation_ids(self) -> list[str]:
        """IDs of every conversation with at least one written turn, sorted."""
        ...

    def start_plan(
        self,
        conversation_id: str,
        keep_tail: int,
        policy_version: str,
        plan_id: str | None = None,
        *,
        preserve_roles: Iterable[str] = (),
    ) -> CompactionPlan:
        """Plan on the current ledger and register the plan (with its policy version and the
        IDs it may compact) as the conversation's active plan, superseding any older one,
        across processes. An older plan that ended without any record gets
        `failed`/`abandoned`. A conversation no turn was ever written to gets the empty
        plan (revision 0) and nothing is registered: no plan, no record."""
        ...

    def begin_compaction(
        self,
        conversation_id: str,
        keep_tail: int,
        policy_version: str,
        *,
        preserve_roles: Iterable[str] = (),
        min_new_turns: int = 1,
        only_due_at_once: bool = False,
        plan_id: str | None = None,
    ) -> CompactionWork:
        """Plan and, when at least `min_new_turns` compactable turns are not covered by the
        current summary (or something is due at once: a rebase when coverage would shrink,
        the rest of a backlog being folded, SPEC §15.8), register the plan and return the
        work: the summary it may extend, that summary's stored source digests and the
        uncovered turns. Otherwise register nothing (status ``not-due`` or
        ``nothing-to-compact``). Cost follows the uncovered turns and the tail, not the
        ledger.

        `only_due_at_once=True` (what `Compactor` asks below `trigger_tokens`) registers a
        plan only when something is due at once, whatever `min_new_turns`; a store may
        answer it without planning when nothing is. Added after v1.1: `Compactor` asks a
        store without it nothing below the trigger (its v1.1 behaviour, ``not-due``)."""
        ...

    def consecutive_failures(self, conversation_id: str) -> int:
        """`failed` records since the conversation's newest accepted summary, answered
        without reading the whole history."""
        ...

    def prune_versions(
        self,
        conversation_id: str | None = None,
        keep: int = 4,
        older_than: float | None = None,
    ) -> int:
        """Delete non-current summary records beyond the newest `keep` (and, with
        `older_than` seconds, only older ones) with their text and index; returns how many."""
        ...

    def commit_summary(self, envelope: SummaryEnvelope | None) -> SummaryWrite:
        """Save a result in one transaction: accepted only while its plan is the active one
        and its sources are current (then it becomes the current version and the older
        current one `superseded`); a refused result is recorded as `rejected` with the
        reason; `None` returns `invalid-summary` and records nothing."""
        ...

    def record_failure(self, plan_id: str, reason: str) -> None:
        """Record a failed attempt (no result) of a known plan."""
        ...

    def current_summary(self, conversation_id: str) -> SummaryEnvelope | None:
        """The current version, or None when there is none or it went stale."""
        ...

    def summary_history(self, conversation_id: str) -> list[SummaryRecord]:
        """Every attempt, oldest first, with its status and reason."""
        ...

    def sources_of(self, summary_id: str) -> list[Turn]:
        """The cited turns still in the ledger, in source order."""
        ...

    def summaries_citing(self, conversation_id: str, turn_id: str) -> list[str]:
        """IDs of the accepted versions whose sources include the turn, oldest first."""
        ...

    def context(self, conversation_id: str, policy_version: str) -> AssembledContext:
        """SPEC §8 with the conversation's summary, plus `history_boundary`. Must equal
        `assemble_context(load(c), <pointed version>, policy_version, sealed=<its purged
        sources' stored digests>)` except that a version stored as stale is never used and
        that a summary whose sources are all sealed keeps its recorded `through_sequence`."""
        ...

    def purge_through(
        self, conversation_id: str, sequence: int, reason: str, *, force: bool = False
    ) -> HistoryBoundary:
        """Retention: delete the bodies of raw turns with sequence <= `sequence` (protected
        turns only with `force=True`), record and return the boundary. The current summary,
        checked current first, is sealed (SPEC §15.5); other versions citing a purged turn
        are erased."""
        ...

    def apply_retention(
        self,
        conversation_id: str,
        *,
        retain_turns: int | None = None,
        retain_days: float | None = None,
        reason: str = "retention",
        keep_roles: Iterable[str] = (),
    ) -> HistoryBoundary | None:
        """Purge (sealing first) the raw turns beyond the newest `retain_turns` or older than
        `retain_days` that the current summary covers, keeping protected turns and those of
        `keep_roles`; the boundary, or None."""
        ...

    def delete_conversation(self, conversation_id: str) -> None:
        """Erase the conversation's turns, history, summaries, plans and index rows."""
        ...

    def history_boundary(self, conversation_id: str) -> HistoryBoundary | None:
        """The furthest purge boundary (largest purged sequence), or None."""
        ...


@runtime_checkable
class SearchableStore(Store, Protocol):
    """A `Store` with recall (SPEC §16, §17.9; protocol version 2)."""

    def search(
        self, conversation_id: str, query: str, *, limit: int = 5, scope: str = "covered"
    ) -> list[SearchHit]:
        """SPEC §16.5: the live turns matching `query` (scope `covered`: the current
        summary's live sources, or every live turn without one; `all`: every live turn),
        ranked by BM25 over passages, one hit per turn with its best passage, score
        descending then sequence descending, at most `limit` (1..100). Any `str` query is
        valid and never query syntax; an unknown conversation gives []. Retracted, purged
        and erased text is never returned."""
        ...

    def known_ids(self, conversation_id: str, ids: Iterable[str]) -> set[str]:
        """SPEC §17.6: the IDs among `ids` of every turn ever written to the conversation:
        live, retracted or purged (what "already in the ledger" means to an integration).
        Costs O(len(ids)), not O(ledger). Integrations with a v1.1 `Store` (no
        `known_ids`) treat live turns as known and skip, one by one, the IDs an append
        refuses."""
        ...

    def cited_sources(self, summary_id: str) -> list[Turn]:
        """SPEC §16.3: the live turns among the summary's sources whose sequence its text
        cites (`[seq N`; the first number in a bracket), each once, in ascending sequence;
        an unknown `summary_id` raises `InvalidInput`."""
        ...
