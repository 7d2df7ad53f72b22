"""A tool turn is in the search index exactly when it answers no `recall_history` call
(SPEC §16.5, §17.7), after any write that changes what it answers, both ways and in the
same transaction: its call renamed or re-identified, retracted, or purged; a call made
that it now answers. The rule is the live ledger's, as the summarizer's
(`recall_result_ids`): the oracle of the random walk below.

What was chosen for a retracted call: the results paired with it by call ID are retracted
with it (§17.2) and never come back into the index; a result without a call ID, which its
group's `recall_history` call made a recall result, stays live and, that call gone, is an
ordinary tool turn: searchable. A copy whose call is gone is still blanked when an original
it quotes is erased, so no erased text is found through it."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import ledgerfold as lf
from cli_support import file_has
from ledgerfold._recall_stand_in import recall_result_ids
from ledgerfold.store._recall_results import ERASED_RESULT
from ledgerfold.tools import run_recall

C = "c"


def _word() -> str:
    return "qzv" + "".join(random.choices(string.ascii_lowercase, k=12))


def _calls(*calls: tuple[str, str]) -> str:
    return json.dumps(
        [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}
            for call_id, name in calls
        ]
    )


def _found(store: lf.SQLiteStore, word: str) -> list[str]:
    return sorted(hit.turn_id for hit in store.search(C, word, scope="all", limit=100))


def _ledger(
    path: Path, word: str, *, by_group: bool = False, result_first: bool = False
) -> lf.SQLiteStore:
    """An original `o` holding `word`, then a `recall_history` call `a` (call ID `x`, or its
    group `g`) and its result `r` (the passages of a real recall of `word`), then a turn."""
    store = lf.SQLiteStore(path)
    store.append(C, "user", "nothing to see", id="u0")
    store.append(C, "user", f"the vault word is {word}", id="o")
    call: dict[str, Any] = {
        "role": "assistant",
        "body": "looking it up",
        "id": "a",
        "meta": {"tool_calls": _calls(("x", "recall_history"))},
    }
    result: dict[str, Any] = {
        "role": "tool",
        "body": run_recall(store, C, {"query": word}),
        "id": "r",
        "meta": {} if by_group else {"tool_call_id": "x"},
    }
    if by_group:
        call["group"] = result["group"] = "g"
    if result_first:
        store.append_many(C, [result])
        store.append_many(C, [call])
    else:
        store.append_many(C, [call, result])
    store.append(C, "user", "and then", id="u1")
    assert _found(store, word) == ["o"]  # the result is a recall result: not indexed
    return store


def _sequence(store: lf.SQLiteStore, turn_id: str) -> int:
    return next(t.sequence for t in store.load(C).turns if t.id == turn_id)


# -- its call renamed or re-identified (edits: searchable again) ------------------------------


def test_a_result_whose_call_is_renamed_is_searchable(tmp_path: Path) -> None:
    word = _word()
    with _ledger(tmp_path / "s.db", word) as store:
        store.edit(C, "a", meta={"tool_calls": _calls(("x", "lookup"))})
        assert _found(store, word) == ["o", "r"]
        store.edit(C, "a", meta={"tool_calls": _calls(("x", "recall_history"))})
        assert _found(store, word) == ["o"]


def test_a_result_whose_call_changes_id_is_searchable(tmp_path: Path) -> None:
    word = _word()
    with _ledger(tmp_path / "s.db", word, result_first=True) as store:
        store.edit(C, "a", meta={"tool_calls": _calls(("y", "recall_history"))})
        assert _found(store, word) == ["o", "r"]


def test_a_result_without_a_call_id_whose_group_call_is_renamed_is_searchable(
    tmp_path: Path,
) -> None:
    word = _word()
    with _ledger(tmp_path / "s.db", word, by_group=True) as store:
        store.edit(C, "a", meta={"tool_calls": _calls(("x", "lookup"))})
        assert _found(store, word) == ["o", "r"]


# -- its call retracted ------------------------------------------------------------------------


def test_a_result_retracted_with_its_call_stays_out_of_the_index(tmp_path: Path) -> None:
    """§17.2: the result goes with its call; retracted text is never returned, whatever
    happens to calls of its ID later."""
    word = _word()
    with _ledger(tmp_path / "s.db", word) as store:
        store.retract(C, "a")
        assert "r" not in {t.id for t in store.load(C).turns}
        store.append_many(
            C,
            [
                {
                    "role": "assistant",
                    "body": "again",
                    "id": "a2",
                    "meta": {"tool_calls": _calls(("x", "lookup"))},
                }
            ],
        )
        assert _found(store, word) == ["o"]


def test_a_result_without_a_call_id_is_searchable_once_its_group_call_is_retracted(
    tmp_path: Path,
) -> None:
    """It stays live (§17.2 retracts the results answering the call by ID) and answers no
    call any more: an ordinary tool turn, which the summarizer reads raw, and the index
    has. It stayed out of the index for good."""
    word = _word()
    with _ledger(tmp_path / "s.db", word, by_group=True) as store:
        store.retract(C, "a")
        assert recall_result_ids(store.load(C).turns) == frozenset()
        assert _found(store, word) == ["o", "r"]


def _call_then_original(path: Path, word: str, *, by_group: bool = True) -> lf.SQLiteStore:
    """A `recall_history` call and its result, then the original the result quotes (so
    that a purge through the call keeps it: a purged original blanks its results)."""
    store = lf.SQLiteStore(path)
    store.append(C, "user", "nothing to see", id="u0")
    call: dict[str, Any] = {
        "role": "assistant",
        "body": "looking it up",
        "id": "a",
        "meta": {"tool_calls": _calls(("x", "recall_history"))},
    }
    result: dict[str, Any] = {"role": "tool", "body": "{}", "id": "r"}
    if by_group:
        call["group"] = result["group"] = "g"
    else:
        result["meta"] = {"tool_call_id": "x"}
    store.append_many(C, [call, result])
    store.append(C, "user", f"the vault word is {word}", id="o")
    store.edit(C, "r", body=run_recall(store, C, {"query": word}))
    assert _found(store, word) == ["o"]
    return store


# -- its call purged (a forced purge splits the unit) -------------------------------------------


def test_a_result_whose_call_is_purged_is_searchable(tmp_path: Path) -> None:
    word = _word()
    for by_group in (False, True):
        with _call_then_original(tmp_path / f"{by_group}.db", word, by_group=by_group) as store:
            store.purge_through(C, _sequence(store, "a"), "test", force=True, keep_roles=())
            assert "r" in {t.id for t in store.load(C).turns}
            assert recall_result_ids(store.load(C).turns) == frozenset()
            assert _found(store, word) == ["o", "r"]


def test_a_result_left_answering_a_later_lookup_call_is_searchable(tmp_path: Path) -> None:
    """Its recall call purged, the result answers the first later call of its ID (§17.2):
    a lookup, so it is an ordinary result. Only the other way (a later recall_history call)
    was followed."""
    word = _word()
    with _call_then_original(tmp_path / "s.db", word, by_group=False) as store:
        store.append_many(
            C,
            [
                {
                    "role": "assistant",
                    "body": "again",
                    "id": "a2",
                    "meta": {"tool_calls": _calls(("x", "lookup"))},
                }
            ],
        )
        store.purge_through(C, _sequence(store, "a"), "test", force=True, keep_roles=())
        assert _found(store, word) == ["o", "r"]


# -- no erased text comes back ---------------------------------------------------------------


def test_an_erased_original_is_not_found_through_a_result_whose_call_went(
    tmp_path: Path,
) -> None:
    """The result, an ordinary tool turn once its call is gone, is blanked when the
    original it quotes is erased. It was recognised through its call only, so it kept the
    quote: in the ledger and the context, and then in the index."""
    for removal in ("retract", "purge"):
        word = _word()
        path = tmp_path / f"{removal}.db"
        if removal == "retract":
            store = _ledger(path, word, by_group=True)
            store.retract(C, "a")
        else:
            store = _call_then_original(path, word)
            store.purge_through(C, _sequence(store, "a"), "test", force=True, keep_roles=())
        store.retract(C, "o", erase=True)
        assert {t.id: t.body for t in store.load(C).turns}["r"] == ERASED_RESULT
        assert _found(store, word) == []
        assert _found(store, "removed") == ["r"]  # the placeholder, an ordinary tool turn
        store.close()
        assert not file_has(path, word)


def test_a_retracted_or_erased_result_is_never_indexed_again(tmp_path: Path) -> None:
    """Its group's recall call retracted, a live result would be searchable: a retracted
    one is not, nor does any later change of its group's calls bring it back."""
    for erase in (False, True):
        word = _word()
        path = tmp_path / f"{erase}.db"
        store = _ledger(path, word, by_group=True)
        store.append_many(
            C,
            [
                {
                    "role": "assistant",
                    "body": "more",
                    "id": "b",
                    "group": "g",
                    "meta": {"tool_calls": _calls(("z", "lookup"))},
                }
            ],
        )
        store.retract(C, "r", erase=erase)
        store.retract(C, "a")
        store.edit(C, "b", meta={"tool_calls": _calls(("z", "other"))})
        assert _found(store, word) == ["o"]
        store.retract(C, "o", erase=True)
        assert _found(store, word) == []
        store.close()
        assert not file_has(path, word)


# -- the rule after any sequence of writes -----------------------------------------------------

_OPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["call", "call", "result", "result", "edit-call", "edit-result", "group",
             "retract", "erase", "purge"]
        ),
        st.integers(0, 10**6),
    ),
    max_size=30,
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(_OPS)
def test_the_index_holds_the_live_turns_that_answer_no_recall_call(
    tmp_path_factory: Any, ops: list[tuple[str, int]]
) -> None:
    path = tmp_path_factory.mktemp("walk") / "s.db"
    with lf.SQLiteStore(path) as store:
        for step, (op, seed) in enumerate(ops):
            _write(store, op, random.Random(seed), f"t{step}")
            live = store.load(C).turns if store.conversation_ids() else ()
            wanted = {t.id for t in live if t.body.startswith("tok")} - recall_result_ids(live)
            indexed = {
                t.id
                for t in live
                if t.body.startswith("tok")
                and t.id in {hit.turn_id for hit in store.search(C, t.body.split()[0], scope="all")}
            }
            assert indexed == wanted, (ops[: step + 1], indexed ^ wanted)


def _write(store: lf.SQLiteStore, op: str, rnd: random.Random, turn_id: str) -> None:
    live = store.load(C).turns if store.conversation_ids() else ()

    def some_calls() -> str:
        made = {rnd.choice("xyz"): rnd.choice(["recall_history", "lookup"]) for _ in range(2)}
        return _calls(*made.items())

    body = f"tok{turn_id} text"
    try:
        if op == "call":
            group = rnd.choice([None, "g", "h"])
            spec: dict[str, Any] = {"role": "assistant", "body": body, "id": turn_id}
            spec["meta"] = {"tool_calls": some_calls()}
            store.append_many(C, [spec if group is None else {**spec, "group": group}])
        elif op == "result":
            meta = {"tool_call_id": rnd.choice("xyz")} if rnd.random() < 0.7 else {}
            group = rnd.choice(["g", "h"]) if not meta or rnd.random() < 0.3 else None
            spec = {"role": "tool", "body": body, "id": turn_id, "meta": meta}
            store.append_many(C, [spec if group is None else {**spec, "group": group}])
        elif op == "edit-call" and any(t.role == "assistant" for t in live):
            turn = rnd.choice([t for t in live if t.role == "assistant"])
            store.edit(C, turn.id, meta={"tool_calls": some_calls()} if rnd.random() < 0.8 else {})
        elif op == "edit-result" and any(t.role == "tool" for t in live):
            turn = rnd.choice([t for t in live if t.role == "tool"])
            store.edit(C, turn.id, meta={"tool_call_id": rnd.choice("xyz")})
        elif op == "group" and live:
            store.edit(C, rnd.choice(live).id, group=rnd.choice([None, "g", "h"]))
        elif op in ("retract", "erase") and live:
            store.retract(C, rnd.choice(live).id, erase=op == "erase")
        elif op == "purge" and len(live) > 1:
            through = rnd.choice(live[:-1]).sequence
            store.purge_through(C, through, "walk", force=rnd.random() < 0.7, keep_roles=())
    except lf.LedgerfoldError:
        pass  # a write the store refuses changes nothing
