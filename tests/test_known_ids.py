"""`SQLiteStore.known_ids` (SPEC §17.6): every ID ever written to the conversation — live,
retracted, erased or purged — and nothing else; and `to_chat_messages(system_prompt=...)`:
one leading system message carrying the prompt and the summary."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ledgerfold import (
    AssembledContext,
    CompactionPolicy,
    Compactor,
    SQLiteStore,
    SummaryItem,
    to_chat_messages,
)


def test_known_ids_live_retracted_erased_purged_not_other_conversations(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "k.db")
    store.append_many("c", [{"id": f"t{n}", "role": "user", "body": f"b{n}"} for n in range(8)])
    store.append("other", "user", "x", id="o1")
    store.retract("c", "t2")
    store.retract("c", "t3", erase=True)
    store.purge_through("c", 1, "retention", force=True)
    asked = ["t0", "t2", "t3", "t7", "o1", "nope"]
    assert store.known_ids("c", asked) == {"t0", "t2", "t3", "t7"}
    assert store.known_ids("c", []) == set()
    assert store.known_ids("unknown", ["t0"]) == set()
    store.delete_conversation("c")  # erased: nothing of it is known any more
    assert store.known_ids("c", asked) == set()


def test_known_ids_takes_more_ids_than_sqlite_has_parameters(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "m.db")
    store.append_many("c", [{"id": f"t{n}", "role": "user", "body": "b"} for n in range(50)])
    asked = [f"t{n}" for n in range(40_000)]  # beyond SQLITE_MAX_VARIABLE_NUMBER (32766)
    assert store.known_ids("c", iter(asked)) == {f"t{n}" for n in range(50)}


def test_known_ids_is_one_indexed_lookup(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "q.db")
    store.append("c", "user", "b", id="t1")
    seen: list[str] = []
    store._connection().set_trace_callback(seen.append)
    store.known_ids("c", ["t1", "t2"])
    selects = [statement for statement in seen if statement.lstrip().upper().startswith("SELECT")]
    assert len(selects) == 1
    plan = store._connection().execute("EXPLAIN QUERY PLAN " + selects[0]).fetchall()
    assert any(row[3].startswith("SEARCH t USING COVERING INDEX") for row in plan)
    assert not any(row[3].startswith("SCAN t") for row in plan)  # never the whole ledger


_IDS = st.sampled_from([f"t{n}" for n in range(12)])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["append", "retract", "erase", "purge"]), _IDS), max_size=25
    ),
    st.lists(_IDS, max_size=12),
)
def test_known_ids_is_everything_ever_appended(
    operations: list[tuple[str, str]], asked: list[str]
) -> None:
    store = SQLiteStore()
    written: list[str] = []
    for operation, turn_id in operations:
        live = {turn.id for turn in store.load("c").turns}
        if operation == "append" and turn_id not in written:
            store.append("c", "user", "b", id=turn_id)
            written.append(turn_id)
        elif operation in ("retract", "erase") and turn_id in live:
            store.retract("c", turn_id, erase=operation == "erase")
        elif operation == "purge" and written:
            store.purge_through("c", 1 + len(written) // 2, "x", force=True)
    assert store.known_ids("c", asked) == set(asked) & set(written)
    store.close()


def _summarised_context() -> AssembledContext:
    store = SQLiteStore()
    store.append("c", "system", "Stored system turn.", protected=True)
    for n in range(8):
        store.append("c", "user", f"question {n}")
    compactor = Compactor(
        store, CompactionPolicy("v", keep_tail=2, trigger_tokens=None, min_new_turns=1)
    )
    assert compactor.compact("c").accepted
    context = compactor.context("c")
    assert any(isinstance(item, SummaryItem) for item in context.items)
    return context


def test_system_prompt_leads_with_the_summary_and_nothing_else_carries_it() -> None:
    context = _summarised_context()
    plain = to_chat_messages(context)
    (summary,) = [m for m in plain if "<ledgerfold-summary>" in m["content"]]
    joined = to_chat_messages(context, system_prompt="Be brief.")
    assert joined[0] == {"role": "system", "content": "Be brief.\n\n" + summary["content"]}
    # The rest is every other message, in order: the stored system turn stays a turn.
    assert joined[1:] == [m for m in plain if m is not summary]
    assert not any("<ledgerfold-summary>" in m["content"] for m in joined[1:])
    json.dumps(joined, allow_nan=False)
    # An empty prompt adds no text before the summary.
    assert to_chat_messages(context, system_prompt="")[0]["content"] == summary["content"]


def test_system_prompt_without_a_summary_is_the_prompt_alone() -> None:
    store = SQLiteStore()
    store.append("c", "user", "hi")
    context = store.context("c", "v")
    assert to_chat_messages(context, system_prompt="P") == [
        {"role": "system", "content": "P"},
        {"role": "user", "content": "hi"},
    ]
    assert to_chat_messages(context, recall=False) == to_chat_messages(context)
    # An empty prompt and no summary: no system message (several providers refuse an empty
    # one), not `{"role": "system", "content": ""}`.
    assert to_chat_messages(context, system_prompt="") == [{"role": "user", "content": "hi"}]
