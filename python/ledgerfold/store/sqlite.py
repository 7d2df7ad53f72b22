"""`SQLiteStore`: the embedded ledger store (SPEC §9, §12) on the standard library's `sqlite3`.

Durability: WAL with `synchronous=FULL`, so a returned commit survives power loss (the WAL
is fsynced at every commit). Every write is one `BEGIN IMMEDIATE` transaction, which takes
the database's write lock up front: across processes, writes are serialised and a plan or a
commit always sees the newest committed state. Every read of more than one query runs in one
read transaction, so it sees one snapshot.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime, timezone
from types import TracebackType
from typing import Any

from ledgerfold import _validate
from ledgerfold.context import (
    AssembledContext,
    ContextItem,
    HistoryBoundary,
    SummaryItem,
    TurnItem,
    assemble_context,
)
from ledgerfold.errors import DuplicateId, InvalidInput, StoreError
from ledgerfold.model import ROLES, Conversation, Turn
from ledgerfold.plan import CompactionPlan, plan_compaction
from ledgerfold.store.protocol import SummaryRecord
from ledgerfold.store.schema import (
    APPLICATION_ID,
    MIGRATIONS,
    SCHEMA_VERSION,
    TURN_LIVE,
    TURN_PURGED,
    TURN_RETRACTED,
)
from ledgerfold.summary import SummaryEnvelope, SummaryWrite, accept_summary_result

__all__ = ["SQLiteStore"]

_log = logging.getLogger("ledgerfold.store")

_APPEND_KEYS = frozenset({"id", "role", "body", "protected", "protection_reason", "group", "meta"})
_EDIT_KEYS = frozenset({"role", "body", "protected", "protection_reason", "group", "meta"})
_LEGACY_KEYS = frozenset({"id", "role", "body", "provenance", "meta", "group"})
_TURN_COLUMNS = "id, sequence, role, body, protected, protection_reason, grp, meta"
_ITEM_COLUMNS = "id, sequence, role, body, meta"
#: Envelopes kept in memory per store; summaries are immutable, so entries never go stale.
_CACHE_LIMIT = 64


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _statements(script: str) -> Iterator[str]:
    """Split a DDL script into statements (`executescript` would commit the transaction)."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            yield pending
            pending = ""


def _meta_json(meta: Mapping[str, str] | None) -> str | None:
    return None if meta is None else json.dumps(dict(meta), sort_keys=True, ensure_ascii=False)


def _meta_dict(text: str | None) -> dict[str, str] | None:
    if text is None:
        return None
    meta: dict[str, str] = json.loads(text)
    return meta


def _turn_from_row(row: tuple[Any, ...]) -> Turn:
    turn_id, sequence, role, body, protected, reason, group, meta = row
    return Turn(
        turn_id,
        sequence,
        role,
        body,
        protected=bool(protected),
        protection_reason=reason,
        group=group,
        meta=_meta_dict(meta),
    )


def _item_from_row(row: tuple[Any, ...]) -> TurnItem:
    turn_id, sequence, role, body, meta = row
    return TurnItem(turn_id, role, body, sequence, _meta_dict(meta))


@dataclass(frozen=True, slots=True)
class _Version:
    """A stored summary as the store caches it."""

    pk: int
    envelope: SummaryEnvelope
    through_sequence: int


class SQLiteStore:
    """The embedded ledger store: a file path (WAL, `synchronous=FULL`) or `":memory:"`.

    One instance may be shared by threads (every method holds the instance's lock); several
    processes may open the same file. Usable as a context manager; `close()` releases it.
    """

    def __init__(self, path: str | os.PathLike[str] = ":memory:") -> None:
        if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
            raise InvalidInput(
                f"path: must be str or os.PathLike, got {type(path).__name__}",
                field="path",
                problem="wrong-type",
            )
        self._path = os.fspath(path)
        if not isinstance(self._path, str) or not self._path:
            raise InvalidInput("path: must be a non-empty text path", field="path", problem="empty")
        self._lock = threading.RLock()
        self._cache: dict[str, _Version] = {}
        self._conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as err:
            raise StoreError(f"{self._path}: cannot open the database ({err})") from err
        try:
            self._setup(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    # ------------------------------------------------------------------ opening

    def _setup(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("PRAGMA busy_timeout = 30000")
            # Reading the header first: a file that is not SQLite fails here, not halfway.
            application_id = conn.execute("PRAGMA application_id").fetchone()[0]
            foreign_tables = (
                application_id == 0
                and conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' LIMIT 1"
                ).fetchone()
            )
        except sqlite3.DatabaseError as err:
            raise StoreError(f"{self._path}: not an SQLite database ({err})") from err
        # Refuse another application's file before changing anything in it (journal mode).
        if application_id not in (0, APPLICATION_ID):
            raise StoreError(f"{self._path}: an SQLite database of another application")
        if foreign_tables:
            raise StoreError(f"{self._path}: an SQLite database that is not a ledgerfold store")
        try:
            if self._path != ":memory:":
                conn.execute("PRAGMA journal_mode = WAL").fetchone()
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.DatabaseError as err:
            raise StoreError(f"{self._path}: cannot prepare the database ({err})") from err
        try:
            self._migrate(conn)
        except sqlite3.Error as err:
            raise StoreError(f"{self._path}: cannot prepare the database ({err})") from err

    def _migrate(self, conn: sqlite3.Connection) -> None:
        for version, name, ddl in MIGRATIONS:
            conn.execute("BEGIN IMMEDIATE")
            try:
                current = self._schema_version(conn)
                if current >= version:
                    conn.execute("COMMIT")
                    continue
                for statement in _statements(ddl):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    (version, name, _now()),
                )
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version = {version}")
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _schema_version(self, conn: sqlite3.Connection) -> int:
        application_id = conn.execute("PRAGMA application_id").fetchone()[0]
        tables = {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        if application_id != APPLICATION_ID:
            if tables:
                raise StoreError(f"{self._path}: an SQLite database that is not a ledgerfold store")
            return 0
        if "schema_migrations" not in tables:
            raise StoreError(f"{self._path}: a ledgerfold store without its migration table")
        version = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0]
        if version is None:
            return 0
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self._path}: schema version {version} is newer than this ledgerfold "
                f"({SCHEMA_VERSION})"
            )
        return int(version)

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close the connection; later calls raise `StoreError`. Idempotent."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

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
        state = "closed" if self._conn is None else "open"
        return f"SQLiteStore(path={self._path!r}, {state})"

    # ------------------------------------------------------------------ transactions

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError("the store is closed")
        return self._conn

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """One transaction; any failure rolls it back. sqlite errors become `StoreError`."""
        with self._lock:
            conn = self._connection()
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.Error as err:
                raise StoreError(f"cannot start a transaction ({err})") from err
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                self._rollback(conn)
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(f"database failure, nothing was written ({exc})") from exc
                raise

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            # SQLite may already have rolled back (e.g. after SQLITE_FULL); what is on disk
            # is then the state before the transaction.
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")

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
        return self._append(conversation_id, [spec], field_prefix="")[0]

    def append_many(self, conversation_id: str, turns: Iterable[Mapping[str, Any]]) -> list[Turn]:
        """Append turns (mappings with the `append` keywords) all or nothing; one revision."""
        specs: list[Mapping[str, Any]] = []
        for field, spec in _mappings("turns", turns, _APPEND_KEYS):
            for required in ("role", "body"):
                if required not in spec:
                    raise InvalidInput(
                        f"{field}.{required}: missing", field=f"{field}.{required}", problem="empty"
                    )
            specs.append(spec)
        return self._append(conversation_id, specs, field_prefix="turns")

    def import_legacy(
        self, conversation_id: str, records: Iterable[Mapping[str, Any]]
    ) -> list[Turn]:
        """Import legacy records (mappings with optional `id`, `role`, `body`, `provenance`,
        `meta`, `group`) all or nothing. A record without a known role or without provenance
        comes in protected as `unverified-provenance`, so it is never silently compacted; a
        missing or unknown role becomes `user` with `meta["legacy_role"]` = the original
        value (or `"missing"`). Provenance is kept as `meta["provenance"]`."""
        specs: list[Mapping[str, Any]] = []
        for field, record in _mappings("records", records, _LEGACY_KEYS):
            raw_meta = record.get("meta")
            if raw_meta is not None and not isinstance(raw_meta, Mapping):
                raise InvalidInput(
                    f"{field}.meta: must be a mapping", field=f"{field}.meta", problem="wrong-type"
                )
            meta = dict(raw_meta) if raw_meta is not None else {}
            role = record.get("role")
            if role is not None and not isinstance(role, str):
                raise InvalidInput(
                    f"{field}.role: must be str, got {type(role).__name__}",
                    field=f"{field}.role",
                    problem="wrong-type",
                )
            provenance = record.get("provenance")
            if provenance is not None:
                provenance = _validate.text(f"{field}.provenance", provenance, blank_ok=True)
                if provenance.strip():
                    meta["provenance"] = provenance
                else:
                    provenance = None
            verified = True
            if role not in ROLES:
                meta["legacy_role"] = "missing" if role is None else role
                role = "user"
                verified = False
            if provenance is None:
                verified = False
            specs.append(
                {
                    "id": record.get("id"),
                    "role": role,
                    "body": record.get("body", ""),
                    "group": record.get("group"),
                    "meta": meta or None,
                    "protected": not verified,
                    "protection_reason": None if verified else "unverified-provenance",
                }
            )
        turns = self._append(conversation_id, specs, field_prefix="records")
        _log.info(
            "legacy import: conversation=%s turns=%d protected=%d",
            conversation_id,
            len(turns),
            sum(turn.protected for turn in turns),
        )
        return turns

    def _append(
        self, conversation_id: str, specs: list[Mapping[str, Any]], *, field_prefix: str
    ) -> list[Turn]:
        conversation_id = _validate.text("conversation_id", conversation_id)
        # Validate everything the ledger does not decide before touching the database.
        prepared: list[tuple[str, Mapping[str, Any]]] = []
        seen: set[str] = set()
        for index, spec in enumerate(specs):
            prefix = f"{field_prefix}[{index}]." if field_prefix else ""
            turn_id = spec.get("id")
            if turn_id is None:
                turn_id = "t-" + uuid.uuid4().hex
            else:
                turn_id = _validate.text(f"{prefix}id", turn_id)
            if turn_id in seen:
                raise DuplicateId(
                    f"{prefix}id: duplicate turn id {turn_id!r}", id=turn_id, field=f"{prefix}id"
                )
            seen.add(turn_id)
            protected = spec.get("protected", False)
            if not isinstance(protected, bool):
                raise InvalidInput(
                    f"{prefix}protected: must be bool, got {type(protected).__name__}",
                    field=f"{prefix}protected",
                    problem="wrong-type",
                )
            prepared.append((turn_id, spec))
        if not prepared:
            return []
        with self._transaction(write=True) as conn:
            row = conn.execute(
                "SELECT revision, last_sequence FROM conversations WHERE id = ?",
                (conversation_id,),
            ).fetchone()
            revision, last_sequence = row if row is not None else (0, 0)
            turns: list[Turn] = []
            for index, (turn_id, spec) in enumerate(prepared):
                prefix = f"{field_prefix}[{index}]." if field_prefix else ""
                try:
                    turn = Turn(
                        turn_id,
                        last_sequence + 1 + index,
                        spec.get("role"),  # type: ignore[arg-type]  # validated by Turn
                        spec.get("body"),  # type: ignore[arg-type]
                        protected=spec.get("protected", False),
                        protection_reason=spec.get("protection_reason"),
                        group=spec.get("group"),
                        meta=spec.get("meta"),
                    )
                except InvalidInput as err:
                    if not prefix:
                        raise
                    raise InvalidInput(
                        f"{prefix}{err}", field=f"{prefix}{err.field}", problem=err.problem
                    ) from None
                turns.append(turn)
            clash = self._first_existing_id(conn, conversation_id, [t.id for t in turns])
            if clash is not None:
                raise DuplicateId(f"id: turn id {clash!r} already exists", id=clash)
            if row is None:
                conn.execute(
                    "INSERT INTO conversations (id, revision, last_sequence) VALUES (?, 0, 0)",
                    (conversation_id,),
                )
            conn.executemany(
                "INSERT INTO turns (conversation_id, id, sequence, role, body, protected,"
                " protection_reason, grp, meta, digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        conversation_id,
                        t.id,
                        t.sequence,
                        t.role,
                        t.body,
                        int(t.protected),
                        t.protection_reason,
                        t.group,
                        _meta_json(t.meta),
                        t.digest,
                    )
                    for t in turns
                ],
            )
            conn.execute(
                "UPDATE conversations SET revision = ?, last_sequence = ? WHERE id = ?",
                (revision + 1, turns[-1].sequence, conversation_id),
            )
        _log.debug(
            "appended: conversation=%s turns=%d sequences=%d..%d revision=%d",
            conversation_id,
            len(turns),
            turns[0].sequence,
            turns[-1].sequence,
            revision + 1,
        )
        return turns

    @staticmethod
    def _first_existing_id(
        conn: sqlite3.Connection, conversation_id: str, turn_ids: list[str]
    ) -> str | None:
        # Chunked to stay under SQLite's host-parameter limit.
        for start in range(0, len(turn_ids), 500):
            chunk = turn_ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            row = conn.execute(
                f"SELECT id FROM turns WHERE conversation_id = ? AND id IN ({marks}) LIMIT 1",
                (conversation_id, *chunk),
            ).fetchone()
            if row is not None:
                return str(row[0])
        return None

    def _live_turn_row(
        self, conn: sqlite3.Connection, conversation_id: str, turn_id: str
    ) -> tuple[Any, ...]:
        row = conn.execute(
            f"SELECT pk, {_TURN_COLUMNS}, digest FROM turns"
            " WHERE conversation_id = ? AND id = ? AND state = ?",
            (conversation_id, turn_id, TURN_LIVE),
        ).fetchone()
        if row is None:
            raise InvalidInput(
                f"turn_id: no live turn {turn_id!r} in conversation {conversation_id!r}",
                field="turn_id",
                problem="unknown-value",
            )
        return tuple(row)

    def _bump_revision(self, conn: sqlite3.Connection, conversation_id: str) -> int:
        conn.execute(
            "UPDATE conversations SET revision = revision + 1 WHERE id = ?", (conversation_id,)
        )
        revision: int = conn.execute(
            "SELECT revision FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()[0]
        return revision

    @staticmethod
    def _mark_citing_stale(
        conn: sqlite3.Connection,
        conversation_id: str,
        turn_ids_sql: str,
        params: tuple[Any, ...],
        reason: str,
    ) -> int:
        """Mark the accepted versions citing any of the selected turn IDs stale. A later
        `source-missing` overrides an earlier `source-modified`, the order `check_summary`
        reports them in, so the stored reason is what a full check would say."""
        if reason == "source-missing":
            status_filter = (
                "(status IN ('current', 'superseded')"
                " OR (status = 'stale' AND reason != 'source-missing'))"
            )
        else:
            status_filter = "status IN ('current', 'superseded')"
        cursor = conn.execute(
            f"UPDATE summaries SET status = 'stale', reason = ? WHERE conversation_id = ?"
            f" AND {status_filter} AND pk IN (SELECT summary_pk FROM summary_sources"
            f" WHERE turn_id IN ({turn_ids_sql}))",
            (reason, conversation_id, *params),
        )
        return cursor.rowcount

    def edit(self, conversation_id: str, turn_id: str, **changes: Any) -> Turn:
        """Change fields of a live turn (not `id` or `sequence`); new revision; the earlier
        version goes to the history table; citing summaries become stale when it changed."""
        conversation_id = _validate.text("conversation_id", conversation_id)
        turn_id = _validate.text("turn_id", turn_id)
        for key in changes:
            if key not in _EDIT_KEYS:
                problem = "not-allowed" if key in ("id", "sequence") else "unknown-value"
                try:
                    key.encode("utf-8")
                    shown = key
                except UnicodeEncodeError:  # keep the message printable on any stream
                    shown = ascii(key)
                raise InvalidInput(f"{shown}: cannot be edited", field=key, problem=problem)
        with self._transaction(write=True) as conn:
            row = self._live_turn_row(conn, conversation_id, turn_id)
            turn_pk, old_digest = row[0], row[-1]
            old = _turn_from_row(row[1:-1])
            new = old.replace(**changes)
            revision = self._bump_revision(conn, conversation_id)
            conn.execute(
                "INSERT INTO turn_history (turn_pk, replaced_at_revision, role, body, protected,"
                " protection_reason, grp, meta, digest, replaced_at)"
                " SELECT pk, ?, role, body, protected, protection_reason, grp, meta, digest, ?"
                " FROM turns WHERE pk = ?",
                (revision, _now(), turn_pk),
            )
            conn.execute(
                "UPDATE turns SET role = ?, body = ?, protected = ?, protection_reason = ?,"
                " grp = ?, meta = ?, digest = ? WHERE pk = ?",
                (
                    new.role,
                    new.body,
                    int(new.protected),
                    new.protection_reason,
                    new.group,
                    _meta_json(new.meta),
                    new.digest,
                    turn_pk,
                ),
            )
            stale = 0
            if new.digest != bytes(old_digest):
                stale = self._mark_citing_stale(
                    conn, conversation_id, "?", (turn_id,), "source-modified"
                )
        _log.info(
            "edited: conversation=%s turn=%s sequence=%d revision=%d summaries_stale=%d",
            conversation_id,
            turn_id,
            new.sequence,
            revision,
            stale,
        )
        return new

    def retract(self, conversation_id: str, turn_id: str) -> None:
        """Remove a live turn from the ledger view (the row stays); new revision; citing
        summaries become stale (`source-missing`)."""
        conversation_id = _validate.text("conversation_id", conversation_id)
        turn_id = _validate.text("turn_id", turn_id)
        with self._transaction(write=True) as conn:
            row = self._live_turn_row(conn, conversation_id, turn_id)
            conn.execute("UPDATE turns SET state = ? WHERE pk = ?", (TURN_RETRACTED, row[0]))
            revision = self._bump_revision(conn, conversation_id)
            stale = self._mark_citing_stale(
                conn, conversation_id, "?", (turn_id,), "source-missing"
            )
        _log.info(
            "retracted: conversation=%s turn=%s sequence=%d revision=%d summaries_stale=%d",
            conversation_id,
            turn_id,
            row[2],
            revision,
            stale,
        )

    def purge_through(
        self, conversation_id: str, sequence: int, reason: str, *, force: bool = False
    ) -> HistoryBoundary:
        """Retention: delete bodies (and earlier versions) of raw turns with sequence <=
        `sequence`, protected ones only when `force` is True; record the boundary; new
        revision; citing summaries become stale (`source-missing`)."""
        conversation_id = _validate.text("conversation_id", conversation_id)
        sequence = _validate.integer("sequence", sequence, minimum=0)
        reason = _validate.text("reason", reason)
        if not isinstance(force, bool):
            raise InvalidInput("force: must be bool", field="force", problem="wrong-type")
        selected = (
            "SELECT {column} FROM turns WHERE conversation_id = ? AND sequence <= ?"
            " AND state IN ({states}) AND (protected = 0 OR ?)"
        )
        with self._transaction(write=True) as conn:
            if self._conversation_row(conn, conversation_id) is None:
                raise InvalidInput(
                    f"conversation_id: unknown conversation {conversation_id!r}",
                    field="conversation_id",
                    problem="unknown-value",
                )
            params = (conversation_id, sequence, int(force))
            # Only live turns can make a version stale: a retracted one already did.
            stale = self._mark_citing_stale(
                conn,
                conversation_id,
                selected.format(column="id", states=TURN_LIVE),
                params,
                "source-missing",
            )
            both = f"{TURN_LIVE}, {TURN_RETRACTED}"
            conn.execute(
                "DELETE FROM turn_history WHERE turn_pk IN ("
                + selected.format(column="pk", states=both)
                + ")",
                params,
            )
            purged = conn.execute(
                "UPDATE turns SET state = ?, body = '', meta = NULL WHERE pk IN ("
                + selected.format(column="pk", states=both)
                + ")",
                (TURN_PURGED, *params),
            ).rowcount
            revision = self._bump_revision(conn, conversation_id)
            boundary = HistoryBoundary(sequence, reason, _now())
            conn.execute(
                "INSERT INTO history_boundaries (conversation_id, through_sequence, reason,"
                " purged_at) VALUES (?, ?, ?, ?)",
                (conversation_id, boundary.through_sequence, reason, boundary.purged_at),
            )
        _log.info(
            "purged: conversation=%s through_sequence=%d turns=%d force=%s revision=%d"
            " summaries_stale=%d",
            conversation_id,
            sequence,
            purged,
            force,
            revision,
            stale,
        )
        return boundary

    # ------------------------------------------------------------------ ledger reads

    @staticmethod
    def _conversation_row(conn: sqlite3.Connection, conversation_id: str) -> tuple[Any, ...] | None:
        row = conn.execute(
            "SELECT revision, current_summary FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        return None if row is None else tuple(row)

    def _load(self, conn: sqlite3.Connection, conversation_id: str) -> Conversation:
        row = self._conversation_row(conn, conversation_id)
        if row is None:
            return Conversation(conversation_id, 0, ())
        turns = [
            _turn_from_row(turn_row)
            for turn_row in conn.execute(
                f"SELECT {_TURN_COLUMNS} FROM turns"
                " WHERE conversation_id = ? AND state = ? ORDER BY sequence",
                (conversation_id, TURN_LIVE),
            )
        ]
        return Conversation(conversation_id, row[0], turns)

    def load(self, conversation_id: str) -> Conversation:
        """The live ledger; an unknown ID gives an empty conversation at revision 0."""
        conversation_id = _validate.text("conversation_id", conversation_id)
        with self._transaction(write=False) as conn:
            return self._load(conn, conversation_id)

    def conversation_ids(self) -> list[str]:
        """Every conversation with at least one written turn, sorted."""
        with self._transaction(write=False) as conn:
            return [row[0] for row in conn.execute("SELECT id FROM conversations ORDER BY id")]

    # ------------------------------------------------------------------ plans and summaries

    def start_plan(
        self,
        conversation_id: str,
        keep_tail: int,
        policy_version: str,
        plan_id: str | None = None,
    ) -> CompactionPlan:
        """Plan on the current ledger; the plan becomes the active one, superseding older."""
        conversation_id = _validate.text("conversation_id", conversation_id)
        _validate.integer("keep_tail", keep_tail, minimum=1)
        policy_version = _validate.text("policy_version", policy_version)
        plan_id = (
            "plan-" + uuid.uuid4().hex if plan_id is None else _validate.text("plan_id", plan_id)
        )
        with self._transaction(write=True) as conn:
            if conn.execute("SELECT 1 FROM plans WHERE id = ?", (plan_id,)).fetchone():
                raise InvalidInput(
                    f"plan_id: plan {plan_id!r} already exists",
                    field="plan_id",
                    problem="duplicate",
                )
            plan = plan_compaction(self._load(conn, conversation_id), keep_tail, plan_id)
            plan_pk = conn.execute(
                "INSERT INTO plans (id, conversation_id, policy_version, source_revision,"
                " through_sequence, compacted_count, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    plan_id,
                    conversation_id,
                    policy_version,
                    plan.source_revision,
                    plan.through_sequence,
                    len(plan.compacted_ids),
                    _now(),
                ),
            ).lastrowid
            conn.execute(
                "INSERT INTO active_plans (conversation_id, plan_pk) VALUES (?, ?)"
                " ON CONFLICT (conversation_id) DO UPDATE SET plan_pk = excluded.plan_pk",
                (conversation_id, plan_pk),
            )
        _log.info(
            "plan started: conversation=%s plan=%s revision=%d compacted=%d through_sequence=%d",
            conversation_id,
            plan_id,
            plan.source_revision,
            len(plan.compacted_ids),
            plan.through_sequence,
        )
        return plan

    def commit_summary(self, envelope: SummaryEnvelope | None) -> SummaryWrite:
        """One transaction: re-read the ledger, check the active plan (then cleared: a plan
        yields at most one accepted version) and the sources against the plan's policy
        version; write version + source index + kept turns + pointer, or a `rejected` record."""
        if envelope is None:
            return SummaryWrite(False, None, "invalid-summary", None)
        _validate.instance("envelope", envelope, SummaryEnvelope)
        with self._transaction(write=True) as conn:
            if conn.execute("SELECT 1 FROM summaries WHERE id = ?", (envelope.id,)).fetchone():
                raise InvalidInput(
                    f"envelope.id: summary {envelope.id!r} already exists",
                    field="envelope.id",
                    problem="duplicate",
                )
            active = conn.execute(
                "SELECT p.pk, p.id, p.policy_version FROM active_plans a"
                " JOIN plans p ON p.pk = a.plan_pk WHERE a.conversation_id = ?",
                (envelope.conversation_id,),
            ).fetchone()
            conversation = self._load(conn, envelope.conversation_id)
            if active is None:
                write = SummaryWrite(False, envelope, "stale-source", "superseded-plan")
            else:
                write = accept_summary_result(envelope, conversation, active[2], active[1])
            created_at = _now()
            if not write.accepted:
                conn.execute(
                    "INSERT INTO summaries (id, conversation_id, plan_id, status, reason,"
                    " created_at, source_revision, source_fingerprint, policy_version, text,"
                    " source_count, rejected_source_ids)"
                    " VALUES (?, ?, ?, 'rejected', ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        envelope.id,
                        envelope.conversation_id,
                        envelope.plan_id,
                        write.detail,
                        created_at,
                        envelope.source_revision,
                        envelope.source_fingerprint,
                        envelope.policy_version,
                        envelope.text,
                        len(envelope.source_ids),
                        json.dumps(envelope.source_ids, ensure_ascii=False),
                    ),
                )
            else:
                self._write_version(conn, envelope, conversation, created_at)
                conn.execute(
                    "DELETE FROM active_plans WHERE conversation_id = ?",
                    (envelope.conversation_id,),
                )
        if write.accepted:
            _log.info(
                "summary committed: conversation=%s summary=%s plan=%s sources=%d"
                " fingerprint=%s revision=%d",
                envelope.conversation_id,
                envelope.id,
                envelope.plan_id,
                len(envelope.source_ids),
                envelope.source_fingerprint,
                conversation.revision,
            )
        else:
            _log.warning(
                "summary rejected: conversation=%s summary=%s plan=%s reason=%s detail=%s",
                envelope.conversation_id,
                envelope.id,
                envelope.plan_id,
                write.reason,
                write.detail,
            )
        return write

    def _write_version(
        self,
        conn: sqlite3.Connection,
        envelope: SummaryEnvelope,
        conversation: Conversation,
        created_at: str,
    ) -> None:
        sources = [conversation.get(turn_id) for turn_id in envelope.source_ids]
        # accept_summary_result has checked that every source exists, in ledger order.
        through_sequence = max(turn.sequence for turn in sources if turn is not None)
        summary_pk = conn.execute(
            "INSERT INTO summaries (id, conversation_id, plan_id, status, reason, created_at,"
            " source_revision, source_fingerprint, policy_version, text, source_count,"
            " through_sequence) VALUES (?, ?, ?, 'current', NULL, ?, ?, ?, ?, ?, ?, ?)",
            (
                envelope.id,
                envelope.conversation_id,
                envelope.plan_id,
                created_at,
                envelope.source_revision,
                envelope.source_fingerprint,
                envelope.policy_version,
                envelope.text,
                len(envelope.source_ids),
                through_sequence,
            ),
        ).lastrowid
        assert summary_pk is not None
        conn.executemany(
            "INSERT INTO summary_sources (summary_pk, position, turn_id, turn_digest)"
            " VALUES (?, ?, ?, ?)",
            [
                (summary_pk, position, turn.id, turn.digest)
                for position, turn in enumerate(sources)
                if turn is not None
            ],
        )
        source_set = set(envelope.source_ids)
        kept_ids = [
            turn.id
            for turn in conversation.turns
            if turn.sequence < through_sequence and turn.id not in source_set
        ]
        if kept_ids:
            conn.executemany(
                "INSERT INTO summary_kept (summary_pk, turn_pk) SELECT ?, pk FROM turns"
                " WHERE conversation_id = ? AND id = ?",
                [(summary_pk, envelope.conversation_id, turn_id) for turn_id in kept_ids],
            )
        conn.execute(
            "UPDATE summaries SET status = 'superseded' WHERE pk = ("
            " SELECT current_summary FROM conversations WHERE id = ?) AND status = 'current'",
            (envelope.conversation_id,),
        )
        conn.execute(
            "UPDATE conversations SET current_summary = ? WHERE id = ?",
            (summary_pk, envelope.conversation_id),
        )
        self._remember(_Version(summary_pk, envelope, through_sequence))

    def _remember(self, version: _Version) -> None:
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.pop(next(iter(self._cache)))
        self._cache[version.envelope.id] = version

    def mark_stale(self, verdicts: Iterable[tuple[str, str, str]]) -> int:
        """Mark summaries found stale by a deep revalidation: `(conversation_id, summary_id,
        reason)` each, in one transaction. Only versions still `current` change (one that
        changed meanwhile was already handled by eager invalidation). Returns how many."""
        items = [
            (
                _validate.text("reason", reason),
                _validate.text("summary_id", summary_id),
                _validate.text("conversation_id", conversation_id, blank_ok=True, empty_ok=False),
            )
            for conversation_id, summary_id, reason in verdicts
        ]
        if not items:
            return 0
        with self._transaction(write=True) as conn:
            changed = 0
            for reason, summary_id, conversation_id in items:
                changed += conn.execute(
                    "UPDATE summaries SET status = 'stale', reason = ?"
                    " WHERE id = ? AND conversation_id = ? AND status = 'current'",
                    (reason, summary_id, conversation_id),
                ).rowcount
        for reason, summary_id, conversation_id in items:
            _log.info(
                "summary marked stale by revalidation: conversation=%s summary=%s reason=%s",
                conversation_id,
                summary_id,
                reason,
            )
        return changed

    def record_failure(self, plan_id: str, reason: str) -> None:
        """Record a failed attempt of a known plan (no envelope)."""
        plan_id = _validate.text("plan_id", plan_id)
        reason = _validate.text("reason", reason)
        with self._transaction(write=True) as conn:
            row = conn.execute(
                "SELECT conversation_id FROM plans WHERE id = ?", (plan_id,)
            ).fetchone()
            if row is None:
                raise InvalidInput(
                    f"plan_id: unknown plan {plan_id!r}", field="plan_id", problem="unknown-value"
                )
            conn.execute(
                "INSERT INTO summaries (conversation_id, plan_id, status, reason, created_at)"
                " VALUES (?, ?, 'failed', ?, ?)",
                (row[0], plan_id, reason, _now()),
            )
        _log.warning("summary failed: conversation=%s plan=%s", row[0], plan_id)

    _SUMMARY_COLUMNS = (
        "pk, id, conversation_id, plan_id, status, reason, created_at, source_revision,"
        " source_fingerprint, policy_version, text, through_sequence, rejected_source_ids"
    )

    def _version(self, conn: sqlite3.Connection, row: tuple[Any, ...]) -> _Version:
        """The envelope of a summary row (cached; never for `failed` rows)."""
        summary_id = row[1]
        cached = self._cache.get(summary_id)
        if cached is not None:
            return cached
        if row[12] is not None:
            source_ids = tuple(json.loads(row[12]))
        else:
            source_ids = tuple(
                r[0]
                for r in conn.execute(
                    "SELECT turn_id FROM summary_sources WHERE summary_pk = ? ORDER BY position",
                    (row[0],),
                )
            )
        envelope = SummaryEnvelope(
            id=summary_id,
            plan_id=row[3],
            conversation_id=row[2],
            source_revision=row[7],
            source_ids=source_ids,
            source_fingerprint=row[8],
            policy_version=row[9],
            text=row[10],
        )
        version = _Version(row[0], envelope, row[11] if row[11] is not None else 0)
        self._remember(version)
        return version

    def _pointed(
        self, conn: sqlite3.Connection, conversation_id: str
    ) -> tuple[_Version, str, str | None] | None:
        """The version the conversation's pointer designates, its status and reason."""
        row = conn.execute(
            f"SELECT {self._SUMMARY_COLUMNS} FROM summaries"
            " WHERE pk = (SELECT current_summary FROM conversations WHERE id = ?)",
            (conversation_id,),
        ).fetchone()
        if row is None:
            return None
        return self._version(conn, tuple(row)), row[4], row[5]

    def current_summary(self, conversation_id: str) -> SummaryEnvelope | None:
        """The current version, or None when there is none or it went stale."""
        conversation_id = _validate.text("conversation_id", conversation_id)
        with self._transaction(write=False) as conn:
            pointed = self._pointed(conn, conversation_id)
        if pointed is None or pointed[1] != "current":
            return None
        return pointed[0].envelope

    def summary_history(self, conversation_id: str) -> list[SummaryRecord]:
        """Every attempt of the conversation, oldest first."""
        conversation_id = _validate.text("conversation_id", conversation_id)
        with self._transaction(write=False) as conn:
            rows = conn.execute(
                f"SELECT {self._SUMMARY_COLUMNS} FROM summaries WHERE conversation_id = ?"
                " ORDER BY pk",
                (conversation_id,),
            ).fetchall()
            return [
                SummaryRecord(
                    envelope=None if row[1] is None else self._version(conn, tuple(row)).envelope,
                    status=row[4],
                    reason=row[5],
                    created_at=row[6],
                    plan_id=row[3],
                )
                for row in rows
            ]

    def sources_of(self, summary_id: str) -> list[Turn]:
        """The cited turns still in the ledger, in source order."""
        summary_id = _validate.text("summary_id", summary_id)
        with self._transaction(write=False) as conn:
            row = conn.execute(
                f"SELECT {self._SUMMARY_COLUMNS} FROM summaries WHERE id = ?", (summary_id,)
            ).fetchone()
            if row is None:
                raise InvalidInput(
                    f"summary_id: unknown summary {summary_id!r}",
                    field="summary_id",
                    problem="unknown-value",
                )
            envelope = self._version(conn, tuple(row)).envelope
            conversation = self._load(conn, envelope.conversation_id)
        return [turn for turn in map(conversation.get, envelope.source_ids) if turn is not None]

    def summaries_citing(self, conversation_id: str, turn_id: str) -> list[str]:
        """IDs of the accepted versions whose sources include the turn, oldest first."""
        conversation_id = _validate.text("conversation_id", conversation_id)
        turn_id = _validate.text("turn_id", turn_id)
        with self._transaction(write=False) as conn:
            return [
                row[0]
                for row in conn.execute(
                    "SELECT s.id FROM summaries s WHERE s.conversation_id = ? AND s.pk IN"
                    " (SELECT summary_pk FROM summary_sources WHERE turn_id = ?) ORDER BY s.pk",
                    (conversation_id, turn_id),
                )
            ]

    # ------------------------------------------------------------------ context

    def context(self, conversation_id: str, policy_version: str) -> AssembledContext:
        """SPEC §8 with the conversation's summary, plus `history_boundary`.

        Fast path (the summary is current in the database and of this policy): the summary's
        sources are neither loaded nor hashed. Eager invalidation keeps the stored status
        honest; deep re-hashing is batch revalidation's job. Otherwise the whole ledger is
        loaded and `assemble_context` decides.
        """
        conversation_id = _validate.text("conversation_id", conversation_id)
        policy_version = _validate.text("policy_version", policy_version)
        with self._transaction(write=False) as conn:
            boundary = self._boundary(conn, conversation_id)
            pointed = self._pointed(conn, conversation_id)
            if pointed is not None:
                version, status, reason = pointed
                envelope = version.envelope
                if (
                    status == "current"
                    and envelope.policy_version == policy_version
                    and not conn.execute(
                        "SELECT 1 FROM turns WHERE conversation_id = ? AND id = ? AND state = ?",
                        (conversation_id, envelope.id, TURN_LIVE),
                    ).fetchone()
                ):
                    return AssembledContext(
                        self._summarised_items(conn, conversation_id, version), None, boundary
                    )
            conversation = self._load(conn, conversation_id)
        if pointed is None:
            assembled = assemble_context(conversation, None, policy_version)
        else:
            assembled = assemble_context(conversation, envelope, policy_version)
            if status == "stale" and assembled.fallback is None:
                # The sources were edited back to their old values; a stale version stays
                # stale (its record says so), so the context stays raw.
                raw = assemble_context(conversation, None, policy_version)
                assembled = AssembledContext(raw.items, f"stale-summary:{reason}")
        if assembled.fallback is not None:
            _log.info(
                "context fallback: conversation=%s fallback=%s id=%s turns=%d",
                conversation_id,
                assembled.fallback,
                assembled.fallback_id,
                len(assembled.items),
            )
        return AssembledContext(
            assembled.items, assembled.fallback, boundary, assembled.fallback_id
        )

    def _summarised_items(
        self, conn: sqlite3.Connection, conversation_id: str, version: _Version
    ) -> tuple[ContextItem, ...]:
        envelope = version.envelope
        kept = conn.execute(
            f"SELECT {', '.join('t.' + c.strip() for c in _ITEM_COLUMNS.split(','))}"
            " FROM summary_kept k JOIN turns t ON t.pk = k.turn_pk"
            " WHERE k.summary_pk = ? AND t.state = ? ORDER BY t.sequence",
            (version.pk, TURN_LIVE),
        )
        items: list[ContextItem] = [_item_from_row(row) for row in kept]
        items.append(
            SummaryItem(envelope.id, envelope.text, version.through_sequence, envelope.source_ids)
        )
        tail = conn.execute(
            f"SELECT {_ITEM_COLUMNS} FROM turns"
            " WHERE conversation_id = ? AND sequence > ? AND state = ? ORDER BY sequence",
            (conversation_id, version.through_sequence, TURN_LIVE),
        )
        items.extend(_item_from_row(row) for row in tail)
        return tuple(items)

    # ------------------------------------------------------------------ retention

    @staticmethod
    def _boundary(conn: sqlite3.Connection, conversation_id: str) -> HistoryBoundary | None:
        row = conn.execute(
            "SELECT through_sequence, reason, purged_at FROM history_boundaries"
            # The furthest boundary: a later, smaller purge does not bring history back.
            " WHERE conversation_id = ? ORDER BY through_sequence DESC, pk DESC LIMIT 1",
            (conversation_id,),
        ).fetchone()
        return None if row is None else HistoryBoundary(row[0], row[1], row[2])

    def history_boundary(self, conversation_id: str) -> HistoryBoundary | None:
        """The furthest purge boundary of the conversation (the largest purged sequence, with
        the reason and time of the purge that reached it), or None."""
        conversation_id = _validate.text("conversation_id", conversation_id)
        with self._transaction(write=False) as conn:
            return self._boundary(conn, conversation_id)


def _mappings(
    name: str, items: object, allowed: frozenset[str] | set[str]
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """`(field, mapping)` for each item of an iterable of mappings with only `allowed` keys;
    anything else is `InvalidInput` naming `name[index]`."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise InvalidInput(
            f"{name}: must be an iterable of mappings", field=name, problem="wrong-type"
        )
    for index, item in enumerate(items):
        field = f"{name}[{index}]"
        if not isinstance(item, Mapping):
            raise InvalidInput(
                f"{field}: must be a mapping, got {type(item).__name__}",
                field=field,
                problem="wrong-type",
            )
        unknown = sorted(str(key) for key in item if key not in allowed)
        if unknown:
            raise InvalidInput(
                f"{field}: unknown keys {unknown}", field=field, problem="not-allowed"
            )
        yield field, item
