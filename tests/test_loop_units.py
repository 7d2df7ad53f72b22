"""The agent loop (SPEC §15), checked black-box through the public API on real transcripts and a
real SQLite file. Planning keeps units whole (SPEC §15.3, §15.4): the system prompt and
preserved turns with their groups stay raw, open tool calls stay raw until answered, and a group
split by a late result, during summarising or by an edit makes the summary stale or refused."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ledgerfold import (
    CompactionPolicy,
    Compactor,
    Conversation,
    SQLiteStore,
    SummaryRequest,
    Turn,
    check_summary,
    create_summary_envelope,
    plan_compaction,
    to_chat_messages,
)

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from loop_support import (  # noqa: E402
    CONV,
    Recorder,
    ledger_map,
    orphan_tool_messages,
    real_bodies,
    spec_of,
    talk,
    transcripts,
)

# -- §15.3 planning ---------------------------------------------------------------------------


def test_system_prompt_stays_raw_by_default_and_a_preserved_turn_keeps_its_group(
    store: SQLiteStore,
) -> None:
    transcript = next(transcripts("tau_bench.jsonl"))
    assert transcript.turns[0].role == "system" and len(transcript.turns[0].body) > 6000
    store.append_many(CONV, [spec_of(turn) for turn in transcript.turns])
    recorder = Recorder()
    assert Compactor(store, CompactionPolicy("v1", keep_tail=4), recorder).compact(CONV).accepted
    assert all(turn.role != "system" for request in recorder.requests for turn in request.turns)
    first = store.context(CONV, "v1").items[0]
    assert first.id == transcript.turns[0].id and first.text == transcript.turns[0].body
    # preserve_roles=("tool",): each tool result keeps its assistant call raw with it.
    conversation = store.load(CONV)
    plan = plan_compaction(conversation, 4, "p", preserve_roles=("tool",))
    grouped = {turn.id for turn in conversation.turns if turn.group is not None}
    assert grouped and not grouped & set(plan.compacted_ids)
    everything = plan_compaction(conversation, 4, "q", preserve_roles=())
    assert transcript.turns[0].id in everything.compacted_ids


def test_an_open_tool_call_group_stays_raw_until_every_call_is_answered(
    store: SQLiteStore,
) -> None:
    def call(call_id: str) -> dict[str, Any]:
        return {
            "id": call_id,
            "type": "function",
            "function": {"name": "lookup", "arguments": "{}"},
        }

    store.append_chat_messages(
        CONV,
        [
            {"role": "user", "content": "find both"},
            {"role": "assistant", "content": "", "tool_calls": [call("c1"), call("c2")]},
            {"role": "tool", "tool_call_id": "c1", "content": "first result"},
        ],
    )
    talk(store, real_bodies(10), 0, 8)
    recorder = Recorder()
    compactor = Compactor(store, CompactionPolicy("v1", keep_tail=2, min_new_turns=1), recorder)
    assert compactor.compact(CONV).accepted
    sent = {turn.role for turn in recorder.requests[0].turns}
    assert "tool" not in sent and len(recorder.requests[0].turns) == 7
    assert orphan_tool_messages(to_chat_messages(store.context(CONV, "v1"))) == []
    # The second answer arrives in a later call: it joins the group, now closed.
    store.append_chat_messages(CONV, [{"role": "tool", "tool_call_id": "c2", "content": "2nd"}])
    talk(store, real_bodies(10), 8, 3)
    assert compactor.compact(CONV).accepted
    assert {turn.role for turn in recorder.requests[1].turns} >= {"assistant", "tool"}
    assert orphan_tool_messages(to_chat_messages(store.context(CONV, "v1"))) == []


def test_an_unanswered_call_without_a_group_is_its_own_preserved_unit(
    store: SQLiteStore,
) -> None:
    calls = [{"id": "c9", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    store.append(CONV, "user", "please look it up", id="q")
    store.append(CONV, "assistant", "", id="ask", meta={"tool_calls": json.dumps(calls)})
    talk(store, real_bodies(10), 0, 8)
    recorder = Recorder()
    compactor = Compactor(store, CompactionPolicy("v1", keep_tail=2, min_new_turns=1), recorder)
    summary = compactor.compact(CONV).summary
    assert summary is not None and "ask" not in summary.source_ids and "q" in summary.source_ids
    assert "ask" in store.context(CONV, "v1").ids


# -- §15.4 group-split ------------------------------------------------------------------------


def test_group_split_is_the_last_check_reason() -> None:
    turns = [
        Turn("a", 1, "assistant", "call", group="g"),
        Turn("r", 2, "tool", "result", group="g"),
        Turn("u", 3, "user", "thanks"),
        Turn("late", 4, "tool", "late result", group="g"),
    ]
    ledger = Conversation("c", 1, turns[:3])
    summary = create_summary_envelope(plan_compaction(ledger, 1, "p"), ledger, "s", "v1", "x")
    assert summary is not None and summary.source_ids == ("a", "r")
    split = Conversation("c", 2, turns)
    assert check_summary(summary, split, "v1").reason == "group-split"
    assert check_summary(summary, split, "v1").turn_id == "late"
    edited = Conversation("c", 3, [turns[0].replace(body="other"), *turns[1:]])
    assert check_summary(summary, edited, "v1").reason == "source-modified"
    assert check_summary(summary, split, "v2").reason == "policy-mismatch"


def test_a_late_result_joining_a_summarised_group_is_stale_at_once(store: SQLiteStore) -> None:
    transcript = next(t for t in transcripts("tau_bench.jsonl") if len(t.turns) >= 20)
    store.append_many(CONV, [spec_of(turn) for turn in transcript.turns])
    summary = (
        Compactor(store, CompactionPolicy("v1", keep_tail=4, min_new_turns=1)).compact(CONV).summary
    )
    assert summary is not None
    ledger = ledger_map(store)
    call_turn = next(
        ledger[i] for i in summary.source_ids if "tool_calls" in (ledger[i].meta or {})
    )
    call_id = json.loads((call_turn.meta or {})["tool_calls"])[0]["id"]
    store.append_chat_messages(
        CONV, [{"role": "tool", "tool_call_id": call_id, "content": "a duplicate late result"}]
    )
    late = store.load(CONV).turns[-1]
    assert late.group == call_turn.group
    record = store.summary_history(CONV)[-1]
    assert (record.status, record.reason) == ("stale", "group-split")
    context = store.context(CONV, "v1")
    assert context.fallback == "stale-summary:group-split"
    assert orphan_tool_messages(to_chat_messages(context)) == []


def test_a_group_split_while_summarising_or_by_an_edit_is_refused_or_stale(
    store: SQLiteStore,
) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    store.append_chat_messages(
        CONV,
        [
            {"role": "user", "content": "look it up"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "found"},
        ],
    )
    talk(store, real_bodies(10), 0, 6)

    def late_during_the_call(request: SummaryRequest) -> str:
        store.append_chat_messages(CONV, [{"role": "tool", "tool_call_id": "c1", "content": "!"}])
        return "a summary"

    policy = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
    outcome = Compactor(store, policy, late_during_the_call).compact(CONV)
    assert (outcome.status, outcome.reason) == ("stale", "group-split")
    assert store.current_summary(CONV) is None
    assert orphan_tool_messages(to_chat_messages(store.context(CONV, "v1"))) == []
    # An edit that moves a turn outside the summary into a summarised group.
    talk(store, real_bodies(10), 6, 4)
    summary = Compactor(store, policy, Recorder()).compact(CONV).summary
    assert summary is not None
    group = next(t.group for t in store.load(CONV).turns if t.id in summary.source_ids and t.group)
    store.edit(CONV, "t9", group=group)
    assert store.context(CONV, "v1").fallback == "stale-summary:group-split"
    assert (store.summary_history(CONV)[-1].status, store.summary_history(CONV)[-1].reason) == (
        "stale",
        "group-split",
    )
