"""A plan whose `preserve_roles` another tool left unreadable (text that is not UTF-8, not
JSON, not a list of role names): the store's `context()` failed (`StoreError`), or used the
summary without the §17.3 check it cannot make, and a compaction raised `JSONDecodeError`.
Now it is handled as a damaged summary record is: the context is every turn raw with
`stale-summary:damaged-record` naming the summary (stats agree), a compaction is due at
once and rebases, a commit under such a plan is refused, and purging works."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from ledgerfold import CompactionPolicy, Compactor, SQLiteStore, create_summary_envelope
from ledgerfold.integrations.openai_agents import LedgerfoldSession

PV = "v1"
CID = "c"
POLICY = CompactionPolicy(PV, keep_tail=2, min_new_turns=50)
SECRET = "sys prompt 4111111111111111"
DAMAGE = {
    "not-utf8": "CAST(X'5b2273797374656dff225d' AS TEXT)",  # ["system\xff"]
    "not-json": "'not json'",
    "not-a-list": "'{\"system\": 1}'",
    "not-roles": "'[1, 2]'",
    "unknown-role": "'[\"admin\"]'",
}


def _ledger(path: Path, damage: str) -> str:
    """A compacted conversation whose plan another tool changed; returns the summary ID."""
    with SQLiteStore(path) as store:
        store.append(CID, "system", SECRET)
        for n in range(8):
            store.append(CID, "user" if n % 2 == 0 else "assistant", f"turn {n}")
        outcome = Compactor(store, POLICY).compact(CID, force=True)
        assert outcome.accepted and outcome.summary is not None
        assert store.context(CID, PV).fallback is None
        summary_id = outcome.summary.id
    with sqlite3.connect(path) as conn:
        conn.execute(f"UPDATE plans SET preserve_roles = {DAMAGE[damage]}")
    conn.close()
    return summary_id


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_the_context_falls_back_raw_and_names_the_summary(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "agent.db"
    summary_id = _ledger(db, damage)
    with SQLiteStore(db) as store:
        context = store.context(CID, PV)
        assert context.fallback == "stale-summary:damaged-record"
        assert context.fallback_id == summary_id
        assert [item.id for item in context.items] == [t.id for t in store.load(CID).turns]
        assert Compactor(store, POLICY).context(CID).fallback == context.fallback
        assert store.stats().fallbacks == {"stale-summary:damaged-record": 1}
        assert store.stats(CID).fallbacks == {"stale-summary:damaged-record": 1}
        session = LedgerfoldSession(CID, store=store, policy=POLICY)  # type: ignore[arg-type]
        items = asyncio.run(session.get_items())
        assert len(items) == 9
    assert SECRET not in caplog.text


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_compaction_is_due_at_once_and_rebases(tmp_path: Path, damage: str) -> None:
    db = tmp_path / "agent.db"
    summary_id = _ledger(db, damage)
    with SQLiteStore(db) as store:
        store.append(CID, "user", "one more")  # far below min_new_turns
        outcome = Compactor(store, POLICY).compact(CID)
        assert outcome.accepted and outcome.summary is not None
        assert outcome.summary.parent_id is None  # a rebase: the damaged plan is not trusted
        assert outcome.summary.id != summary_id
        assert store.context(CID, PV).fallback is None
        assert store.stats().fallbacks == {}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_retracted_system_prompt_is_never_hidden(tmp_path: Path, damage: str) -> None:
    """With the roles unreadable the store cannot tell whether a retracted turn kept raw
    below the summary was preserved (SPEC §17.3): never the summary without that check."""
    db = tmp_path / "agent.db"
    _ledger(db, damage)
    with SQLiteStore(db) as store:
        system = store.load(CID).turns[0].id
        store.retract(CID, system)
        context = store.context(CID, PV)
        assert context.fallback == "stale-summary:damaged-record"
        assert system not in [item.id for item in context.items]


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_purge_works_and_a_commit_under_the_damaged_plan_is_refused(
    tmp_path: Path, damage: str
) -> None:
    db = tmp_path / "agent.db"
    with SQLiteStore(db) as store:
        for n in range(8):
            store.append(CID, "user" if n % 2 == 0 else "assistant", f"turn {n}")
        plan = store.start_plan(CID, 2, PV, preserve_roles=("system",))
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE plans SET preserve_roles = {DAMAGE[damage]}")
    conn.close()
    with SQLiteStore(db) as store:
        made = create_summary_envelope(plan, store.load(CID), "s1", PV, "summary text")
        assert made is not None
        write = store.commit_summary(made)
        assert (write.accepted, write.reason, write.detail) == (
            False,
            "invalid-summary",
            "plan-mismatch",
        )
        assert store.context(CID, PV).fallback == "no-summary"
        boundary = store.purge_through(CID, 2, "retention")
        assert boundary.through_sequence == 2
        assert Compactor(store, POLICY).compact(CID, force=True).accepted
        assert store.context(CID, PV).fallback is None
