"""The bad-input table: each kind of bad input across the public API, the exception it
raises, its `.code` and its `.field`.

`tests/test_bad_input.py` runs every row; `python tests/bad_input_table.py > docs/bad-input.md`
writes the same rows as a Markdown table (a test checks that docs/bad-input.md is up to date).
Bodies and summary texts in the rows carry `SECRET_BODY` / `SECRET_SUMMARY`, which no error
message may contain.
"""

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


def _revalidate(path: str | Path) -> object:
    from ledgerfold.revalidate import revalidate_database

    return revalidate_database(path)


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
_MANIFEST_HEAD = '{"format": "ledgerfold-parquet", "format_version": 1, '
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


class _NoSearch:
    """A store without `search` (a v1.1 `Store`, SPEC §17.9): everything else delegated."""

    def __init__(self, store: lf.SQLiteStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name == "search":
            raise AttributeError(name)
        return getattr(self._store, name)


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


ROWS: tuple[BadInput, ...] = (
    # ---- Turn (SPEC §2)
    row(
        "Turn: id of the wrong type", "Turn(1, 1, 'user', body)", lambda: turn(id=1), INVALID, "id"
    ),
    row("Turn: empty id", "Turn('', 1, 'user', body)", lambda: turn(id=""), INVALID, "id"),
    row(
        "Turn: lone surrogate in id",
        "Turn('\\ud800', 1, 'user', body)",
        lambda: turn(id=SURROGATE),
        INVALID,
        "id",
    ),
    row(
        "Turn: sequence of the wrong type",
        "Turn('t1', '1', 'user', body)",
        lambda: turn(sequence="1"),
        INVALID,
        "sequence",
    ),
    row(
        "Turn: bool for an int",
        "Turn('t1', True, 'user', body)",
        lambda: turn(sequence=True),
        INVALID,
        "sequence",
    ),
    row(
        "Turn: negative sequence",
        "Turn('t1', -1, 'user', body)",
        lambda: turn(sequence=-1),
        INVALID,
        "sequence",
    ),
    row(
        "Turn: sequence beyond i64",
        "Turn('t1', 2**63, 'user', body)",
        lambda: turn(sequence=2**63),
        INVALID,
        "sequence",
    ),
    row(
        "Turn: unknown role",
        "Turn('t1', 1, 'admin', body)",
        lambda: turn(role="admin"),
        INVALID,
        "role",
    ),
    row(
        "Turn: role of the wrong type",
        "Turn('t1', 1, 2, body)",
        lambda: turn(role=2),
        INVALID,
        "role",
    ),
    row(
        "Turn: body of the wrong type",
        "Turn('t1', 1, 'user', None)",
        lambda: turn(body=None),
        INVALID,
        "body",
    ),
    row(
        "Turn: lone surrogate in body",
        "Turn('t1', 1, 'user', body + '\\ud800')",
        lambda: turn(body=SECRET_BODY + SURROGATE),
        INVALID,
        "body",
    ),
    row(
        "Turn: protected not a bool",
        "Turn(..., protected=1)",
        lambda: turn(protected=1),
        INVALID,
        "protected",
    ),
    row(
        "Turn: unknown protection reason",
        "Turn(..., protected=True, protection_reason='because')",
        lambda: turn(protected=True, protection_reason="because"),
        INVALID,
        "protection_reason",
    ),
    row(
        "Turn: protection reason without protected",
        "Turn(..., protection_reason='audit-evidence')",
        lambda: turn(protection_reason="audit-evidence"),
        INVALID,
        "protection_reason",
    ),
    row("Turn: empty group", "Turn(..., group='')", lambda: turn(group=""), INVALID, "group"),
    row(
        "Turn: group of the wrong type",
        "Turn(..., group=3)",
        lambda: turn(group=3),
        INVALID,
        "group",
    ),
    row(
        "Turn: meta not a mapping",
        "Turn(..., meta=[('k', 'v')])",
        lambda: turn(meta=[("k", "v")]),
        INVALID,
        "meta",
    ),
    row(
        "Turn: non-str meta key",
        "Turn(..., meta={1: 'v'})",
        lambda: turn(meta={1: SECRET_BODY}),
        INVALID,
        "meta",
    ),
    row(
        "Turn: non-str meta value",
        "Turn(..., meta={'k': 1})",
        lambda: turn(meta={"k": 1}),
        INVALID,
        "meta",
    ),
    row(
        "Turn: empty meta key",
        "Turn(..., meta={'': 'v'})",
        lambda: turn(meta={"": SECRET_BODY}),
        INVALID,
        "meta",
    ),
    row(
        "Turn: lone surrogate in meta",
        "Turn(..., meta={'k': '\\ud800'})",
        lambda: turn(meta={"k": SECRET_BODY + SURROGATE}),
        INVALID,
        "meta",
    ),
    row(
        "Turn.replace: unknown field",
        "turn.replace(colour='red')",
        lambda: turn().replace(colour="red"),
        INVALID,
        "replace",
    ),
    row(
        "Turn.replace: invalid value",
        "turn.replace(sequence=-1)",
        lambda: turn().replace(sequence=-1),
        INVALID,
        "sequence",
    ),
    # ---- Conversation
    row(
        "Conversation: duplicate turn id",
        "Conversation('c', 0, [Turn('a', 1, ...), Turn('a', 2, ...)])",
        lambda: lf.Conversation("c", 0, [turn(id="a"), turn(id="a", sequence=2)]),
        DUPLICATE,
        "id",
    ),
    row(
        "Conversation: duplicate sequence",
        "Conversation('c', 0, [Turn('a', 1, ...), Turn('b', 1, ...)])",
        lambda: lf.Conversation("c", 0, [turn(id="a"), turn(id="b")]),
        INVALID,
        "sequence",
    ),
    row(
        "Conversation: empty id",
        "Conversation('', 0, turns)",
        lambda: lf.Conversation("", 0, turns()),
        INVALID,
        "id",
    ),
    row(
        "Conversation: negative revision",
        "Conversation('c', -1, turns)",
        lambda: lf.Conversation("c", -1, turns()),
        INVALID,
        "revision",
    ),
    row(
        "Conversation: turns that are not Turns",
        "Conversation('c', 0, [1])",
        lambda: lf.Conversation("c", 0, [1]),  # type: ignore[list-item]
        INVALID,
        "turns",
    ),
    row(
        "fingerprint_turns: not Turns",
        "fingerprint_turns([1])",
        lambda: lf.fingerprint_turns([1]),  # type: ignore[list-item]
        INVALID,
        "turns",
    ),
    row(
        "same_ordered_ids: not an iterable of str",
        "same_ordered_ids(5, [])",
        lambda: lf.same_ordered_ids(5, []),  # type: ignore[arg-type]
        INVALID,
        "a",
    ),
    # ---- plan_compaction (SPEC §4)
    row(
        "plan_compaction: keep_tail 0",
        "plan_compaction(conversation, 0, 'p')",
        lambda: lf.plan_compaction(conversation(), 0, "p"),
        INVALID,
        "keep_tail",
    ),
    row(
        "plan_compaction: keep_tail bool",
        "plan_compaction(conversation, True, 'p')",
        lambda: lf.plan_compaction(conversation(), True, "p"),
        INVALID,
        "keep_tail",
    ),
    row(
        "plan_compaction: keep_tail float",
        "plan_compaction(conversation, 2.0, 'p')",
        lambda: lf.plan_compaction(conversation(), 2.0, "p"),  # type: ignore[arg-type]
        INVALID,
        "keep_tail",
    ),
    row(
        "plan_compaction: blank plan_id",
        "plan_compaction(conversation, 2, ' ')",
        lambda: lf.plan_compaction(conversation(), 2, " "),
        INVALID,
        "plan_id",
    ),
    row(
        "plan_compaction: not a Conversation",
        "plan_compaction([turn], 2, 'p')",
        lambda: lf.plan_compaction(turns(), 2, "p"),  # type: ignore[arg-type]
        INVALID,
        "conversation",
    ),
    # ---- envelopes, checks, acceptance, assembly (SPEC §5–§8)
    row(
        "create_summary_envelope: plan of the wrong type",
        "create_summary_envelope('p', conversation, 's', 'v', text)",
        lambda: lf.create_summary_envelope("p", conversation(), "s", POLICY, SECRET_SUMMARY),  # type: ignore[arg-type]
        INVALID,
        "plan",
    ),
    row(
        "create_summary_envelope: turns of the wrong type",
        "create_summary_envelope(plan, 5, 's', 'v', text)",
        lambda: lf.create_summary_envelope(plan(), 5, "s", POLICY, SECRET_SUMMARY),  # type: ignore[arg-type]
        INVALID,
        "turns",
    ),
    row(
        "create_summary_envelope: blank summary_id",
        "create_summary_envelope(plan, turns, '', 'v', text)",
        lambda: lf.create_summary_envelope(plan(), conversation(), "", POLICY, SECRET_SUMMARY),
        INVALID,
        "summary_id",
    ),
    row(
        "create_summary_envelope: text of the wrong type",
        "create_summary_envelope(plan, turns, 's', 'v', 5)",
        lambda: lf.create_summary_envelope(plan(), conversation(), "s", POLICY, 5),  # type: ignore[arg-type]
        INVALID,
        "text",
    ),
    row(
        "create_summary_envelope: lone surrogate in text",
        "create_summary_envelope(plan, turns, 's', 'v', text + '\\ud800')",
        lambda: lf.create_summary_envelope(
            plan(), conversation(), "s", POLICY, SECRET_SUMMARY + SURROGATE
        ),
        INVALID,
        "text",
    ),
    row(
        "SummaryEnvelope: field of the wrong type",
        "SummaryEnvelope(..., text=5)",
        lambda: lf.SummaryEnvelope("s", "p", "c", 0, ("t1",), "lf1:00", POLICY, 5),  # type: ignore[arg-type]
        INVALID,
        "text",
    ),
    row(
        "check_summary: summary of the wrong type",
        "check_summary('s', conversation, 'v')",
        lambda: lf.check_summary("s", conversation(), POLICY),  # type: ignore[arg-type]
        INVALID,
        "summary",
    ),
    row(
        "check_summary: conversation of the wrong type",
        "check_summary(envelope, 'c', 'v')",
        lambda: lf.check_summary(envelope(), "c", POLICY),  # type: ignore[arg-type]
        INVALID,
        "conversation",
    ),
    row(
        "check_summary: policy_version of the wrong type",
        "check_summary(envelope, conversation, 5)",
        lambda: lf.check_summary(envelope(), conversation(), 5),  # type: ignore[arg-type]
        INVALID,
        "policy_version",
    ),
    row(
        "citations: summary of the wrong type",
        "citations('s', conversation)",
        lambda: lf.citations("s", conversation()),  # type: ignore[arg-type]
        INVALID,
        "summary",
    ),
    row(
        "citations: conversation of the wrong type",
        "citations(envelope, 'c')",
        lambda: lf.citations(envelope(), "c"),  # type: ignore[arg-type]
        INVALID,
        "conversation",
    ),
    row(
        "accept_summary_result: candidate of the wrong type",
        "accept_summary_result('s', conversation, 'v', 'p')",
        lambda: lf.accept_summary_result("s", conversation(), POLICY, "p"),  # type: ignore[arg-type]
        INVALID,
        "candidate",
    ),
    row(
        "accept_summary_result: plan of the wrong type",
        "accept_summary_result(envelope, conversation, 'v', 'p', plan='p')",
        lambda: lf.accept_summary_result(envelope(), conversation(), POLICY, "p", plan="p"),  # type: ignore[arg-type]
        INVALID,
        "plan",
    ),
    row(
        "accept_summary_result: current of the wrong type",
        "accept_summary_result(envelope, conversation, 'v', 'p', current='s')",
        lambda: lf.accept_summary_result(envelope(), conversation(), POLICY, "p", current="s"),  # type: ignore[arg-type]
        INVALID,
        "current",
    ),
    row(
        "accept_summary_result: sealed not a mapping",
        "accept_summary_result(envelope, conversation, 'v', 'p', sealed=['t1'])",
        lambda: lf.accept_summary_result(envelope(), conversation(), POLICY, "p", sealed=["t1"]),  # type: ignore[arg-type]
        INVALID,
        "sealed",
    ),
    row(
        "accept_summary_result: an unknown preserved role",
        "accept_summary_result(envelope, conversation, 'v', 'p', preserve_roles=['admin'])",
        lambda: lf.accept_summary_result(
            envelope(), conversation(), POLICY, "p", preserve_roles=["admin"]
        ),
        INVALID,
        "preserve_roles",
    ),
    row(
        "assemble_context: summary of the wrong type",
        "assemble_context(conversation, 's', 'v')",
        lambda: lf.assemble_context(conversation(), "s", POLICY),  # type: ignore[arg-type]
        INVALID,
        "summary",
    ),
    row(
        "assemble_context: policy_version None",
        "assemble_context(conversation, envelope, None)",
        lambda: lf.assemble_context(conversation(), envelope(), None),  # type: ignore[arg-type]
        INVALID,
        "policy_version",
    ),
    row(
        "assemble_context: preserved_ids a str",
        "assemble_context(conversation, envelope, 'v', 't1')",
        lambda: lf.assemble_context(conversation(), envelope(), POLICY, "t1"),
        INVALID,
        "preserved_ids",
    ),
    row(
        "to_chat_messages: not an AssembledContext",
        "to_chat_messages([message])",
        lambda: lf.to_chat_messages([{"role": "user", "content": SECRET_BODY}]),  # type: ignore[arg-type]
        INVALID,
        "context",
    ),
    row(
        "to_chat_messages: NaN in stored meta.tool_calls",
        "to_chat_messages(context)  # a turn's meta.tool_calls holds NaN",
        lambda: _stored_tool_calls('[{"id": "k1", "x": NaN}]'),
        INVALID,
        "meta.tool_calls",
    ),
    row(
        "to_chat_messages: system_prompt not a str",
        "to_chat_messages(context, system_prompt=['Be brief.'])",
        lambda: lf.to_chat_messages(lf.AssembledContext(()), system_prompt=[SECRET_BODY]),  # type: ignore[arg-type]
        INVALID,
        "system_prompt",
    ),
    row(
        "to_chat_messages: lone surrogate in system_prompt",
        "to_chat_messages(context, system_prompt='\\ud800')",
        lambda: lf.to_chat_messages(lf.AssembledContext(()), system_prompt=SURROGATE),
        INVALID,
        "system_prompt",
    ),
    row(
        "to_chat_messages: recall not a bool",
        "to_chat_messages(context, recall='yes')",
        lambda: lf.to_chat_messages(lf.AssembledContext(()), recall="yes"),  # type: ignore[arg-type]
        INVALID,
        "recall",
    ),
    row(
        "SQLiteStore.known_ids: one ID, not a list",
        "store.known_ids('c', 't1')",
        on_store(lambda store: store.known_ids("c", "t1")),  # type: ignore[arg-type]
        INVALID,
        "ids",
    ),
    row(
        "SQLiteStore.known_ids: an ID of the wrong type",
        "store.known_ids('c', ['t1', 2])",
        on_store(lambda store: store.known_ids("c", ["t1", 2])),  # type: ignore[list-item]
        INVALID,
        "ids[1]",
    ),
    row(
        "SQLiteStore.known_ids: blank conversation_id",
        "store.known_ids(' ', ['t1'])",
        on_store(lambda store: store.known_ids(" ", ["t1"])),
        INVALID,
        "conversation_id",
    ),
    row(
        "LedgerfoldMiddleware: system_prompt not a str",
        "LedgerfoldMiddleware(store, 'c', system_prompt=1)",
        on_store(lambda store: _middleware(store, "c", system_prompt=1)),
        INVALID,
        "system_prompt",
    ),
    row(
        "LedgerfoldMiddleware: blank conversation_id",
        "LedgerfoldMiddleware(store, ' ')",
        on_store(lambda store: _middleware(store, " ")),
        INVALID,
        "conversation_id",
    ),
    row(
        "LedgerfoldMiddleware: recall not a bool",
        "LedgerfoldMiddleware(store, 'c', recall='yes')",
        on_store(lambda store: _middleware(store, "c", recall="yes")),
        INVALID,
        "recall",
    ),
    row(
        "LedgerfoldMiddleware: recall=True with a store that cannot search",
        "LedgerfoldMiddleware(v11_store, 'c', recall=True)",
        on_store(lambda store: _middleware(_NoSearch(store), "c", recall=True)),  # type: ignore[arg-type]
        INVALID,
        "store",
    ),
    row(
        "LedgerfoldSession.recall_tool: a store that cannot search",
        "LedgerfoldSession('c', store=v11_store).recall_tool()",
        on_store(lambda store: _session_recall_tool(_NoSearch(store))),
        INVALID,
        "store",
    ),
    row(
        "run_recall: a store that cannot search",
        "run_recall(object(), 'c', arguments)",
        lambda: _run_recall(object(), "c"),
        INVALID,
        "store",
    ),
    row(
        "run_recall: blank conversation_id",
        "run_recall(store, ' ', arguments)",
        on_store(lambda store: _run_recall(store, " ")),
        INVALID,
        "conversation_id",
    ),
    # ---- from_chat_messages
    row(
        "from_chat_messages: not a list of messages",
        "from_chat_messages('hello')",
        lambda: lf.from_chat_messages(SECRET_BODY),  # type: ignore[arg-type]
        INVALID,
        "messages",
    ),
    row(
        "from_chat_messages: message not a mapping",
        "from_chat_messages(['hello'])",
        lambda: lf.from_chat_messages([SECRET_BODY]),  # type: ignore[list-item]
        INVALID,
        "messages[0]",
    ),
    row(
        "from_chat_messages: unknown role",
        "from_chat_messages([{'role': 'admin', ...}])",
        lambda: lf.from_chat_messages([{"role": "admin", "content": SECRET_BODY}]),
        INVALID,
        "messages[0].role",
    ),
    row(
        "from_chat_messages: content of the wrong type",
        "from_chat_messages([{'role': 'user', 'content': 5}])",
        lambda: lf.from_chat_messages([{"role": "user", "content": 5}]),
        INVALID,
        "messages[0].content",
    ),
    row(
        "from_chat_messages: lone surrogate in content",
        "from_chat_messages([{'role': 'user', 'content': '\\ud800'}])",
        lambda: lf.from_chat_messages([{"role": "user", "content": SECRET_BODY + SURROGATE}]),
        INVALID,
        "messages[0].content",
    ),
    row(
        "from_chat_messages: tool calls on a user message",
        "from_chat_messages([{'role': 'user', 'tool_calls': [...]}])",
        lambda: lf.from_chat_messages(
            [{"role": "user", "content": SECRET_BODY, "tool_calls": [{"id": "call-1"}]}]
        ),
        INVALID,
        "messages[0].tool_calls",
    ),
    row(
        "from_chat_messages: duplicate message id",
        "from_chat_messages([{'id': 'x', ...}, {'id': 'x', ...}])",
        lambda: lf.from_chat_messages(
            [
                {"id": "x", "role": "user", "content": SECRET_BODY},
                {"id": "x", "role": "user", "content": SECRET_BODY},
            ]
        ),
        DUPLICATE,
        "messages[1].id",
    ),
    row(
        "from_chat_messages: NaN or Infinity in tool_calls",
        "from_chat_messages([{'role': 'assistant', 'tool_calls': [{..., 'x': nan}]}])",
        lambda: _tool_calls_with(float("nan")),
        INVALID,
        "messages[0].tool_calls",
    ),
    row(
        "from_chat_messages: tool_calls nested too deeply",
        "from_chat_messages([{'role': 'assistant', 'tool_calls': [{..., 'x': [[[...]]]}]}])",
        lambda: _tool_calls_with(_deep_list()),
        INVALID,
        "messages[0].tool_calls",
    ),
    # ---- transcripts (`ledgerfold import`)
    row(
        "load_transcripts: JSON line nested too deeply",
        "load_transcripts('t.jsonl')  # a line of 100,000 nested arrays",
        on_transcript('{"conversation_id": "c", "source": "s", "turns": ' + DEEP_JSON + "}"),
        INVALID,
        "line",
    ),
    row(
        "load_transcripts: NaN or Infinity in a line",
        "load_transcripts('t.jsonl')  # {..., 'x': NaN}",
        on_transcript('{"conversation_id": "c", "source": "s", "turns": [], "x": NaN}'),
        INVALID,
        "line",
    ),
    # ---- Parquet export and its Dask revalidation
    row(
        "export_parquet: out_dir without a directory name",
        "export_parquet(db, '.')  # in an empty directory",
        on_export(lambda base: "."),
        INVALID,
        "out_dir",
    ),
    row(
        "export_parquet: out_dir a symbolic link",
        "export_parquet(db, 'link')  # link -> an empty directory",
        on_export(lambda base: _link(base, "empty")),
        INVALID,
        "out_dir",
    ),
    row(
        "export_parquet: out_dir a dangling symbolic link",
        "export_parquet(db, 'link')  # link -> nothing",
        on_export(lambda base: _link(base, "nowhere")),
        INVALID,
        "out_dir",
    ),
    row(
        "read_manifest: JSON nested too deeply",
        "read_manifest(path)  # _manifest.json of 100,000 nested arrays",
        on_manifest(DEEP_JSON),
        INVALID,
        "path",
    ),
    row(
        "read_manifest: parts not a list",
        "read_manifest(path)  # _manifest.json with 'parts': 5",
        on_manifest(_MANIFEST_HEAD + f'"counts": {_COUNTS}, "parts": 5}}'),
        INVALID,
        "path",
    ),
    row(
        "read_manifest: counts not the parts' total",
        "read_manifest(path)  # 'counts': {'turns': 8, ...}, parts of 0 turns",
        on_manifest(_MANIFEST_HEAD + f'"counts": {_COUNTS_8_TURNS}, "parts": [{_PART}]}}'),
        INVALID,
        "path",
    ),
    row(
        "read_manifest: a listed part file missing",
        "read_manifest(path)  # part-00000.parquet not there",
        on_manifest(_MANIFEST_HEAD + f'"counts": {_COUNTS}, "parts": [{_PART}]}}'),
        INVALID,
        "path",
    ),
    # ---- SQLiteStore (SPEC §12)
    row(
        "SQLiteStore: path not str or PathLike",
        "SQLiteStore(5)",
        lambda: lf.SQLiteStore(5),  # type: ignore[arg-type]
        INVALID,
        "path",
    ),
    row(
        "SQLiteStore: bytes path",
        "SQLiteStore(b'ledger.db')",
        lambda: lf.SQLiteStore(b"ledger.db"),  # type: ignore[arg-type]
        INVALID,
        "path",
    ),
    row("SQLiteStore: empty path", "SQLiteStore('')", lambda: lf.SQLiteStore(""), INVALID, "path"),
    row(
        "SQLiteStore: a directory",
        "SQLiteStore('/tmp')",
        on_file(lambda directory: directory),
        STORE,
        None,
    ),
    row(
        "SQLiteStore: a file that is not SQLite",
        "SQLiteStore('notes.txt')",
        on_file(_text_file),
        STORE,
        None,
    ),
    row(
        "SQLiteStore: another program's SQLite database",
        "SQLiteStore('other.db')  # has its own tables",
        on_file(lambda directory: _sqlite_file(directory, "CREATE TABLE notes (text)")),
        STORE,
        None,
    ),
    row(
        "SQLiteStore: SQLite database of another application",
        "SQLiteStore('other.db')  # PRAGMA application_id set",
        on_file(lambda directory: _sqlite_file(directory, "PRAGMA application_id = 7")),
        STORE,
        None,
    ),
    row(
        "SQLiteStore: used after close()",
        "store.close(); store.load('c')",
        _closed_store,
        STORE,
        None,
    ),
    row(
        "SQLiteStore: path with a NUL character",
        "SQLiteStore('a\\x00b.db')",
        lambda: lf.SQLiteStore("a\x00b.db"),
        INVALID,
        "path",
    ),
    row(
        "SQLiteStore: read_only not a bool",
        "SQLiteStore(path, read_only=1)",
        lambda: lf.SQLiteStore(":memory:", read_only=1),  # type: ignore[arg-type]
        INVALID,
        "read_only",
    ),
    row(
        "SQLiteStore(read_only=True): no such file (nothing is created)",
        "SQLiteStore('missing.db', read_only=True)",
        on_file(
            lambda directory: Path(lf.SQLiteStore(directory / "missing.db", read_only=True)._path)
        ),
        STORE,
        None,
    ),
    row(
        "SQLiteStore(read_only=True): an empty file (left empty)",
        "SQLiteStore('empty.db', read_only=True)",
        on_file(
            lambda directory: Path(lf.SQLiteStore(_empty_file(directory), read_only=True)._path)
        ),
        STORE,
        None,
    ),
    row(
        "SQLiteStore(read_only=True): a write",
        "SQLiteStore(path, read_only=True).append('c', 'user', body)",
        _read_only_write,
        STORE,
        None,
    ),
    row(
        "damaged file: a turn body that is not valid UTF-8",
        "store.context('c', policy)  # body bytes + 0xFF written by another tool",
        on_damaged(
            "UPDATE turns SET body = CAST(? AS TEXT) WHERE id = 't5'",
            lambda store: store.context(CONVERSATION_ID, POLICY),
        ),
        STORE,
        None,
    ),
    row(
        "damaged file: a summary text that is not valid UTF-8",
        "store.summary_history('c')  # text bytes + 0xFF",
        on_damaged(
            "UPDATE summaries SET text = CAST(? AS TEXT) WHERE id = 's-1'",
            lambda store: store.summary_history(CONVERSATION_ID),
        ),
        STORE,
        None,
    ),
    row(
        "damaged file: a turn meta that is not JSON",
        "store.load('c')  # meta = '{not json'",
        on_damaged(
            "UPDATE turns SET meta = '{not json' WHERE id = 't6' OR ? IS NULL",
            lambda store: store.load(CONVERSATION_ID),
        ),
        STORE,
        None,
    ),
    row(
        "damaged file: a summary without its fingerprint",
        "store.summary_history('c')  # source_fingerprint = NULL (context() falls back raw)",
        on_damaged(
            "UPDATE summaries SET source_fingerprint = NULL WHERE id = 's-1' OR ? IS NULL",
            lambda store: store.summary_history(CONVERSATION_ID),
        ),
        STORE,
        None,
    ),
    row(
        "revalidate_database: no such file (nothing is created)",
        "revalidate_database('missing.db')",
        on_file(lambda directory: _revalidate(directory / "missing.db")),  # type: ignore[arg-type, return-value]
        STORE,
        None,
    ),
    row(
        "revalidate_database: path with a NUL character",
        "revalidate_database('a\\x00b.db')",
        lambda: _revalidate("a\x00b.db"),
        INVALID,
        "path",
    ),
    row(
        "mark_stale: a verdict that is not a 3-tuple",
        "store.mark_stale([('c',)])",
        on_store(lambda store: store.mark_stale([("c",)])),  # type: ignore[list-item]
        INVALID,
        "verdicts[0]",
    ),
    row(
        "edit: a field name that is a lone surrogate",
        "store.edit('c', 't1', **{'\\ud800': 1})  # .field is ascii-escaped",
        on_store(lambda store: store.edit("c", "t1", **{SURROGATE: 1})),
        INVALID,
        ascii(SURROGATE),
    ),
    row(
        "append: blank conversation_id",
        "store.append(' ', 'user', body)",
        on_store(lambda store: store.append(" ", "user", SECRET_BODY)),
        INVALID,
        "conversation_id",
    ),
    row(
        "append: unknown role",
        "store.append('c', 'admin', body)",
        on_store(lambda store: store.append("c", "admin", SECRET_BODY)),
        INVALID,
        "role",
    ),
    row(
        "append: turn id already used",
        "store.append('c', 'user', body, id='t1')",
        on_store(lambda store: store.append("c", "user", SECRET_BODY, id="t1")),
        DUPLICATE,
        "id",
    ),
    row(
        "append_many: not a list of mappings",
        "store.append_many('c', 5)",
        on_store(lambda store: store.append_many("c", 5)),  # type: ignore[arg-type]
        INVALID,
        "turns",
    ),
    row(
        "append: meta.tool_calls not JSON",
        "store.append('c', 'assistant', body, meta={'tool_calls': 'not json'})",
        on_store(
            lambda store: store.append(
                "c", "assistant", SECRET_BODY, meta={"tool_calls": "not json"}
            )
        ),
        INVALID,
        "meta.tool_calls",
    ),
    row(
        "append: meta.tool_calls call without an id",
        "store.append('c', 'assistant', body, meta={'tool_calls': '[{\"name\": \"f\"}]'})",
        on_store(
            lambda store: store.append(
                "c", "assistant", SECRET_BODY, meta={"tool_calls": '[{"name": "f"}]'}
            )
        ),
        INVALID,
        "meta.tool_calls[0].id",
    ),
    row(
        "append: NaN in meta.tool_calls",
        "store.append('c', 'assistant', body, meta={'tool_calls': '[{...NaN}]'})",
        on_store(
            lambda store: store.append(
                "c", "assistant", SECRET_BODY, meta={"tool_calls": '[{"id": "k", "x": NaN}]'}
            )
        ),
        INVALID,
        "meta.tool_calls",
    ),
    row(
        "edit: meta.tool_calls not JSON",
        "store.edit('c', 't1', meta={'tool_calls': 'not json'})",
        on_store(lambda store: (store.edit("c", "t1", meta={"tool_calls": "not json"}),)),
        INVALID,
        "meta.tool_calls",
    ),
    row(
        "append_many: unknown key",
        "store.append_many('c', [{'role': 'user', 'body': body, 'x': 1}])",
        on_store(lambda store: store.append_many("c", [{"role": "user", "body": "b", "x": 1}])),
        INVALID,
        "turns[0]",
    ),
    row(
        "append_many: explicit sequence not above the last one",
        "store.append_many('c', [{'role': 'user', 'body': body, 'sequence': 6}])",
        on_store(
            lambda store: store.append_many(
                "c", [{"role": "user", "body": SECRET_BODY, "sequence": 6}]
            )
        ),
        INVALID,
        "turns[0].sequence",
    ),
    row(
        "append_many: explicit sequences not increasing",
        "store.append_many('c', [{..., 'sequence': 9}, {..., 'sequence': 8}])",
        on_store(
            lambda store: store.append_many(
                "c",
                [
                    {"role": "user", "body": SECRET_BODY, "sequence": 9},
                    {"role": "user", "body": SECRET_BODY, "sequence": 8},
                ],
            )
        ),
        INVALID,
        "turns[1].sequence",
    ),
    row(
        "append_many: sequence not an int",
        "store.append_many('c', [{'role': 'user', 'body': body, 'sequence': True}])",
        on_store(
            lambda store: store.append_many(
                "c", [{"role": "user", "body": SECRET_BODY, "sequence": True}]
            )
        ),
        INVALID,
        "turns[0].sequence",
    ),
    row(
        "append_chat_messages: not a list of messages",
        "store.append_chat_messages('c', 'hello')",
        on_store(lambda store: store.append_chat_messages("c", "hello")),  # type: ignore[arg-type]
        INVALID,
        "messages",
    ),
    row(
        "append_chat_messages: unknown role",
        "store.append_chat_messages('c', [{'role': 'admin', ...}])",
        on_store(lambda store: store.append_chat_messages("c", [{"role": "admin"}])),
        INVALID,
        "messages[0].role",
    ),
    row(
        "append_chat_messages: call id already used",
        "store.append_chat_messages('c', [{'role': 'assistant', 'tool_calls': [{'id': 'k'}]}])"
        " twice",
        on_store(
            lambda store: [
                store.append_chat_messages(
                    "c", [{"role": "assistant", "content": "", "tool_calls": [{"id": "k"}]}]
                )
                for _ in range(2)
            ]
        ),
        INVALID,
        "messages[0].tool_calls[0].id",
    ),
    row(
        "edit: unknown conversation",
        "store.edit('nope', 't1', body=body)",
        on_store(lambda store: store.edit("nope", "t1", body=SECRET_BODY)),
        INVALID,
        "turn_id",
    ),
    row(
        "edit: unknown turn",
        "store.edit('c', 'nope', body=body)",
        on_store(lambda store: store.edit("c", "nope", body=SECRET_BODY)),
        INVALID,
        "turn_id",
    ),
    row(
        "edit: of id",
        "store.edit('c', 't1', id='t9')",
        on_store(lambda store: store.edit("c", "t1", id="t9")),
        INVALID,
        "id",
    ),
    row(
        "edit: of sequence",
        "store.edit('c', 't1', sequence=9)",
        on_store(lambda store: store.edit("c", "t1", sequence=9)),
        INVALID,
        "sequence",
    ),
    row(
        "edit: unknown field",
        "store.edit('c', 't1', colour='red')",
        on_store(lambda store: store.edit("c", "t1", colour="red")),
        INVALID,
        "colour",
    ),
    row(
        "edit: invalid new value",
        "store.edit('c', 't1', body='\\ud800')",
        on_store(lambda store: store.edit("c", "t1", body=SECRET_BODY + SURROGATE)),
        INVALID,
        "body",
    ),
    row(
        "retract: unknown conversation or turn",
        "store.retract('nope', 't1')",
        on_store(lambda store: store.retract("nope", "t1")),
        INVALID,
        "turn_id",
    ),
    row(
        "start_plan: blank policy_version",
        "store.start_plan('c', 2, '')",
        on_store(lambda store: store.start_plan("c", 2, "")),
        INVALID,
        "policy_version",
    ),
    row(
        "start_plan: policy_version of the wrong type",
        "store.start_plan('c', 2, 1)",
        on_store(lambda store: store.start_plan("c", 2, 1)),  # type: ignore[arg-type]
        INVALID,
        "policy_version",
    ),
    row(
        "begin_compaction: negative min_new_turns",
        "store.begin_compaction('c', 2, 'v', min_new_turns=-1)",
        on_store(lambda store: store.begin_compaction("c", 2, POLICY, min_new_turns=-1)),
        INVALID,
        "min_new_turns",
    ),
    row(
        "begin_compaction: bool for min_new_turns",
        "store.begin_compaction('c', 2, 'v', min_new_turns=True)",
        on_store(lambda store: store.begin_compaction("c", 2, POLICY, min_new_turns=True)),
        INVALID,
        "min_new_turns",
    ),
    row(
        "begin_compaction: only_due_at_once not a bool",
        "store.begin_compaction('c', 2, 'v', only_due_at_once=1)",
        on_store(lambda store: store.begin_compaction("c", 2, POLICY, only_due_at_once=1)),  # type: ignore[arg-type]
        INVALID,
        "only_due_at_once",
    ),
    row(
        "context: policy_version of the wrong type",
        "store.context('c', None)",
        on_store(lambda store: store.context("c", None)),  # type: ignore[arg-type]
        INVALID,
        "policy_version",
    ),
    row(
        "commit_summary: not an envelope",
        "store.commit_summary('s')",
        on_store(lambda store: store.commit_summary("s")),  # type: ignore[arg-type]
        INVALID,
        "envelope",
    ),
    row(
        "commit_summary: summary id already stored",
        "store.commit_summary(envelope)  # twice",
        on_store(_commit_twice),
        INVALID,
        "envelope.id",
    ),
    row(
        "record_failure: unknown plan",
        "store.record_failure('nope', 'summarizer-error')",
        on_store(lambda store: store.record_failure("nope", "summarizer-error")),
        INVALID,
        "plan_id",
    ),
    row(
        "sources_of: unknown summary",
        "store.sources_of('nope')",
        on_store(lambda store: store.sources_of("nope")),
        INVALID,
        "summary_id",
    ),
    row(
        "cited_sources: unknown summary",
        "store.cited_sources('nope')",
        on_store(lambda store: store.cited_sources("nope")),
        INVALID,
        "summary_id",
    ),
    row(
        "repair_digests: not an iterable of pairs",
        "store.repair_digests([('c',)])",
        on_store(lambda store: store.repair_digests([("c",)])),  # type: ignore[list-item]
        INVALID,
        "turns[0]",
    ),
    row(
        "purge_through: negative sequence",
        "store.purge_through('c', -1, 'retention')",
        on_store(lambda store: store.purge_through("c", -1, "retention")),
        INVALID,
        "sequence",
    ),
    row(
        "purge_through: unknown conversation",
        "store.purge_through('nope', 3, 'retention')",
        on_store(lambda store: store.purge_through("nope", 3, "retention")),
        INVALID,
        "conversation_id",
    ),
    row(
        "purge_through: force not a bool",
        "store.purge_through('c', 3, 'retention', force=1)",
        on_store(lambda store: store.purge_through("c", 3, "retention", force=1)),  # type: ignore[arg-type]
        INVALID,
        "force",
    ),
    # ---- search (SPEC §16.1, §16.5)
    row(
        "search: query not a str",
        "store.search('c', None)",
        on_store(lambda store: store.search("c", None)),  # type: ignore[arg-type]
        INVALID,
        "query",
    ),
    row(
        "search: limit 0",
        "store.search('c', 'q', limit=0)",
        on_store(lambda store: store.search("c", SECRET_BODY, limit=0)),
        INVALID,
        "limit",
    ),
    row(
        "search: limit above 100",
        "store.search('c', 'q', limit=101)",
        on_store(lambda store: store.search("c", SECRET_BODY, limit=101)),
        INVALID,
        "limit",
    ),
    row(
        "search: limit a bool",
        "store.search('c', 'q', limit=True)",
        on_store(lambda store: store.search("c", SECRET_BODY, limit=True)),
        INVALID,
        "limit",
    ),
    row(
        "search: limit a float",
        "store.search('c', 'q', limit=5.0)",
        on_store(lambda store: store.search("c", SECRET_BODY, limit=5.0)),  # type: ignore[arg-type]
        INVALID,
        "limit",
    ),
    row(
        "search: unknown scope",
        "store.search('c', 'q', scope='raw')",
        on_store(lambda store: store.search("c", SECRET_BODY, scope="raw")),
        INVALID,
        "scope",
    ),
    row(
        "search: conversation_id not a str",
        "store.search(1, 'q')",
        on_store(lambda store: store.search(1, SECRET_BODY)),  # type: ignore[arg-type]
        INVALID,
        "conversation_id",
    ),
    row(
        "search: a v4 database opened read-only (no index yet)",
        "SQLiteStore(v4_path, read_only=True).search('c', 'q')",
        _search_v4_read_only,
        STORE,
        None,
    ),
    row(
        "purge_through: keep_roles names an unknown role",
        "store.purge_through('c', 3, 'retention', keep_roles=['boss'])",
        on_store(lambda store: store.purge_through("c", 3, "retention", keep_roles=["boss"])),
        INVALID,
        "keep_roles",
    ),
    row(
        "purge_through: keep_roles a str",
        "store.purge_through('c', 3, 'retention', keep_roles='system')",
        on_store(lambda store: store.purge_through("c", 3, "retention", keep_roles="system")),
        INVALID,
        "keep_roles",
    ),
    row(
        "preview_purge: keep_roles names an unknown role",
        "store.preview_purge('c', 3, keep_roles=['boss'])",
        on_store(lambda store: store.preview_purge("c", 3, keep_roles=["boss"])),
        INVALID,
        "keep_roles",
    ),
    # ---- orchestration (SPEC §13)
    row(
        "CompactionPolicy: blank version",
        "CompactionPolicy('')",
        lambda: lf.CompactionPolicy(""),
        INVALID,
        "version",
    ),
    row(
        "CompactionPolicy: keep_tail 0",
        "CompactionPolicy('v', keep_tail=0)",
        lambda: lf.CompactionPolicy(POLICY, keep_tail=0),
        INVALID,
        "keep_tail",
    ),
    row(
        "CompactionPolicy: keep_tail bool",
        "CompactionPolicy('v', keep_tail=True)",
        lambda: lf.CompactionPolicy(POLICY, keep_tail=True),
        INVALID,
        "keep_tail",
    ),
    row(
        "CompactionPolicy: trigger_tokens 0",
        "CompactionPolicy('v', trigger_tokens=0)",
        lambda: lf.CompactionPolicy(POLICY, trigger_tokens=0),
        INVALID,
        "trigger_tokens",
    ),
    row(
        "CompactionPolicy: token_counter not callable",
        "CompactionPolicy('v', token_counter=5)",
        lambda: lf.CompactionPolicy(POLICY, token_counter=5),  # type: ignore[arg-type]
        INVALID,
        "token_counter",
    ),
    row(
        "CompactionPolicy: keep_checkpoints negative",
        "CompactionPolicy('v', keep_checkpoints=-1)",
        lambda: lf.CompactionPolicy(POLICY, keep_checkpoints=-1),
        INVALID,
        "keep_checkpoints",
    ),
    row(
        "CompactionPolicy: keep_checkpoints None",
        "CompactionPolicy('v', keep_checkpoints=None)",
        lambda: lf.CompactionPolicy(POLICY, keep_checkpoints=None),  # type: ignore[arg-type]
        INVALID,
        "keep_checkpoints",
    ),
    row(
        "SQLiteStore.prune_versions: keep_checkpoints negative",
        "store.prune_versions('c', keep=4, keep_checkpoints=-1)",
        on_store(lambda store: store.prune_versions(CONVERSATION_ID, keep=4, keep_checkpoints=-1)),
        INVALID,
        "keep_checkpoints",
    ),
    row(
        "Compactor: policy of the wrong type",
        "Compactor(store, 'v')",
        on_store(lambda store: lf.Compactor(store, POLICY)),  # type: ignore[arg-type]
        INVALID,
        "policy",
    ),
    row(
        "Compactor: summarizer not callable",
        "Compactor(store, policy, 'summarize')",
        on_store(lambda store: lf.Compactor(store, lf.CompactionPolicy(POLICY), "x")),  # type: ignore[arg-type]
        INVALID,
        "summarizer",
    ),
    row(
        "Compactor: on_event not callable",
        "Compactor(store, policy, on_event=1)",
        on_store(lambda store: lf.Compactor(store, lf.CompactionPolicy(POLICY), on_event=1)),  # type: ignore[arg-type]
        INVALID,
        "on_event",
    ),
    row(
        "SQLiteStore: on_event not callable",
        "SQLiteStore(on_event='hook')",
        lambda: lf.SQLiteStore(on_event="hook"),  # type: ignore[arg-type]
        INVALID,
        "on_event",
    ),
    row(
        "Compactor: timeout not > 0",
        "Compactor(store, policy, timeout=0)",
        on_store(lambda store: lf.Compactor(store, lf.CompactionPolicy(POLICY), timeout=0)),
        INVALID,
        "timeout",
    ),
    row(
        "Compactor: timeout infinite",
        "Compactor(store, policy, timeout=float('inf'))",
        on_store(
            lambda store: lf.Compactor(store, lf.CompactionPolicy(POLICY), timeout=float("inf"))
        ),
        INVALID,
        "timeout",
    ),
    row(
        "CompactionPolicy: retain_days NaN",
        "CompactionPolicy('v', retain_days=float('nan'))",
        lambda: lf.CompactionPolicy(POLICY, retain_days=float("nan")),
        INVALID,
        "retain_days",
    ),
    row(
        "apply_retention: retain_days negative",
        "store.apply_retention('c', retain_days=-1)",
        on_store(lambda store: store.apply_retention("c", retain_days=-1)),
        INVALID,
        "retain_days",
    ),
    row(
        "prune_versions: older_than infinite",
        "store.prune_versions(older_than=float('inf'))",
        on_store(lambda store: store.prune_versions(older_than=float("inf"))),
        INVALID,
        "older_than",
    ),
    row(
        "Compactor.compact: blank conversation_id",
        "compactor.compact('')",
        on_store(lambda store: compactor(store).compact("")),
        INVALID,
        "conversation_id",
    ),
    row(
        "Compactor.context: max_tokens 0",
        "compactor.context('c', max_tokens=0)",
        on_store(lambda store: compactor(store).context("c", max_tokens=0)),
        INVALID,
        "max_tokens",
    ),
    row(
        "Compactor.context: token_counter returns a non-int",
        "CompactionPolicy('v', token_counter=lambda text: -1)",
        on_store(lambda store: compactor(store, token_counter=lambda text: -1).context("c", 10)),
        INVALID,
        "token_counter",
    ),
    row(
        "Compactor.context: budget too small",
        "compactor.context('c', max_tokens=10)",
        on_store(lambda store: compactor(store).context("c", max_tokens=10)),
        BUDGET,
        None,
    ),
    row(
        "ExtractiveSummarizer: max_chars_per_turn too small",
        "ExtractiveSummarizer(max_chars_per_turn=2)",
        lambda: lf.ExtractiveSummarizer(max_chars_per_turn=2),
        INVALID,
        "max_chars_per_turn",
    ),
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown() -> str:
    """The table as Markdown, as docs/bad-input.md shows it."""
    lines = [
        "<!-- Generated by `python tests/bad_input_table.py > docs/bad-input.md`; "
        "tests/test_bad_input.py checks it is up to date. -->",
        "",
        "Every row is a test (`tests/test_bad_input.py`): the exception class and `.code` are "
        "exact, `.field` names the offending argument (`InvalidInput` and `DuplicateId` only), "
        "and neither `str(error)` nor `repr(error)` contains a turn body or summary text.",
        "",
        "| kind of bad input | example | exception | `.code` | `.field` |",
        "|---|---|---|---|---|",
    ]
    for bad in ROWS:
        field = f"`{bad.field}`" if bad.field is not None else "—"
        lines.append(
            f"| {_cell(bad.kind)} | `{_cell(bad.example)}` | `{bad.error.__name__}` "
            f"| `{bad.code}` | {_cell(field)} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
