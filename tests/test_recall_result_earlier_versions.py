"""An erasure or purge of an original blanks every `recall_history` result that returned it
(SPEC §16.5 "Erasure", §17.7), also one edited since: the result's earlier version, which
quoted the original, is in the turn's history, and the erased text must leave the file with
it. Checked by grepping the database file's bytes, on a real file database, as
tests/test_recall_results.py does."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from cli_support import file_has
from ledgerfold.tools import run_recall

CONVERSATION = "c"


def marker() -> str:
    return "qjx" + "".join(random.choices(string.ascii_lowercase, k=14))


def _call(call_id: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "recall_history", "arguments": "{}"},
    }


def filled(path: Path, word: str) -> lf.SQLiteStore:
    store = lf.SQLiteStore(path)
    for i in range(10):
        store.append(CONVERSATION, "user", f"ordinary words number {i} about apples", id=f"t{i}")
    store.append(CONVERSATION, "user", f"the vault word is {word} remember it", id="secret")
    result = run_recall(store, CONVERSATION, {"query": word})
    assert word in result
    store.append_chat_messages(
        CONVERSATION,
        [
            {"role": "assistant", "content": "", "tool_calls": [_call("call-r")], "id": "a-r"},
            {"role": "tool", "tool_call_id": "call-r", "content": result, "id": "r-r"},
        ],
    )
    return store


EDITED_BODIES = [
    pytest.param(json.dumps({"hits": [], "note": "trimmed by the app"}), id="hits-emptied"),
    pytest.param("the app replaced this result", id="not-json-any-more"),
]


@pytest.mark.parametrize("edited", EDITED_BODIES)
@pytest.mark.parametrize("removal", ["erase", "purge"])
def test_removing_an_original_erases_an_edited_results_earlier_version(
    tmp_path: Path, edited: str, removal: str
) -> None:
    word = marker()
    path = tmp_path / "a.db"
    with filled(path, word) as store:
        store.edit(CONVERSATION, "r-r", body=edited)
        if removal == "erase":
            store.retract(CONVERSATION, "secret", erase=True)
        else:
            secret = store.get_turns(CONVERSATION, ["secret"])[0]
            store.purge_through(CONVERSATION, secret.sequence, "retention")
    assert not file_has(path, word)


def test_erasing_an_original_erases_a_result_edited_into_another_role(tmp_path: Path) -> None:
    word = marker()
    path = tmp_path / "a.db"
    with filled(path, word) as store:
        store.edit(CONVERSATION, "r-r", body="the app replaced this result", role="user")
        store.retract(CONVERSATION, "secret", erase=True)
    assert not file_has(path, word)


def test_a_result_never_quoting_the_original_keeps_its_history(tmp_path: Path) -> None:
    word = marker()
    path = tmp_path / "a.db"
    with filled(path, word) as store:
        other = run_recall(store, CONVERSATION, {"query": "apples"})
        store.edit(CONVERSATION, "r-r", body=other)
        store.edit(CONVERSATION, "r-r", body=json.dumps({"hits": [], "note": "later"}))
        store.retract(CONVERSATION, "t3", erase=True)
        # the first version quoted "secret", not t3: it stays with its history
        (result,) = store.get_turns(CONVERSATION, ["r-r"])
        assert json.loads(result.body)["note"] == "later"
    assert file_has(path, word)
