"""Databases for the HTML inspector tests: one conversation in every turn state, with hostile
text in bodies, reasons and IDs (a `<script>` must show as text, never run)."""

from __future__ import annotations

import json
from pathlib import Path

from ledgerfold import CompactionPolicy, Compactor, ExtractiveSummarizer, SQLiteStore

CONVERSATION = "c<b>1</b>"
POLICY = "html-v1"
SCRIPT = "<script>document.title='pwned'</script>"
IMG = "<img src=x onerror=\"document.title='pwned-img'\">"


def _call(call_id: str) -> dict[str, str]:
    calls = [{"id": call_id, "type": "function", "function": {"name": "ls", "arguments": "{}"}}]
    return {"tool_calls": json.dumps(calls)}


def build_states_db(path: Path) -> str:
    """One conversation with raw, protected, preserved (system role, open call, pinned group),
    compacted, purged and retracted turns, a stale version, a superseded one and a failure."""
    turns: list[dict[str, object]] = [
        {"id": "t1", "role": "system", "body": "You are careful. " + SCRIPT},
    ]
    for n in range(2, 21):
        role = "user" if n % 2 == 0 else "assistant"
        turns.append({"id": f"t{n}", "role": role, "body": f"turn {n} says {SCRIPT} and {IMG}"})
    turns[5] = {
        "id": "t6",
        "role": "user",
        "body": "never upload " + IMG,
        "protected": True,
        "protection_reason": "active-constraint",
    }
    turns += [
        {"id": "t21", "role": "user", "body": "pinned group start", "group": "g1"},
        {
            "id": "t22",
            "role": "user",
            "body": "keep this " + SCRIPT,
            "group": "g1",
            "protected": True,
            "protection_reason": "audit-evidence",
        },
        {"id": "t23", "role": "assistant", "body": "calling", "meta": _call("call-1")},
    ]
    for n in range(24, 34):
        turns.append({"id": f"t{n}", "role": "user" if n % 2 else "assistant", "body": f"{n}"})
    with SQLiteStore(path) as store:
        store.append_many(CONVERSATION, turns)
        compactor = Compactor(
            store, CompactionPolicy(POLICY, min_new_turns=1, keep_tail=4), ExtractiveSummarizer()
        )
        compactor.compact(CONVERSATION, force=True)
        store.edit(CONVERSATION, "t4", body="edited " + SCRIPT)  # first version goes stale
        compactor.compact(CONVERSATION, force=True)
        store.append(CONVERSATION, "user", "one more " + SCRIPT, id="t34")
        compactor.compact(CONVERSATION, force=True)  # supersedes (or extends) the second
        plan = store.start_plan(CONVERSATION, 4, POLICY)
        store.record_failure(plan.plan_id, "model timed out " + SCRIPT)
        store.append(CONVERSATION, "user", "withdrawn", id="t35")
        store.append(CONVERSATION, "user", "the last words " + IMG, id="t36")
        store.retract(CONVERSATION, "t35")
    return CONVERSATION


def build_purged_db(path: Path) -> str:
    """A conversation whose first turns were purged before anything was compacted."""
    with SQLiteStore(path) as store:
        store.append_many(
            "p", [{"id": f"p{n}", "role": "user", "body": f"body {n}"} for n in range(1, 41)]
        )
        store.purge_through("p", 10, "retention " + SCRIPT)
        Compactor(
            store, CompactionPolicy(POLICY, min_new_turns=1, keep_tail=5), ExtractiveSummarizer()
        ).compact("p", force=True)
    return "p"
