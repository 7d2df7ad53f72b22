"""Forged envelopes on the rolling path (SPEC §15.4): an envelope built on the plan's own
source tuple with other fields changed, a source ID SQLite cannot take, a tuple built for
another conversation, and the plan memo never vouching for another conversation's prefix."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from ledgerfold import _plan as planning
from ledgerfold._summary import extended_fingerprint
from ledgerfold.store._protocol import CompactionWork

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))


from rolling_support import VERSION, _compact, _reference, _say  # noqa: E402

# -- forged envelopes (SPEC §15.4) ------------------------------------------------------------


def _begin(store: lf.SQLiteStore, cid: str) -> tuple[lf.CompactionPlan, CompactionWork]:
    work = store.begin_compaction(cid, 2, VERSION)
    assert work.plan is not None and work.parent is not None
    return work.plan, work


def _forged(work: CompactionWork, summary_id: str, **changes: Any) -> lf.SummaryEnvelope:
    plan = work.plan
    assert plan is not None and work.parent is not None
    honest = lf.SummaryEnvelope(
        id=summary_id,
        plan_id=plan.plan_id,
        conversation_id=plan.conversation_id,
        source_revision=plan.source_revision,
        source_ids=plan.compacted_ids,
        source_fingerprint=extended_fingerprint(work.parent_digests, work.new_turns),
        policy_version=VERSION,
        text="forged",
        parent_id=work.parent.id,
    )
    return dataclasses.replace(honest, **changes)


def test_forged_envelopes_on_the_plans_own_tuple_are_refused(tmp_path: Path) -> None:
    with lf.SQLiteStore(tmp_path / "ledger.db") as store:
        _say(store, "c", 10)
        oldest = _compact(store)
        _say(store, "c", 3)
        _compact(store)
        _say(store, "c", 3)
        cases = [
            ({"source_fingerprint": "lf1:" + "0" * 64}, ("stale-source", "source-modified")),
            ({"parent_id": oldest.id}, ("invalid-summary", "plan-mismatch")),
            ({"parent_id": "nobody"}, ("invalid-summary", "plan-mismatch")),
            ({"policy_version": "v2"}, ("stale-source", "policy-mismatch")),
            ({"conversation_id": "other"}, ("stale-source", "superseded-plan")),
        ]
        for number, (changes, verdict) in enumerate(cases):
            plan, work = _begin(store, "c")
            envelope = _forged(work, f"forged-{number}", **changes)
            assert envelope.source_ids is plan.compacted_ids  # the memo's very tuple
            write = store.commit_summary(envelope)
            assert (write.accepted, write.reason, write.detail) == (False, *verdict), changes
        # The honest one still goes through after all that.
        _, work = _begin(store, "c")
        honest = _forged(work, "honest")
        assert store.commit_summary(honest).accepted
        assert honest.source_fingerprint == _reference(store, honest)


@pytest.mark.parametrize("bad", ["\ud800", 7, None])
@pytest.mark.parametrize("late", [False, True], ids=["extension", "late-result"])
def test_a_source_id_sqlite_cannot_take_is_invalid_input(
    tmp_path: Path, bad: object, late: bool
) -> None:
    """Regression: a lone surrogate among an extension's new IDs (or anywhere in a result
    refused before its sources are checked, whose record stores them) raised the driver's
    `UnicodeEncodeError` out of `commit_summary`; an int or None was refused as
    `source-missing` on the fast path while the ledger check calls it `InvalidInput`. Now it
    is `InvalidInput` naming `summary.source_ids` on every path, and nothing is written."""
    with lf.SQLiteStore(tmp_path / "ledger.db") as store:
        _say(store, "c", 10)
        _compact(store)
        _say(store, "c", 3)
        plan, work = _begin(store, "c")
        forged = _forged(
            work,
            "forged",
            source_ids=(*plan.compacted_ids, bad),
            plan_id="an-older-plan" if late else plan.plan_id,
        )
        history = store.summary_history("c")
        with pytest.raises(lf.InvalidInput) as raised:
            store.commit_summary(forged)
        assert raised.value.field == "summary.source_ids"
        assert store.summary_history("c") == history
        honest = _forged(work, "honest")  # the plan is still the active one
        assert store.commit_summary(honest).accepted
        assert honest.source_fingerprint == _reference(store, honest)


def test_a_tuple_built_for_another_conversation_is_refused(tmp_path: Path) -> None:
    """Two conversations with the same turn IDs and covered digests: an envelope for one made
    of the other's plan tuple and fingerprint state (same IDs, other new bodies) is refused
    by the fingerprint, whatever the memo remembers."""
    with lf.SQLiteStore(tmp_path / "ledger.db") as store:
        for cid in ("c", "d"):
            _say(store, cid, 10)
            _compact(store, cid)
        store.append_many("c", [{"id": "n", "role": "user", "body": "c's own"}] * 1)
        store.append_many("d", [{"id": "n", "role": "user", "body": "d's own"}] * 1)
        _say(store, "c", 2, stem="tail")
        _say(store, "d", 2, stem="tail")
        _, work_c = _begin(store, "c")
        plan_d, work_d = _begin(store, "d")  # built last: the memo holds d's tuple
        assert work_d.parent is not None
        assert planning.starts_with_ids(plan_d.compacted_ids, work_d.parent.source_ids)
        forged = _forged(
            work_c,
            "forged",
            source_ids=plan_d.compacted_ids,
            source_fingerprint=extended_fingerprint(work_d.parent_digests, work_d.new_turns),
        )
        write = store.commit_summary(forged)
        assert (write.reason, write.detail) == ("stale-source", "source-modified")
        _, work_c = _begin(store, "c")
        honest = _forged(work_c, "honest")
        assert store.commit_summary(honest).accepted
        assert honest.source_fingerprint == _reference(store, honest)


def test_the_memo_does_not_vouch_for_another_conversations_prefix(tmp_path: Path) -> None:
    """The memo holds `d`'s plan tuple (d's covered IDs + new IDs); `c` has as many covered
    turns, other IDs, and the same new turns. An envelope for `c` on `d`'s tuple, with the
    fingerprint `c`'s parent state and new turns give, names sources `c` does not have: the
    memo must not take it for a tuple that starts with `c`'s covered IDs."""
    with lf.SQLiteStore(tmp_path / "ledger.db") as store:
        same = [{"id": f"n{i}", "role": "user", "body": "same"} for i in range(6)]
        for cid in ("c", "d"):
            _say(store, cid, 8, stem=f"{cid}-")
            store.append_many(cid, same[:2])  # the tail the first compaction leaves raw
            _compact(store, cid)
            store.append_many(cid, same[2:])
        _, work_c = _begin(store, "c")
        plan_d, work_d = _begin(store, "d")  # built last: the memo holds d's tuple
        assert work_c.parent is not None and work_d.parent is not None
        assert len(work_c.parent.source_ids) == len(work_d.parent.source_ids)
        assert work_c.new_turns == work_d.new_turns
        forged = _forged(work_c, "forged", source_ids=plan_d.compacted_ids)
        write = store.commit_summary(forged)
        assert (write.accepted, write.reason, write.detail) == (
            False,
            "stale-source",
            "source-missing",
        )


def test_an_envelope_naming_another_conversations_plan_leaves_that_plan_alone(
    tmp_path: Path,
) -> None:
    """An envelope for `c` that names `d`'s active plan is refused for `c`, and `d`'s plan
    keeps its IDs and stays committable: a misdirected (or forged) result ends no plan of
    another conversation."""
    with lf.SQLiteStore(tmp_path / "ledger.db") as store:
        for cid in ("c", "d"):
            _say(store, cid, 10)
            _compact(store, cid)
            _say(store, cid, 3, stem="tail")
        _begin(store, "c")  # c has an active plan of its own
        plan_d, work_d = _begin(store, "d")
        misdirected = _forged(work_d, "misdirected", conversation_id="c")
        write = store.commit_summary(misdirected)
        assert (write.reason, write.detail) == ("stale-source", "superseded-plan")
        ended = (
            store._connection()
            .execute("SELECT ended FROM plans WHERE id = ?", (plan_d.plan_id,))
            .fetchone()[0]
        )
        assert ended == 0
        honest = _forged(work_d, "honest-d")
        assert store.commit_summary(honest).accepted
        assert store.current_summary("d").id == "honest-d"
