"""`ledgerfold search DB CONVERSATION QUERY`: the recall search (SPEC §16.1) from a shell."""

from __future__ import annotations

import click
from rich.table import Table

from ledgerfold._cli.commands_upgrade import schema_state
from ledgerfold._cli.main import Count, UserError, cli, open_store, require_conversation
from ledgerfold._cli.render import (
    echo_json,
    elided_caption,
    esc,
    one_line,
    plural,
    print_table,
    stdout_console,
    turn_id_cell,
)
from ledgerfold._errors import StoreError
from ledgerfold._segment import query_terms
from ledgerfold.store._schema import SCHEMA_VERSION

__all__ = ["search_command"]


@cli.command("search", short_help="Search the turns of a conversation (recall).")
@click.argument("db")
@click.argument("conversation_id", metavar="CONVERSATION")
@click.argument("query")
@click.option(
    "--all",
    "search_all",
    is_flag=True,
    help="Search every live turn, not only those the context no longer shows raw.",
)
@click.option(
    "--limit",
    type=Count(1, 100),
    default=5,
    show_default=True,
    help="At most this many turns.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the hits as JSON.")
def search_command(
    db: str, conversation_id: str, query: str, search_all: bool, limit: int, as_json: bool
) -> None:
    """Find the turns of CONVERSATION that match QUERY (plain words, any language; never
    query syntax). By default only the turns its current summary covers are searched: what
    the model no longer sees raw (every turn, when it has no current summary)."""
    scope = "all" if search_all else "covered"
    with open_store(db, read_only=True) as store:
        require_conversation(store, conversation_id)
        if not query_terms(query):  # "", "???": it said no turn matched, as if it had looked
            raise UserError(
                f"QUERY {_quoted(query)} has no word to search for (plain words, numbers or codes)"
            )
        # Without a current summary "covered" is every live turn (SPEC §16.5): say so.
        summarised = search_all or store.current_summary(conversation_id) is not None
        # Purged turns are found by no search: a miss says so rather than suggest `--all`
        # when no live turn is left to search.
        boundary = store.history_boundary(conversation_id)
        live = store.stats(conversation_id).turns
        try:
            hits = store.search(conversation_id, query, limit=limit, scope=scope)
        except StoreError:
            version, _ = schema_state(db)
            if version >= SCHEMA_VERSION:
                raise
            raise UserError(
                f"{db}: schema version {version} has no search index yet;"
                f" run `ledgerfold upgrade {db}` first"
            ) from None
    if as_json:
        echo_json(
            {
                "conversation": conversation_id,
                "scope": scope,
                "hits": [
                    {
                        "turn_id": hit.turn_id,
                        "sequence": hit.sequence,
                        "role": hit.role,
                        "summary_id": hit.summary_id,
                        "score": hit.score,
                        "text": hit.text,
                    }
                    for hit in hits
                ],
            }
        )
        return
    console = stdout_console()
    searched = scope if summarised else "every turn: no current summary"
    if not hits:
        if boundary is not None and not live:
            console.print(
                f"no turn of {esc(conversation_id)} matches: every turn through sequence"
                f" {boundary.through_sequence} was purged, and search finds only live turns"
            )
        elif search_all:
            console.print(f"no turn of {esc(conversation_id)} matches")
        elif summarised:
            console.print(
                f"no covered turn of {esc(conversation_id)} matches"
                " (--all also searches the turns the context shows raw)"
            )
        else:
            console.print(f"no turn of {esc(conversation_id)} matches ({searched})")
        return
    table = Table(
        title=f"{len(hits)} {plural(len(hits), 'hit')} in {esc(conversation_id)} ({searched})"
    )
    for column in ("seq", "role", "turn", "summary", "passage"):
        table.add_column(column, overflow="fold")
    for hit in hits:
        table.add_row(
            str(hit.sequence),
            hit.role,
            turn_id_cell(hit.turn_id, conversation_id),
            esc(hit.summary_id or "-"),
            esc(one_line(hit.text)),
        )
    elided_caption(table, conversation_id)
    print_table(console, table)


#: A refused query longer than this is cut in the message (a pasted file is not echoed).
QUOTED_CHARS = 80


def _quoted(query: str) -> str:
    """The query as the message shows it: whole when short, else its start and its length."""
    if len(query) <= QUOTED_CHARS:
        return repr(query)
    return f"{query[: QUOTED_CHARS - 1]!r}… ({len(query):,} characters)"
