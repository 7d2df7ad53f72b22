"""Due-ness as pure decisions (SPEC §15.2, §15.8, §17.3), and the store
deciding with them."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

import ledgerfold as lf
from ledgerfold import _due as due


@given(st.integers(1, 100), st.integers(0, 50))
def test_the_back_off_doubles_per_failure_up_to_64_times(minimum: int, failures: int) -> None:
    needed = due.needed_turns(minimum, failures)
    assert needed == minimum * (2**failures if failures <= 6 else 64)
    assert due.needed_turns(minimum, failures + 1) in (needed, 2 * needed)


@given(
    new=st.integers(0, 50),
    needed=st.integers(1, 50),
    rebase_due=st.booleans(),
    backlog_left=st.booleans(),
    relayout=st.booleans(),
    failures=st.integers(0, 3),
)
def test_the_verdict(
    new: int, needed: int, rebase_due: bool, backlog_left: bool, relayout: bool, failures: int
) -> None:
    at_once = due.due_at_once(
        rebase_due=rebase_due, backlog_left=backlog_left, relayout=relayout, failures=failures
    )
    # A backlog stays due only until an attempt fails (the back-off then applies).
    assert at_once == (rebase_due or relayout or (backlog_left and failures == 0))
    verdict = due.verdict(new, needed, at_once=at_once)
    if new == 0:
        assert verdict == "nothing-to-compact"  # even when something is "due at once"
    elif new >= needed or at_once:
        assert verdict == "ready"
    else:
        assert verdict == "not-due"


def test_the_store_and_the_compactor_back_off_alike(tmp_path: Path) -> None:
    def failing(request: lf.SummaryRequest) -> str:
        raise RuntimeError("down")

    with lf.SQLiteStore(tmp_path / "a.db") as store:
        for index in range(6):
            store.append("c", "user", f"turn {index}", id=f"t{index}")
        policy = lf.CompactionPolicy("p", keep_tail=2, min_new_turns=2)
        assert lf.Compactor(store, policy, failing).compact("c").status == "failed"
        # 4 new turns, 1 failure: 2 * 2 = 4 needed, so due; after a second failure, 8.
        assert lf.Compactor(store, policy, failing).compact("c").status == "failed"
        assert due.needed_turns(2, store.consecutive_failures("c")) == 8
        work = store.begin_compaction("c", 2, "p", min_new_turns=8)
        assert work.status == "not-due" and work.failures == 2
        assert lf.Compactor(store, policy).compact("c").reason == "not-due"
