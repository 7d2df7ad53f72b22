"""Helpers of the bad-input table (`bad_input_table.py`): the row type, fixtures that build
the values a row needs, and the `(exception, code)` pairs the rows expect."""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ledgerfold as lf

SECRET_BODY = "BODY-SECRET-\u2028-7f3a"
SECRET_SUMMARY = "SUMMARY-SECRET-91c2"
SURROGATE = "\ud800"  # a lone surrogate: not encodable as UTF-8

CONVERSATION_ID = "c"
POLICY = "policy-1"


@dataclass(frozen=True)
class BadInput:
    """One row: what is wrong, an example call, and what must come out."""

    kind: str
    example: str
    call: Callable[[], object]
    error: type[lf.LedgerfoldError]
    code: str
    field: str | None


def turns(n: int = 6) -> list[lf.Turn]:
    return [
        lf.Turn(f"t{i}", i, "user" if i % 2 else "assistant", f"{SECRET_BODY} {i}")
        for i in range(1, n + 1)
    ]


def conversation() -> lf.Conversation:
    return lf.Conversation(CONVERSATION_ID, 6, turns())


def plan() -> lf.CompactionPlan:
    return lf.plan_compaction(conversation(), 2, "plan-1")


def envelope() -> lf.SummaryEnvelope:
    made = lf.create_summary_envelope(plan(), conversation(), "s-1", POLICY, SECRET_SUMMARY)
    assert made is not None
    return made


def turn(**changes: Any) -> lf.Turn:
    """`Turn("t1", 1, "user", SECRET_BODY, ...)` with some arguments replaced."""
    fields: dict[str, Any] = {"id": "t1", "sequence": 1, "role": "user", "body": SECRET_BODY}
    fields.update(changes)
    positional = [fields.pop(name) for name in ("id", "sequence", "role", "body")]
    return lf.Turn(*positional, **fields)


def on_store(action: Callable[[lf.SQLiteStore], object]) -> Callable[[], object]:
    """Run `action` on a fresh in-memory store holding conversation "c" (t1..t6)."""

    def run() -> object:
        with lf.SQLiteStore(":memory:") as store:
            store.append_many(
                CONVERSATION_ID,
                [{"id": t.id, "role": t.role, "body": t.body} for t in turns()],
            )
            return action(store)

    return run


def on_utf16_store(action: Callable[[lf.SQLiteStore], object]) -> Callable[[], object]:
    """Run `action` on a store over a file whose text is stored as UTF-16 (`PRAGMA encoding`
    set by another tool before ledgerfold first opened it), holding conversation "c"."""

    def run() -> object:
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory) / "utf16.db"
            conn = sqlite3.connect(path)
            conn.execute("PRAGMA encoding = 'UTF-16le'")
            conn.execute("CREATE TABLE probe (x)")  # the encoding is fixed by the first table
            conn.execute("DROP TABLE probe")
            conn.commit()
            conn.close()
            with lf.SQLiteStore(path) as store:
                store.append_many(
                    CONVERSATION_ID,
                    [{"id": t.id, "role": t.role, "body": t.body} for t in turns()],
                )
                return action(store)

    return run


def on_file(prepare: Callable[[Path], Path]) -> Callable[[], object]:
    """Open an `SQLiteStore` on the path `prepare` makes inside a temporary directory."""

    def run() -> object:
        with tempfile.TemporaryDirectory() as directory:
            return lf.SQLiteStore(prepare(Path(directory)))

    return run


def _text_file(directory: Path) -> Path:
    path = directory / "notes.txt"
    path.write_text("not a database\n" * 200, encoding="utf-8")
    return path


def _sqlite_file(directory: Path, statement: str) -> Path:
    path = directory / "other.db"
    connection = sqlite3.connect(path)
    connection.execute(statement)
    connection.commit()
    connection.close()
    return path


def on_damaged(statement: str, read: Callable[[lf.SQLiteStore], object]) -> Callable[[], object]:
    """Run `read` on a database file holding conversation "c" (t1..t6, a summary of t1..t4)
    after `statement` damaged it behind the store's back."""

    def run() -> object:
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory) / "ledger.db"
            with lf.SQLiteStore(path) as store:
                store.append_many(
                    CONVERSATION_ID,
                    [{"id": t.id, "role": t.role, "body": t.body} for t in turns()],
                )
                planned = store.start_plan(CONVERSATION_ID, 2, POLICY)
                made = lf.create_summary_envelope(
                    planned, store.load(CONVERSATION_ID), "s-1", POLICY, SECRET_SUMMARY
                )
                store.commit_summary(made)
            connection = sqlite3.connect(path)
            connection.execute(statement, (SECRET_BODY.encode() + b"\xff",))
            connection.commit()
            connection.close()
            with lf.SQLiteStore(path) as store:
                return read(store)

    return run


def _revalidate(path: str | Path, **options: Any) -> object:
    from ledgerfold.revalidate import revalidate_database

    return revalidate_database(path, **options)


def _read_only_write() -> object:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "ledger.db"
        lf.SQLiteStore(path).close()
        with lf.SQLiteStore(path, read_only=True) as store:
            return store.append(CONVERSATION_ID, "user", SECRET_BODY)


def _search_v4_read_only() -> object:
    """A v4 file (written before the search index) opened read-only: search cannot answer."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "ledger.db"
        with lf.SQLiteStore(path) as store:
            store.append(CONVERSATION_ID, "user", SECRET_BODY)
        conn = sqlite3.connect(path, isolation_level=None)
        conn.executescript(
            "DROP TABLE search_fts; DROP TABLE search_state; DROP TABLE search_offsets;"
            " DELETE FROM schema_migrations WHERE version = 5; PRAGMA user_version = 4;"
        )
        conn.close()
        with lf.SQLiteStore(path, read_only=True) as store:
            return store.search(CONVERSATION_ID, SECRET_BODY)


def _empty_file(directory: Path) -> Path:
    path = directory / "empty.db"
    path.write_bytes(b"")
    return path


def _closed_store() -> object:
    store = lf.SQLiteStore(":memory:")
    store.close()
    return store.load(CONVERSATION_ID)


def _commit_twice(store: lf.SQLiteStore) -> object:
    first = store.start_plan(CONVERSATION_ID, 2, POLICY)
    made = lf.create_summary_envelope(first, store.load(CONVERSATION_ID), "s-1", POLICY, "x")
    store.commit_summary(made)
    store.start_plan(CONVERSATION_ID, 2, POLICY)
    return store.commit_summary(made)


# Deeper than Python's JSON parser and encoder can recurse (they raised RecursionError).
DEEP_JSON = "[" * 100_000 + "]" * 100_000


def _deep_list() -> list[Any]:
    nested: list[Any] = []
    for _ in range(100_000):
        nested = [nested]
    return nested


def _tool_calls_with(value: Any) -> object:
    call = {"id": "k1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return lf.from_chat_messages(
        [{"role": "assistant", "content": SECRET_BODY, "tool_calls": [{**call, "x": value}]}]
    )


def _stored_tool_calls(text: str) -> object:
    item = lf.TurnItem("t1", "assistant", SECRET_BODY, 1, {"tool_calls": text})
    return lf.to_chat_messages(lf.AssembledContext((item,)))


def on_transcript(line: str) -> Callable[[], object]:
    """Load a transcript file holding `line`."""

    def run() -> object:
        from ledgerfold._transcripts import load_transcripts

        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory) / "t.jsonl"
            path.write_text(line + "\n", encoding="utf-8")
            return load_transcripts(path)

    return run


def on_export(out_dir: Callable[[Path], Path | str]) -> Callable[[], object]:
    """`export_parquet` of an empty database to the path `out_dir` makes in a temporary
    directory, run from that directory's empty subdirectory `empty`."""

    def run() -> object:
        from ledgerfold.export import export_parquet

        cwd = os.getcwd()
        with tempfile.TemporaryDirectory() as directory:
            base = Path(directory)
            (base / "empty").mkdir()
            lf.SQLiteStore(base / "ledger.db").close()
            os.chdir(base / "empty")
            try:
                return export_parquet(base / "ledger.db", out_dir(base))
            finally:
                os.chdir(cwd)

    return run


def _link(base: Path, to: str) -> Path:
    (base / "link").symlink_to(base / to)
    return base / "link"


def on_manifest(text: str) -> Callable[[], object]:
    """`ledgerfold.dask.read_manifest` of a directory whose `_manifest.json` is `text`."""

    def run() -> object:
        from ledgerfold.dask import read_manifest

        with tempfile.TemporaryDirectory() as directory:
            (Path(directory) / "_manifest.json").write_text(text, encoding="utf-8")
            return read_manifest(directory)

    return run


_COUNTS = '{"conversations": 0, "turns": 0, "summaries": 0, "summary_sources": 0}'
_MANIFEST_HEAD = '{"format": "ledgerfold-parquet", "format_version": 4, '
_COUNTS_8_TURNS = _COUNTS.replace('"turns": 0', '"turns": 8')
_PART = '{"index": 0, "file": "part-00000.parquet", ' + _COUNTS[1:]


def compactor(store: lf.SQLiteStore, **policy: Any) -> lf.Compactor:
    return lf.Compactor(store, lf.CompactionPolicy(POLICY, **{"min_new_turns": 1, **policy}))


INVALID = (lf.InvalidInput, "invalid-input")
DUPLICATE = (lf.DuplicateId, "duplicate-id")
STORE = (lf.StoreError, "store-error")
BUDGET = (lf.ContextBudgetExceeded, "context-budget-exceeded")


def _middleware(store: lf.SQLiteStore, conversation_id: str, **options: Any) -> object:
    from ledgerfold.integrations.langchain import LedgerfoldMiddleware

    return LedgerfoldMiddleware(store, conversation_id, **options)


def _middleware_append_outside_a_run(store: lf.SQLiteStore) -> object:
    from langchain_core.messages import HumanMessage

    from ledgerfold.integrations.langchain import LedgerfoldMiddleware

    return LedgerfoldMiddleware(store).append_new([HumanMessage("hi", id="h1")])


class _NoSearch:
    """A store without `search` (a v1.1 `Store`, SPEC §17.9): everything else delegated."""

    def __init__(self, store: lf.SQLiteStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name == "search":
            raise AttributeError(name)
        return getattr(self._store, name)


def _session(store: object, **options: Any) -> object:
    from ledgerfold.integrations.openai_agents import LedgerfoldSession

    return LedgerfoldSession("c", store=store, **options)  # type: ignore[arg-type]


def _session_recall_tool(store: object) -> object:
    from ledgerfold.integrations.openai_agents import LedgerfoldSession

    return LedgerfoldSession("c", store=store).recall_tool()  # type: ignore[arg-type]


def _run_recall(store: object, conversation_id: object) -> object:
    from ledgerfold.tools import run_recall

    return run_recall(store, conversation_id, '{"query": "x"}')  # type: ignore[arg-type]


def row(
    kind: str,
    example: str,
    call: Callable[[], object],
    expected: tuple[type[lf.LedgerfoldError], str],
    field: str | None,
) -> BadInput:
    return BadInput(kind, example, call, expected[0], expected[1], field)
