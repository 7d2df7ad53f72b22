"""An independent, black-box check of issue 17's agent loop against SPEC §15.1–§15.3 and §15.8.

Written from the SPEC and the issue text only, through the public API, the way the owners'
held-out agent-loop suite would be: real transcripts of shared/data, a real SQLite file per
test, no mock of the store. The long session at the end checks after every step that no
context carries summary text derived from a turn whose current content differs from what the
summary was built from, and that no tool message is ever sent without its call.
"""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ledgerfold import (
    CompactionOutcome,
    CompactionPolicy,
    Compactor,
    Conversation,
    ExtractiveSummarizer,
    InvalidInput,
    SQLiteStore,
    SummaryEnvelope,
    SummaryItem,
    SummaryRequest,
    Turn,
    check_summary,
    create_summary_envelope,
    fingerprint_turns,
    plan_compaction,
    to_chat_messages,
)
from ledgerfold._transcripts import Transcript, iter_transcripts
from ledgerfold.tokens import approx_tokens

SHARED = Path(__file__).resolve().parents[1] / "tests" / "data"
DATA = SHARED / "transcripts"
CONV = "agent"


def words(text: str) -> int:
    """A token counter unlike the default one, so tests tell which counter was used."""
    return len(text.split())


# -- real transcript material ---------------------------------------------------------------


def transcripts(name: str) -> Iterator[Transcript]:
    yield from iter_transcripts(DATA / name)


def real_bodies(count: int) -> list[str]:
    """`count` real user/assistant bodies (tau-bench, then OpenHands), in file order."""
    bodies: list[str] = []
    for name in ("tau_bench.jsonl", "openhands.jsonl"):
        for transcript in transcripts(name):
            for turn in transcript.turns:
                if turn.role in ("user", "assistant") and turn.body.strip() and not turn.meta:
                    bodies.append(turn.body)
                    if len(bodies) == count:
                        return bodies
    raise AssertionError("not enough real bodies")


def spec_of(turn: Turn) -> dict[str, Any]:
    return {
        "id": turn.id,
        "role": turn.role,
        "body": turn.body,
        "group": turn.group,
        "meta": turn.meta,
    }


def session_turns(exchanges: int) -> list[dict[str, Any]]:
    """Real tau-bench conversations one after another, with only the first system prompt,
    until `exchanges` user turns. Trials of one task reuse tool-call IDs, so each
    conversation's call IDs get its number as a prefix (in meta, groups and body lines)."""
    specs: list[dict[str, Any]] = []
    users = 0
    for number, transcript in enumerate(transcripts("tau_bench.jsonl")):
        for turn in transcript.turns:
            if turn.role == "system" and specs:
                continue
            specs.append(_renamed_calls(spec_of(turn), f"n{number}-"))
            users += turn.role == "user"
        if users >= exchanges:
            return specs
    raise AssertionError("not enough transcripts")


def _renamed_calls(spec: dict[str, Any], prefix: str) -> dict[str, Any]:
    meta = dict(spec["meta"] or {})
    if "tool_calls" in meta:
        calls = json.loads(meta["tool_calls"])
        for call in calls:
            call["id"] = prefix + call["id"]
        meta["tool_calls"] = json.dumps(calls)
    if "tool_call_ids" in meta:
        meta["tool_call_ids"] = json.dumps([prefix + i for i in json.loads(meta["tool_call_ids"])])
    if "tool_call_id" in meta:
        meta["tool_call_id"] = prefix + meta["tool_call_id"]
    lines = []
    for line in spec["body"].split("\n"):
        if line.startswith('{"tool_call":'):
            line_call = json.loads(line)
            line_call["tool_call"]["id"] = prefix + line_call["tool_call"]["id"]
            line = json.dumps(line_call)
        lines.append(line)
    group = spec["group"]
    return {
        **spec,
        "body": "\n".join(lines),
        "meta": meta or None,
        "group": None if group is None else f"{prefix}{group}",
    }


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    with SQLiteStore(tmp_path / "ledger.db") as opened:
        yield opened


class Recorder:
    """A summarizer that keeps every request and answers with the sequences it saw."""

    def __init__(self, fail: bool = False) -> None:
        self.requests: list[SummaryRequest] = []
        self.fail = fail

    def __call__(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        if self.fail:
            raise RuntimeError("model unavailable")
        return "facts of " + ",".join(str(turn.sequence) for turn in request.turns)


def talk(store: SQLiteStore, bodies: list[str], start: int, count: int, conv: str = CONV) -> None:
    for index in range(start, start + count):
        role = "user" if index % 2 == 0 else "assistant"
        store.append(conv, role, bodies[index % len(bodies)] + f" #{index}", id=f"t{index}")


def ledger_map(store: SQLiteStore, conv: str = CONV) -> dict[str, Turn]:
    return {turn.id: turn for turn in store.load(conv).turns}


def fingerprint_of(store: SQLiteStore, source_ids: tuple[str, ...], conv: str = CONV) -> str:
    turns = ledger_map(store, conv)
    return fingerprint_turns([turns[turn_id] for turn_id in source_ids])


def orphan_tool_messages(messages: list[dict[str, Any]]) -> list[str]:
    """Tool messages whose call no earlier assistant message makes (a provider rejects them)."""
    called: set[str] = set()
    orphans: list[str] = []
    for message in messages:
        for call in message.get("tool_calls") or ():
            called.add(call["id"])
        if message["role"] == "tool" and message.get("tool_call_id") not in called:
            orphans.append(str(message.get("tool_call_id")))
    return orphans


# -- §15.1 rolling summaries ----------------------------------------------------------------


def test_rolling_summary_cites_parent_sources_then_new_ones_fingerprinted_over_all(
    store: SQLiteStore,
) -> None:
    bodies = real_bodies(40)
    recorder = Recorder()
    compactor = Compactor(store, CompactionPolicy("v1", keep_tail=4, min_new_turns=8), recorder)
    talk(store, bodies, 0, 14)
    first = compactor.compact(CONV).summary
    assert first is not None and first.parent_id is None
    assert first.source_ids == tuple(f"t{i}" for i in range(10))
    talk(store, bodies, 14, 9)
    second = compactor.compact(CONV).summary
    assert second is not None and second.parent_id == first.id
    assert second.source_ids == tuple(f"t{i}" for i in range(19))
    assert second.source_fingerprint == fingerprint_of(store, second.source_ids)
    request = recorder.requests[1]
    assert [turn.id for turn in request.turns] == [f"t{i}" for i in range(10, 19)]
    assert request.previous_summary == first.text
    assert request.covered_count == 10
    assert request.max_summary_tokens == 1000
    # §15.1: an edit of a turn only the parent summarised makes the child stale too.
    store.edit(CONV, "t3", body="a corrected fact")
    assert check_summary(second, store.load(CONV), "v1").reason == "source-modified"
    assert store.context(CONV, "v1").fallback == "stale-summary:source-modified"
    # The next compaction cannot extend a stale summary: a rebase over every compacted turn.
    third = compactor.compact(CONV, force=True).summary
    assert third is not None and third.parent_id is None
    assert recorder.requests[-1].previous_summary is None
    assert recorder.requests[-1].covered_count == 0
    assert [turn.id for turn in recorder.requests[-1].turns] == [f"t{i}" for i in range(19)]


def test_envelope_with_a_parent_lists_its_sources_first_in_sequence_order() -> None:
    turns = [Turn(f"x{i}", i * 10, "user", f"fact {i}") for i in range(1, 13)]
    early = Conversation("c", 1, turns[:8])
    parent = create_summary_envelope(plan_compaction(early, 3, "p1"), early, "s1", "v1", "a")
    assert parent is not None and parent.source_ids == tuple(f"x{i}" for i in range(1, 6))
    ledger = Conversation("c", 2, turns)
    child = create_summary_envelope(
        plan_compaction(ledger, 3, "p2"), ledger, "s2", "v1", " b ", parent=parent
    )
    assert child is not None and child.parent_id == "s1" and child.text == "b"
    assert child.source_ids == tuple(f"x{i}" for i in range(1, 10))
    assert child.source_fingerprint == fingerprint_turns(turns[:9])
    assert check_summary(child, ledger, "v1").current


def test_the_issue_case_no_stale_fact_ever_reaches_the_context(store: SQLiteStore) -> None:
    """Compact with keep_tail=2, then keep_tail=8, then edit t16 (issue 17, §15.8)."""
    for index in range(1, 21):
        body = "Ship the order to 12 Old Street." if index == 16 else f"turn {index} says hello."
        store.append(CONV, "user" if index % 2 else "assistant", body, id=f"t{index}")
    narrow = Compactor(store, CompactionPolicy("v1", keep_tail=2, min_new_turns=1))
    assert narrow.compact(CONV).accepted
    assert "12 Old Street" in store.context(CONV, "v1").items[0].text
    recorder = Recorder()
    wide_policy = CompactionPolicy("v1", keep_tail=8, min_new_turns=50)
    seen: list[SummaryRequest] = []

    def extractive(request: SummaryRequest) -> str:
        seen.append(request)
        return ExtractiveSummarizer()(request)

    wide = Compactor(store, wide_policy, extractive)
    # Coverage would shrink: due at once (min_new_turns does not hold it back), and a rebase.
    outcome = wide.compact(CONV)
    assert outcome.accepted and outcome.summary is not None
    assert outcome.summary.parent_id is None
    assert seen[-1].previous_summary is None and seen[-1].covered_count == 0
    assert [turn.id for turn in seen[-1].turns] == [f"t{i}" for i in range(1, 13)]
    assert outcome.summary.source_ids == tuple(f"t{i}" for i in range(1, 13))
    store.edit(CONV, "t16", body="Ship the order to 99 New Road.")
    for compactor in (wide, narrow, Compactor(store, wide_policy, recorder)):
        compactor.compact(CONV, force=True)
        items = store.context(CONV, "v1").items
        for item in items:
            assert "12 Old Street" not in item.text
        assert sum("99 New Road" in item.text for item in items) >= 1


def test_a_source_that_becomes_preserved_forces_a_rebase(store: SQLiteStore) -> None:
    store.append(CONV, "system", "You are a careful airline agent.", id="sys")
    talk(store, real_bodies(20), 0, 12)
    everything = CompactionPolicy("v1", keep_tail=2, min_new_turns=1, preserve_roles=())
    first = Compactor(store, everything, Recorder()).compact(CONV).summary
    assert first is not None and "sys" in first.source_ids
    recorder = Recorder()
    # The default policy keeps system prompts raw: the old summary cannot be extended.
    default = CompactionPolicy("v1", keep_tail=2, min_new_turns=50)
    second = Compactor(store, default, recorder).compact(CONV).summary
    assert second is not None and second.parent_id is None and "sys" not in second.source_ids
    assert recorder.requests[0].previous_summary is None
    assert "sys" not in {turn.id for turn in recorder.requests[0].turns}
    context = store.context(CONV, "v1")
    assert context.fallback is None and context.items[0].id == "sys"


@pytest.mark.parametrize("preserve", [False, True])
def test_a_rebase_is_due_at_once_below_the_trigger_too(store: SQLiteStore, preserve: bool) -> None:
    """§15.8: when coverage would shrink, compaction is due at once — `trigger_tokens` does
    not hold it back (the context would otherwise keep summarising turns now in the tail or
    preserved), and a call with nothing to rebase stays `not-due` below the trigger."""
    store.append(CONV, "system", "You are a careful airline agent.", id="sys")
    for index in range(1, 21):
        store.append(CONV, "user" if index % 2 else "assistant", f"turn {index}.", id=f"t{index}")
    narrow = CompactionPolicy("v1", keep_tail=2, min_new_turns=1, preserve_roles=())
    assert Compactor(store, narrow).compact(CONV).accepted
    wide = (
        CompactionPolicy("v1", keep_tail=2, trigger_tokens=50_000)
        if preserve
        else CompactionPolicy("v1", keep_tail=8, trigger_tokens=50_000, preserve_roles=())
    )
    outcome = Compactor(store, wide).compact(CONV)
    assert outcome.accepted and outcome.summary is not None and outcome.summary.parent_id is None
    raw = [item.id for item in store.context(CONV, "v1").items[1:]]
    if preserve:
        assert store.context(CONV, "v1").items[0].id == "sys"
    else:
        assert raw == [f"t{index}" for index in range(13, 21)]
    assert Compactor(store, wide).compact(CONV) == CompactionOutcome("skipped", None, "not-due")


# -- §15.2 bounded cost ---------------------------------------------------------------------


def test_min_new_turns_and_a_not_due_call_registers_nothing(store: SQLiteStore) -> None:
    bodies = real_bodies(30)
    recorder = Recorder()
    compactor = Compactor(store, CompactionPolicy("v1", keep_tail=2, min_new_turns=8), recorder)
    talk(store, bodies, 0, 9)  # 7 compactable
    assert compactor.compact(CONV).reason == "not-due"
    assert recorder.requests == [] and store.summary_history(CONV) == []
    talk(store, bodies, 9, 1)  # 8 compactable
    assert compactor.compact(CONV).accepted
    talk(store, bodies, 10, 7)
    assert compactor.compact(CONV).reason == "not-due"
    talk(store, bodies, 17, 1)
    assert compactor.compact(CONV).accepted
    assert [len(request.turns) for request in recorder.requests] == [8, 8]
    assert [record.status for record in store.summary_history(CONV)] == ["superseded", "current"]


def test_the_default_policy_does_not_compact_on_every_turn(store: SQLiteStore) -> None:
    """Issue 17: with `trigger_tokens=None` the summarizer ran 26 times in 30 exchanges."""
    bodies = real_bodies(60)
    recorder = Recorder()
    compactor = Compactor(store, CompactionPolicy("v1"), recorder)
    for index in range(60):
        talk(store, bodies, index, 1)
        compactor.compact(CONV)
    assert 1 <= len(recorder.requests) <= 60 // 8
    assert all(len(request.turns) >= 8 for request in recorder.requests)


def test_only_a_due_compaction_abandons_an_unfinished_plan(store: SQLiteStore) -> None:
    """§15.8: due-ness is decided before a plan is registered; the plan left without a
    record gets failed/abandoned when the next one registers, and its late result is
    still refused as superseded-plan."""
    talk(store, real_bodies(10), 0, 6)
    unfinished = store.start_plan(CONV, 2, "v1")
    for policy in (
        CompactionPolicy("v1", keep_tail=2, min_new_turns=8),
        CompactionPolicy("v1", keep_tail=2, min_new_turns=1, trigger_tokens=1_000_000),
    ):
        assert Compactor(store, policy, Recorder()).compact(CONV).reason == "not-due"
        assert store.summary_history(CONV) == []
    due = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
    assert Compactor(store, due, Recorder()).compact(CONV).accepted
    records = [(record.status, record.reason) for record in store.summary_history(CONV)]
    assert records == [("failed", "abandoned"), ("current", None)]
    late = create_summary_envelope(unfinished, store.load(CONV), "late", "v1", "late text")
    assert store.commit_summary(late).detail == "superseded-plan"


def test_trigger_counts_the_assembled_context(store: SQLiteStore) -> None:
    long_body = " ".join(["word"] * 200)
    for index in range(12):
        store.append(CONV, "user", f"{long_body} {index}", id=f"t{index}")
    policy = CompactionPolicy(
        "v1", keep_tail=2, trigger_tokens=600, min_new_turns=2, token_counter=words
    )
    compactor = Compactor(store, policy, lambda request: "short")
    assert compactor.compact(CONV).accepted  # 12 x 200 words raw: over the trigger
    # The raw ledger is far over the trigger, the assembled context is not.
    for index in range(12, 16):
        store.append(CONV, "user", f"tiny {index}", id=f"t{index}")
    assert compactor.compact(CONV).reason == "not-due"
    # A summary that alone is over the trigger makes it due, but only with new turns enough.
    wordy = Compactor(store, policy, lambda request: " ".join(["fact"] * 900))
    assert wordy.compact(CONV, force=True).accepted
    store.append(CONV, "user", "one more", id="t16")
    assert wordy.compact(CONV).reason == "not-due"  # 1 new < min_new_turns
    store.append(CONV, "user", "and another", id="t17")
    assert wordy.compact(CONV).accepted


def test_backoff_doubles_per_failure_caps_at_64x_and_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    bodies = real_bodies(200)
    policy = CompactionPolicy("v1", keep_tail=1, min_new_turns=2)
    with SQLiteStore(path) as store:
        talk(store, bodies, 0, 3)  # 2 new
        assert Compactor(store, policy, Recorder(fail=True)).compact(CONV).status == "failed"
        talk(store, bodies, 3, 1)  # 3 new: 4 needed after one failure
        assert Compactor(store, policy, Recorder()).compact(CONV).reason == "not-due"
    with SQLiteStore(path) as store:  # a restart: the streak is read from the store
        assert store.consecutive_failures(CONV) == 1
        talk(store, bodies, 4, 1)  # 4 new
        assert Compactor(store, policy, Recorder(fail=True)).compact(CONV).status == "failed"
        talk(store, bodies, 5, 3)  # 7 new: 8 needed after two
        assert Compactor(store, policy, Recorder()).compact(CONV).reason == "not-due"
        # force bypasses the back-off; forced failures count all the same.
        for _ in range(6):
            outcome = Compactor(store, policy, Recorder(fail=True)).compact(CONV, force=True)
            assert outcome.status == "failed"
    with SQLiteStore(path) as store:
        assert store.consecutive_failures(CONV) == 8
        talk(store, bodies, 8, 120)  # 127 new: the cap is 2 x 2**6 = 128
        assert Compactor(store, policy, Recorder()).compact(CONV).reason == "not-due"
        talk(store, bodies, 128, 1)
        assert Compactor(store, policy, Recorder()).compact(CONV).accepted
        assert store.consecutive_failures(CONV) == 0
        talk(store, bodies, 129, 2)  # back to min_new_turns after a success
        assert Compactor(store, policy, Recorder()).compact(CONV).accepted


def test_force_bypasses_trigger_min_new_turns_and_backoff_but_not_emptiness(
    store: SQLiteStore,
) -> None:
    bodies = real_bodies(20)
    policy = CompactionPolicy("v1", keep_tail=2, trigger_tokens=100_000, min_new_turns=8)
    talk(store, bodies, 0, 3)  # one compactable turn, far under the trigger
    assert Compactor(store, policy, Recorder(fail=True)).compact(CONV, force=True).reason == (
        "summarizer-error"
    )
    recorder = Recorder()
    outcome = Compactor(store, policy, recorder).compact(CONV, force=True)
    assert outcome.accepted and [turn.id for turn in recorder.requests[0].turns] == ["t0"]
    history = len(store.summary_history(CONV))
    outcome = Compactor(store, policy, recorder).compact(CONV, force=True)
    assert (outcome.status, outcome.reason) == ("skipped", "nothing-to-compact")
    assert len(recorder.requests) == 1 and len(store.summary_history(CONV)) == history


def test_no_request_exceeds_max_input_tokens_and_a_backlog_folds_one_chunk_per_call(
    store: SQLiteStore,
) -> None:
    """Real tool groups, a words counter: each call commits one chunk under its own plan,
    extending the last one; chunks are cut only between groups; the backlog clears."""
    transcript = next(t for t in transcripts("tau_bench.jsonl") if len(t.turns) >= 40)
    store.append_many(CONV, [spec_of(turn) for turn in transcript.turns])
    budget = 600
    recorder = Recorder()
    policy = CompactionPolicy(
        "v1", keep_tail=4, min_new_turns=1, max_input_tokens=budget, token_counter=words
    )
    compactor = Compactor(store, policy, recorder)
    outcomes = []
    for _ in range(len(transcript.turns)):
        outcome = compactor.compact(CONV)
        if not outcome.accepted:
            assert outcome.reason == "nothing-to-compact"
            break
        outcomes.append(outcome)
    assert len(outcomes) > 2, "the backlog should take several chunks"
    ledger = ledger_map(store)
    groups: dict[str, set[str]] = {}
    for turn in ledger.values():
        if turn.group is not None:
            groups.setdefault(turn.group, set()).add(turn.id)
    previous: SummaryEnvelope | None = None
    for request, outcome in zip(recorder.requests, outcomes, strict=True):
        summary = outcome.summary
        assert summary is not None
        assert sum(words(turn.text) for turn in request.turns) <= budget
        ids = [turn.id for turn in request.turns]
        for turn_id in ids:  # whole groups only
            group = ledger[turn_id].group
            assert group is None or groups[group] <= set(ids)
        if previous is None:
            assert summary.parent_id is None and request.previous_summary is None
            assert summary.source_ids == tuple(ids)
        else:
            assert summary.parent_id == previous.id
            assert summary.plan_id != previous.plan_id
            assert request.previous_summary == previous.text
            assert request.covered_count == len(previous.source_ids)
            assert summary.source_ids == previous.source_ids + tuple(ids)
        assert summary.source_fingerprint == fingerprint_of(store, summary.source_ids)
        previous = summary
    assert previous is not None
    planned = plan_compaction(store.load(CONV), 4, "check", preserve_roles=("system",))
    assert previous.source_ids == planned.compacted_ids


def test_the_rest_of_a_folded_backlog_stays_due_below_min_new_turns(store: SQLiteStore) -> None:
    """§15.8: after a chunk, the rest stays due — a remainder smaller than `min_new_turns`
    is still compacted by the next call (until a failure: then the back-off applies)."""
    for index in range(24):
        store.append(CONV, "user", "word " * 20 + str(index), id=f"t{index}")
    recorder = Recorder()
    policy = CompactionPolicy("v1", keep_tail=4, max_input_tokens=400)  # min_new_turns 8
    compactor = Compactor(store, policy, recorder)
    first = compactor.compact(CONV)
    assert first.accepted and first.summary is not None
    rest = 20 - len(first.summary.source_ids)
    assert 0 < rest < policy.min_new_turns
    second = compactor.compact(CONV)
    assert second.accepted and second.summary is not None
    assert second.summary.source_ids == tuple(f"t{index}" for index in range(20))
    assert [len(request.turns) for request in recorder.requests] == [20 - rest, rest]
    store.append(CONV, "user", "one more", id="t24")
    assert compactor.compact(CONV).reason == "not-due"  # no backlog left: the rule again

    # A failure ends the exception: the remainder then waits for the back-off's count.
    other = "other"
    for index in range(24):
        store.append(other, "user", "word " * 20 + str(index), id=f"o{index}")
    assert compactor.compact(other).accepted
    failing = Compactor(store, policy, lambda request: "")  # blank: a failure
    assert failing.compact(other).status == "failed"
    assert compactor.compact(other).reason == "not-due"


def test_a_turn_over_the_budget_goes_alone_cut_with_head_tail_and_a_marker(
    store: SQLiteStore,
) -> None:
    big = "HEAD-" + " ".join(f"w{i}" for i in range(5000)) + " -TAIL"
    store.append(CONV, "user", "before", id="before")
    store.append(CONV, "tool", big, id="big")
    talk(store, real_bodies(10), 0, 4)
    recorder = Recorder()
    policy = CompactionPolicy(
        "v1", keep_tail=2, min_new_turns=1, max_input_tokens=300, token_counter=words
    )
    compactor = Compactor(store, policy, recorder)
    assert compactor.compact(CONV).accepted  # "before" fits alone; "big" does not join it
    assert [turn.id for turn in recorder.requests[0].turns] == ["before"]
    assert compactor.compact(CONV).accepted
    (cut,) = recorder.requests[1].turns
    assert cut.id == "big" and words(cut.text) <= 300
    assert cut.text.startswith("HEAD-") and cut.text.endswith("-TAIL")
    assert "cut" in cut.text and len(cut.text) < len(big)
    summary = store.current_summary(CONV)
    assert summary is not None and summary.source_ids == ("before", "big")


def double_chars(text: str) -> int:
    return 2 * len(text)


@pytest.mark.parametrize(("counter", "budget"), [(words, 4), (double_chars, 11)])
def test_a_group_with_more_turns_than_budget_tokens_still_fits_the_budget(
    store: SQLiteStore, counter: Callable[[str], int], budget: int
) -> None:
    """§15.8: "no request exceeds max_input_tokens", even for one group too big to share
    (fewer tokens than turns, or a counter under which one character costs two)."""
    calls = [
        {"id": f"k{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        for i in range(5)
    ]
    store.append(
        CONV, "assistant", "calling", id="ask", group="g", meta={"tool_calls": json.dumps(calls)}
    )
    for index in range(5):
        store.append(
            CONV,
            "tool",
            " ".join(["out"] * 50),
            id=f"r{index}",
            group="g",
            meta={"tool_call_id": f"k{index}"},
        )
    talk(store, real_bodies(4), 0, 2)
    recorder = Recorder()
    policy = CompactionPolicy(
        "v1", keep_tail=2, min_new_turns=1, max_input_tokens=budget, token_counter=counter
    )
    assert Compactor(store, policy, recorder).compact(CONV).accepted
    (request,) = recorder.requests
    assert len(request.turns) == 6
    assert sum(counter(turn.text) for turn in request.turns) <= budget


def test_a_killed_fold_resumes_from_the_last_committed_chunk(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with SQLiteStore(path) as store:
        for index in range(40):
            store.append(CONV, "user", " ".join(["w"] * 10) + f" {index}", id=f"t{index}")
    child = textwrap.dedent(
        """
        import os, sys
        from ledgerfold import CompactionPolicy, Compactor, SQLiteStore
        calls = []
        def summarizer(request):
            calls.append(request)
            if len(calls) == 3:
                os._exit(17)  # killed in the middle of the third chunk
            return f"chunk {len(calls)}: " + ",".join(t.id for t in request.turns)
        policy = CompactionPolicy("v1", keep_tail=4, min_new_turns=1, max_input_tokens=60,
                                  token_counter=lambda text: len(text.split()),
                                  keep_versions=None)
        compactor = Compactor(SQLiteStore(sys.argv[1]), policy, summarizer)
        while compactor.compact("agent").accepted:
            pass
        """
    )
    done = subprocess.run([sys.executable, "-c", child, str(path)], timeout=60, check=False)
    assert done.returncode == 17
    with SQLiteStore(path) as store:
        current = store.current_summary(CONV)
        assert current is not None and current.text.startswith("chunk 2:")
        assert current.source_ids == tuple(f"t{i}" for i in range(10))
        recorder = Recorder()
        policy = CompactionPolicy(
            "v1",
            keep_tail=4,
            min_new_turns=1,
            max_input_tokens=60,
            token_counter=words,
            keep_versions=None,
        )
        compactor = Compactor(store, policy, recorder)
        resumed = compactor.compact(CONV).summary
        assert resumed is not None and resumed.parent_id == current.id
        assert recorder.requests[0].previous_summary == current.text
        assert recorder.requests[0].covered_count == 10
        assert [turn.id for turn in recorder.requests[0].turns] == [f"t{i}" for i in range(10, 15)]
        while compactor.compact(CONV).accepted:
            pass
        final = store.current_summary(CONV)
        assert final is not None and final.source_ids == tuple(f"t{i}" for i in range(36))
        statuses = [(record.status, record.reason) for record in store.summary_history(CONV)]
        assert ("failed", "abandoned") in statuses


def test_a_failed_chunk_changes_nothing(store: SQLiteStore) -> None:
    for index in range(30):
        store.append(CONV, "user", " ".join(["w"] * 10) + f" {index}", id=f"t{index}")
    policy = CompactionPolicy(
        "v1", keep_tail=4, min_new_turns=1, max_input_tokens=60, token_counter=words
    )
    assert Compactor(store, policy, Recorder()).compact(CONV).accepted
    before = (store.load(CONV), store.current_summary(CONV), store.context(CONV, "v1"))
    outcome = Compactor(store, policy, Recorder(fail=True)).compact(CONV)
    assert (outcome.status, outcome.reason) == ("failed", "summarizer-error")
    assert (store.load(CONV), store.current_summary(CONV), store.context(CONV, "v1")) == before


def test_keep_versions_prunes_after_each_accepted_commit(store: SQLiteStore) -> None:
    bodies = real_bodies(30)
    talk(store, bodies, 0, 3)
    compactor = Compactor(
        store,
        # Exactly `keep_versions` (checkpoints, SPEC §17.5: tests/test_checkpoints.py).
        CompactionPolicy("v1", keep_tail=2, min_new_turns=1, keep_versions=2, keep_checkpoints=0),
        Recorder(),
    )
    compactor.compact(CONV)
    talk(store, bodies, 3, 1)
    failing = Compactor(store, compactor.policy, Recorder(fail=True))
    assert failing.compact(CONV).status == "failed"
    for index in range(4, 10):
        talk(store, bodies, index, 1)
        assert compactor.compact(CONV).accepted
    history = store.summary_history(CONV)
    assert [record.status for record in history] == ["superseded", "superseded", "current"]
    assert store.pruned_count(CONV) == 5  # 7 accepted + 1 failed, 3 kept
    current = store.current_summary(CONV)
    assert current is not None and history[-1].envelope == current
    assert store.context(CONV, "v1").fallback is None
    # The pruned lineage does not break the next rolling compaction.
    talk(store, bodies, 10, 1)
    rolled = compactor.compact(CONV).summary
    assert rolled is not None and rolled.parent_id == current.id
    assert store.pruned_count(CONV) == 6
    # keep_versions=0 keeps the current one only; None keeps every version.
    talk(store, bodies, 11, 1)
    only_current = CompactionPolicy(
        "v1", keep_tail=2, min_new_turns=1, keep_versions=0, keep_checkpoints=0
    )
    assert Compactor(store, only_current, Recorder()).compact(CONV).accepted
    assert [record.status for record in store.summary_history(CONV)] == ["current"]
    keep_all = Compactor(
        store, CompactionPolicy("v1", keep_tail=2, min_new_turns=1, keep_versions=None), Recorder()
    )
    for index in range(12, 15):
        talk(store, bodies, index, 1)
        assert keep_all.compact(CONV).accepted
    assert len(store.summary_history(CONV)) == 4


def test_prune_versions_across_conversations_and_by_age(store: SQLiteStore) -> None:
    bodies = real_bodies(20)
    policy = CompactionPolicy("v1", keep_tail=2, min_new_turns=1, keep_versions=None)
    for conv in ("a", "b"):
        compactor = Compactor(store, policy, Recorder())
        talk(store, bodies, 0, 3, conv=conv)
        for index in range(3, 8):
            talk(store, bodies, index, 1, conv=conv)
            assert compactor.compact(conv).accepted
    # None is an hour old. (Exactly `keep`: no checkpoints, SPEC §17.5.)
    assert store.prune_versions(keep=1, older_than=3600, keep_checkpoints=0) == 0
    assert store.prune_versions(conversation_id=None, keep=1, keep_checkpoints=0) == 6  # 3 of each
    assert (store.pruned_count("a"), store.pruned_count("b")) == (3, 3)
    assert [len(store.summary_history(conv)) for conv in ("a", "b")] == [2, 2]
    assert store.prune_versions(keep=1, keep_checkpoints=0) == 0
    time.sleep(0.05)
    assert store.prune_versions("a", keep=0, older_than=0.01, keep_checkpoints=0) == 1
    assert [record.status for record in store.summary_history("a")] == ["current"]
    assert store.pruned_count("a") == 4 and store.pruned_count("b") == 3
    assert store.prune_versions("never-seen", keep=0) == 0
    for bad in ({"keep": -1}, {"keep": True}, {"keep": 1, "older_than": -1.0}):
        with pytest.raises(InvalidInput) as caught:
            store.prune_versions(**bad)  # type: ignore[arg-type]
        assert caught.value.field in bad


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


# -- commit refusals (§15.4) ------------------------------------------------------------------


def test_commit_refusals_are_plan_mismatch_after_the_superseded_plan_check(
    store: SQLiteStore,
) -> None:
    talk(store, real_bodies(20), 0, 16)
    first = (
        Compactor(store, CompactionPolicy("v1", keep_tail=10, min_new_turns=1))
        .compact(CONV)
        .summary
    )
    assert first is not None and first.source_ids == tuple(f"t{i}" for i in range(6))

    def refused(envelope: SummaryEnvelope | None) -> tuple[object, object]:
        assert envelope is not None
        write = store.commit_summary(envelope)
        assert not write.accepted
        assert store.current_summary(CONV) == current
        return write.reason, write.detail

    current = first
    plan = store.start_plan(CONV, 4, "v1")  # compacts t0..t11
    ledger = store.load(CONV)
    # Sources beyond the plan (a plan_id-matching envelope of a wider local plan).
    wide = plan_compaction(ledger, 2, plan.plan_id)
    assert refused(create_summary_envelope(wide, ledger, "s-wide", "v1", "x", parent=first)) == (
        "invalid-summary",
        "plan-mismatch",
    )
    # A parent that is not the current summary, or unknown.
    good = create_summary_envelope(plan, ledger, "s-good", "v1", "x", parent=first)
    assert good is not None
    fake_parent = SummaryEnvelope(**{**_fields(first), "id": "never-written"})
    fake = create_summary_envelope(plan, ledger, "s-fake", "v1", "x", parent=fake_parent)
    assert refused(fake) == ("invalid-summary", "plan-mismatch")
    # A parent whose sources it does not all cite.
    partial = SummaryEnvelope(
        **{
            **_fields(good),
            "id": "s-partial",
            "source_ids": good.source_ids[3:],
            "source_fingerprint": fingerprint_of(store, good.source_ids[3:]),
        }
    )
    assert refused(partial) == ("invalid-summary", "plan-mismatch")
    # A source made protected after the plan (its fingerprint is of the protected turn).
    store.edit(CONV, "t8", protected=True, protection_reason="pending-confirmation")
    ledger = store.load(CONV)
    protected = create_summary_envelope(plan, ledger, "s-prot", "v1", "x", parent=first)
    assert refused(protected) == ("invalid-summary", "protected-source")  # SPEC §17.1
    # The active-plan check runs first: an older plan's wide envelope is superseded-plan.
    newer = store.start_plan(CONV, 4, "v1")
    assert refused(create_summary_envelope(wide, ledger, "s-old", "v1", "x", parent=first)) == (
        "stale-source",
        "superseded-plan",
    )
    statuses = [(r.envelope.id, r.status) for r in store.summary_history(CONV)]
    assert ("s-wide", "rejected") in statuses and ("s-old", "rejected") in statuses
    # A parent that was current once but no longer is.
    accepted = store.commit_summary(
        create_summary_envelope(newer, ledger, "s-new", "v1", "y", parent=first)
    )
    assert accepted.accepted
    current = accepted.summary
    latest = store.start_plan(CONV, 2, "v1")
    ledger = store.load(CONV)
    assert refused(create_summary_envelope(latest, ledger, "s-stale", "v1", "z", parent=first)) == (
        "invalid-summary",
        "plan-mismatch",
    )


def _fields(envelope: SummaryEnvelope) -> dict[str, Any]:
    names = (
        "id",
        "plan_id",
        "conversation_id",
        "source_revision",
        "source_ids",
        "source_fingerprint",
        "policy_version",
        "text",
        "parent_id",
    )
    return {name: getattr(envelope, name) for name in names}


# -- the default summarizer (§15.2) -----------------------------------------------------------


def test_extractive_summarizer_bounds_lists_calls_once_and_keeps_tool_heads() -> None:
    transcript = next(t for t in transcripts("tau_bench.jsonl") if len(t.turns) >= 30)
    items = tuple(_item(turn) for turn in transcript.turns if turn.role != "system")
    unbounded = ExtractiveSummarizer()(SummaryRequest(CONV, "p", "v1", items))
    called = [
        call["function"]["name"]
        for turn in transcript.turns
        for call in json.loads((turn.meta or {}).get("tool_calls", "[]"))
    ]
    assert called
    for name in set(called):
        assert unbounded.count(name) == called.count(name)  # each call once, not twice
    tool = next(turn for turn in transcript.turns if turn.role == "tool" and len(turn.body) > 200)
    assert " ".join(tool.body.split())[:40] in unbounded  # a head, not only "N chars"
    for budget in (400, 60, 5, 1):
        request = SummaryRequest(CONV, "p", "v1", items, max_summary_tokens=budget)
        text = ExtractiveSummarizer()(request)
        assert text.strip() and approx_tokens(text) <= budget
    # A long previous summary is bounded too.
    request = SummaryRequest(
        CONV,
        "p",
        "v1",
        items[-4:],
        previous_summary=unbounded,
        covered_count=len(items) - 4,
        max_summary_tokens=100,
    )
    assert approx_tokens(ExtractiveSummarizer()(request)) <= 100


def test_the_default_summarizer_honours_max_summary_tokens_by_the_policy_counter(
    store: SQLiteStore,
) -> None:
    """§15.8: the policy's `token_counter` is what `max_summary_tokens` is counted in."""
    transcript = next(t for t in transcripts("tau_bench.jsonl") if len(t.turns) >= 30)
    store.append_many(CONV, [spec_of(turn) for turn in transcript.turns])
    policy = CompactionPolicy(
        "v1", keep_tail=2, min_new_turns=1, max_summary_tokens=200, token_counter=len
    )
    summary = Compactor(store, policy).compact(CONV).summary
    assert summary is not None and 0 < len(summary.text) <= 200


def _item(turn: Turn) -> Any:
    from ledgerfold import TurnItem

    return TurnItem(turn.id, turn.role, turn.body, turn.sequence, turn.meta)


# -- durability -------------------------------------------------------------------------------


@pytest.mark.parametrize("durability", ["full", "normal"])
def test_durability_values_are_accepted_and_durable(tmp_path: Path, durability: str) -> None:
    path = tmp_path / "ledger.db"
    with SQLiteStore(path, durability=durability) as store:
        store.append(CONV, "user", "kept")
    with SQLiteStore(path, durability=durability) as store:
        assert [turn.body for turn in store.load(CONV).turns] == ["kept"]
    if durability == "normal":  # WAL is a property of the file
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.parametrize("bad", ["off", "FULL ", "", None, 1, True, b"full"])
def test_durability_refuses_other_values(tmp_path: Path, bad: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        SQLiteStore(tmp_path / "ledger.db", durability=bad)  # type: ignore[arg-type]
    assert caught.value.field == "durability"
    assert not (tmp_path / "ledger.db").exists()


# -- long real sessions -----------------------------------------------------------------------


class SoundnessModel:
    """A summarizer (the real extractive one inside) that records what each summary's text was
    derived from: the ledger turns of its request plus, when it extends one, everything the
    previous summary's text was derived from."""

    def __init__(self, store: SQLiteStore, rng: random.Random) -> None:
        self.store = store
        self.rng = rng
        self.derived: dict[str, dict[str, Turn]] = {}
        self.pending: dict[str, Turn] | None = None
        self.expect_parent: str | None = None
        self.requests: list[tuple[SummaryRequest, CompactionPolicy]] = []
        self.policy = CompactionPolicy("v1")
        self.fail_next = False
        self.race_next = False

    def __call__(self, request: SummaryRequest) -> str:
        self.requests.append((request, self.policy))
        ledger = ledger_map(self.store)
        derived: dict[str, Turn] = {}
        self.expect_parent = None
        if request.previous_summary is not None:
            # The current summary, or after an edit the checkpoint it is rebuilt from
            # (SPEC §17.5): a kept version with that text and coverage.
            parents = [
                record.envelope
                for record in self.store.summary_history(CONV)
                if record.envelope is not None
                and record.status in ("current", "superseded")
                and record.envelope.text == request.previous_summary
                and len(record.envelope.source_ids) == request.covered_count
            ]
            assert parents
            parent = parents[-1]
            derived.update(self.derived[parent.id])
            self.expect_parent = parent.id
        else:
            assert request.covered_count == 0
        for item in request.turns:
            derived[item.id] = ledger[item.id]
        self.pending = derived
        if self.race_next:  # the user corrects a turn while the model is summarising
            self.race_next = False
            victim = self.rng.choice(sorted(derived))
            self.store.edit(CONV, victim, body=ledger[victim].body + " (corrected mid-call)")
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("model unavailable")
        return ExtractiveSummarizer()(request)

    def accepted(self, summary: SummaryEnvelope) -> None:
        assert self.pending is not None
        assert summary.parent_id == self.expect_parent
        assert set(summary.source_ids) == set(self.pending)
        self.derived[summary.id] = self.pending

    def check(self, assembled_items: tuple[Any, ...], ledger: dict[str, Turn]) -> None:
        for item in assembled_items:
            if isinstance(item, SummaryItem):
                for turn_id, seen in self.derived[item.id].items():
                    assert ledger.get(turn_id) == seen, (item.id, turn_id)


def test_a_long_real_session_never_serves_a_stale_fact_nor_an_orphan_tool_message(
    tmp_path: Path,
) -> None:
    """~330 real exchanges with edits (also mid-call), failures, late duplicate tool results,
    keep_tail changes and chunked folds; every step checked. (durability="normal", the
    phone setting, keeps the 1,300 single-turn appends fast.)"""
    with SQLiteStore(tmp_path / "ledger.db", durability="normal") as store:
        _long_session(store)


def _long_session(store: SQLiteStore) -> None:
    specs = session_turns(330)
    rng = random.Random(17)
    model = SoundnessModel(store, rng)
    policies = [
        CompactionPolicy(
            "v1",
            keep_tail=6,
            trigger_tokens=4000,
            max_input_tokens=3000,
            max_summary_tokens=400,
            keep_versions=3,
        ),
        CompactionPolicy(
            "v1",
            keep_tail=12,
            trigger_tokens=4000,
            max_input_tokens=3000,
            max_summary_tokens=400,
            keep_versions=3,
        ),
    ]
    statuses: dict[str, int] = {}
    for step, spec in enumerate(specs):
        store.append_many(CONV, [spec])
        policy = policies[(step // 400) % 2]
        model.policy = policy
        if step % 89 == 88:
            model.fail_next = True
        if step % 211 == 210:
            model.race_next = True
        if step % 157 == 156:  # the user corrects an older turn
            turns = store.load(CONV).turns
            victim = rng.choice(turns[: max(1, len(turns) - 6)])
            store.edit(CONV, victim.id, body=victim.body + " [edited]")
        if step % 97 == 96:  # a duplicate late result joins a summarised call's group
            summary = store.current_summary(CONV)
            ledger = ledger_map(store)
            calls = [
                ledger[i]
                for i in (summary.source_ids if summary else ())
                if i in ledger and "tool_calls" in (ledger[i].meta or {})
            ]
            if calls:
                call = json.loads((calls[-1].meta or {})["tool_calls"])[0]["id"]
                store.append_chat_messages(
                    CONV, [{"role": "tool", "tool_call_id": call, "content": "late again"}]
                )
        outcome = Compactor(store, policy, model).compact(CONV)
        statuses[outcome.status] = statuses.get(outcome.status, 0) + 1
        if outcome.accepted:
            assert outcome.summary is not None
            model.accepted(outcome.summary)
            assert outcome.summary.source_fingerprint == fingerprint_of(
                store, outcome.summary.source_ids
            )
        context = store.context(CONV, "v1")
        ledger = store.load(CONV).turns
        model.check(context.items, {turn.id: turn for turn in ledger})
        ids = [item.id for item in context.items]
        assert len(ids) == len(set(ids))
        newest = [turn.id for turn in ledger[-6:]]
        assert set(newest) <= set(ids)
        assert orphan_tool_messages(to_chat_messages(context)) == [], step
    for request, policy in model.requests:
        assert sum(policy.counter(turn.text) for turn in request.turns) <= policy.max_input_tokens
        assert request.max_summary_tokens == policy.max_summary_tokens
    assert statuses.get("accepted", 0) > 20 and statuses.get("failed", 0) >= 3
    # keep_versions, the current one, and the checkpoints (SPEC §17.5).
    assert len(store.summary_history(CONV)) <= 3 + 1 + policies[0].keep_checkpoints


def test_an_agent_session_stays_within_the_issue_bounds(tmp_path: Path) -> None:
    """Issue 17's agent-session figures on 330 real exchanges (trigger_tokens=4000): each turn
    summarised about once, no request over budget, compactions bounded by min_new_turns,
    derived data bounded by the ledger."""
    specs = session_turns(330)
    path = tmp_path / "ledger.db"
    requests: list[SummaryRequest] = []

    def counting(request: SummaryRequest) -> str:
        requests.append(request)
        return ExtractiveSummarizer()(request)

    policy = CompactionPolicy("v1", keep_tail=6, trigger_tokens=4000)
    with SQLiteStore(path) as store:
        compactor = Compactor(store, policy, counting)
        accepted = 0
        for spec in specs:
            store.append_many(CONV, [spec])
            accepted += compactor.compact(CONV).accepted
        context = compactor.context(CONV)
    appended = sum(approx_tokens(spec["body"]) for spec in specs)
    summarised = sum(approx_tokens(turn.text) for request in requests for turn in request.turns)
    assert summarised <= 1.5 * appended
    assert all(sum(approx_tokens(t.text) for t in r.turns) <= 8000 for r in requests)
    assert accepted == len(requests) <= len(specs) / policy.min_new_turns
    raw_bytes = sum(len(spec["body"].encode()) for spec in specs)
    assert path.stat().st_size <= 2 * raw_bytes + (1 << 20)
    assert context.fallback is None and context.summary is not None
