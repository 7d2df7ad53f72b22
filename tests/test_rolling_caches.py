"""The rolling fast path's cached fingerprint state shared or bypassed: two threads rolling
two conversations on one store, a store of one's own handing `parent_digests` as plain bytes,
and another process changing a conversation under this process's warm cache; every accepted
version keeps its reference fingerprint."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from ledgerfold.store._protocol import CompactionWork

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))


from rolling_support import POLICY, VERSION, _compact, _reference, _say  # noqa: E402


def test_threads_rolling_two_conversations_keep_every_fingerprint(tmp_path: Path) -> None:
    """Rolling compactions of two conversations on one store from two threads (each tuple
    `extend_ids` builds carries its own prefix; no shared memo to overwrite): every accepted
    version has its reference fingerprint."""
    errors: list[BaseException] = []
    accepted: list[lf.SummaryEnvelope] = []
    with lf.SQLiteStore(tmp_path / "ledger.db") as store:

        def loop(cid: str) -> None:
            try:
                compactor = lf.Compactor(store, POLICY, lambda request: "summary")
                for _ in range(25):
                    _say(store, cid, 2)
                    outcome = compactor.compact(cid)
                    if outcome.accepted and outcome.summary is not None:
                        accepted.append(outcome.summary)
            except BaseException as error:  # reported by the main thread
                errors.append(error)

        threads = [threading.Thread(target=loop, args=(cid,)) for cid in ("c", "d")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert sum(envelope.parent_id is not None for envelope in accepted) > 30
        for envelope in accepted:
            assert envelope.source_fingerprint == _reference(store, envelope)


# -- a store of one's own handing plain bytes ---------------------------------------------------


class BytesStore:
    """A `Store` that delegates to `SQLiteStore` but hands `parent_digests` as plain bytes
    (32 per source, read from the index), as a store without `SourceDigests` would."""

    def __init__(self, inner: lf.SQLiteStore) -> None:
        self.inner = inner
        self.handed: list[type] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def begin_compaction(self, *args: Any, **kwargs: Any) -> CompactionWork:
        work = self.inner.begin_compaction(*args, **kwargs)
        if work.parent is None:
            return work
        rows = self.inner._connection().execute(
            "SELECT ss.turn_digest FROM summary_sources ss JOIN summaries s"
            " ON s.pk = ss.summary_pk WHERE s.id = ? ORDER BY ss.position",
            (work.parent.id,),
        )
        digests = b"".join(row[0] for row in rows)
        self.handed.append(type(digests))
        return dataclasses.replace(work, parent_digests=digests)


def test_a_store_handing_bytes_rolls_with_the_compactor(tmp_path: Path) -> None:
    with lf.SQLiteStore(tmp_path / "ledger.db") as inner:
        store = BytesStore(inner)
        _say(inner, "c", 10)
        _compact(store)
        for _ in range(4):
            _say(inner, "c", 3)
            rolled = _compact(store)
            assert rolled.parent_id is not None
            assert rolled.source_fingerprint == _reference(inner, rolled)
        assert store.handed == [bytes] * 4
        assert inner.context("c", VERSION).summary is not None


# -- two processes ----------------------------------------------------------------------------

_CHILD = """
import sys
import ledgerfold as lf
path, step = sys.argv[1], sys.argv[2]
with lf.SQLiteStore(path) as store:
    if step == "recreate":
        store.delete_conversation("c")
        store.append_many("c", [
            {"id": f"turn{i}", "role": ("user", "assistant")[i % 2], "body": f"other {i}"}
            for i in range(12)
        ])
        policy = lf.CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
        ids = iter(["s1", "s2"])
        lf.Compactor(store, policy, lambda r: "other", summary_id_factory=lambda: next(ids)
        ).compact("c")
    elif step == "edit":
        store.edit("c", "turn1", body="changed elsewhere")
"""


@pytest.mark.parametrize("step", ["recreate", "edit"])
def test_another_process_changing_the_conversation_under_a_warm_cache(
    tmp_path: Path, step: str
) -> None:
    """This process's cache holds the fingerprint state of `s1`; another process deletes the
    conversation and brings back the same conversation, turn and summary IDs with other
    bodies (on the reused row), or edits a covered turn. The next compaction here must not
    extend from the cached state: every accepted version keeps its reference fingerprint."""
    path = tmp_path / "ledger.db"
    ids = iter(["s1", "s2", "s3", "s4"])
    with lf.SQLiteStore(path) as store:
        compactor = lf.Compactor(
            store, POLICY, lambda request: "mine", summary_id_factory=lambda: next(ids)
        )
        _say(store, "c", 10)
        assert compactor.compact("c").accepted
        _say(store, "c", 2)
        assert compactor.compact("c").accepted  # s2 extends s1: the cache is warm
        subprocess.run([sys.executable, "-c", _CHILD, str(path), step], check=True, timeout=60)
        _say(store, "c", 2)
        outcome = compactor.compact("c")
        current = store.current_summary("c")
        assert current is not None
        assert current.source_fingerprint == _reference(store, current)
        if outcome.accepted and outcome.summary is not None:
            assert outcome.summary.source_fingerprint == _reference(store, outcome.summary)
        assert lf.check_summary(current, store.load("c"), VERSION).current
