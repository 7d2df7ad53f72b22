"""The order of `report`'s "needs attention": what is broken now first — a context falling
back now (stale, damaged, `preserved-missing`, `duplicate-id`) — then purged turns
summarised nowhere, then failures since the last accepted summary; within each class by
ID, whatever the number of reasons. A rejected result (a normal race: `superseded-plan`)
is not a reason to look: it stays visible in the conversation's summary counts."""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import run
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore, create_summary_envelope

POLICY = CompactionPolicy("order-v1", keep_tail=4, min_new_turns=1)


def _build(db: Path) -> None:
    with SQLiteStore(db) as store:
        for cid in (
            "a-failed",
            "b-purged",
            "c-stale",
            "d-rejected",
            "e-stale-failed",
            "f-preserved",
            "g-purged-failed",
            "h-fine",
        ):
            store.append_many(
                cid,
                [
                    {
                        "role": "user",
                        "body": f"{cid} turn {n}",
                        "protected": n == 2,
                        "protection_reason": "audit-evidence" if n == 2 else None,
                    }
                    for n in range(12)
                ],
            )
        compactor = Compactor(store, POLICY)
        for cid in ("a-failed", "c-stale", "d-rejected", "e-stale-failed", "f-preserved", "h-fine"):
            assert compactor.compact(cid).accepted
        for cid in ("c-stale", "e-stale-failed"):  # an edit of a covered turn: stale
            current = store.current_summary(cid)
            assert current is not None
            store.edit(cid, current.source_ids[0], body="corrected")
        store.retract("f-preserved", store.load("f-preserved").turns[2].id)
        for cid in ("b-purged", "g-purged-failed"):
            store.purge_through(cid, 4, "retention", force=True)
        for cid in ("a-failed", "e-stale-failed", "g-purged-failed"):
            store.record_failure(
                store.start_plan(cid, 4, POLICY.version).plan_id, "summarizer-error"
            )
        # Two plans race: the later one's result commits, the earlier one's is refused.
        store.append_many("d-rejected", [{"role": "user", "body": f"more {n}"} for n in range(6)])
        first = store.start_plan("d-rejected", 4, POLICY.version)
        second = store.start_plan("d-rejected", 4, POLICY.version)
        ledger = store.load("d-rejected")
        late = create_summary_envelope(first, ledger, "s-late", POLICY.version, "late")
        won = create_summary_envelope(second, ledger, "s-won", POLICY.version, "won")
        assert won is not None and late is not None
        assert store.commit_summary(won).accepted
        refused = store.commit_summary(late)
        assert (refused.reason, refused.detail) == ("stale-source", "superseded-plan")


def test_broken_now_first_then_purges_then_failures_each_by_id(tmp_path: Path) -> None:
    db = tmp_path / "order.db"
    _build(db)
    result = run("report", str(db), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    order = [row["conversation"] for row in report["attention"]]
    assert order == [
        "c-stale",
        "e-stale-failed",
        "f-preserved",
        "b-purged",
        "g-purged-failed",
        "a-failed",
    ]
    assert report["attention_total"] == 6
    out = tmp_path / "report.html"
    assert run("report", str(db), "--html", str(out)).exit_code == 0
    page = out.read_text(encoding="utf-8")
    attention = page.split('<table id="attention">')[1].split("</table>")[0]
    assert [attention.index(f">{cid}</a>") for cid in order] == sorted(
        attention.index(f">{cid}</a>") for cid in order
    )


def test_a_rejection_alone_needs_no_attention_and_stays_visible(tmp_path: Path) -> None:
    db = tmp_path / "order.db"
    _build(db)
    with SQLiteStore(db, read_only=True) as store:
        assert [r.status for r in store.summary_history("d-rejected")][-1] == "rejected"
    report = json.loads(run("report", str(db), "--json").stdout)
    assert "d-rejected" not in {row["conversation"] for row in report["attention"]}
    assert not any("rejected" in why for row in report["attention"] for why in row["why"])
    out = tmp_path / "report.html"
    assert run("report", str(db), "--html", str(out)).exit_code == 0
    page = out.read_text(encoding="utf-8")
    conversations = page.split('<table id="conversations">')[1].split("</table>")[0]
    row = next(r for r in conversations.split("<tr>") if ">d-rejected</a>" in r)
    assert "rejected" in row  # its summary counts by status
