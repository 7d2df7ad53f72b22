"""`ExtractiveSummarizer` names the parts a turn's `meta["omitted_content_parts"]` lists
(an image, a file). That value is any text `append` takes; JSON nested deeper than Python's
parser follows made reading it raise RecursionError, so every compaction of the
conversation with the default summarizer failed (`summarizer-error`). Such a value names no
part, as text that is not JSON does; the compaction is accepted."""

from __future__ import annotations

from pathlib import Path

import ledgerfold as lf

DEEP = "[" * 100_000 + "]" * 100_000


def test_a_compaction_over_deeply_nested_parts_is_accepted(tmp_path: Path) -> None:
    with lf.SQLiteStore(tmp_path / "x.db") as store:
        store.append("c", "user", "look", id="img", meta={"omitted_content_parts": DEEP})
        store.append_many(
            "c", [{"id": f"t{n}", "role": "user", "body": f"turn {n}"} for n in range(8)]
        )
        policy = lf.CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
        outcome = lf.Compactor(store, policy).compact("c")
        assert outcome.accepted, outcome
        current = store.current_summary("c")
        assert current is not None and "img" in current.source_ids
