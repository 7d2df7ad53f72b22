"""The HTML report page (`ledgerfold report --html`): the totals, the conversations that
need attention first, each linked to its inspector page. Built as `html.py` builds the
inspector's pages, with its escaping (`_e`) and page frame."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ledgerfold._cli.html import _LABELS, _e, _page, _pct, _status
from ledgerfold._cli.html_data import REPORT_ROWS, ConversationRow, DatabaseView
from ledgerfold._cli.render import counted, label_for
from ledgerfold.store._stats import StoreStats

__all__ = ["ID_CHARS", "orphaned_note", "render_database"]


#: The mini bar's parts: its raw part is every live turn the current summary does not cover
#: (system prompts and protected turns too), not only the tail the inspector calls "raw tail".
_BAR_LABELS = {**_LABELS, "raw": "raw (not covered)"}


def _mini_bar(row: ConversationRow) -> str:
    counts = row.counts
    covered = min(counts.get("covered", 0), counts.get("live", 0) + counts.get("purged", 0))
    live_raw = max(counts.get("live", 0) - covered, 0)
    parts = [
        ("compacted", covered),
        ("raw", live_raw),
        ("purged", counts.get("purged", 0)),
        ("retracted", counts.get("retracted", 0)),
    ]
    total = sum(n for _, n in parts)
    cells = "".join(
        f'<span class="{s}" style="width:{_pct(n, total)}" title="{n} {_BAR_LABELS[s]}"></span>'
        for s, n in parts
        if n
    )
    return f'<div class="bar">{cells}</div>'


_STAT_LABELS = {
    "conversations": "conversations",
    "turns": "live turns",
    "turns_retracted": "retracted turns",
    "turns_purged": "purged turns",
    "purged_without_summary": "purged, no current summary",
    "sealed_lost": "purged, not in the current summary",
}


#: The card of the keys of turns with no `conversations` row (`_totals`).
ORPHANED_CARD = "orphaned_keys"

#: A conversation never compacted falls back with `no-summary`: not trouble, and said so.
NO_SUMMARY = "no-summary"
NO_SUMMARY_NOTE = " (not compacted yet)"

# Cards that name conversations in trouble now (stale and failed records may be history:
# the failed summaries' card is one when a failure came after the last accepted summary).
_TROUBLE = (
    "fallbacks.stale-summary:",
    "fallbacks.preserved-missing",
    "fallbacks.duplicate-id",
    "purged_without_summary",
    "sealed_lost",
)


def _totals(stats: StoreStats, failed_now: int, orphaned: int = 0) -> str:
    """`SQLiteStore.stats()` as cards: each carries its key (`data-stat`) and value; the
    fallbacks also as one total (`fallbacks`), shown when there are none by reason too.
    Trouble now is highlighted (`bad`): `failed_now` failures since a conversation's last
    accepted summary make the failed summaries' card so. `orphaned` keys of turns with no
    `conversations` row (which `stats()` does not count as conversations, and the page's
    heading does) get a card of their own after the conversations', in trouble."""
    trouble = (*_TROUBLE, "summaries.failed") if failed_now else _TROUBLE
    cards = [
        (key, label, getattr(stats, key))
        for key, label in _STAT_LABELS.items()
        if key not in ("purged_without_summary", "sealed_lost")
    ]
    if orphaned:
        cards.insert(1, (ORPHANED_CARD, "orphaned turn keys", orphaned))
        trouble = (*trouble, ORPHANED_CARD)
    cards += [(f"summaries.{s}", f"{s} summaries", n) for s, n in stats.summaries.items()]
    cards.append(("fallbacks", "contexts falling back", sum(stats.fallbacks.values())))
    cards += [
        (f"fallbacks.{r}", f"fallback: {r}" + (NO_SUMMARY_NOTE if r == NO_SUMMARY else ""), n)
        for r, n in stats.fallbacks.items()
    ]
    cards.append(
        (
            "purged_without_summary",
            _STAT_LABELS["purged_without_summary"],
            stats.purged_without_summary,
        )
    )
    cards.append(("sealed_lost", _STAT_LABELS["sealed_lost"], stats.sealed_lost))
    return (
        '<div class="stats" id="totals">'
        + "".join(
            f'<div class="stat{" bad" if n and key.startswith(trouble) else ""}"'
            f' data-stat="{_e(key)}"><b>{n:,}</b>{_e(label_for(n, label))}</div>'
            for key, label, n in cards
        )
        + "</div>"
    )


#: Characters of a conversation ID shown in the report's tables (the rest is counted; the
#: inspector page shows it whole): one long ID must not push every other row off the screen.
ID_CHARS = 256


def _short_id(conversation_id: str) -> str:
    """The ID as a table shows it: cut at `ID_CHARS`, and free to wrap after each `/`
    (`<wbr>`), so `tau-bench/airline/task9/trial3` breaks between its parts, not in a word."""
    if len(conversation_id) <= ID_CHARS:
        return _wrappable(conversation_id)
    more = counted(len(conversation_id) - ID_CHARS, "more character")
    return f"{_wrappable(conversation_id[:ID_CHARS])}<span class=note> … {more}</span>"


def _wrappable(text: str) -> str:
    """A `/` that separates words (`gpt-4o/sample15`, `../x`; not the one of `</b>`) is
    followed by a `<wbr>`."""
    return "<wbr>".join(_e(part) for part in _PARTS.split(text))


_PARTS = re.compile(r"(?<=[\w.-]/)")


def _conversation_cell(row: ConversationRow, links: Mapping[str, str]) -> str:
    # A key no command can name has no page: the one its shown text links to is another
    # conversation's (the text key "42" beside a key another tool stored as the number 42).
    href = links.get(row.conversation_id) if row.named else None
    if href is None:
        return f"<td class=mono>{_short_id(row.conversation_id)}</td>"
    return f'<td class=mono><a href="{_e(href)}">{_short_id(row.conversation_id)}</a></td>'


def _conversation_rows(rows: list[ConversationRow], links: Mapping[str, str]) -> str:
    out = []
    for row in rows:
        statuses = " ".join(
            f'<span class="st st-{_e(s)}">{_e(s)} {n}</span>'
            for s, n in sorted(row.statuses.items())
        )
        counts = row.counts
        why = (
            "<td><ul class=why>" + "".join(f"<li>{_e(w)}</li>" for w in row.why) + "</ul></td>"
            if row.why
            else ""
        )
        out.append(
            f"<tr>{_conversation_cell(row, links)}{why}<td>{counts.get('live', 0)}</td>"
            f"<td>{counts.get('purged', 0)}</td><td>{counts.get('retracted', 0)}</td>"
            f"<td>{counts.get('covered', 0)}</td><td>{_mini_bar(row)}</td>"
            f"<td class=mono>{_e(row.current or '—')}</td><td>{statuses}</td>"
            f"<td>{'' if row.boundary is None else row.boundary}</td></tr>"
        )
    return "".join(out)


def _head(why: bool) -> str:
    columns = ["conversation", *(["why"] if why else [])]
    columns += ["live", "purged", "retracted", "covered", "", "current summary", "versions"]
    return "".join(f"<th>{c}</th>" for c in [*columns, "boundary ≤"])


def orphaned_note(orphaned: int) -> str:
    """What the count of conversations holds besides the `conversations` rows: the keys of
    turns left with no row there (listed as damage)."""
    if not orphaned:
        return ""
    keys = counted(orphaned, "key")
    return f" (of them {keys} whose turns have no row in table conversations)"


def render_database(view: DatabaseView, links: Mapping[str, str] | None = None) -> str:
    """The report page of a whole database: the store's totals, the conversations that need
    attention (each with why), then the rest; `links` maps a conversation ID to the
    (relative, already URL-quoted) address of its inspector page."""
    links = links or {}
    flagged = [row for row in view.conversations if row.why]
    others = [row for row in view.conversations if not row.why]
    left_out = view.total_conversations - len(view.conversations)
    flagged_out = view.attention_total - len(flagged)
    note = ""
    if left_out > 0:
        note = (
            f'<p class="note" id="left-out">{counted(left_out, "more conversation")} not listed'
            f" ({flagged_out:,} of them need attention); no inspector page was written for"
            f" them. The report lists at most {REPORT_ROWS:,}.</p>"
        )
    attention_html = (
        f'<table id="attention"><thead><tr>{_head(True)}</tr></thead>'
        f"<tbody>{_conversation_rows(flagged, links)}</tbody></table>"
        if flagged
        else '<p class="note" id="attention">No conversation needs attention.</p>'
    )
    others_html = (
        f'<table id="conversations"><thead><tr>{_head(False)}</tr></thead>'
        f"<tbody>{_conversation_rows(others, links)}</tbody></table>"
        if others
        else '<p class="note" id="conversations">None.</p>'
    )
    problems = "".join(
        f"<tr><td class=mono>{_short_id(cid)}</td><td class=mono>{_e(sid or f'(plan {plan})')}</td>"
        f"<td>{_status(status)}</td><td>{_e(reason or '')}</td>"
        f"<td class=nw>{_e(created[:19].replace('T', ' '))}</td></tr>"
        for cid, sid, plan, status, reason, created in view.problems
    )
    problem_html = (
        '<table id="problems"><thead><tr><th>conversation</th><th>summary</th><th>status</th>'
        f"<th>reason</th><th>created</th></tr></thead><tbody>{problems}</tbody></table>"
        if problems
        else '<p class="note" id="problems">No stale or failed summaries.</p>'
    )
    totals = _totals(view.stats, view.failed_now, view.orphaned) if view.stats is not None else ""
    body = (
        f"<h1>Database <code>{_e(view.path)}</code></h1>"
        f'<p class="sub">ledgerfold report · {counted(view.total_conversations, "conversation")}'
        f"{_e(orphaned_note(view.orphaned))}</p>{totals}"
        f"<h2>Needs attention ({view.attention_total:,})</h2>{attention_html}"
        f"<h2>Other conversations ({view.total_conversations - view.attention_total:,})</h2>"
        f"{others_html}{note}"
        f"<h2>Stale and failed summaries (newest first)</h2>{problem_html}"
    )
    return _page(f"ledgerfold report · {view.path}", body)
