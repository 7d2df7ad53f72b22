"""The agent loop (SPEC §15.1–§15.3, §15.8): rolling summaries sound by construction, bounded
summarizer input, hysteresis, back-off, chunked folding, pruning, preserved roles, open tool
calls and split groups. Every test runs the real `Compactor` on a real SQLite file."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledgerfold import (
    CompactionPolicy,
    Compactor,
    SQLiteStore,
    SummaryRequest,
    check_summary,
    plan_compaction,
    to_chat_messages,
)
from ledgerfold.tokens import approx_tokens

CONV = "c"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    with SQLiteStore(tmp_path / "ledger.db") as opened:
        yield opened


class Recorder:
    """A summarizer that keeps every request and answers with a short, numbered text that
    names the sequences it saw (so tests can tell which facts a summary carries)."""

    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    def __call__(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        seen = ",".join(str(turn.sequence) for turn in request.turns)
        return f"summary {len(self.requests)} of seqs {seen}"


def talk(store: SQLiteStore, count: int, start: int = 0, size: int = 1) -> None:
    for index in range(start, start + count):
        role = "user" if index % 2 == 0 else "assistant"
        store.append(CONV, role, f"message {index} " + "word " * size, id=f"m{index}")


def policy(**changes: object) -> CompactionPolicy:
    settings: dict[str, object] = {"keep_tail": 2, "min_new_turns": 1}
    settings.update(changes)
    return CompactionPolicy("v1", **settings)  # type: ignore[arg-type]


# -- rolling and rebase (§15.1) ---------------------------------------------------------------


def test_a_rolling_summary_covers_every_turn_its_ancestors_did(store: SQLiteStore) -> None:
    recorder = Recorder()
    compactor = Compactor(store, policy(), recorder)
    talk(store, 6)
    first = compactor.compact(CONV).summary
    talk(store, 3, start=6)
    second = compactor.compact(CONV).summary
    assert first is not None and second is not None
    assert second.parent_id == first.id
    assert second.source_ids == tuple(f"m{i}" for i in range(7))
    request = recorder.requests[1]
    assert [turn.id for turn in request.turns] == ["m4", "m5", "m6"]
    assert request.previous_summary == first.text
    assert request.covered_count == 4
    # Any edit of a turn only the parent summarised makes the new summary stale.
    store.edit(CONV, "m0", body="message 0, corrected")
    assert not check_summary(second, store.load(CONV), "v1").current
    assert store.context(CONV, "v1").fallback == "stale-summary:source-modified"


def test_a_stale_fact_never_reaches_the_model(store: SQLiteStore) -> None:
    """keep_tail 2, then 8: coverage would shrink, so the second compaction is a rebase and
    its text is not made from a summary of turns it does not cover."""
    recorder = Recorder()
    talk(store, 20)
    store.edit(CONV, "m15", body="Ship the order to 12 Old Street")
    Compactor(store, policy(keep_tail=2), recorder).compact(CONV)
    outcome = Compactor(store, policy(keep_tail=8), recorder).compact(CONV)
    assert outcome.status == "accepted" and outcome.summary is not None
    rebase = recorder.requests[1]
    assert rebase.previous_summary is None and rebase.covered_count == 0
    assert outcome.summary.parent_id is None
    assert "m15" not in outcome.summary.source_ids
    store.edit(CONV, "m15", body="Ship the order to 4 New Road")
    context = store.context(CONV, "v1")
    summary = context.summary
    assert summary is not None
    assert "16" not in summary.text.split("seqs ")[1].split(",")  # m15 is sequence 16
    assert [item.text for item in context.items if item.id == "m15"] == [
        "Ship the order to 4 New Road"
    ]


def test_rolling_never_shrinks_coverage_when_a_source_gets_a_preserved_role(
    store: SQLiteStore,
) -> None:
    recorder = Recorder()
    talk(store, 8)
    Compactor(store, policy(preserve_roles=()), recorder).compact(CONV)
    talk(store, 2, start=8)
    outcome = Compactor(store, policy(preserve_roles=("assistant",)), recorder).compact(CONV)
    assert outcome.summary is not None and outcome.summary.parent_id is None
    assert all(turn.role != "assistant" for turn in recorder.requests[1].turns)


# -- bounded cost (§15.2) ----------------------------------------------------------------------


def test_each_turn_is_summarised_about_once_over_a_long_session(store: SQLiteStore) -> None:
    recorder = Recorder()
    compactor = Compactor(store, CompactionPolicy("v1", keep_tail=6), recorder)
    appended = 0
    for exchange in range(150):
        talk(store, 2, start=2 * exchange, size=5)
        appended += 2
        compactor.compact(CONV)
    summarised = sum(len(request.turns) for request in recorder.requests)
    assert summarised <= appended
    assert len({turn.id for r in recorder.requests for turn in r.turns}) == summarised
    # Hysteresis: compaction waits for min_new_turns (8) uncovered turns.
    assert len(recorder.requests) <= appended // 8
    assert all(len(request.turns) >= 8 for request in recorder.requests)


def test_trigger_counts_the_assembled_context_not_the_summary_alone(store: SQLiteStore) -> None:
    recorder = Recorder()
    talk(store, 40, size=20)
    counter = approx_tokens
    compactor = Compactor(store, policy(trigger_tokens=400, token_counter=counter), recorder)
    assert compactor.compact(CONV).status == "accepted"
    tokens = sum(counter(item.text) + 4 for item in store.context(CONV, "v1").items)
    assert tokens <= 400
    # Not due again until the assembled context passes the trigger once more.
    talk(store, 2, start=40, size=20)
    assert compactor.compact(CONV).reason == "not-due"


def test_backoff_doubles_the_new_turns_needed_and_survives_a_restart(tmp_path: Path) -> None:
    calls = []

    def failing(request: SummaryRequest) -> str:
        calls.append(request)
        raise RuntimeError("model unavailable")

    path = tmp_path / "ledger.db"
    with SQLiteStore(path) as store:
        talk(store, 4 + 2)
        failing_policy = policy(min_new_turns=2)
        assert Compactor(store, failing_policy, failing).compact(CONV).status == "failed"
        assert store.consecutive_failures(CONV) == 1
        # One failure: 4 new turns needed; the 4 uncovered turns are just enough.
        assert Compactor(store, failing_policy, failing).compact(CONV).status == "failed"
        assert Compactor(store, failing_policy, failing).compact(CONV).reason == "not-due"
    with SQLiteStore(path) as store:  # counted from the store: a restart does not reset it
        assert store.consecutive_failures(CONV) == 2
        compactor = Compactor(store, failing_policy, Recorder())
        assert compactor.compact(CONV).reason == "not-due"
        talk(store, 4, start=6)  # 8 uncovered now: 2 * 2**2
        assert compactor.compact(CONV).status == "accepted"
        assert store.consecutive_failures(CONV) == 0
        # force bypasses the back-off and min_new_turns (but not an empty backlog).
        assert len(calls) == 2


def test_a_backlog_folds_in_bounded_chunks_each_committed(store: SQLiteStore) -> None:
    recorder = Recorder()
    talk(store, 60, size=30)  # about 38 tokens a turn
    compactor = Compactor(store, policy(max_input_tokens=400), recorder)
    outcomes = []
    while (outcome := compactor.compact(CONV)).status == "accepted":
        outcomes.append(outcome)
    assert len(outcomes) > 3
    for request in recorder.requests:
        assert sum(approx_tokens(turn.text) for turn in request.turns) <= 400
    # Each chunk extends the last; together they cover every compactable turn once.
    chained = [outcome.summary for outcome in outcomes]
    assert all(s is not None for s in chained)
    for parent, child in itertools.pairwise(chained):
        assert child is not None and parent is not None
        assert child.parent_id == parent.id
    last = chained[-1]
    assert last is not None and last.source_ids == tuple(f"m{i}" for i in range(58))
    seen = [turn.id for request in recorder.requests for turn in request.turns]
    assert seen == [f"m{i}" for i in range(58)]


def test_a_turn_larger_than_the_budget_goes_alone_cut_with_head_and_tail(
    store: SQLiteStore,
) -> None:
    recorder = Recorder()
    store.append(CONV, "tool", "HEAD " + "x" * 8000 + " TAIL", id="big")
    talk(store, 3)
    compactor = Compactor(store, policy(max_input_tokens=200), recorder)
    assert compactor.compact(CONV).status == "accepted"
    (turn,) = recorder.requests[0].turns
    assert turn.id == "big"
    assert approx_tokens(turn.text) <= 200
    assert turn.text.startswith("HEAD ") and turn.text.endswith(" TAIL")
    assert "characters cut" in turn.text


def test_versions_beyond_keep_versions_are_pruned(store: SQLiteStore) -> None:
    # Exactly `keep_versions` (checkpoints, SPEC §17.5, are tested in test_checkpoints.py).
    compactor = Compactor(store, policy(keep_versions=2, keep_checkpoints=0), Recorder())
    for round_ in range(6):
        talk(store, 3, start=3 * round_)
        assert compactor.compact(CONV).status == "accepted"
    history = store.summary_history(CONV)
    assert [record.status for record in history] == ["superseded", "superseded", "current"]
    assert store.pruned_count(CONV) == 3
    rows = store._connection().execute("SELECT COUNT(*) FROM summaries").fetchone()[0]
    assert rows == 3
    assert store.prune_versions(CONV, keep=0, keep_checkpoints=0) == 2
    assert [record.status for record in store.summary_history(CONV)] == ["current"]
    assert store.pruned_count(CONV) == 5
    assert store.context(CONV, "v1").fallback is None


# -- planning (§15.3) -------------------------------------------------------------------------


def test_system_prompts_stay_raw_by_default(store: SQLiteStore) -> None:
    recorder = Recorder()
    store.append(CONV, "system", "# Airline Agent Policy\n" + "rule. " * 1000, id="policy")
    talk(store, 12)
    assert Compactor(store, CompactionPolicy("v1", keep_tail=2), recorder).compact(CONV).accepted
    assert all(turn.role != "system" for turn in recorder.requests[0].turns)
    context = store.context(CONV, "v1")
    assert context.items[0].id == "policy"
    assert context.items[0].text.startswith("# Airline Agent Policy")


def test_an_open_tool_call_stays_raw_until_answered(store: SQLiteStore) -> None:
    recorder = Recorder()
    talk(store, 4)
    calls = json.dumps([{"id": "call-1", "type": "function", "function": {"name": "f"}}])
    store.append(CONV, "assistant", "", id="ask", group="g1", meta={"tool_calls": calls})
    talk(store, 6, start=4)
    conversation = store.load(CONV)
    plan = plan_compaction(conversation, 2, "p")
    assert "ask" not in plan.compacted_ids and "ask" in plan.preserved_ids
    Compactor(store, policy(), recorder).compact(CONV)
    assert "ask" not in {turn.id for turn in recorder.requests[0].turns}
    context = store.context(CONV, "v1")
    assert "ask" in context.ids  # raw in the context...
    # ...but a call whose result is missing while later messages follow is not sent
    # (SPEC §17.2): providers refuse it.
    assert context.dropped == 1
    assert not any(message.get("tool_calls") for message in to_chat_messages(context))


def test_a_late_tool_result_in_a_summarised_group_makes_the_summary_stale(
    store: SQLiteStore,
) -> None:
    """A tool result appended after its call was summarised splits the group: the summary
    goes stale at once (group-split), so no tool message is sent without its call."""
    calls = json.dumps([{"id": "call-1", "type": "function", "function": {"name": "f"}}])
    store.append(CONV, "assistant", "", id="ask", group="g1", meta={"tool_calls": calls})
    store.append(CONV, "tool", "partial", id="r0", group="g1", meta={"tool_call_id": "call-1"})
    talk(store, 6)
    summary = Compactor(store, policy(), Recorder()).compact(CONV).summary
    assert summary is not None and "ask" in summary.source_ids
    store.append(CONV, "tool", "late", id="late", group="g1", meta={"tool_call_id": "call-1"})
    assert check_summary(summary, store.load(CONV), "v1").reason == "group-split"
    context = store.context(CONV, "v1")
    assert context.fallback == "stale-summary:group-split"
    assert [record.reason for record in store.summary_history(CONV)][-1] == "group-split"
    # The same through an edit that moves a turn outside the summary into a summarised group.
    store.append("c2", "user", "question", id="q", group="g2")
    store.append("c2", "assistant", "answer", id="a", group="g2")
    for index in range(4):
        store.append("c2", "user", f"later {index}", id=f"later{index}")
    summary = Compactor(store, policy(), Recorder()).compact("c2").summary
    assert summary is not None and {"q", "a"} <= set(summary.source_ids)
    store.edit("c2", "later3", group="g2")
    assert store.context("c2", "v1").fallback == "stale-summary:group-split"
    assert check_summary(summary, store.load("c2"), "v1").turn_id == "later3"


def test_parent_id_survives_reopening_the_store(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with SQLiteStore(path) as store:
        talk(store, 6)
        compactor = Compactor(store, policy(), Recorder())
        compactor.compact(CONV)
        talk(store, 2, start=6)
        second = compactor.compact(CONV).summary
        assert second is not None and second.parent_id is not None
    with SQLiteStore(path) as reopened:
        assert reopened.current_summary(CONV) == second
        assert reopened.summary_history(CONV)[-1].envelope == second


@pytest.mark.parametrize(("durability", "level"), [("full", 2), ("normal", 1)])
def test_durability_sets_the_sync_level(tmp_path: Path, durability: str, level: int) -> None:
    with SQLiteStore(tmp_path / "ledger.db", durability=durability) as store:
        conn = store._connection()
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == level
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        store.append(CONV, "user", "hello")
    with SQLiteStore(tmp_path / "ledger.db", durability=durability) as store:
        assert [turn.body for turn in store.load(CONV).turns] == ["hello"]


def test_durability_refuses_other_values(tmp_path: Path) -> None:
    from ledgerfold import InvalidInput

    with pytest.raises(InvalidInput) as caught:
        SQLiteStore(tmp_path / "ledger.db", durability="off")
    assert caught.value.field == "durability"
    assert not (tmp_path / "ledger.db").exists()


def test_malformed_tool_calls_are_refused_at_write_so_reads_never_fail(
    store: SQLiteStore,
) -> None:
    """Regression: `meta={"tool_calls": "not json"}` was accepted, and every later
    `to_chat_messages` of the conversation raised. Now the write is refused (SPEC §15.8)."""
    from ledgerfold import InvalidInput

    talk(store, 2)
    for bad in ("not json", '{"id": "x"}', '[{"name": "f"}]', '[{"id": "k", "v": NaN}]'):
        with pytest.raises(InvalidInput) as caught:
            store.append(CONV, "assistant", "calling", meta={"tool_calls": bad})
        assert caught.value.field is not None and caught.value.field.startswith("meta.tool_calls")
    with pytest.raises(InvalidInput):
        store.edit(CONV, "m1", meta={"tool_calls": "not json"})
    assert len(store.load(CONV)) == 2
    assert len(to_chat_messages(store.context(CONV, "v1"))) == 2


def test_create_summary_envelope_with_a_parent_cites_every_covered_turn() -> None:
    from ledgerfold import Conversation, Turn, create_summary_envelope

    turns = [Turn(f"t{i}", i, "user", f"fact {i}") for i in range(1, 11)]
    first_ledger = Conversation("c", 1, turns[:8])
    first = create_summary_envelope(
        plan_compaction(first_ledger, 2, "p1"), first_ledger, "s1", "v1", "a"
    )
    assert first is not None and first.source_ids == tuple(f"t{i}" for i in range(1, 7))
    ledger = Conversation("c", 2, turns)
    plan = plan_compaction(ledger, 2, "p2")
    second = create_summary_envelope(plan, ledger, "s2", "v1", "b", parent=first)
    assert second is not None and second.parent_id == "s1"
    assert second.source_ids == tuple(f"t{i}" for i in range(1, 9))
    assert check_summary(second, ledger, "v1").current
    # Without the parent's turns in `turns` there is nothing to fingerprint: None.
    assert create_summary_envelope(plan, turns[6:], "s3", "v1", "b", parent=first) is None
    edited = Conversation("c", 3, [*turns[:2], turns[2].replace(body="changed"), *turns[3:]])
    assert check_summary(second, edited, "v1").reason == "source-modified"


@pytest.mark.parametrize("roles", ["system", ["robot"], [1]])
def test_preserve_roles_must_be_known_roles(roles: object) -> None:
    from ledgerfold import Conversation, InvalidInput

    with pytest.raises(InvalidInput) as caught:
        plan_compaction(Conversation("c", 0, ()), 1, "p", preserve_roles=roles)  # type: ignore[arg-type]
    assert caught.value.field == "preserve_roles"
    with pytest.raises(InvalidInput) as caught:
        CompactionPolicy("v1", preserve_roles=roles)  # type: ignore[arg-type]
    assert caught.value.field == "preserve_roles"
