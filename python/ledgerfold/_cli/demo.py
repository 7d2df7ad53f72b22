"""`ledgerfold demo`: a synthetic conversation of a file-organising agent, and the story
told with it (compaction, a stale summary after an edit, recovery, versions)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.text import Text

from ledgerfold._cli.main import NOT_STDIO, STDIO, UserError, check_db_path, cli, open_store
from ledgerfold._cli.render import (
    context_table,
    counted,
    echo_json,
    esc,
    outcome_json,
    print_rule,
    print_table,
    safe_text,
    stdout_console,
    tail_ids,
    text_preview,
    versions_table,
)
from ledgerfold._compactor import CompactionOutcome, Compactor
from ledgerfold._context import AssembledContext, SummaryItem
from ledgerfold._policy import CompactionPolicy
from ledgerfold.store._sqlite import SQLiteStore
from ledgerfold.summarizers._extractive import ExtractiveSummarizer
from ledgerfold.tools import run_recall

__all__ = ["demo_command"]

_DEMO_POLICY = "demo-v1"
_DEMO_KEEP_TAIL = 6


def _call(call_id: str, name: str, arguments: dict[str, str]) -> dict[str, str]:
    calls = [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
    ]
    return {"tool_calls": json.dumps(calls, separators=(",", ":"))}


def _demo_turns() -> list[dict[str, Any]]:
    """A few dozen synthetic turns of a file-organising agent (the demo's own text)."""
    turns: list[dict[str, Any]] = []

    def add(role: str, body: str, **extra: Any) -> None:
        turns.append({"id": f"m{len(turns) + 1}", "role": role, "body": body, **extra})

    def tool_round(call_id: str, name: str, args: dict[str, str], result: str, say: str) -> None:
        group = f"tools:{call_id}"
        add("assistant", say, group=group, meta=_call(call_id, name, args))
        add("tool", result, group=group, meta={"tool_call_id": call_id, "name": name})

    add("system", "You are a file-organising assistant running on this laptop.")
    add("user", "Help me tidy the project folder and tell me what is in it.")
    add(
        "user",
        "Only read local files: never upload or send anything anywhere.",
        protected=True,
        protection_reason="active-constraint",
    )
    add("assistant", "Understood: I will only read local files.")
    tool_round(
        "c1",
        "list_dir",
        {"path": "."},
        "report.md notes.txt draft-old.md tmp1.log tmp2.log tmp3.log",
        "Listing the project folder.",
    )
    add("assistant", "The folder holds six files: two documents, an old draft and three logs.")
    add("user", "What is in report.md?")
    tool_round(
        "c2",
        "read_file",
        {"path": "report.md"},
        "# Q3 report. Revenue grew 12%. Costs fell 3%.",
        "Reading report.md.",
    )
    add("assistant", "report.md is the Q3 report: revenue grew 12% and costs fell 3%.")
    add("user", "And notes.txt?")
    tool_round(
        "c3",
        "read_file",
        {"path": "notes.txt"},
        "- call the printer vendor\n- archive the old draft",
        "Reading notes.txt.",
    )
    add("assistant", "notes.txt has two to-dos: call the printer vendor; archive the old draft.")
    add(
        "assistant",
        "Shall I delete tmp1.log, tmp2.log and tmp3.log? I am waiting for your confirmation.",
        protected=True,
        protection_reason="pending-confirmation",
    )
    add("user", "Let me think about that. Meanwhile, what is in draft-old.md?")
    tool_round(
        "c4",
        "read_file",
        {"path": "draft-old.md"},
        "Outline: intro, revenue, costs, outlook.",
        "Reading draft-old.md.",
    )
    add("assistant", "draft-old.md is an early outline of the Q3 report.")
    add(
        "user",
        "From now on work only on the selected files: report.md and notes.txt.",
        protected=True,
        protection_reason="active-constraint",
    )
    add("assistant", "Noted: only report.md and notes.txt from here on.")
    add("user", "Summarise both in one paragraph.")
    add("assistant", "Q3 revenue grew 12% while costs fell 3%; two to-dos remain open.")
    add("user", "Which to-do is more urgent?")
    add("assistant", "Calling the printer vendor: the notes mark it first.")
    add("user", "How many words are in report.md?")
    tool_round("c5", "word_count", {"path": "report.md"}, "412", "Counting words in report.md.")
    add("assistant", "report.md has 412 words.")
    return turns


def _demo_conversation_id(store: SQLiteStore) -> str:
    existing = set(store.conversation_ids())
    candidate, n = "demo", 1
    while candidate in existing:
        n += 1
        candidate = f"demo-{n}"
    return candidate


def _run_demo(console: Console, db_path: Path) -> dict[str, Any]:
    """Tell the story on `console`; return what `demo --json` prints."""

    def rule(title: str) -> None:
        print_rule(console, title)

    with SQLiteStore(db_path) as store:
        cid = _demo_conversation_id(store)
        policy = CompactionPolicy(_DEMO_POLICY, keep_tail=_DEMO_KEEP_TAIL)
        numbers = iter(range(1, 1_000_000))
        compactor = Compactor(
            store,
            policy,
            ExtractiveSummarizer(max_chars_per_turn=80),
            summary_id_factory=lambda: f"{cid}-summary-{next(numbers)}",
        )

        rule("1. A conversation lands in the ledger")
        store.append_many(cid, _demo_turns())
        conversation = store.load(cid)
        protected = [turn for turn in conversation.turns if turn.protected]
        groups = {turn.group for turn in conversation.turns if turn.group}
        console.print(
            f"conversation [bold]{esc(cid)}[/] in {esc(db_path)}: {len(conversation)} turns,"
            f" {len(protected)} protected, {len(groups)} tool-call groups"
        )
        for turn in protected:
            console.print(
                f"  protected [yellow]{turn.protection_reason}[/] {turn.id} (seq {turn.sequence}):"
                f" {esc(text_preview(turn.body, 90))}"
            )

        rule(f"2. Compact (ExtractiveSummarizer, keep_tail={_DEMO_KEEP_TAIL})")
        first = compactor.compact(cid, force=True)
        _print_outcome(console, first)
        _show_context(console, store, cid, "context after compaction")
        context = store.context(cid, _DEMO_POLICY)
        conversation = store.load(cid)
        raw_ids = {item.id for item in context.items if not isinstance(item, SummaryItem)}
        tail = tail_ids(conversation, _DEMO_KEEP_TAIL)
        summary = context.summary
        ok_protected = all(turn.id in raw_ids for turn in protected)
        ok_tail = tail <= raw_ids
        console.print(
            f"{_tick(ok_protected)} every protected turn is raw   {_tick(ok_tail)} the newest"
            f" {_DEMO_KEEP_TAIL} turns are raw   {_tick(summary is not None)} the summary stands"
            f" where its last source was (sequence {summary.through_sequence if summary else '-'})"
        )

        rule("3. Edit a summarised turn")
        edited_id = "m11"
        old = conversation.get(edited_id)
        edited_body = "report.md is the Q3 report: revenue grew 15%, not 12%."
        store.edit(cid, edited_id, body=edited_body)
        console.print(
            f"edited {edited_id} (seq {old.sequence if old else '?'}), one of the summary's"
            f" sources, from {esc(repr(old.body if old else ''))} to {esc(repr(edited_body))};"
            " the summary citing it:"
        )
        first_id = first.summary.id if first.summary is not None else None
        for record in store.summary_history(cid):
            if record.envelope is not None and record.envelope.id == first_id:
                console.print(f"  {first_id}: [red]{record.status}[/] ({record.reason})")
        context = store.context(cid, _DEMO_POLICY)
        context_fallback_after_edit = context.fallback
        console.print(
            f"context fallback: [bold red]{context.fallback}[/] — all {len(context.items)} turns"
            " raw, nothing lost, the stale summary is not used"
        )

        rule("4. Re-compact")
        second = compactor.compact(cid, force=True)
        _print_outcome(console, second)

        rule("5. Append a new turn")
        new_id = f"m{len(store.load(cid)) + 1}"
        store.append(cid, "user", "Please archive draft-old.md when you get a moment.", id=new_id)
        context = store.context(cid, _DEMO_POLICY)
        reused = context.summary
        second_id = second.summary.id if second.summary is not None else None
        console.print(
            f"{_tick(reused is not None and reused.id == second_id)}"
            f" summary {reused.id if reused else '-'} still current and reused;"
            f" the new turn {new_id} appears raw: {_tick(new_id in context.ids)}"
        )
        _show_context(console, store, cid, "context after the append", rows_from=-4)

        rule("6. Compact again: a new version extends the current one, which it supersedes")
        third = compactor.compact(cid, force=True)
        _print_outcome(console, third)

        rule("7. Ask for what the summary left out: the recall_history tool")
        question = "revenue growth in the Q3 report"
        recalled = json.loads(run_recall(store, cid, {"query": question, "limit": 2}))
        console.print(f"the model calls recall_history(query={esc(question)!r}):")
        for hit in recalled["hits"]:
            console.print(
                f"  seq {hit['sequence']} {esc(hit['role'])} [dim]{esc(hit['turn_id'])}, covered"
                f" by {esc(hit['summary_id'])}[/]: {esc(text_preview(hit['text']))}"
            )
        found_original = any("12%" in hit["text"] for hit in recalled["hits"])
        console.print(
            f"{_tick(found_original)} the original turn comes back word for word, with its"
            " identity; the summary stays bounded"
        )

        rule("Version history")
        versions = [
            {
                "id": record.envelope.id if record.envelope is not None else None,
                "plan_id": record.plan_id,
                "status": record.status,
                "reason": record.reason,
                "created_at": record.created_at,
                "sources": len(record.envelope.source_ids) if record.envelope else 0,
                "fingerprint": record.envelope.source_fingerprint if record.envelope else None,
            }
            for record in store.summary_history(cid)
        ]
        print_table(console, versions_table(versions))
        final_turns = len(store.load(cid))
    return {
        "conversation": cid,
        "turns": final_turns,
        "protected": len(protected),
        "compactions": [
            outcome_json("step", step, outcome)
            for step, outcome in (("first", first), ("after-edit", second), ("after-append", third))
        ],
        "checks": {
            "protected_raw": ok_protected,
            "tail_raw": ok_tail,
            "stale_after_edit_fallback": context_fallback_after_edit,
            "summary_reused_after_append": reused is not None and reused.id == second_id,
            "recall_found_original": found_original,
        },
        "versions": versions,
    }


def _tick(ok: bool) -> str:
    return "[green]✓[/]" if ok else "[red]✗[/]"


def _print_outcome(console: Console, outcome: CompactionOutcome) -> None:
    summary = outcome.summary
    detail = (
        f"summary {summary.id}: {len(summary.source_ids)} turns,"
        f" fingerprint {summary.source_fingerprint[:20]}…"
        if summary is not None
        else f"reason {outcome.reason}"
    )
    console.print(f"compaction [bold]{outcome.status}[/]: {esc(detail)}")


def _show_context(
    console: Console, store: SQLiteStore, cid: str, title: str, rows_from: int | None = None
) -> None:
    context = store.context(cid, _DEMO_POLICY)
    conversation = store.load(cid)
    if rows_from is not None:
        context = AssembledContext(
            context.items[rows_from:], context.fallback, context.history_boundary
        )
        title += f" (last {-rows_from} items)"
    print_table(
        console,
        context_table(
            context,
            conversation,
            title=title,
            preview=True,
            tail_ids=tail_ids(conversation, _DEMO_KEEP_TAIL),
        ),
    )


@cli.command("demo", short_help="Run the end-to-end story on a demo conversation.")
@click.option(
    "--db",
    "db",
    metavar="PATH",
    help="Keep the demo database at this path, a new file (default: a temp file, removed).",
)
@click.option(
    "--append",
    is_flag=True,
    help="Add the demo conversation to a --db that holds conversations already (under a"
    " fresh name: demo-2, ...); without it, such a database is refused.",
)
@click.option("--json", "as_json", is_flag=True, help="Print what happened as one JSON object.")
def demo_command(db: str | None, append: bool, as_json: bool) -> None:
    """Run an end-to-end story: compaction, a stale summary, recovery, versions."""
    # With --json the story is told to no one; only the report is printed.
    console = Console(quiet=True) if as_json else stdout_console()
    kept: Path | None = None
    if db is not None:
        if db == STDIO:  # the demo writes a database file: never one named `-`
            raise UserError(f"--db -: {NOT_STDIO.format(what='the demo database is a file')}")
        kept = check_db_path(db, create=True)
        held = _conversations_in(db) if kept.exists() and kept.stat().st_size else 0
        if held and not append:
            raise UserError(
                f"{db}: holds {counted(held, 'conversation')} already; the demo writes its own"
                " database: give a new path, or --append to add the demo conversation to it"
            )
        report = _run_demo(console, kept)
        beside = f", beside its {counted(held, 'other conversation')}" if held else ""
        name = report["conversation"]
        console.print(Text(f"database kept at {safe_text(kept)} (conversation {name}{beside})"))
    else:
        directory = tempfile.mkdtemp(prefix="ledgerfold-demo-")
        temporary = Path(directory) / "demo.db"
        try:
            report = _run_demo(console, temporary)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        # Step 1 named it: say it is gone, and how to keep one to inspect.
        console.print(
            Text(
                f"temporary database {safe_text(temporary)} removed; run"
                " `ledgerfold demo --db PATH` to keep one for `ledgerfold inspect`"
            )
        )
    if as_json:
        echo_json({**report, "db": str(kept) if kept is not None else None})


def _conversations_in(db: str) -> int:
    """How many conversations the database at `db` holds (a read-only open: a refused demo
    writes nothing)."""
    with open_store(db, read_only=True) as store:
        return len(store.conversation_ids())
