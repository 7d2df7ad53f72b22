"""Revalidation makes the store sound again after a body is changed behind the library's back
(raw SQL): the stored digest of every such turn is repaired, so (a) the next summary is not
fingerprinted from the wrong digest, and (b) an edit back to the old text through
`store.edit` is compared with the right digest and stales the summary that states the
changed fact. Real file databases throughout."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ledgerfold import CompactionPolicy, Compactor, ExtractiveSummarizer, SQLiteStore, Turn
from ledgerfold.revalidate import revalidate_database

POLICY = CompactionPolicy("v1", keep_tail=2, min_new_turns=2)
CONVERSATION = "c"
ORIGINAL = "the meeting is on Monday"
TAMPERED = "the meeting is on Friday"


def _ledger(path: Path) -> None:
    """Ten turns, the third stating the fact, compacted once."""
    with SQLiteStore(path) as store:
        for index in range(10):
            body = ORIGINAL if index == 2 else f"turn {index} says something else"
            store.append(CONVERSATION, "user" if index % 2 else "assistant", body, id=f"t{index}")
        outcome = Compactor(store, POLICY, ExtractiveSummarizer()).compact(CONVERSATION)
        assert outcome.status == "accepted"
        assert "t2" in store.current_summary(CONVERSATION).source_ids  # type: ignore[union-attr]


def _tamper(path: Path, body: str) -> None:
    with sqlite3.connect(path) as conn:
        changed = conn.execute(
            "UPDATE turns SET body = ? WHERE conversation_id = ? AND id = 't2'",
            (body, CONVERSATION),
        ).rowcount
        assert changed == 1
    conn.close()


def _stored_digest(path: Path, turn_id: str) -> bytes:
    with sqlite3.connect(path) as conn:
        (digest,) = conn.execute("SELECT digest FROM turns WHERE id = ?", (turn_id,)).fetchone()
    conn.close()
    return bytes(digest)


def _digest_of(body: str, sequence: int) -> bytes:
    return Turn("t2", sequence, "assistant", body).digest


def test_revalidation_repairs_the_digest_and_reports_it(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _ledger(path)
    _tamper(path, TAMPERED)
    report = revalidate_database(path, workers=1)
    assert report.stale == 1
    assert report.digests_wrong == 1 and report.digests_repaired == 1
    payload = report.as_json()
    assert payload["digests_repaired"] == 1
    assert payload["wrong_digests"] == [{"conversation": CONVERSATION, "turn": "t2"}]
    assert _stored_digest(path, "t2") == _digest_of(TAMPERED, 3)
    # A second pass finds the store sound.
    again = revalidate_database(path, workers=1)
    assert again.stale == 0 and again.digests_wrong == 0 and again.digests_repaired == 0


def test_a_the_next_summary_is_fingerprinted_from_the_right_digest(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _ledger(path)
    _tamper(path, TAMPERED)
    assert revalidate_database(path, workers=1).stale == 1
    with SQLiteStore(path) as store:
        store.append(CONVERSATION, "user", "one more", id="t10")
        store.append(CONVERSATION, "assistant", "and another", id="t11")
        outcome = Compactor(store, POLICY, ExtractiveSummarizer()).compact(CONVERSATION)
        assert outcome.status == "accepted"
        summary = store.current_summary(CONVERSATION)
        assert summary is not None and "t2" in summary.source_ids
    # The new summary is current when every body is re-hashed.
    report = revalidate_database(path, workers=1)
    assert report.stale == 0 and report.current == 1
    assert report.digests_wrong == 0


def test_b_an_edit_back_to_the_old_text_stales_the_summary(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _ledger(path)
    _tamper(path, TAMPERED)
    revalidate_database(path, workers=1)
    with SQLiteStore(path) as store:
        store.append(CONVERSATION, "user", "one more", id="t10")
        store.append(CONVERSATION, "assistant", "and another", id="t11")
        Compactor(store, POLICY, ExtractiveSummarizer()).compact(CONVERSATION)
        summary = store.current_summary(CONVERSATION)
        assert summary is not None and "Friday" in summary.text
        store.edit(CONVERSATION, "t2", body=ORIGINAL)
        context = store.context(CONVERSATION, POLICY.version)
        # The summary stating the changed fact is never served.
        assert context.fallback == "stale-summary:source-modified"
        assert not any("Friday" in getattr(item, "text", "") for item in context.items)


def test_a_turn_no_summary_covers_is_repaired_too(tmp_path: Path) -> None:
    """The tail is not verified by any summary's check: it is hashed on its own."""
    path = tmp_path / "ledger.db"
    _ledger(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE turns SET body = 'changed' WHERE id = 't9'")
    conn.close()
    report = revalidate_database(path, workers=1)
    assert report.stale == 0
    assert report.wrong_digests == ((CONVERSATION, "t9"),)
    assert report.digests_repaired == 1


def test_without_marking_nothing_is_written(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _ledger(path)
    _tamper(path, TAMPERED)
    before = _stored_digest(path, "t2")
    report = revalidate_database(path, workers=1, mark_stale=False)
    assert report.digests_wrong == 1 and report.digests_repaired == 0
    assert _stored_digest(path, "t2") == before


def test_repair_digests_refuses_bad_input(tmp_path: Path) -> None:
    from ledgerfold import InvalidInput

    with SQLiteStore(tmp_path / "ledger.db") as store:
        with pytest.raises(InvalidInput) as caught:
            store.repair_digests("ab")  # type: ignore[arg-type]
        assert caught.value.field == "turns"
        with pytest.raises(InvalidInput) as caught:
            store.repair_digests([("c",)])  # type: ignore[list-item]
        assert caught.value.field == "turns[0]"
        assert store.repair_digests([("c", "missing")]) == 0


def test_repair_keeps_current_a_version_made_from_the_very_bytes(tmp_path: Path) -> None:
    """Only the stored digest of a cited turn was changed behind the library's back: the
    summary's source index recorded the digest of the bytes it was made from, which the
    repair recomputes, so the summary stays current (it went stale). A body changed goes on
    staling the summary (`test_revalidation_repairs_the_digest_and_reports_it`)."""
    path = tmp_path / "ledger.db"
    _ledger(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE turns SET digest = zeroblob(32) WHERE id = 't2'")
    conn.close()
    with SQLiteStore(path) as store:
        assert store.repair_digests([(CONVERSATION, "t2")]) == 1
        assert store.current_summary(CONVERSATION) is not None
        assert store.context(CONVERSATION, POLICY.version).fallback is None
    assert _stored_digest(path, "t2") == _digest_of(ORIGINAL, 3)
