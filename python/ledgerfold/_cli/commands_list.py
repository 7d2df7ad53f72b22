"""`ledgerfold list DB`: every conversation with its turns, its summary versions, the status
of its current summary and its history boundary (SPEC §15.7). It only reads."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from ledgerfold._cli.main import (
    cli,
    conversation_keys,
    damaged_row,
    key_damage,
    key_sql,
    key_text,
    open_store,
)
from ledgerfold._cli.orphans import ORPHANED, orphan_keys, orphan_sql
from ledgerfold._cli.render import (
    boundary_json,
    echo_json,
    esc,
    plural,
    print_table,
    safe_text,
    stdout_console,
)
from ledgerfold._errors import StoreError
from ledgerfold.store._paths import connect_reading
from ledgerfold.store._sqlite import SQLiteStore

__all__ = ["conversation_row", "list_command"]

# Statuses of an accepted version; the newest of them is the conversation's summary.
_ACCEPTED = ("current", "superseded", "stale")


def conversation_row(store: SQLiteStore, conversation_id: str) -> dict[str, Any]:
    """One conversation as `list --json` prints it.

    `status` is ``current`` (the summary is in use), ``stale`` (with `reason`: marked stale
    by an edit, a retraction or revalidation, or found stale when the context is assembled)
    or ``none`` (never summarised)."""
    conversation = store.load(conversation_id)
    history = store.summary_history(conversation_id)
    accepted = [record for record in history if record.status in _ACCEPTED]
    newest = accepted[-1] if accepted else None
    summary_id = newest.envelope.id if newest is not None and newest.envelope else None
    status, reason = "none", None
    if newest is not None and newest.status == "current" and newest.envelope is not None:
        context = store.context(conversation_id, newest.envelope.policy_version)
        status, reason = (
            ("current", None) if context.fallback is None else ("stale", context.fallback)
        )
    elif newest is not None and newest.status == "stale":
        status, reason = "stale", newest.reason
    elif newest is None and (pointed := store.current_summary(conversation_id)) is not None:
        # No version of its own, yet a current summary: its row points at another
        # conversation's (its key changed outside ledgerfold: `SET id = 42` leaves the rows
        # of the old key behind). The context falls back, as `report` says; never `none`.
        context = store.context(conversation_id, pointed.policy_version)
        if context.fallback is not None:
            status, reason = "stale", context.fallback
    return {
        "conversation": conversation_id,
        "revision": conversation.revision,
        "turns": len(conversation),
        "summaries": len(accepted),
        "attempts": len(history),
        "summary": summary_id,
        "status": status,
        "reason": reason,
        "history_boundary": boundary_json(store.history_boundary(conversation_id)),
        "key_sql": None,
    }


def _row_or_damage(store: SQLiteStore, conversation_id: str) -> dict[str, Any]:
    """`conversation_row`, or, for a conversation with a row changed outside ledgerfold, a
    row of status `damaged` whose reason names the row (table, column, turn; never its
    content), its counts unknown: the other conversations are listed all the same."""
    try:
        return conversation_row(store, conversation_id)
    except StoreError as error:
        if damaged_row(error) is None:
            raise
        unknown = dict.fromkeys(("revision", "turns", "summaries", "attempts", "summary"))
        return {
            "conversation": conversation_id,
            **unknown,
            "status": "damaged",
            "reason": str(error),
            "history_boundary": None,
            "key_sql": None,
        }


def _damaged_key(key: object) -> dict[str, Any]:
    """The `damaged` row of a conversation whose key another tool stored as text that is not
    UTF-8, as a blob or as a number (`key_damage`): named as text (bad bytes replaced; a
    number by its digits, which a text key may share), nothing else read (no call can name
    it), and `key_sql`, the SQL literal that selects that key and no other."""
    unknown = dict.fromkeys(("revision", "turns", "summaries", "attempts", "summary"))
    return {
        "conversation": key_text(key),
        **unknown,
        "status": "damaged",
        "reason": key_damage(key),
        "history_boundary": None,
        "key_sql": key_sql(key),
    }


def _orphan_keys(db: str) -> list[object]:
    """The conversation keys of turn rows that no `conversations` row has (`orphan_keys`),
    in key order: no command lists or names them."""
    with closing(connect_reading(str(Path(db).resolve()), factory=sqlite3.Connection)) as conn:
        return orphan_keys(conn)


def _orphaned(key: object) -> dict[str, Any]:
    """The `damaged` row of turns whose key has no `conversations` row, with `key_sql`
    (the key as an SQL literal: text quoted) to find them by."""
    return {**_damaged_key(key), "reason": ORPHANED, "key_sql": orphan_sql(key)}


@cli.command("list", short_help="List the conversations of DB and their summary status.")
@click.argument("db")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def list_command(db: str, as_json: bool) -> None:
    """List the conversations of DB: turns, summaries, status of the current summary."""
    with open_store(db, read_only=True) as store:
        try:
            keys: list[object] = list(store.conversation_ids())
        except StoreError as error:  # a key that is not UTF-8 text: read the keys leniently
            if damaged_row(error) is None:
                raise
            keys = conversation_keys(db)
        rows = [
            _row_or_damage(store, key) if isinstance(key, str) else _damaged_key(key)
            for key in keys
        ]
    rows += [_orphaned(key) for key in _orphan_keys(db)]  # after the conversations
    if as_json:
        echo_json(rows)
        return
    if not rows:
        # One line, as other empty results say it (`search`, `report`), not a bare header.
        stdout_console().print(f"no conversation in {esc(db)}")
        return
    table = Table(
        title=Text(f"{len(rows)} {plural(len(rows), 'conversation')}"), title_justify="left"
    )
    for column in ("conversation", "turns", "summaries", "summary", "status", "boundary"):
        table.add_column(column, overflow="fold")
    for row in rows:
        boundary = row["history_boundary"]
        status = row["status"] + (f" ({row['reason']})" if row["reason"] else "")
        if row["key_sql"] is not None:
            column = "conversation_id" if row["reason"] == ORPHANED else "id"
            status += f"; in SQL: {column} = {row['key_sql']}"
        table.add_row(
            Text(safe_text(row["conversation"])),
            str(row["turns"]) if row["turns"] is not None else "-",
            str(row["summaries"]) if row["summaries"] is not None else "-",
            Text(safe_text(row["summary"] or "-")),
            Text(safe_text(status), style=_STYLE.get(row["status"], "")),
            Text(f"through {boundary['through_sequence']}" if boundary else "-"),
        )
    print_table(stdout_console(), table)


_STYLE = {"current": "green", "stale": "red", "none": "dim", "damaged": "red"}
