"""The HTML inspector's pages: pure functions from the gathered views (`html_data.py`) to one
self-contained document (inline CSS, no script, no network).

Every value from the ledger goes through `_e` (IDs, reasons: HTML escaping, quotes
included, and the terminal's spelling of control, bidirectional and separator characters)
or `_text` (bodies and summary text: HTML escaping, and control characters spelled out);
a Content-Security-Policy that allows
no script at all is the second line of defence.
"""

from __future__ import annotations

import json
import re
from html import escape
from typing import Any

from ledgerfold._cli.html_data import (
    CONTEXT_HEAD,
    MESSAGE_CHARS,
    STATES,
    ConversationView,
    Mark,
    VersionRow,
)
from ledgerfold._cli.render import counted, label_for, safe_text
from ledgerfold.adapters._chat import SUMMARY_OPEN
from ledgerfold.summarizers._extractive import OMITTED_LINE

__all__ = ["render_conversation"]

_LABELS = {
    "raw": "raw tail",
    "protected": "protected",
    "preserved": "preserved",
    "compacted": "compacted",
    "purged": "purged",
    "retracted": "retracted",
    "damaged": "damaged",
    "mixed": "mixed (aggregated)",
}
_HINTS = {
    "raw": "sent to the model as written",
    "protected": "never summarised (its reason)",
    "preserved": "system role, open tool call, or pinned group",
    "compacted": "covered by the current summary",
    "purged": "raw text gone (retention)",
    "retracted": "withdrawn from the ledger",
    "damaged": "changed outside ledgerfold: cannot be read back, not shown",
}

_CSS = """
:root{--raw:#3b82f6;--protected:#f59e0b;--preserved:#8b5cf6;--compacted:#10b981;
--purged:#9ca3af;--retracted:#ef4444;--damaged:#111827;--ink:#1f2937;--muted:#6b7280;
--line:#e5e7eb}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
color:var(--ink);margin:0;background:#f8fafc}
main{max-width:1200px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 10px}
.sub{color:var(--muted);margin:0 0 16px}
code,.mono{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,monospace;font-size:12.5px}
.card{background:#fff;border:1px solid var(--line);border-radius:10px;padding:16px 18px}
.stats{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0}
.stat{background:#fff;border:1px solid var(--line);border-radius:8px;padding:8px 12px}
.stat b{display:block;font-size:18px}
.legend{display:flex;flex-wrap:wrap;gap:8px 18px;margin:6px 0 14px;padding:0;list-style:none}
.legend li{display:flex;align-items:center;gap:6px}
.legend small{color:var(--muted)}.legend .zero{opacity:.45}
.sw.bd{width:0;border-left:3px dashed #111827;border-radius:0;height:16px}
h1 code{font-size:inherit}
.sw{width:14px;height:14px;border-radius:3px;display:inline-block}
.timeline{position:relative;height:104px;margin:4px 0 6px}
.band{position:absolute;top:0;height:30px;background:#d1fae5;border:1.5px solid var(--compacted);
border-radius:6px;color:#065f46;font-size:12px;padding:5px 8px;overflow:hidden;
white-space:nowrap;text-overflow:ellipsis;min-width:6px}
.track{position:absolute;top:40px;left:0;right:0;height:34px;background:#f1f5f9;
border-radius:6px;overflow:hidden}
.m{position:absolute;top:0;bottom:0;min-width:2px}
.m.t{border-right:1px solid rgba(255,255,255,.75)}
.raw{background:var(--raw)}.protected{background:var(--protected)}
.preserved{background:var(--preserved)}.compacted{background:var(--compacted)}
.purged{background:repeating-linear-gradient(45deg,#9ca3af 0 4px,#d1d5db 4px 8px)}
.retracted{background:repeating-linear-gradient(45deg,#ef4444 0 3px,#fecaca 3px 7px)}
.damaged{background:repeating-linear-gradient(-45deg,#111827 0 3px,#fde047 3px 7px)}
.sw.mixed{background:linear-gradient(var(--raw) 0 60%,var(--protected) 60% 100%)}
.boundary{position:absolute;top:34px;height:48px;border-left:3px dashed #111827}
.boundary span{position:absolute;top:48px;left:-2px;font-size:11.5px;white-space:nowrap;
color:#111827;background:#f8fafc;padding:0 4px}
.boundary.end span{left:auto;right:1px;top:44px;z-index:1}
.axis{position:absolute;top:78px;left:0;right:0;font-size:11.5px;color:var(--muted)}
.axis span:last-child{position:absolute;right:0}
.summary-text{white-space:pre-wrap;margin:8px 0 0;max-height:320px;overflow:auto;
background:#f0fdf4;border-left:4px solid var(--compacted);padding:10px 12px;border-radius:4px}
.sline{min-height:1.2em}.purged-note{margin-left:8px;font-size:11.5px;color:#7c2d12;
background:#ffedd5;border-radius:8px;padding:0 6px}
.cites{margin-left:8px;white-space:nowrap}
.cite{font-size:11.5px;color:#065f46;background:#d1fae5;border-radius:8px;padding:0 6px;
margin-left:4px;text-decoration:none}.cite:hover{text-decoration:underline}
#sources{margin-top:10px;max-height:480px;overflow:auto}
#sources summary{cursor:pointer;color:var(--muted)}
:target{outline:2px solid var(--compacted)}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid var(--line)}
th,td{text-align:left;padding:6px 10px;border-bottom:1px solid var(--line);vertical-align:top}
th{background:#f1f5f9;font-weight:600;font-size:12.5px;white-space:nowrap}
td.mono{overflow-wrap:anywhere}td.nw{white-space:nowrap}
tr.is-current td{background:#ecfdf5}
.st{padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;white-space:nowrap;
display:inline-block;margin:1px 0}
.st-current{background:#d1fae5;color:#065f46}.st-superseded{background:#e5e7eb;color:#374151}
.st-stale{background:#fee2e2;color:#991b1b}.st-failed,.st-rejected{background:#fef3c7;color:#92400e}
.msg{background:#fff;border:1px solid var(--line);border-left:4px solid var(--raw);
border-radius:6px;padding:8px 12px;margin:8px 0}
.msg.summary{border-left-color:var(--compacted);background:#f0fdf4}
.msg.system{border-left-color:var(--preserved)}
.msg.tool{border-left-color:#64748b}
.msg header{font-size:12px;color:var(--muted);margin-bottom:4px}
.msg pre{white-space:pre-wrap;word-break:break-word;margin:0;
font:12.5px/1.45 ui-monospace,"DejaVu Sans Mono",Menlo,monospace}
.note{color:var(--muted);font-style:italic;margin:8px 0}
.alert{background:#fee2e2;color:#991b1b;border-radius:8px;padding:8px 12px;margin:10px 0}
ul.why{margin:0;padding-left:16px;color:#991b1b;min-width:180px;max-width:260px;
overflow-wrap:anywhere}
#attention .bar{min-width:70px}#attention td.mono{min-width:90px}
.stat.bad{border-color:#fca5a5;background:#fef2f2}
table#attention{border-left:4px solid #ef4444}
.back{font-size:13px;margin:0 0 8px;display:inline-block}
.bar{display:flex;height:12px;min-width:160px;border-radius:3px;overflow:hidden;
background:#f1f5f9}
"""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _e(value: object) -> str:
    """An ID, a reason or a label: HTML-escaped, with the characters that would reorder or
    hide it spelled out as on the terminal (`safe_text`: a bidirectional override in
    `"\u202eevil\u202c"` would show another conversation's name, "live")."""
    return escape(safe_text(value), quote=True)


# C0 and C1 controls but tab, newline and carriage return: an HTML page cannot hold them (a
# parse error; a NUL is dropped), so they are spelled out as on the terminal.
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _text(value: str) -> str:
    """A body or a summary's text: HTML-escaped, its control characters spelled out
    (`\\x00`); right-to-left text keeps its marks (each sits in a block of its own, so its
    direction ends there)."""
    return escape(_CONTROLS.sub(lambda match: f"\\x{ord(match.group()):02x}", value), quote=True)


def _page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head>"
        f"<body><main>{body}</main></body></html>\n"
    )


def _pct(value: int, total: int) -> str:
    return f"{100 * value / max(total, 1):.4f}%"


def _mark_title(mark: Mark, labels: dict[str, str] = _LABELS) -> str:
    span = f"seq {mark.first}" if mark.first == mark.last else f"seq {mark.first}–{mark.last}"
    turns = counted(mark.count, "turn")
    if mark.state == "mixed":
        parts = ", ".join(f"{n:,} {labels[s]}" for s, n in mark.mix)
        return f"{span} · {turns}: {parts}"
    what = f"{span} · {mark.label.strip()}" if mark.label else f"{span} · {turns}"
    return f"{what} · {labels[mark.state]}: {mark.detail}"


def _legend(counts: dict[str, int], mixed: bool, unsummarised: str | None = None) -> str:
    """The timeline's key. With no summary in use (`unsummarised` says why: none yet, or the
    context falls back) every turn is raw: not a "raw tail". When it
    shows purged or retracted turns, it first says how many turns it shows, and how they
    add up to the "turns" card's live ones."""
    items = []
    gone = {state: counts.get(state, 0) for state in ("purged", "retracted")}
    if any(gone.values()):
        shown = sum(counts.get(state, 0) for state in STATES)
        parts = "".join(f", {n:,} {state}" for state, n in gone.items() if n)
        items.append(
            f'<li id="legend-total"><b>{counted(shown, "turn")}</b> <small>on the timeline:'
            f" {shown - sum(gone.values()):,} live (the turns card){parts}</small></li>"
        )
    for state in STATES:
        if state == "damaged" and not counts.get(state):
            continue  # named only on a page that has one
        zero = ' class="zero"' if not counts.get(state) else ""
        label, hint = _LABELS[state], _HINTS[state]
        if state == "raw" and unsummarised is not None:
            label, hint = "raw", f"{hint} ({unsummarised})"
        items.append(
            f'<li{zero}><span class="sw {state}"></span><b>{label}</b>'
            f" {counts.get(state, 0):,} <small>{hint}</small></li>"
        )
    if mixed:
        items.append(
            '<li><span class="sw mixed"></span><b>mixed</b> <small>short runs merged,'
            " filled in proportion (hover for counts)</small></li>"
        )
    items.append('<li><span class="sw bd"></span><b>history boundary</b></li>')
    return f'<ul class="legend" id="legend">{"".join(items)}</ul>'


def _mix_fill(mark: Mark) -> str:
    """A mixed mark's fill: its states stacked top to bottom in proportion to their counts."""
    if not mark.mix:
        return ""
    stops, done = [], 0
    for state, count in mark.mix:
        start, done = done, done + count
        stops.append(
            f"var(--{state}) {100 * start / mark.count:.1f}% {100 * done / mark.count:.1f}%"
        )
    return f";background:linear-gradient({','.join(stops)})"


def _timeline(view: ConversationView) -> str:
    total = view.total
    # With no summary in use every turn is raw, not a "raw tail" (as the legend says).
    labels = _LABELS if view.fallback is None else {**_LABELS, "raw": "raw"}
    parts = []
    if view.band is not None and view.summary is not None:
        start, end, first, last = view.band
        label = (
            f"summary {view.summary.id} · {counted(len(view.summary.source_ids), 'turn')} · seq"
            f" {first}–{last}"
        )
        parts.append(
            f'<div class="band" id="band" style="left:{_pct(start, total)};'
            f'width:{_pct(end - start, total)}" title="{_e(label)}">{_e(label)}</div>'
        )
    marks = "".join(
        f'<div class="m {m.state}{" t" if m.label else ""}" style="left:{_pct(m.start, total)};'
        f'width:{_pct(m.count, total)}{_mix_fill(m)}" title="{_e(_mark_title(m, labels))}"></div>'
        for m in view.marks
    )
    parts.append(f'<div class="track" id="track">{marks}</div>')
    if view.boundary is not None and view.boundary_at is not None:
        text = f"history boundary ≤ seq {view.boundary.through_sequence}"
        # Past the middle, the label reads leftwards from the line: rightwards, a boundary
        # near the end would push it past the timeline and off the page.
        side = " end" if 2 * view.boundary_at > total else ""
        parts.append(
            f'<div class="boundary{side}" id="boundary"'
            f' style="left:{_pct(view.boundary_at, total)}">'
            f"<span>{_e(text)}</span></div>"
        )
    if view.marks:
        parts.append(
            f'<div class="axis"><span>seq {view.marks[0].first}</span>'
            f"<span>seq {view.marks[-1].last}</span></div>"
        )
    return f'<div class="timeline">{"".join(parts)}</div>'


def _status(status: str) -> str:
    return f'<span class="st st-{_e(status)}">{_e(status)}</span>'


#: A summary record the store cannot read, in the versions table.
_DAMAGED = ' <span class="st st-stale damaged-record">record changed outside ledgerfold</span>'


def _versions(rows: tuple[VersionRow, ...]) -> str:
    if not rows:
        return '<p class="note">No summary versions yet.</p>'
    head = "".join(
        f"<th>{c}</th>"
        for c in ("#", "id", "status", "reason", "created", "sources", "fingerprint", "parent_id")
    )
    body = []
    for number, row in enumerate(rows, 1):
        ident = row.id if row.id is not None else f"(plan {row.plan_id})"
        fingerprint = (row.fingerprint[:12] + "…") if row.fingerprint else ""
        css = ' class="is-current"' if row.status == "current" else ""
        body.append(
            f"<tr{css}><td>{number}</td><td class=mono>{_e(ident)}</td>"
            f"<td>{_status(row.status)}</td><td>{_e(row.reason or '')}"
            f"{_DAMAGED if row.damaged else ''}</td>"
            f"<td class=nw>{_e(row.created_at[:19].replace('T', ' '))}</td><td>{row.sources}</td>"
            f"<td class='mono nw'>{_e(fingerprint)}</td>"
            f"<td class=mono>{_e(row.parent_id or '')}</td></tr>"
        )
    return (
        f'<table id="versions"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    )


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return _text(text)
    more = counted(len(text) - limit, "more character")
    return f"{_text(text[:limit])}<span class=note> … {more}</span>"


def _message(message: dict[str, Any], limit: int) -> str:
    content = message.get("content")
    # None: a message that only calls tools (`to_chat_messages` sends `content: null`).
    text = (
        content
        if isinstance(content, str)
        else ""
        if content is None
        else json.dumps(content, ensure_ascii=False)
    )
    kind = message.get("role", "")
    css = "summary" if kind == "system" and SUMMARY_OPEN in text else kind
    extra = []
    for key in ("name", "tool_call_id"):
        if key in message:
            extra.append(f"{key} {message[key]}")
    if "tool_calls" in message:
        calls = json.dumps(message["tool_calls"], ensure_ascii=False)
        extra.append(f"tool_calls {calls[:300]}")
    header = " · ".join([kind, *extra])
    body = _clip(text, limit) if content is not None else "<span class=note>(no text)</span>"
    return f'<div class="msg {_e(css)}"><header>{_e(header)}</header><pre>{body}</pre></div>'


def _context(view: ConversationView) -> str:
    call = f"<code>to_chat_messages(store.context(…, {_e(view.policy_version)}))</code>"
    intro = (
        f'<p class="sub">{counted(view.message_count, "message")}, as {call} gives them.</p>'
        if view.unsendable is None
        else f'<p class="sub">No messages: {call} raises <code>{view.raises}</code>.</p>'
    )
    if view.fallback is not None:
        sent = "every turn is sent raw" if view.message_count else "the context is empty"
        if view.dropped and view.message_count:
            sent = "the turns are sent raw"
        elif view.unsendable is not None:
            sent = "no message can be sent (below)"
        if view.fallback == "no-summary" and view.message_count:  # not compacted yet: no alarm
            intro += (
                f'<p class="note" id="fallback">Fallback: no-summary — {sent}'
                " (not compacted yet).</p>"
            )
        else:
            intro += f'<p class="alert" id="fallback">Fallback: {_e(view.fallback)} — {sent}.</p>'
    if view.unsendable is not None:
        what = "assembled" if view.raises == "StoreError" else "turned into chat messages"
        intro += (
            f'<p class="alert" id="unsendable">The context cannot be {what}:'
            f" {_e(view.unsendable)}</p>"
        )
    if view.dropped and view.unsendable is None:
        intro += (
            f'<p class="note" id="left-out">{counted(view.dropped, "raw turn")} left out of'
            " the messages: a tool call without its results, or a result without its call,"
            " which providers refuse (the ledger keeps them).</p>"
        )
    items = [_message(m, MESSAGE_CHARS) for m in view.messages]
    if view.omitted:
        omitted = counted(view.omitted, "message")
        items.insert(CONTEXT_HEAD, f'<p class="note">… {omitted} not shown …</p>')
    return intro + f'<div id="context">{"".join(items)}</div>'


def _summary_lines(view: ConversationView) -> str:
    """The summary's text, line by line, each cited line followed by links to its sources
    (SPEC §16.3)."""
    lines = []
    for line, cited in view.summary_lines:
        links = "".join(
            f'<a class="cite" href="#{source.anchor}" title="{_e(source.turn_id)}">'
            f"seq {source.sequence} {_e(source.role)}</a>"
            for source in cited
        )
        sources = f'<span class="cites">{links}</span>' if links else ""
        purged = _purged_note(line, view)
        lines.append(f'<div class="sline">{_text(line)}{sources}{purged}</div>')
    return "".join(lines)


def _purged_note(line: str, view: ConversationView) -> str:
    """A note on the summary's marker of omitted turn lines (SPEC §16.5) whose turns were
    purged, in part or all: written before the purge, its "recall_history returns them"
    no longer holds for those (the stored text, and the context, keep it as written)."""
    found = OMITTED_LINE.match(line)
    if found is None or view.boundary is None:
        return ""
    through = view.boundary.through_sequence
    first = int(found.group(2)) if found.group(2) is not None else None
    last = int(found.group(3) or found.group(2)) if first is not None else None
    if first is not None and first > through:
        return ""
    what = (
        "returns none of them"
        if last is not None and last <= through
        else f"can return only those after sequence {through}"
    )
    return (
        f'<span class="purged-note">turns through sequence {through} were purged'
        f" ({_e(view.boundary.reason)}): recall_history {what}</span>"
    )


def _cited_sources(view: ConversationView) -> str:
    if not view.cited:
        return '<p class="note" id="sources">The summary cites no source turn.</p>'
    items = "".join(
        f'<div class="msg {_e(source.role)}" id="{source.anchor}"><header>seq {source.sequence}'
        f" · {_e(source.role)} · <code>{_e(source.turn_id)}</code></header>"
        f"<pre>{_clip(source.text, MESSAGE_CHARS)}</pre></div>"
        for source in view.cited
    )
    return (
        f'<details id="sources" open><summary>{counted(len(view.cited), "cited source turn")}'
        "</summary>"
        f"{items}</details>"
    )


def _damaged(view: ConversationView) -> str:
    """The live turns changed outside ledgerfold, named (ID, sequence, column), never read."""
    if not view.damaged:
        return ""
    items = "".join(
        f"<li>turn <code>{_e(turn.turn_id)}</code> (sequence {turn.sequence}): its"
        f" <code>{_e(turn.column)}</code> cannot be read back</li>"
        for turn in view.damaged[:_DAMAGED_SHOWN]
    )
    more = len(view.damaged) - _DAMAGED_SHOWN
    rest = f"<li>… {counted(more, 'more turn')}</li>" if more > 0 else ""
    return (
        f'<div class="alert" id="damaged">{counted(len(view.damaged), "live turn")} changed'
        f" outside ledgerfold (marked damaged on the timeline, not shown):<ul>{items}{rest}"
        "</ul></div>"
    )


def _summary_damage(view: ConversationView) -> str:
    if view.summary_damage is None:
        return ""
    return (
        '<p class="alert" id="summary-damage">A summary record cannot be read back (the'
        f" store's error; the records are listed as stored): {_e(view.summary_damage)}</p>"
    )


#: Damaged turns named on the page (the rest are counted).
_DAMAGED_SHOWN = 20


def render_conversation(view: ConversationView, back: str | None = None) -> str:
    """The inspector page of one conversation; `back` is the (URL-quoted) address of the
    report that links to it, if any."""
    counts = view.counts
    raw_states = ["raw", "protected", "preserved"] + (["compacted"] if view.fallback else [])
    sent = sum(counts.get(state, 0) for state in raw_states) - view.dropped
    # Live turns, as `inspect` counts them; the purged and retracted ones the timeline also
    # shows are tiles of their own when there are any.
    gone = [(f"{state} turns", counts.get(state, 0)) for state in ("purged", "retracted")]
    stats = [
        ("turns", view.total - sum(count for _, count in gone)),
        *((label, count) for label, count in gone if count),
        ("revision", view.revision),
        ("compacted", counts.get("compacted", 0)),
        # What the model is sent raw: with a current summary the context cannot use
        # (`preserved-missing`, `duplicate-id`) its sources too, less the turns the messages
        # leave out (a call without its results, a result without its call).
        ("raw in context", sent if view.unsendable is None else 0),
        ("versions", len(view.versions)),
        ("context messages", view.message_count),
    ]
    tiles = "".join(f'<div class="stat"><b>{v:,}</b>{_e(label_for(v, k))}</div>' for k, v in stats)
    if view.summary is not None:
        summary = view.summary
        parent = f", extends {_e(summary.parent_id)}" if summary.parent_id else ""
        summary_html = (
            f'<div class="card" id="summary"><b>current summary</b> <code>{_e(summary.id)}</code>'
            f" · {counted(len(summary.source_ids), 'source')} · fingerprint <code>"
            f"{_e(summary.source_fingerprint[:16])}…</code> · policy {_e(summary.policy_version)}"
            f'{parent}<div class="summary-text" id="summary-text">{_summary_lines(view)}</div>'
            f"{_cited_sources(view)}</div>"
        )
    elif view.summary_damage is not None:
        summary_html = (
            '<p class="alert" id="summary">No current summary the store can read (see the'
            " summary versions below).</p>"
        )
    else:
        summary_html = '<p class="note" id="summary">No current summary.</p>'
    if view.boundary is not None:
        b = view.boundary
        boundary_html = (
            f"<p>History boundary: turns through sequence <b>{b.through_sequence}</b> were purged"
            f" ({_e(b.reason)}, {_e(b.purged_at[:19].replace('T', ' '))}).</p>"
        )
    else:
        boundary_html = "<p>History boundary: none (no turn purged).</p>"
    roles = (
        "unreadable (its plan was changed outside ledgerfold)"
        if view.preserve_roles is None
        else ", ".join(view.preserve_roles) or "none"
    )
    # No summary in use: none yet, or one the context does not use (stale, ...).
    legend_unsummarised = (
        None
        if view.fallback is None
        else "no summary yet"
        if view.fallback == "no-summary"
        else "no summary in use: the context falls back"
    )
    back_html = f'<a class="back" id="back" href="{_e(back)}">← report</a>' if back else ""
    body = (
        f"{back_html}<h1>Conversation <code>{_e(view.conversation_id)}</code></h1>"
        f'<p class="sub">ledgerfold inspector · preserved roles: {_e(roles)}</p>'
        f'<div class="stats">{tiles}</div>'
        f'<h2>Timeline</h2><div class="card">'
        f"{_legend(counts, any(m.state == 'mixed' for m in view.marks), legend_unsummarised)}"
        f"{_timeline(view)}"
        f"{boundary_html}{_damaged(view)}</div>"
        f"<h2>Summary</h2>{summary_html}"
        f"<h2>Summary versions (oldest first)</h2>{_summary_damage(view)}{_versions(view.versions)}"
        f"<h2>Context as the model sees it</h2>{_context(view)}"
    )
    return _page(f"ledgerfold · {view.conversation_id}", body)
