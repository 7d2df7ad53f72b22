"""`SQLiteStore`: the embedded ledger store (SPEC §9, §12) on the standard library's `sqlite3`.

This module holds the public methods and their docstrings, the store's lifecycle and its
transaction. Whole groups of methods delegate to components given the store's transaction
(argument checks, one transaction per call, logging): `ledger_reads.LedgerReads` (the
ledger's reads, search), `turn_writes.TurnWrites` (appends, edits),
`summary_methods.SummaryVersions` (commits, stale marks, digest repairs, version reads),
`loop_methods.CompactionLoop` (planning, pruning) and `retention_methods.Retention`
(retraction, purges, deletion). The work inside a transaction lives beside it: `database`
(opening, migrations, transactions), `rows` (columns <-> values), `ledger` (turn rows),
`summaries` and `summary_reads` (versions), `context_read` (the context) and `legacy` (the
import policy for old records).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from ledgerfold import _validate, _worker
from ledgerfold._context import AssembledContext, HistoryBoundary
from ledgerfold._events import EventHook
from ledgerfold._model import Conversation, Turn
from ledgerfold._plan import CompactionPlan
from ledgerfold._search_hit import SearchHit
from ledgerfold._summary import SummaryEnvelope, SummaryWrite
from ledgerfold.adapters._chat import chat_turn_specs
from ledgerfold.adapters._chat_objects import ChatMessage
from ledgerfold.store import _context_read as context_read
from ledgerfold.store import _group_commit as group_commit
from ledgerfold.store import _search_repair as search_repair
from ledgerfold.store import _summaries as summaries
from ledgerfold.store import _wal_recovery as wal_recovery
from ledgerfold.store._context_cache import ContextCache
from ledgerfold.store._database import BatchEnd, Database, durability_arg
from ledgerfold.store._ledger_reads import LedgerReads
from ledgerfold.store._loop_methods import CompactionLoop
from ledgerfold.store._paths import database_path
from ledgerfold.store._protocol import CompactionWork, SummaryRecord
from ledgerfold.store._retention_methods import Retention
from ledgerfold.store._stats import StoreStats
from ledgerfold.store._summary_methods import SummaryVersions
from ledgerfold.store._turn_writes import TurnWrites

__all__ = ["SQLiteStore"]


@_worker.batching
class SQLiteStore:
    """The embedded ledger store: a file path (WAL) or `":memory:"`.

    `durability="full"` (the default) fsyncs every commit, so a returned write survives
    power loss. `durability="normal"` (WAL with `synchronous=NORMAL`, the usual choice on
    phones) fsyncs at checkpoints only: a returned write survives the app crashing or being
    killed, the file is never corrupted, but the last commits may be lost if the device
    loses power. One instance may be shared by threads (every method holds the instance's
    lock); several processes may open the same file. Usable as a context manager.

    `read_only=True` opens an existing ledgerfold file for reading only (SQLite's
    `mode=ro`): nothing is created, migrated or written, not even a journal, so it works in
    a directory the process cannot write; a missing, empty or outdated file is a
    `StoreError`, as is a WAL holding frames without its `-shm` where the process may not
    create one (such a directory, or beside a file it may not write), and every write
    method raises `StoreError`. Without it, a file the process may not write is a
    `StoreError` (nothing is created beside it). Where the process may not write the file
    or its directory, a file without a live writer is read as it is at the open (SQLite's
    `immutable`): reopen it to see later commits.

    `on_event` (optional) receives an `Event` after each write that an operator wants to
    know of (SPEC §17.8): summaries marked stale by an edit or retraction, purges,
    erasures and deleted conversations — IDs and counts, never text. It runs after the
    transaction has committed, outside the store's lock; a hook that raises is logged.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        durability: str = "full",
        read_only: bool = False,
        on_event: EventHook | None = None,
    ) -> None:
        _validate.hook("on_event", on_event)
        self._on_event = on_event
        self._path = database_path(path)
        self._cache = summaries.VersionCache()
        self._contexts = ContextCache()
        self._db = Database(self._path, durability_arg(durability), read_only=read_only)
        wal_recovery.checkpoint_leftover(self._db)  # a killed erasure's old pages
        self._loop = CompactionLoop(self._transaction, self._cache, self._db, self._contexts)
        self._writes = TurnWrites(self._transaction, on_event, self._contexts)
        self._retention = Retention(
            self._transaction, self._db, self._cache, on_event, self._contexts
        )
        self._versions = SummaryVersions(self._transaction, self._cache, on_event)
        self._reads = LedgerReads(self._transaction)

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close the connection; later calls raise `StoreError`. Idempotent. The store's
        worker thread (async entry points, SPEC §17.6) finishes its queued calls first."""
        _worker.close_worker(self)
        with self._db.lock:
            self._contexts.clear()
        self._db.close()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._db.closed else "open"
        durability = "" if self._db.durability == "full" else ", durability='normal'"
        mode = ", read_only=True" if self._db.read_only else ""
        return f"SQLiteStore(path={self._path!r}{durability}{mode}, {state})"

    @property
    def _worker_closed(self) -> bool:  # for its worker: a closed store keeps no thread
        return self._db.closed

    @contextmanager
    def _worker_batch(self) -> Iterator[BatchEnd | None]:
        """What the store's worker runs a batch of queued jobs in: one group commit
        (`_group_commit`). If it fails, none of the writes it covered is kept (`BatchEnd`
        tells which, when a job committed it early): what the caches learnt all goes."""
        try:
            with group_commit.batch(self._db) as end:
                yield end
        except BaseException:
            with self._db.lock:
                self._contexts.clear()
                self._cache.clear()
            raise

    def _connection(self) -> sqlite3.Connection:
        """The underlying connection, for tests and tools that need SQLite itself."""
        return self._db.connection()

    @contextmanager
    def _transaction(
        self, *, write: bool, operation: str, scope: str | None = None
    ) -> Iterator[sqlite3.Connection]:
        """One transaction of the database, for the method named `operation` (what a
        failure names); versions it staged reach the cache only once it has committed.
        A write with `scope` changes rows of that one conversation only: the contexts of
        the others stay cached (`_context_cache`); any other write empties that cache."""
        with self._db.lock:
            db = self._db
            scoped: sqlite3.Connection | None = None
            before, control, committed = 0, 0, False
            try:
                with db.transaction(write=write, operation=operation) as conn:
                    if write and scope is None:
                        self._contexts.clear()
                    elif write:
                        scoped, before, control = conn, conn.total_changes, db.control_changes
                    yield conn
                committed = True
            except BaseException:
                self._cache.discard()
                raise
            finally:
                # Counted after COMMIT (or ROLLBACK), less what COMMIT itself wrote.
                if scoped is not None and scope is not None:
                    self._contexts.scoped_write(
                        self._contexts.stamp(scoped, db.control_changes),
                        scope,
                        scoped.total_changes - before - (db.control_changes - control),
                        committed=committed,
                    )
            self._cache.publish()

    # ------------------------------------------------------------------ ledger writes

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
        """Append one turn at the next sequence; new revision."""
        spec = {
            "id": id,
            "role": role,
            "body": body,
            "protected": protected,
            "protection_reason": protection_reason,
            "group": group,
            "meta": meta,
        }
        return self._writes.append(conversation_id, [spec], field_prefix="")[0]

    def append_many(self, conversation_id: str, turns: Iterable[Mapping[str, Any]]) -> list[Turn]:
        """Append turns all or nothing, one revision: mappings with the `append` keywords
        and an optional `sequence` (which must exceed every sequence written before), or
        `Turn` values, whose fields but `sequence` are taken (the ledger assigns the next)."""
        return self._writes.append_many(conversation_id, turns)

    def append_chat_messages(
        self, conversation_id: str, messages: Iterable[ChatMessage]
    ) -> list[Turn]:
        """Append OpenAI-style chat messages all or nothing; one revision (SPEC §15.6).

        Converted as `from_chat_messages` converts them (a message is a mapping or an SDK's
        message object, such as `response.choices[0].message`); each turn's ID is the
        message's `id` when present, else a fresh unique ID. A tool result joins its call's
        group even when the call was appended by an earlier call (looked up in the same
        transaction). A call ID made again (a model numbering its calls `call_0`, … in every
        response) is a new call: its results are the ones after it (SPEC §17.2's pairing)."""
        return self._writes.append_chat(conversation_id, chat_turn_specs(messages))

    def import_legacy(
        self, conversation_id: str, records: Iterable[Mapping[str, Any]]
    ) -> list[Turn]:
        """Import legacy records (mappings with optional `id`, `role`, `body`, `provenance`,
        `meta`, `group`) all or nothing. A record without a known role or without provenance
        comes in protected as `unverified-provenance`, so it is never silently compacted; a
        missing or unknown role becomes `user` with `meta["legacy_role"]` = the original
        value (or `"missing"`). Provenance is kept as `meta["provenance"]`."""
        return self._writes.import_legacy(conversation_id, records)

    def edit(self, conversation_id: str, turn_id: str, **changes: Any) -> Turn:
        """Change fields of a live turn (not `id` or `sequence`); new revision; the earlier
        version goes to the history table; citing summaries become stale when it changed."""
        return self._writes.edit(conversation_id, turn_id, changes)

    # ------------------------------------------------------------------ ledger reads

    def load(self, conversation_id: str) -> Conversation:
        """The live ledger; an unknown ID gives an empty conversation at revision 0."""
        return self._reads.load(conversation_id)

    def get_turns(self, conversation_id: str, turn_ids: Iterable[str]) -> list[Turn]:
        """The live turns with these IDs, in sequence order; IDs not in the ledger view are
        left out. Reads only those turns, not the whole conversation."""
        return self._reads.get_turns(conversation_id, turn_ids)

    def known_ids(self, conversation_id: str, ids: Iterable[str]) -> set[str]:
        """The IDs among `ids` of turns ever written to the conversation: live, retracted
        or purged (SPEC §17.6: what "already in the ledger" means to an integration). One
        indexed query; costs O(len(ids)), not O(ledger). A deleted conversation knows none."""
        return self._reads.known_ids(conversation_id, ids)

    def stats(self, conversation_id: str | None = None) -> StoreStats:
        """The counts an operator asks for (SPEC §17.8), for the store or one conversation:
        conversations, live/retracted/purged turns, summary records by status, conversations
        whose context falls back by reason, purged conversations without a current summary.
        Reads only (also on a read-only store)."""
        return self._reads.stats(conversation_id)

    def conversation_ids(self) -> list[str]:
        """Every conversation with at least one written turn, sorted."""
        return self._reads.conversation_ids()

    def search(
        self, conversation_id: str, query: str, *, limit: int = 5, scope: str = "covered"
    ) -> list[SearchHit]:
        """Turns whose text matches `query`, best first (SPEC §16.1, §16.5): BM25 over
        passages, one hit per turn with its best passage, ties by newer sequence.
        `scope="covered"` searches the live turns the current summary covers (every live
        turn when there is none), `"all"` every live turn. The query is never query syntax:
        any `str` is valid (blank or punctuation-only gives []); `limit` is 1..100; an
        unknown conversation gives []. `StoreError` when the database has no index yet
        (an older file opened read-only) or SQLite lacks FTS5."""
        return self._reads.search(conversation_id, query, limit=limit, scope=scope)

    def check_search_index(self) -> list[str]:
        """The search index's problems, as codes (none when it is sound): `corrupt` (FTS5's
        integrity-check fails, or a search misses what it holds), `too-deep`, `not-built`,
        `missing`, `removed-turns-indexed`, `live-turns-missing`, `stale-turns` (indexed from
        a body it no longer holds, or damaged bounds), `no-fts5`. Writes nothing, but needs a
        store open for writing (FTS5 runs its check as a write)."""
        return search_repair.check_store(self._transaction)

    def rebuild_search_index(self) -> int:
        """Make the search index again from the live turns, however damaged it was (its
        table is dropped and made anew); the ledger is not written. Batches commit as they
        go (search raises `StoreError` until the last; an interrupted rebuild goes on at
        the next open for writing). Returns how many turns the index holds."""
        return search_repair.rebuild_store(self._transaction, self._db)

    # ------------------------------------------------------------------ plans and summaries

    def commit_summary(self, envelope: SummaryEnvelope | None) -> SummaryWrite:
        """One transaction: re-read the ledger, check the active plan (then cleared: a plan
        yields at most one accepted version) and the sources against the plan's policy
        version; write version + source index + kept turns + pointer, or a `rejected` record."""
        return self._versions.commit_summary(envelope)

    def mark_stale(self, verdicts: Iterable[tuple[str, str, str]]) -> int:
        """Mark summaries found stale by a deep revalidation: `(conversation_id, summary_id,
        reason)` each, in one transaction. Only versions still `current` change (one that
        changed meanwhile was already handled by eager invalidation). Returns how many."""
        return self._versions.mark_stale(verdicts)

    def repair_digests(self, turns: Iterable[tuple[str, str]]) -> int:
        """Recompute the stored digest of each `(conversation_id, turn_id)` whose digest no
        longer matches its bytes (found by a deep revalidation: a body or a digest changed
        behind the library's back), in one transaction: every version citing it goes stale,
        but one whose source index recorded the recomputed digest (made from these very
        bytes), and its conversation gets a new revision. A turn no longer live, or already
        right, is left alone. Returns how many were repaired."""
        return self._versions.repair_digests(turns)

    def record_failure(self, plan_id: str, reason: str) -> None:
        """Record a failed attempt of a known plan (no envelope)."""
        self._versions.record_failure(plan_id, reason)

    def current_summary(self, conversation_id: str) -> SummaryEnvelope | None:
        """The current version, or None when there is none or it went stale."""
        return self._versions.current_summary(conversation_id)

    def summary_history(self, conversation_id: str) -> list[SummaryRecord]:
        """Every attempt of the conversation, oldest first."""
        return self._versions.summary_history(conversation_id)

    def sources_of(self, summary_id: str) -> list[Turn]:
        """The cited turns still in the ledger, in source order."""
        return self._versions.sources_of(summary_id)

    def cited_sources(self, summary_id: str) -> list[Turn]:
        """SPEC §16.3: the live turns among the summary's sources whose sequence its text
        cites (`[seq N`), each once, in ascending sequence (see `ledgerfold.citations`).
        An unknown `summary_id` raises `InvalidInput`."""
        return self._versions.cited_sources(summary_id)

    def summaries_citing(self, conversation_id: str, turn_id: str) -> list[str]:
        """IDs of the accepted versions whose sources include the turn, oldest first."""
        return self._versions.summaries_citing(conversation_id, turn_id)

    # ------------------------------------------------------------------ the agent loop

    def start_plan(
        self,
        conversation_id: str,
        keep_tail: int,
        policy_version: str,
        plan_id: str | None = None,
        *,
        preserve_roles: Iterable[str] = (),
    ) -> CompactionPlan:
        """Plan on the current ledger; the plan becomes the active one, superseding older
        (an older plan that ended without any record gets `failed`/`abandoned`)."""
        return self._loop.start_plan(
            conversation_id, keep_tail, policy_version, plan_id, preserve_roles=preserve_roles
        )

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
        """One transaction for the start of a compaction (what `Compactor` calls): plan on
        the current ledger and, when at least `min_new_turns` compactable turns are not yet
        covered by the current summary (or something is due at once: a rebase when coverage
        would shrink, the rest of a backlog, a layout that lost a preserved turn), register
        the plan and return it with the summary it may extend, that summary's stored source
        digests and the uncovered turns. Otherwise nothing is registered (`status`
        ``not-due`` or ``nothing-to-compact``). `only_due_at_once=True` (what `Compactor`
        asks below `trigger_tokens`) registers a plan only when something is due at once,
        whatever `min_new_turns`, answering from the current summary alone when nothing is."""
        return self._loop.begin_compaction(
            conversation_id,
            keep_tail,
            policy_version,
            preserve_roles=preserve_roles,
            min_new_turns=min_new_turns,
            only_due_at_once=only_due_at_once,
            plan_id=plan_id,
        )

    def consecutive_failures(self, conversation_id: str) -> int:
        """`failed` records since the conversation's newest accepted summary (the
        compactor's back-off counts them)."""
        return self._loop.consecutive_failures(conversation_id)

    def prune_versions(
        self,
        conversation_id: str | None = None,
        keep: int = 4,
        older_than: float | None = None,
        *,
        keep_checkpoints: int = 8,
    ) -> int:
        """Delete summary records (any status) other than the current one beyond the newest
        `keep` of each conversation (or of `conversation_id`), with their text and source
        index; the `failed` records since the newest accepted summary are kept too (the
        back-off counts them), and so are up to `keep_checkpoints` spaced ancestors of the
        current summary and the sealed base (SPEC §17.5); with `older_than` (seconds), only
        records older than that. Returns how many records were deleted; `pruned_count`
        keeps the tally."""
        return self._loop.prune_versions(
            conversation_id, keep, older_than, keep_checkpoints=keep_checkpoints
        )

    def pruned_count(self, conversation_id: str) -> int:
        """How many summary records of the conversation pruning has deleted."""
        return self._loop.pruned_count(conversation_id)

    # ------------------------------------------------------------------ context

    def context(self, conversation_id: str, policy_version: str) -> AssembledContext:
        """SPEC §8 with the conversation's summary, plus `history_boundary`.

        Fast path (the summary is current in the database and of this policy): the summary's
        sources are neither loaded nor hashed. Eager invalidation keeps the stored status
        honest; deep re-hashing is batch revalidation's job. Otherwise the whole ledger is
        loaded and `assemble_context` decides.
        """
        conversation_id = _validate.identifier("conversation_id", conversation_id)
        policy_version = _validate.text("policy_version", policy_version)
        with self._db.lock:
            # A context assembled since the last change that could alter it (see
            # `_context_cache`) is served again, and logged as a new one would be.
            stamp = self._contexts.stamp(self._db.connection(), self._db.control_changes)
            cached = self._contexts.get(stamp, conversation_id, policy_version)
            if cached is not None:
                context_read.log_fallback(conversation_id, cached)
                return cached
            assembled = context_read.assemble(
                self._transaction, self._cache, conversation_id, policy_version
            )
            self._contexts.put(stamp, conversation_id, policy_version, assembled)
            return assembled

    # ------------------------------------------------------------------ retention

    def retract(self, conversation_id: str, turn_id: str, *, erase: bool = False) -> None:
        """Remove a live turn from the ledger view (the row stays); new revision; citing
        summaries become stale (`source-missing`). A turn that made tool calls takes the
        live tool turns answering them along, in the same revision (SPEC §17.2). With
        `erase=True` its body, meta, digest and earlier versions are erased too, overwritten
        in the file (ID and sequence stay), with every summary version citing it (its text
        may quote the turn), and so are those of the results retracted with it (a result
        quotes what its call fetched); a turn retracted earlier can be erased this way
        later (only that turn then), and a purged one (the versions citing it, sealed too)."""
        self._retention.retract(conversation_id, turn_id, erase=erase)

    def purge_through(
        self,
        conversation_id: str,
        sequence: int,
        reason: str,
        *,
        force: bool = False,
        keep_roles: Iterable[str] = ("system",),
    ) -> HistoryBoundary:
        """Retention: delete bodies (and earlier versions) of raw turns with sequence <=
        `sequence`, protected ones and those of `keep_roles` (the policy's `preserve_roles`;
        default: the system prompt) only when `force` is True; record the boundary; new
        revision (neither when no turn goes: SPEC §8's `history_boundary` stays None). The
        current summary, checked current first, is sealed: it stays in the context, its
        purged sources checked by their stored digests (SPEC §15.5). Every other
        summary version citing a purged turn is erased (counted by `pruned_count`). Erased
        bytes are overwritten in the file and the WAL is checkpointed. The boundary records
        at most the last sequence written and, without `force`, stops before a compaction
        unit the purge would split and before an unanswered tool call (SPEC §17.2: so no
        tool result is ever left raw without its call), and before a `keep_roles` turn the
        sealed summary covers: its `through_sequence` says where the purge went."""
        return self._retention.purge_through(
            conversation_id, sequence, reason, force=force, keep_roles=keep_roles
        )

    def apply_retention(
        self,
        conversation_id: str,
        *,
        retain_turns: int | None = None,
        retain_days: float | None = None,
        reason: str = "retention",
        keep_roles: Iterable[str] = (),
    ) -> HistoryBoundary | None:
        """Purge (sealing first) the raw turns beyond the newest `retain_turns` or written
        more than `retain_days` ago, but only those the current summary covers: without a
        current summary nothing is purged, and a turn it keeps raw (preserved, protected,
        an open tool call) stays. Turns of `keep_roles` are kept (the Compactor passes its
        policy's `preserve_roles`, so the system prompt stays raw in the context). Returns
        the boundary,
        or None when nothing was due. (The Compactor calls this after an accepted summary
        when its policy states a retention.)"""
        return self._retention.apply_retention(
            conversation_id,
            retain_turns=retain_turns,
            retain_days=retain_days,
            reason=reason,
            keep_roles=keep_roles,
        )

    def preview_purge(
        self,
        conversation_id: str,
        sequence: int,
        *,
        force: bool = False,
        keep_roles: Iterable[str] = ("system",),
    ) -> dict[str, Any]:
        """What `purge_through` would do, nothing written: `turns` (how many would go, with
        `first_sequence`/`last_purged_sequence`), `protected_kept`, `roles_kept` (turns of
        `keep_roles` that stay), `sealed_summary` (the ID
        of the summary that would be sealed, or None), `versions_erased`, `last_sequence`,
        and `unsummarised`: live turns that would go without being a source of the sealed
        summary, so what they said would leave the context for good."""
        return self._retention.preview_purge(
            conversation_id, sequence, force=force, keep_roles=keep_roles
        )

    def delete_conversation(self, conversation_id: str) -> None:
        """Erase the conversation: its turns, turn history, summaries, plans, index rows and
        purge boundaries, overwritten in the file (the WAL is checkpointed). An unknown ID
        is not an error."""
        self._retention.delete_conversation(conversation_id)

    def vacuum(self) -> None:
        """Rewrite the database file so that nothing of erased or purged text is left in it
        (SQLite's `VACUUM`, then a checkpoint). The erasing calls overwrite what they delete,
        but an older copy of a row can remain in the unused space of a page in use (which
        `secure_delete` does not clear); only a rewrite removes it. Takes time and free disk
        space in proportion to the file; raises `StoreError` (nothing changed) when it
        cannot. A reader holding an older snapshot delays the rewrite reaching the file (as
        after any erasure: logged, retried after the next write and at `close()`)."""
        self._db.vacuum()

    def history_boundary(self, conversation_id: str) -> HistoryBoundary | None:
        """The furthest purge boundary of the conversation (the largest purged sequence, with
        the reason and time of the purge that reached it), or None."""
        return self._reads.history_boundary(conversation_id)
