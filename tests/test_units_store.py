"""Compaction units in the store and the chat adapter (SPEC §17.2): retraction takes a call's
results along, a summary splitting a call from an ungrouped result is stale (also in a database
written before the rule), a purge without force takes no unanswered call and no system prompt,
and chat messages are always a valid tool-call sequence, whatever the ledger holds."""

from __future__ import annotations

import json
import logging
import pickle
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import ledgerfold as lf
from ledgerfold import AssembledContext, SQLiteStore, TurnItem, to_chat_messages
from ledgerfold.revalidate import revalidate_database
from tool_call_meta import answer, calls, policy

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

import reference as ref  # noqa: E402

C = "c"


def valid(messages: list[dict[str, Any]]) -> bool:
    return ref.valid_tool_sequence(messages)


# ---------------------------------------------------------------- retract


def test_retracting_a_call_retracts_its_results_in_the_same_revision(caplog: Any) -> None:
    with SQLiteStore() as store:
        store.append(C, "user", "weather?", id="u1")
        store.append(C, "assistant", "", id="a1", meta=calls("x", "y"))  # no group
        store.append(C, "tool", "sunny", id="rx", meta=answer("x"))
        store.append(C, "tool", "warm", id="ry", group="other", meta=answer("y"))
        store.append(C, "tool", "unrelated", id="rz", meta=answer("z"))
        store.append(C, "user", "thanks", id="u2")
        before = store.load(C).revision
        with caplog.at_level(logging.INFO, logger="ledgerfold.store"):
            assert store.retract(C, "a1") is None
        conversation = store.load(C)
        assert [t.id for t in conversation.turns] == ["u1", "rz", "u2"]
        assert conversation.revision == before + 1
        assert "answers_retracted=2" in caplog.text


def test_erasing_a_call_erases_the_results_retracted_with_it(tmp_path: Path) -> None:
    """`retract(call, erase=True)`: the results that go with the call (SPEC §17.2) are erased
    too, in the same call (a result quotes what the call fetched): bodies and earlier
    versions gone from the file, from search and from every summary version citing them;
    the event names every erased turn. A result answering another call keeps its body."""
    path = tmp_path / "f.db"
    events: list[lf.Event] = []
    store = SQLiteStore(path, on_event=events.append)
    store.append(C, "user", "look up my record", id="u1")
    store.append(C, "assistant", "", id="a1", meta=calls("x"))
    store.append(C, "tool", "qjxprivaterecord blood type A", id="rx", meta=answer("x"))
    store.edit(C, "rx", body="qjxprivaterecord blood type O")  # an earlier version too
    store.append(C, "tool", "qjxkeepthisone", id="rz", meta=answer("z"))
    store.append(C, "user", "thanks", id="u2")
    assert [hit.turn_id for hit in store.search(C, "qjxprivaterecord", scope="all")] == ["rx"]
    store.retract(C, "a1", erase=True)
    assert [t.id for t in store.load(C).turns] == ["u1", "rz", "u2"]
    assert store.search(C, "qjxprivaterecord", scope="all") == []
    erased = [event for event in events if event.name == "retention.erased"]
    assert [(event.turn_ids, event.turns) for event in erased] == [(("a1", "rx"), 2)]
    store.close()
    data = path.read_bytes()
    assert b"qjxprivaterecord" not in data
    assert b"qjxkeepthisone" in data


def test_retracting_a_result_leaves_its_call() -> None:
    with SQLiteStore() as store:
        store.append(C, "assistant", "", id="a1", meta=calls("x"))
        store.append(C, "tool", "r", id="rx", meta=answer("x"))
        store.retract(C, "rx")
        assert [t.id for t in store.load(C).turns] == ["a1"]


# ---------------------------------------------------------------- group-split


def _summarised_call(store: SQLiteStore) -> lf.SummaryEnvelope:
    """A call and its ungrouped result, summarised together, then a tail."""
    store.append(C, "user", "look it up", id="u1")
    store.append(C, "assistant", "", id="a1", meta=calls("x"))
    store.append(C, "tool", "found", id="r1", meta=answer("x"))
    for n in range(4):
        store.append(C, "user", f"more {n}", id=f"m{n}")
    summary = lf.Compactor(store, policy()).compact(C).summary
    assert summary is not None and {"a1", "r1"} <= set(summary.source_ids)
    return summary


def test_an_ungrouped_second_result_makes_the_summary_of_its_call_stale() -> None:
    with SQLiteStore() as store:
        _summarised_call(store)
        store.append(C, "tool", "found again", id="r2", meta=answer("x"))  # no group
        context = store.context(C, "v1")
        assert context.fallback == "stale-summary:group-split"
        assert store.summary_history(C)[-1].reason == "group-split"
        assert valid(to_chat_messages(context))


def test_editing_a_turn_into_a_result_of_a_summarised_call_makes_it_stale() -> None:
    with SQLiteStore() as store:
        _summarised_call(store)
        store.append(C, "tool", "orphan", id="r2")
        store.edit(C, "r2", meta=answer("x"))
        assert store.context(C, "v1").fallback == "stale-summary:group-split"


def test_a_split_summary_in_an_older_database_is_stale_for_context_and_revalidation(
    tmp_path: Path,
) -> None:
    db = tmp_path / "old.db"
    with SQLiteStore(db) as store:
        _summarised_call(store)
        store.append(C, "tool", "found again", id="r2", meta=answer("x"))
    # Before §17.2 the append marked nothing: the record still says current.
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE summaries SET status = 'current', reason = NULL WHERE status = 'stale'"
        )
    with SQLiteStore(db) as store:
        context = store.context(C, "v1")
        assert (context.fallback, context.fallback_id) == ("stale-summary:group-split", "r2")
        assert "r2" in context.ids and context.summary is None
    report = revalidate_database(db, workers=1)
    assert [(s.reason, s.turn_id) for s in report.stale_summaries] == [("group-split", "r2")]
    with SQLiteStore(db) as store:
        assert store.summary_history(C)[-1].status == "stale"


# ---------------------------------------------------------------- purge


def test_a_purge_without_force_stops_before_an_unanswered_call() -> None:
    with SQLiteStore() as store:
        store.append(C, "user", "book it", id="u1")
        store.append(C, "assistant", "", id="a1", meta=calls("x"))  # the result is pending
        for n in range(4):
            store.append(C, "user", f"meanwhile {n}", id=f"m{n}")
        boundary = store.purge_through(C, 5, "retention")
        assert boundary.through_sequence == 1
        assert "a1" in {t.id for t in store.load(C).turns}
        store.append(C, "tool", "booked", id="r1", meta=answer("x"))
        context = store.context(C, "v1")
        assert {"a1", "r1"} <= set(context.ids)  # the call is there for its result
        assert valid(to_chat_messages(context))


def test_a_purge_without_force_keeps_a_protected_unanswered_call_and_goes_past_it() -> None:
    # A protected turn is never taken without force, so the purge does not stop before it:
    # the call stays raw below the boundary, its result comes later, the pair stays whole.
    with SQLiteStore() as store:
        store.append(C, "assistant", "", id="a1", group="a1", meta=calls("x"))
        store.edit(C, "a1", protected=True)
        store.append(C, "user", "meanwhile", id="u1")
        assert store.preview_purge(C, 2)["through_sequence"] == 2
        assert store.purge_through(C, 2, "retention").through_sequence == 2
        assert [t.id for t in store.load(C).turns] == ["a1"]
        store.append(C, "tool", "booked", id="r1", group="a1", meta=answer("x"))
        context = store.context(C, "v1")
        assert {"a1", "r1"} <= set(context.ids) and context.dropped == 0
        assert valid(to_chat_messages(context))
        # Unprotected once answered, the pair is compacted together below the boundary.
        store.edit(C, "a1", protected=False)
        for n in range(2):
            store.append(C, "user", f"later {n}", id=f"l{n}")
        summary = lf.Compactor(store, policy()).compact(C, force=True).summary
        assert summary is not None and {"a1", "r1"} <= set(summary.source_ids)
        assert valid(to_chat_messages(store.context(C, "v1")))


def test_retention_keeps_an_unanswered_call_the_summary_keeps_raw() -> None:
    with SQLiteStore() as store:
        store.append(C, "user", "book it", id="u1")
        store.append(C, "assistant", "", id="a1", meta=calls("x"))  # the result is pending
        for n in range(4):
            store.append(C, "user", f"meanwhile {n}", id=f"m{n}")
        summary = lf.Compactor(store, policy()).compact(C, force=True).summary
        assert summary is not None and "a1" not in summary.source_ids
        boundary = store.apply_retention(C, retain_turns=0)
        assert boundary is not None and boundary.through_sequence >= 2  # it is below the cut
        assert "a1" in {t.id for t in store.load(C).turns}
        store.append(C, "tool", "booked", id="r1", meta=answer("x"))
        assert {"a1", "r1"} <= set(store.context(C, "v1").ids)
        for n in range(2):  # once the result leaves the tail, the pair is folded together
            store.append(C, "user", f"later {n}", id=f"l{n}")
        summary = lf.Compactor(store, policy()).compact(C, force=True).summary
        assert summary is not None and summary.parent_id is not None
        assert {"a1", "r1"} <= set(summary.source_ids)
        assert valid(to_chat_messages(store.context(C, "v1")))


def test_a_purge_without_force_does_not_split_an_ungrouped_call() -> None:
    with SQLiteStore() as store:
        store.append(C, "user", "q", id="u1")
        store.append(C, "user", "q2", id="u2")
        store.append(C, "assistant", "", id="a1", meta=calls("x"))
        store.append(C, "tool", "r", id="r1", meta=answer("x"))
        store.append(C, "user", "next", id="u3")
        assert store.preview_purge(C, 3)["through_sequence"] == 2
        assert store.purge_through(C, 3, "r").through_sequence == 2
        assert [t.id for t in store.load(C).turns] == ["a1", "r1", "u3"]


def test_a_forced_purge_takes_the_call_and_the_adapter_leaves_its_result_out(
    caplog: Any,
) -> None:
    with SQLiteStore() as store:
        store.append(C, "assistant", "", id="a1", meta=calls("x"))
        store.append(C, "tool", "r", id="r1", meta=answer("x"))
        store.append(C, "user", "next", id="u3")
        store.purge_through(C, 1, "r", force=True)
        context = store.context(C, "v1")
        assert "r1" in context.ids and context.dropped == 1  # in the context, not sent
        with caplog.at_level(logging.WARNING, logger="ledgerfold.adapters"):
            messages = to_chat_messages(context)
        assert messages == [{"role": "user", "content": "next"}]
        assert "r1" in caplog.text and "next" not in caplog.text
        assert [t.id for t in store.load(C).turns] == ["r1", "u3"]  # the ledger keeps it


def test_a_purge_keeps_the_system_prompt_unless_forced(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ledgerfold._cli.main import cli

    db = tmp_path / "a.db"
    with SQLiteStore(db) as store:
        store.append(C, "system", "You are terse.", id="s1")
        for n in range(6):
            store.append(C, "user", f"u{n}", id=f"u{n}")
    result = CliRunner().invoke(cli, ["purge", str(db), C, "--through", "4", "--reason", "x"])
    assert result.exit_code == 0, result.output
    assert "1 system turn kept" in result.output
    with SQLiteStore(db) as store:
        assert store.load(C).turns[0].id == "s1"
        store.purge_through(C, 5, "x", keep_roles=())
        assert store.load(C).turns[0].id == "u4"  # no role kept: it goes
    db2 = tmp_path / "b.db"
    with SQLiteStore(db2) as store:
        store.append(C, "system", "You are terse.", id="s1")
        store.append(C, "user", "u", id="u1")
        store.append(C, "user", "v", id="u2")
    forced = ["purge", str(db2), C, "--through", "2", "--reason", "x", "--force"]
    assert CliRunner().invoke(cli, forced).exit_code == 0
    with SQLiteStore(db2) as store:
        assert [t.id for t in store.load(C).turns] == ["u2"]


def test_a_purge_stops_before_a_system_prompt_the_sealed_summary_covers() -> None:
    with SQLiteStore() as store:
        store.append(C, "user", "u0", id="u0")
        store.append(C, "system", "rules", id="s1")
        for n in range(5):
            store.append(C, "user", f"u{n + 1}", id=f"u{n + 1}")
        # A policy that preserves no role lets the summary cover the system turn.
        no_roles = lf.CompactionPolicy("v1", keep_tail=2, min_new_turns=1, preserve_roles=())
        summary = lf.Compactor(store, no_roles).compact(C).summary
        assert summary is not None and "s1" in summary.source_ids
        assert store.purge_through(C, 4, "x").through_sequence == 1
        assert store.context(C, "v1").fallback is None  # the sealed summary stays in use


# ---------------------------------------------------------------- adapter


def item(tid: str, seq: int, role: str, meta: dict[str, str] | None = None) -> TurnItem:
    return TurnItem(tid, role, f"text {tid}", seq, meta)


def test_dropped_is_part_of_the_contexts_value() -> None:
    orphan = AssembledContext((item("r", 1, "tool", answer("x")), item("u", 2, "user")))
    fine = AssembledContext(
        (item("a", 1, "assistant", calls("x")), item("r", 2, "tool", answer("x")))
    )
    assert (orphan.dropped, fine.dropped, AssembledContext(()).dropped) == (1, 0, 0)
    again = pickle.loads(pickle.dumps(orphan))
    assert again == orphan and again.dropped == 1 and hash(again.items) == hash(orphan.items)
    assert "dropped=1" in repr(orphan)
    with pytest.raises(TypeError):
        AssembledContext((), dropped=3)  # type: ignore[call-arg]  # derived, never passed


def test_an_unanswered_call_is_sent_only_at_the_end() -> None:
    last = AssembledContext(
        (
            item("u", 1, "user"),
            item("a", 2, "assistant", calls("x", "y")),
            item("rx", 3, "tool", answer("x")),
        )
    )
    assert [m["role"] for m in to_chat_messages(last)] == ["user", "assistant", "tool"]
    followed = AssembledContext((*last.items, item("u2", 4, "user")))
    assert [m["role"] for m in to_chat_messages(followed)] == ["user", "user"]
    assert followed.dropped == 2


# ------------------------------------------- property: any ledger gives a valid sequence

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("user")),
        st.tuples(
            st.just("call"),
            st.lists(st.sampled_from("abcd"), min_size=1, max_size=2, unique=True),
            st.booleans(),
        ),
        st.tuples(st.just("result"), st.sampled_from("abcde"), st.booleans()),
        st.tuples(st.just("retract"), st.integers(0, 30)),
        st.tuples(st.just("compact"), st.integers(1, 4)),
        st.tuples(st.just("purge"), st.integers(0, 30), st.booleans()),
        st.tuples(
            st.just("import"),
            st.lists(st.sampled_from("abcd"), min_size=1, max_size=2, unique=True),
        ),
        # Out of order: the call of results stored before any call of their ID.
        st.tuples(st.just("late-call"), st.booleans()),
    ),
    max_size=25,
)


def _early_result_ids(store: SQLiteStore) -> list[str]:
    """Call IDs of live results that no live call before them names."""
    made: set[str] = set()
    early: list[str] = []
    for turn in store.load(C).turns:
        meta = turn.meta or {}
        if turn.role == "assistant" and "tool_calls" in meta:
            made |= {call["id"] for call in json.loads(meta["tool_calls"])}
        elif turn.role == "tool" and meta.get("tool_call_id") not in made | {None, *early}:
            early.append(meta["tool_call_id"])
    return early


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
@example([("result", "a", False), ("user",), ("user",), ("compact", 1), ("call", ["a"], False)])
def test_chat_messages_are_always_a_valid_tool_call_sequence(ops: list[tuple[Any, ...]]) -> None:
    purged = False
    with SQLiteStore() as store:
        store.append(C, "system", "sys")
        for step, op in enumerate(ops):
            kind = op[0]
            if kind == "user":
                store.append(C, "user", "hi")
            elif kind == "call":
                store.append(C, "assistant", "", group="g" if op[2] else None, meta=calls(*op[1]))
            elif kind == "result":
                store.append(C, "tool", "out", group="g" if op[2] else None, meta=answer(op[1]))
            elif kind == "retract":
                live = store.load(C).turns
                if live:
                    store.retract(C, live[op[1] % len(live)].id)
            elif kind == "compact":
                lf.Compactor(store, policy(op[1])).compact(C, force=True)
            elif kind == "purge":
                store.purge_through(C, op[1], "r", force=op[2])
            elif kind == "late-call":
                early = _early_result_ids(store)
                if early:
                    store.append(
                        C, "assistant", "", group="g" if op[1] else None, meta=calls(*early)
                    )
            else:  # chat messages appended as one batch (fresh call IDs), one result each
                fresh = [f"{c}{step}" for c in op[1]]
                messages: list[dict[str, Any]] = [
                    {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": json.loads(calls(*fresh)["tool_calls"]),
                    }
                ]
                messages += [
                    {"role": "tool", "content": "ok", "tool_call_id": c} for c in fresh[:1]
                ]
                store.append_chat_messages(C, messages)
            context = store.context(C, "v1")
            if kind == "purge":
                purged = True
            envelope = store.current_summary(C)
            if context.summary is not None:
                assert envelope is not None and envelope.id == context.summary.id
            if envelope is not None and not purged:
                # The store never keeps current a summary the core's rule calls stale (its
                # incremental checks pair calls as the core does, a call arriving after a
                # result of its ID included), so its context never serves one either.
                check = lf.check_summary(envelope, store.load(C), "v1")
                assert check.current, (check.reason, check.turn_id)
            out = to_chat_messages(context)
            assert valid(out), out
            assert len(out) == len(context.items) - context.dropped
            ids = {t.id for t in store.load(C).turns}
            assert {i.id for i in context.items if isinstance(i, TurnItem)} <= ids
