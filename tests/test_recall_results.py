"""Recall results stored back in the ledger (SPEC §16.5, §17.7): a tool turn answering a
`recall_history` call is never a summary source's text (the summarizer sees
`[seq N tool] recall_history result: k passages`), and an erasure or purge of an original
blanks every result that returned it, leaving the tool turn (its call stays answered) with a
placeholder body. Erasure is checked by grepping the database file's bytes, on a real file
database, as tests/test_search_erasure.py does."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledgerfold as lf
from cli_support import file_has
from ledgerfold import to_chat_messages
from ledgerfold._fold import fold_chunk
from ledgerfold._recall_stand_in import recall_result_ids, stand_in
from ledgerfold.store._recall_results import ERASED_RESULT
from ledgerfold.tokens import approx_tokens
from ledgerfold.tools import RECALL_TOOL_NAME, run_recall

CONVERSATION = "c"


def marker() -> str:
    return "qjx" + "".join(random.choices(string.ascii_lowercase, k=14))


def _call(call_id: str, name: str = "recall_history") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def recalled(store: lf.SQLiteStore, word: str, call_id: str = "call-r") -> str:
    """Append a recall_history call and its result (run on the store) for `word`; return the
    result's turn ID."""
    result = run_recall(store, CONVERSATION, {"query": word})
    assert word in result
    store.append_chat_messages(
        CONVERSATION,
        [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [_call(call_id)],
                "id": f"a-{call_id}",
            },
            {"role": "tool", "tool_call_id": call_id, "content": result, "id": f"r-{call_id}"},
        ],
    )
    return f"r-{call_id}"


def filled(path: Path, word: str) -> lf.SQLiteStore:
    store = lf.SQLiteStore(path)
    for i in range(20):
        store.append(CONVERSATION, "user", f"ordinary words number {i} about apples", id=f"t{i}")
    store.append(CONVERSATION, "user", f"the vault word is {word} remember it", id="secret")
    for i in range(20, 24):
        store.append(CONVERSATION, "user", f"more ordinary words {i}", id=f"t{i}")
    return store


# -- the summarizer never sees a recall result's text ----------------------------------------


class Recording:
    def __init__(self) -> None:
        self.requests: list[Any] = []

    def __call__(self, request: Any) -> str:
        self.requests.append(request)
        return "summary"


def test_the_summarizer_sees_a_stand_in_for_a_recall_result(tmp_path: Path) -> None:
    word = marker()
    with filled(tmp_path / "a.db", word) as store:
        result_id = recalled(store, word)
        other = [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [_call("call-l", "lookup")],
                "id": "a-l",
            },
            {
                "role": "tool",
                "tool_call_id": "call-l",
                "content": f"lookup says {word}",
                "id": "r-l",
            },
        ]
        store.append_chat_messages(CONVERSATION, other)
        for i in range(4):
            store.append(CONVERSATION, "user", f"tail {i}")
        summarizer = Recording()
        policy = lf.CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
        lf.Compactor(store, policy, summarizer).compact(CONVERSATION, force=True)
        (request,) = summarizer.requests
        texts = {item.id: item.text for item in request.turns}
        assert texts[result_id] == "recall_history result: 1 passages"
        assert texts["r-l"] == f"lookup says {word}"  # another tool's result is itself
        assert word not in "".join(t for i, t in texts.items() if i != "secret" and i != "r-l")


def test_the_extractive_summary_line_of_a_recall_result(tmp_path: Path) -> None:
    word = marker()
    with filled(tmp_path / "a.db", word) as store:
        result_id = recalled(store, word)
        for i in range(4):
            store.append(CONVERSATION, "user", f"tail {i}")
        sequence = store.get_turns(CONVERSATION, [result_id])[0].sequence
        policy = lf.CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
        lf.Compactor(store, policy, lf.ExtractiveSummarizer()).compact(CONVERSATION, force=True)
        summary = store.current_summary(CONVERSATION)
        assert summary is not None and result_id in summary.source_ids
        # Its line says how many passages, not the size of the text standing in for them.
        assert f"[seq {sequence} tool] recall_history result: 1 passages\n" in summary.text + "\n"
        assert "recall_history result: 1 passages (" not in summary.text
        # The original's own line quotes it once; the copy is not quoted again.
        assert summary.text.count(word) == 1


@pytest.mark.parametrize("tool_head_chars", [80, 0])
def test_a_named_recall_result_line_is_the_stand_in_alone(tool_head_chars: int) -> None:
    """A result stored with its tool's name (a LangChain `ToolMessage`, a chat message's
    `name`) reads `[seq N tool] recall_history result: k passages` too (SPEC §17.7), not
    `recall_history: recall_history result: ...`, and so it does without tool heads."""
    item = lf.TurnItem(
        "r", "tool", "recall_history result: 2 passages", 7, {"name": "recall_history"}
    )
    request = lf.SummaryRequest(CONVERSATION, "p", "v1", (item,), None)
    text = lf.ExtractiveSummarizer(tool_head_chars=tool_head_chars)(request)
    assert text == "[seq 7 tool] recall_history result: 2 passages"


def test_recall_results_are_known_by_call_id_or_by_group() -> None:
    calls = json.dumps([_call("c1")])
    lookup = json.dumps([_call("c2", "lookup")])
    turns = [
        lf.Turn("a1", 1, "assistant", "", meta={"tool_calls": calls}),
        lf.Turn("r1", 2, "tool", "{}", meta={"tool_call_id": "c1"}),
        lf.Turn("a2", 3, "assistant", "", group="g", meta={"tool_calls": calls}),
        lf.Turn("r2", 4, "tool", "{}", group="g"),  # no call ID: its group decides
        lf.Turn("a3", 5, "assistant", "", group="h", meta={"tool_calls": lookup}),
        lf.Turn("r3", 6, "tool", "{}", group="h", meta={"tool_call_id": "c2"}),
        lf.Turn("r4", 7, "tool", "{}", meta={"tool_call_id": "unknown"}),
    ]
    assert recall_result_ids(turns) == {"r1", "r2"}
    assert stand_in('{"hits": [{}, {}, {}]}') == "recall_history result: 3 passages"
    assert stand_in('{"error": "bad"}') == "recall_history result: 0 passages"
    assert stand_in("not json") == "recall_history result: 0 passages"


def test_a_call_id_reused_for_another_tool_is_that_tools_result() -> None:
    # `call_0` for recall_history, then `call_0` again for lookup (a model numbering its calls
    # per response): the lookup's result is a fact, never taken for a recall result.
    recall = json.dumps([_call("call_0")])
    lookup = json.dumps([_call("call_0", "lookup")])
    turns = [
        lf.Turn("a1", 1, "assistant", "", meta={"tool_calls": recall}),
        lf.Turn("r1", 2, "tool", "{}", meta={"tool_call_id": "call_0"}),
        lf.Turn("a2", 3, "assistant", "", meta={"tool_calls": lookup}),
        lf.Turn("r2", 4, "tool", "fact", meta={"tool_call_id": "call_0"}),
        lf.Turn("a3", 5, "assistant", "", meta={"tool_calls": recall}),
        lf.Turn("r3", 6, "tool", "{}", meta={"tool_call_id": "call_0"}),
    ]
    assert recall_result_ids(turns) == {"r1", "r3"}


@pytest.mark.parametrize("batched", [False, True], ids=["one-by-one", "one-batch"])
def test_a_lookup_result_under_a_reused_recall_call_id_is_indexed(
    tmp_path: Path, batched: bool
) -> None:
    word, fact = marker(), marker()
    store = filled(tmp_path / "ledger.db", word)
    result = run_recall(store, CONVERSATION, {"query": word})
    messages: list[dict[str, Any]] = [
        {"role": "assistant", "content": "", "tool_calls": [_call("call_0")], "id": "a1"},
        {"role": "tool", "tool_call_id": "call_0", "content": result, "id": "r1"},
        {"role": "assistant", "content": "", "tool_calls": [_call("call_0", "lookup")]},
        {"role": "tool", "tool_call_id": "call_0", "content": f"booking {fact}", "id": "r2"},
    ]
    if batched:
        store.append_chat_messages(CONVERSATION, messages)
    else:
        for message in messages:
            store.append_chat_messages(CONVERSATION, [message])
    assert [hit.turn_id for hit in store.search(CONVERSATION, fact, scope="all")] == ["r2"]
    # The recall result is never indexed: the word is found in its original only.
    assert [hit.turn_id for hit in store.search(CONVERSATION, word, scope="all")] == ["secret"]
    store.close()


def test_a_retracted_call_of_the_same_id_does_not_decide_a_recall_result(
    tmp_path: Path,
) -> None:
    # The result pairs with the live recall call (the retracted lookup between is out of
    # the ledger view): it is not indexed, and an erasure of the original blanks it.
    word = marker()
    store = filled(tmp_path / "ledger.db", word)
    recall = json.dumps([_call("call_0")])
    lookup = json.dumps([_call("call_0", "lookup")])
    store.append(CONVERSATION, "assistant", "", id="a1", meta={"tool_calls": recall})
    store.append(CONVERSATION, "assistant", "", id="a2", meta={"tool_calls": lookup})
    store.retract(CONVERSATION, "a2")
    result = run_recall(store, CONVERSATION, {"query": word})
    store.append(CONVERSATION, "tool", result, id="r", meta={"tool_call_id": "call_0"})
    assert recall_result_ids(store.load(CONVERSATION).turns) == {"r"}
    assert [hit.turn_id for hit in store.search(CONVERSATION, word, scope="all")] == ["secret"]
    store.retract(CONVERSATION, "secret", erase=True)
    assert store.search(CONVERSATION, word, scope="all") == []
    assert {t.id: t.body for t in store.load(CONVERSATION).turns}["r"] == ERASED_RESULT
    store.close()
    assert not file_has(tmp_path / "ledger.db", word)


# -- erasing an original blanks the results that returned it ---------------------------------


def _blanked(store: lf.SQLiteStore, result_id: str) -> None:
    """The result is still there, answered, with the placeholder body."""
    turns = {turn.id: turn for turn in store.load(CONVERSATION).turns}
    assert turns[result_id].body == ERASED_RESULT
    assert turns[result_id].meta == {"tool_call_id": result_id.removeprefix("r-")}
    messages = to_chat_messages(store.context(CONVERSATION, "v1"))
    ids = [m.get("tool_call_id") for m in messages if m["role"] == "tool"]
    assert result_id.removeprefix("r-") in ids


def test_retract_with_erase_blanks_the_recall_results(tmp_path: Path) -> None:
    word = marker()
    path = tmp_path / "a.db"
    store = filled(path, word)
    first = recalled(store, word, "call-1")
    second = recalled(store, word, "call-2")
    store.append(CONVERSATION, "user", "unrelated")
    store.close()
    assert file_has(path, word[3:])  # the grep can fail: the copies are in the file
    store = lf.SQLiteStore(path)
    store.retract(CONVERSATION, "secret", erase=True)
    _blanked(store, first)
    _blanked(store, second)
    store.close()
    assert not file_has(path, word[3:])


def test_erasing_one_original_leaves_results_of_others_alone(tmp_path: Path) -> None:
    word = marker()
    with filled(tmp_path / "a.db", word) as store:
        kept = recalled(store, "apples", "call-k")
        body = store.get_turns(CONVERSATION, [kept])[0].body
        assert "secret" not in body
        store.retract(CONVERSATION, "secret", erase=True)
        assert store.get_turns(CONVERSATION, [kept])[0].body == body


def test_a_tool_result_that_is_not_a_recall_result_is_left_alone(tmp_path: Path) -> None:
    word = marker()
    with filled(tmp_path / "a.db", word) as store:
        # Looks like a recall result (hits naming the erased turn), answers another tool.
        lookalike = json.dumps({"hits": [{"turn_id": "secret", "text": "quoted"}]})
        store.append_chat_messages(
            CONVERSATION,
            [
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [_call("x", "lookup")],
                    "id": "ax",
                },
                {"role": "tool", "tool_call_id": "x", "content": lookalike, "id": "rx"},
            ],
        )
        store.retract(CONVERSATION, "secret", erase=True)
        assert store.get_turns(CONVERSATION, ["rx"])[0].body == lookalike


def test_a_summary_citing_a_blanked_result_goes_stale(tmp_path: Path) -> None:
    word = marker()
    with filled(tmp_path / "a.db", word) as store:
        result_id = recalled(store, word)
        for i in range(4):
            store.append(CONVERSATION, "user", f"tail {i}")
        policy = lf.CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
        lf.Compactor(store, policy, lf.ExtractiveSummarizer()).compact(CONVERSATION, force=True)
        summary = store.current_summary(CONVERSATION)
        assert summary is not None and result_id in summary.source_ids
        store.retract(CONVERSATION, "secret", erase=True)
        assert store.current_summary(CONVERSATION) is None
        # The turn's stored digest is its new body's: a deep check agrees with the ledger.
        (turn,) = store.get_turns(CONVERSATION, [result_id])
        assert (
            turn.digest
            == lf.Turn(
                turn.id, turn.sequence, turn.role, ERASED_RESULT, meta=turn.meta, group=turn.group
            ).digest
        )


def test_purge_through_blanks_the_recall_results(tmp_path: Path) -> None:
    word = marker()
    path = tmp_path / "a.db"
    store = filled(path, word)
    result_id = recalled(store, word)
    store.purge_through(CONVERSATION, 21, "retention")  # `secret` is sequence 21
    _blanked(store, result_id)
    store.close()
    assert not file_has(path, word[3:])


def test_retention_blanks_the_recall_results(tmp_path: Path) -> None:
    word = marker()
    path = tmp_path / "a.db"
    store = filled(path, word)
    policy = lf.CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
    lf.Compactor(store, policy, lf.ExtractiveSummarizer(max_turns=2)).compact(
        CONVERSATION, force=True
    )
    result_id = recalled(store, word)  # after the summary: retention keeps it
    assert store.apply_retention(CONVERSATION, retain_turns=4) is not None
    assert store.load(CONVERSATION).get("secret") is None  # purged
    (result,) = store.get_turns(CONVERSATION, [result_id])
    assert result.body == ERASED_RESULT
    store.close()
    assert not file_has(path, word[3:])


# -- property: no recall result's text reaches a summarizer request --------------------------

_UNIT = st.tuples(
    st.sampled_from(["recall_history", "lookup"]),  # the tool called
    st.booleans(),  # the answer names its call (tool_call_id), or only shares its group
    st.integers(min_value=1, max_value=3),  # how many passages the answer holds
)


@settings(max_examples=60, deadline=None)
@given(units=st.lists(_UNIT, min_size=1, max_size=6), budget=st.integers(5, 400))
def test_fold_never_hands_a_recall_result_to_the_summarizer(
    units: list[tuple[str, bool, int]], budget: int
) -> None:
    turns: list[lf.Turn] = []
    expected: dict[str, str] = {}
    recall: set[str] = set()
    for n, (name, by_call_id, passages) in enumerate(units):
        sequence = len(turns) + 1
        body = json.dumps({"hits": [{"turn_id": "x", "text": f"quoted {n}"}] * passages})
        calls = json.dumps([_call(f"k{n}", name)])
        meta = {"tool_call_id": f"k{n}"} if by_call_id else None
        turns += [
            lf.Turn(f"u{n}", sequence, "user", f"ask {n}"),
            lf.Turn(
                f"a{n}", sequence + 1, "assistant", "", group=f"g{n}", meta={"tool_calls": calls}
            ),
            lf.Turn(f"r{n}", sequence + 2, "tool", body, group=f"g{n}", meta=meta),
        ]
        if name == "recall_history":
            recall.add(f"r{n}")
            expected[f"r{n}"] = f"recall_history result: {passages} passages"
        else:
            expected[f"r{n}"] = body
    assert recall_result_ids(turns) == recall
    rest = list(turns)
    while rest:
        chunk, items = fold_chunk(rest, budget, approx_tokens)
        # Texts are whole unless the chunk is one unit over the budget (then each is cut).
        whole = sum(approx_tokens(expected.get(t.id, t.body)) for t in chunk) <= budget
        for item in items:
            if item.id in recall:  # never the quoted passages
                assert "quoted" not in item.text
                assert item.text == expected[item.id] or not whole
            elif item.id in expected and whole:
                assert item.text == expected[item.id]  # another tool's result is itself
        rest = rest[len(chunk) :]


@pytest.mark.parametrize(
    ("call", "assistant_group", "tool_group"),
    [
        # The result in a group of its own, its call (by ID) in another one.
        (
            {"id": "call-r", "type": "function", "function": {"name": RECALL_TOOL_NAME}},
            "g-a",
            "g-t",
        ),
        # A flat-named call stored before its result arrives.
        ({"id": "call-r", "name": RECALL_TOOL_NAME}, None, None),
    ],
)
def test_a_result_known_by_its_call_id_anywhere_is_never_indexed_and_blanked_on_erase(
    tmp_path: Path, call: dict[str, Any], assistant_group: str | None, tool_group: str | None
) -> None:
    with lf.SQLiteStore(tmp_path / "a.db") as store:
        store.append(CONVERSATION, "user", "my locker code is 5100", id="orig")
        result = run_recall(store, CONVERSATION, {"query": "locker code"})
        meta = {"tool_calls": json.dumps([call])}
        store.append(CONVERSATION, "assistant", "", group=assistant_group, meta=meta)
        store.append(
            CONVERSATION, "tool", result, id="r1", group=tool_group, meta={"tool_call_id": "call-r"}
        )
        assert [hit.turn_id for hit in store.search(CONVERSATION, "5100", scope="all")] == ["orig"]
        store.retract(CONVERSATION, "orig", erase=True)
        assert store.search(CONVERSATION, "5100", scope="all") == []
        assert "5100" not in store.get_turns(CONVERSATION, ["r1"])[0].body  # blanked
