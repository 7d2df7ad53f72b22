"""Which tool turns answer a `recall_history` call (`store/_recall_answers.py`, SPEC §17.7):
the batch's calls are looked up once per batch, so an `append_many` of tool exchanges costs
its turns, not their square; the answers are as before (results of `recall_history` are not
indexed, other tool results are)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ledgerfold import SQLiteStore
from ledgerfold.store import _recall_answers as recall_answers


def _exchanges(count: int, name_of: Any) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for n in range(count):
        call = {"id": f"call-{n}", "type": "function", "function": {"name": name_of(n)}}
        turns.append({"role": "assistant", "body": "", "meta": {"tool_calls": json.dumps([call])}})
        turns.append(
            {"role": "tool", "body": f"result {n} zebra", "meta": {"tool_call_id": f"call-{n}"}}
        )
    return turns


def test_a_batch_of_tool_exchanges_reads_each_call_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = recall_answers.tool_calls_of
    calls = 0

    def counting(meta: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(meta)

    monkeypatch.setattr(recall_answers, "tool_calls_of", counting)
    with SQLiteStore(tmp_path / "s.db") as store:
        store.append_many("c", _exchanges(300, lambda n: "lookup"))
    assert calls <= 2 * 300  # was one per (tool turn, assistant turn): 90,000


def test_recall_results_are_not_indexed_other_results_are(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        store.append_many("c", _exchanges(20, lambda n: "recall_history" if n % 2 else "lookup"))
        found = {hit.turn_id for hit in store.search("c", "zebra", limit=50)}
        results = {t.id: t for t in store.load("c").turns if t.role == "tool"}
        expected = {
            turn_id
            for turn_id, turn in results.items()
            if int(turn.meta["tool_call_id"].split("-")[1]) % 2 == 0
        }
        assert found == expected and len(expected) == 10
