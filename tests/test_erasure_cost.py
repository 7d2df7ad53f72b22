"""The cost of an erasure's search for the recall results quoting the erased turn (SPEC
§16.5, §17.7): the results are read through the index over tool turns shaped as recall
results (`turns_by_recall_shape`, `_schema.RECALL_TURNS_INDEX`), so `retract(...,
erase=True)` costs what it erases and the results it looks in, not the conversation's every
turn and tool body; a result naming the turn with escapes is still found; a tool output of
that shape listing plain values fails nothing; a file written before the indexes gets them
at its next writing open."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ledgerfold import SQLiteStore
from ledgerfold.store import _search_index
from ledgerfold.store._recall_results import ERASED_RESULT
from ledgerfold.tools import run_recall
from steps_support import vm_steps

C = "c"


def calls(call_id: str, name: str = "f") -> dict[str, str]:
    return {
        "tool_calls": json.dumps(
            [{"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}]
        )
    }


def _recall(store: SQLiteStore, call_id: str, query: str) -> str:
    """A `recall_history` call and its result, run on the store; the result's turn ID."""
    store.append(C, "assistant", "", id=f"a-{call_id}", meta=calls(call_id, "recall_history"))
    result = run_recall(store, C, {"query": query})
    store.append(C, "tool", result, id=f"r-{call_id}", meta={"tool_call_id": call_id})
    return f"r-{call_id}"


def _erase_steps(path: Path, exchanges: int) -> int:
    """SQLite VM steps (in tens) of erasing a turn one recall result quotes, below
    `exchanges` call-and-result pairs of JSON tool output (with no hits, escapes, or none)."""
    outputs = [{"hits": [], "rows": [1, 2]}, {"name": "caf\u00e9"}, {"rows": list(range(40))}]
    rows: list[dict[str, object]] = []
    for n in range(exchanges):
        rows += [
            {"role": "user", "body": f"question {n}"},
            {"role": "assistant", "body": "calling", "meta": calls(f"k{n}")},
            {
                "role": "tool",
                "body": json.dumps(outputs[n % 3]),
                "meta": {"tool_call_id": f"k{n}"},
            },
        ]
    with SQLiteStore(path, durability="normal") as store:
        store.append_many(C, rows)
        store.append(C, "user", "the vault word is qjxsecret", id="secret")
        result = _recall(store, "r1", "vault word qjxsecret")
        steps, _ = vm_steps(store, lambda: store.retract(C, "secret", erase=True))
        assert store.get_turns(C, [result])[0].body == ERASED_RESULT
        return steps


def test_an_erasure_reads_the_recall_results_not_the_conversation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The index rewrite of an SQLite without FTS5's secure-delete is O(index) and exempt
    # from the bound (SPEC §16.5): it is not what is counted here.
    monkeypatch.setattr(_search_index, "scrub", lambda conn: None)
    small = _erase_steps(tmp_path / "small.db", 100)
    large = _erase_steps(tmp_path / "large.db", 3000)
    assert large <= 2 * small


def test_results_of_every_spelling_are_blanked_and_others_kept(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        store.append(C, "user", "the vault word is qjxsecret", id="secret")
        store.append(C, "user", "ordinary words", id="plain")
        plain = _recall(store, "r1", "vault word qjxsecret")
        # The same result with the erased ID spelt with an escape, and one quoting another turn.
        body = store.get_turns(C, [plain])[0].body
        escaped = body.replace('"turn_id": "secret"', '"turn_id": "s\\u0065cret"')
        assert escaped != body
        store.append(C, "assistant", "", id="a-r2", meta=calls("r2", "recall_history"))
        store.append(C, "tool", escaped, id="r-r2", meta={"tool_call_id": "r2"})
        other = _recall(store, "r3", "ordinary")
        # Tool bodies that mention hits without being JSON, or with hits that are no list.
        store.append(C, "assistant", "", id="a-r4", meta=calls("r4", "recall_history"))
        store.append(C, "tool", "hits: secret \\u", id="r-r4", meta={"tool_call_id": "r4"})
        store.append(C, "assistant", "", id="a-r5", meta=calls("r5", "recall_history"))
        store.append(C, "tool", '{"hits": "secret"}', id="r-r5", meta={"tool_call_id": "r5"})
        store.retract(C, "secret", erase=True)
        bodies = {turn.id: turn.body for turn in store.load(C).turns}
        assert bodies[plain] == bodies["r-r2"] == ERASED_RESULT
        assert "ordinary words" in bodies[other]
        assert bodies["r-r4"] == "hits: secret \\u"
        assert bodies["r-r5"] == '{"hits": "secret"}'


def test_an_older_file_gets_the_indexes_and_is_erased_without_them(tmp_path: Path) -> None:
    path = tmp_path / "o.db"
    with SQLiteStore(path) as store:
        store.append(C, "user", "the vault word is qjxsecret", id="secret")
        result = _recall(store, "r1", "vault word qjxsecret")
    names = ("turns_by_recall_shape", "turn_history_by_recall_shape")
    with sqlite3.connect(path) as conn:
        for name in names:
            conn.execute(f"DROP INDEX {name}")
    with SQLiteStore(path) as store:
        conn = store._connection()
        for name in names:
            conn.execute(f"DROP INDEX {name}")  # the query reads the same rows without them
        store.retract(C, "secret", erase=True)
        assert store.get_turns(C, [result])[0].body == ERASED_RESULT
    with SQLiteStore(path) as store:
        found = store._connection().execute(
            "SELECT COUNT(*) FROM sqlite_master WHERE name IN (?, ?)", names
        )
        assert found.fetchone()[0] == 2


def test_a_tool_output_listing_plain_hits_does_not_fail_an_erasure(tmp_path: Path) -> None:
    # A search tool's output of the recall result's shape whose hits are strings and numbers:
    # reading a `turn_id` of them failed the erasure (and a purge) with "malformed JSON".
    with SQLiteStore(tmp_path / "p.db") as store:
        store.append(C, "user", "the vault word is qjxsecret", id="secret")
        store.append(C, "user", "another", id="other")
        store.append(C, "assistant", "", id="a-s", meta=calls("s1", "search"))
        output = json.dumps({"hits": ["qjx", 3, None, [1]]})
        store.append(C, "tool", output, id="r-s", meta={"tool_call_id": "s1"})
        result = _recall(store, "r1", "vault word qjxsecret")
        store.retract(C, "secret", erase=True)
        store.purge_through(C, 2, "retention", force=True)
        assert store.get_turns(C, [result])[0].body == ERASED_RESULT
        assert store.get_turns(C, ["r-s"])[0].body == output
