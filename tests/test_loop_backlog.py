"""The agent loop (SPEC §15), checked black-box through the public API on real transcripts and a
real SQLite file. A backlog is folded one chunk per call within `max_input_tokens` (SPEC §15.2,
§15.8): oversized turns cut with a marker, oversized groups still within budget, a killed fold
resuming from its last chunk, a failed chunk changing nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from ledgerfold import CompactionPolicy, Compactor, SQLiteStore, SummaryEnvelope, plan_compaction

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from loop_support import (  # noqa: E402
    CONV,
    Recorder,
    fingerprint_of,
    ledger_map,
    real_bodies,
    spec_of,
    talk,
    transcripts,
    words,
)


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
