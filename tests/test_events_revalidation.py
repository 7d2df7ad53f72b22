"""Summaries a deep revalidation marks stale are reported as `summary.stale` events (SPEC
§17.8: events where the change happens), as an edit's or a retraction's are: by
`store.mark_stale(...)` on a store with a hook, and by `revalidate_database(...,
on_event=hook)`. Only versions that changed are reported, once, with no text."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import ledgerfold as lf
from ledgerfold.revalidate import revalidate_database

SECRET = "SECRET-3f9a-behind-the-back"
POLICY = lf.CompactionPolicy("revalidation-events-v1", keep_tail=4, min_new_turns=1)


def _compacted(path: Path, conversations: tuple[str, ...]) -> dict[str, str]:
    """Each conversation compacted once; its current summary's ID."""
    current = {}
    with lf.SQLiteStore(path) as store:
        for cid in conversations:
            store.append_many(cid, [{"role": "user", "body": f"{cid} {n}"} for n in range(10)])
            outcome = lf.Compactor(store, POLICY).compact(cid)
            assert outcome.summary is not None
            current[cid] = outcome.summary.id
    return current


def test_mark_stale_reports_the_summaries_it_marked(tmp_path: Path) -> None:
    path = tmp_path / "marks.db"
    current = _compacted(path, ("a", "b", "c"))
    events: list[lf.Event] = []
    with lf.SQLiteStore(path, on_event=events.append) as store:
        marked = store.mark_stale(
            [
                ("a", current["a"], "source-modified"),
                ("b", current["b"], "source-missing"),
                ("c", "no-such-summary", "source-modified"),  # nothing to mark
            ]
        )
        assert marked == 2
        assert [(e.name, e.conversation_id, e.reason, e.summary_ids) for e in events] == [
            ("summary.stale", "a", "source-modified", (current["a"],)),
            ("summary.stale", "b", "source-missing", (current["b"],)),
        ]
        assert all(dict(e.extra)["summaries"] == 1 for e in events)
        # Marked again: already stale, nothing changes and nothing is reported.
        assert store.mark_stale([("a", current["a"], "source-modified")]) == 0
        assert len(events) == 2
        assert store.stats().fallbacks == {
            "stale-summary:source-modified": 1,
            "stale-summary:source-missing": 1,
        }


def test_a_revalidation_reports_what_it_marked_stale(tmp_path: Path) -> None:
    path = tmp_path / "revalidated.db"
    current = _compacted(path, ("kept", "changed"))
    with lf.SQLiteStore(path) as store:
        source = store.current_summary("changed")
        assert source is not None
        turn_id = source.source_ids[0]
    # Another tool rewrites a summarised body behind the library's back.
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE turns SET body = ? WHERE conversation_id = 'changed' AND id = ?",
            (SECRET, turn_id),
        )
    events: list[lf.Event] = []
    report = revalidate_database(path, workers=1, on_event=events.append)
    assert [(s.conversation_id, s.summary_id) for s in report.stale_summaries] == [
        ("changed", current["changed"])
    ]
    stale = [e for e in events if e.name == "summary.stale"]
    assert [(e.conversation_id, e.reason, e.summary_ids) for e in stale] == [
        ("changed", report.stale_summaries[0].reason, (current["changed"],))
    ]
    assert all(SECRET not in repr(event) for event in events)


@pytest.mark.parametrize("bad", [1, "hook"])
def test_a_revalidation_hook_that_is_not_callable_is_invalid_input(
    tmp_path: Path, bad: object
) -> None:
    path = tmp_path / "bad.db"
    _compacted(path, ("a",))
    with pytest.raises(lf.InvalidInput) as caught:
        revalidate_database(path, on_event=bad)  # type: ignore[arg-type]
    assert caught.value.field == "on_event"
