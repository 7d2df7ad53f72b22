"""Shared test ledger: every real transcript of tests/data/transcripts imported into an
SQLiteStore and compacted once (used by the revalidation, export and Dask tests)."""

from __future__ import annotations

from pathlib import Path

from ledgerfold import CompactionPolicy, Compactor, ExtractiveSummarizer, SQLiteStore
from ledgerfold._cli.commands_write import turn_spec
from ledgerfold._transcripts import iter_transcripts

# The repository's copy of the real transcripts (test code, not the library's).
DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "transcripts"


def import_and_compact(path: Path, policy_version: str, keep_tail: int = 4) -> None:
    with SQLiteStore(path) as store:
        for source in sorted(DATA.glob("*.jsonl")):
            for transcript in iter_transcripts(source):
                store.append_many(
                    transcript.conversation_id, [turn_spec(t) for t in transcript.turns]
                )
        compactor = Compactor(
            store,
            CompactionPolicy(policy_version, min_new_turns=1, keep_tail=keep_tail),
            ExtractiveSummarizer(),
        )
        for conversation_id in store.conversation_ids():
            compactor.compact(conversation_id, force=True)
