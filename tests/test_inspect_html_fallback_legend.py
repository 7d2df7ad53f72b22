"""The inspector page of a conversation whose context falls back (its summary went stale):
every turn is sent raw, so the timeline's key calls them `raw`, saying why, as it does with
no summary yet; it called all of them the "raw tail" (the newest few kept raw beside a
summary), as if a summary were in use."""

from __future__ import annotations

from pathlib import Path

from cli_support import run
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore


def _page(tmp_path: Path, edit: bool) -> str:
    db = tmp_path / "agent.db"
    with SQLiteStore(db) as store:
        store.append_many("c", [{"role": "user", "body": f"Step {n}."} for n in range(10)])
        policy = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
        assert Compactor(store, policy).compact("c").status == "accepted"
        if edit:
            store.edit("c", store.load("c").turns[0].id, body="Step 0, changed.")
    out = tmp_path / "page.html"
    result = run("inspect", str(db), "c", "--html", str(out))
    assert result.exit_code == 0, result.output
    return out.read_text(encoding="utf-8")


def test_a_falling_back_context_is_raw_not_a_raw_tail(tmp_path: Path) -> None:
    page = _page(tmp_path, edit=True)
    assert (
        "<b>raw</b> 10 <small>sent to the model as written (no summary in use: the context"
        " falls back)</small>"
    ) in page
    assert "raw tail" not in page


def test_with_a_summary_in_use_the_tail_is_still_the_raw_tail(tmp_path: Path) -> None:
    page = _page(tmp_path, edit=False)
    assert "<b>raw tail</b> 2 <small>sent to the model as written</small>" in page
