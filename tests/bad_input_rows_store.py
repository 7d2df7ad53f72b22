"""Rows of the bad-input table (`bad_input_table.py`): `SQLiteStore` (SPEC §12) and search
(SPEC §16)."""

from __future__ import annotations

from pathlib import Path

import ledgerfold as lf
from bad_input_support import (
    CONVERSATION_ID,
    DUPLICATE,
    INVALID,
    POLICY,
    SECRET_BODY,
    STORE,
    SURROGATE,
    BadInput,
    _closed_store,
    _commit_twice,
    _empty_file,
    _read_only_write,
    _search_v4_read_only,
    _sqlite_file,
    _text_file,
    on_damaged,
    on_file,
    on_store,
    on_utf16_store,
    row,
)

ROWS: tuple[BadInput, ...] = (
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
        "store.context('c', policy)  # body + 0xFF by another tool: error names turn, seq, column",
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
        "damaged file: a conversation revision that is not a count",
        "store.load('c')  # conversations.revision = 'three'",
        on_damaged(
            "UPDATE conversations SET revision = 'three' WHERE id = 'c' OR ? IS NULL",
            lambda store: store.load(CONVERSATION_ID),
        ),
        STORE,
        None,
    ),
    row(
        "damaged file: an edit leaving a damaged field as it is",
        "store.edit('c', 't6', body=body)  # meta = '{not json'; edit(meta=...) repairs it",
        on_damaged(
            "UPDATE turns SET meta = '{not json' WHERE id = 't6' OR ? IS NULL",
            lambda store: store.edit(CONVERSATION_ID, "t6", body=SECRET_BODY),
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
        "append_chat_messages: call id named twice by one message",
        "store.append_chat_messages('c', [{'role': 'assistant', 'tool_calls': [{'id': 'k'},"
        " {'id': 'k'}]}])",
        on_store(
            lambda store: store.append_chat_messages(
                "c",
                [{"role": "assistant", "content": "", "tool_calls": [{"id": "k"}, {"id": "k"}]}],
            )
        ),
        INVALID,
        "messages[0].tool_calls[1].id",
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
    # ---- a file whose text is stored as UTF-16: U+FFFE/U+FFFF would be stored as U+FFFD
    row(
        "append: U+FFFF in a body, UTF-16 file",
        "store.append('c', 'user', body + '\\uffff')  # PRAGMA encoding = 'UTF-16le'",
        on_utf16_store(lambda s: s.append(CONVERSATION_ID, "user", SECRET_BODY + "\uffff")),
        INVALID,
        "body",
    ),
    row(
        "edit: U+FFFE in a body, UTF-16 file",
        "store.edit('c', 't1', body=body + '\\ufffe')  # PRAGMA encoding = 'UTF-16le'",
        on_utf16_store(lambda s: s.edit(CONVERSATION_ID, "t1", body=SECRET_BODY + "\ufffe")),
        INVALID,
        "body",
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
)
