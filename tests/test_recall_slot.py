"""The summary slot on a real store (SPEC §16.5 "The slot"): the framing names the first and
last sequence the summary covers, read from the store's fast path and from the pure
assembly alike."""

from __future__ import annotations

from pathlib import Path

import ledgerfold as lf
from ledgerfold import to_chat_messages

CONVERSATION = "chat"
POLICY = lf.CompactionPolicy("slot-v1", keep_tail=4, min_new_turns=1)


def test_store_context_frames_the_covered_sequences(tmp_path: Path) -> None:
    with lf.SQLiteStore(tmp_path / "slot.db") as store:
        store.append(CONVERSATION, "system", "You are a travel agent.", protected=True)
        for n in range(14):
            store.append(CONVERSATION, "assistant" if n % 2 else "user", f"Small talk {n}.")
        lf.Compactor(store, POLICY, lf.ExtractiveSummarizer()).compact(CONVERSATION)
        context = store.context(CONVERSATION, POLICY.version)
        summary = context.summary
        assert summary is not None and context.fallback is None
        # The protected system prompt (sequence 1) is kept raw, so the sources start at 2.
        assert summary.first_sequence == 2
        (framed,) = [
            m for m in to_chat_messages(context) if "Application-generated" in m["content"]
        ]
        assert (
            f"sequences 2 through {summary.through_sequence} (turns shown raw are not among them)"
        ) in framed["content"]
        # The pure assembly over the same ledger says the same.
        conversation = store.load(CONVERSATION)
        envelope = store.current_summary(CONVERSATION)
        assert envelope is not None
        pure = lf.assemble_context(conversation, envelope, POLICY.version)
        assert pure.summary is not None and pure.summary.first_sequence == 2
