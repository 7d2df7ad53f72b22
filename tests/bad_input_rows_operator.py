"""Rows of the bad-input table (`bad_input_table.py`): the operator's calls on a store —
revalidation and repair, retention (SPEC §9, §15.5, §17.5) and `stats()` (SPEC §17.8)."""

from __future__ import annotations

from bad_input_support import (
    INVALID,
    STORE,
    SURROGATE,
    BadInput,
    _revalidate,
    on_file,
    on_store,
    row,
)

ROWS: tuple[BadInput, ...] = (
    # ---- revalidation and repair
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
        "revalidate_database: more hashing threads than the core takes (before the file is read)",
        "revalidate_database('missing.db', threads=5000)",
        on_file(lambda directory: _revalidate(directory / "missing.db", threads=5000)),  # type: ignore[arg-type, return-value]
        INVALID,
        "threads",
    ),
    row(
        "revalidate_database: on_event not callable",
        "revalidate_database('agent.db', on_event='hook')",
        lambda: _revalidate("agent.db", on_event="hook"),
        INVALID,
        "on_event",
    ),
    row(
        "revalidate_database: progress not callable (before the file is read)",
        "revalidate_database('agent.db', progress=5)",
        lambda: _revalidate("agent.db", progress=5),
        INVALID,
        "progress",
    ),
    row(
        "revalidate_database: on_total not callable (before the file is read)",
        "revalidate_database('agent.db', on_total='count')",
        lambda: _revalidate("agent.db", on_total="count"),
        INVALID,
        "on_total",
    ),
    row(
        "revalidate_database: mark_stale not a bool",
        "revalidate_database('agent.db', mark_stale='no')",
        lambda: _revalidate("agent.db", mark_stale="no"),
        INVALID,
        "mark_stale",
    ),
    row(
        "mark_stale: a verdict that is not a 3-tuple",
        "store.mark_stale([('c',)])",
        on_store(lambda store: store.mark_stale([("c",)])),  # type: ignore[list-item]
        INVALID,
        "verdicts[0]",
    ),
    row(
        "repair_digests: not an iterable of pairs",
        "store.repair_digests([('c',)])",
        on_store(lambda store: store.repair_digests([("c",)])),  # type: ignore[list-item]
        INVALID,
        "turns[0]",
    ),
    # ---- retention
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
    # ---- stats (SPEC §17.8): the store's counts, or one conversation's
    row(
        "stats: conversation_id bytes",
        "store.stats(b'c')",
        on_store(lambda store: store.stats(b"c")),  # type: ignore[arg-type]
        INVALID,
        "conversation_id",
    ),
    row(
        "stats: conversation_id a float",
        "store.stats(1.5)",
        on_store(lambda store: store.stats(1.5)),  # type: ignore[arg-type]
        INVALID,
        "conversation_id",
    ),
    row(
        "stats: conversation_id a bool",
        "store.stats(True)",
        on_store(lambda store: store.stats(True)),  # type: ignore[arg-type]
        INVALID,
        "conversation_id",
    ),
    row(
        "stats: empty conversation_id (None means the whole store)",
        "store.stats('')",
        on_store(lambda store: store.stats("")),
        INVALID,
        "conversation_id",
    ),
    row(
        "stats: conversation_id a lone surrogate",
        "store.stats('\\ud800')",
        on_store(lambda store: store.stats(SURROGATE)),
        INVALID,
        "conversation_id",
    ),
)
