"""The summary slot on a real store (SPEC §16.5 "The slot"): the framing names the first and
last sequence the summary covers, read from the store's fast path and from the pure
assembly alike."""

from __future__ import annotations

from pathlib import Path

import ledgerfold as lf
from ledgerfold import to_chat_messages
from ledgerfold.tools import RECALL_TOOL

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


def _purged_store(tmp_path: Path, through: str) -> tuple[lf.SQLiteStore, int]:
    """A compacted conversation purged through the summary's last source (`through="all"`)
    or through its middle (`"part"`); returns the store and the purge's last sequence."""
    store = lf.SQLiteStore(tmp_path / "purged.db")
    for n in range(14):
        store.append(CONVERSATION, "assistant" if n % 2 else "user", f"Order note {n}.")
    lf.Compactor(store, POLICY, lf.ExtractiveSummarizer()).compact(CONVERSATION)
    summary = store.context(CONVERSATION, POLICY.version).summary
    assert summary is not None and summary.first_sequence == 1
    last = summary.through_sequence if through == "all" else summary.through_sequence // 2
    store.purge_through(CONVERSATION, last, "retention")
    return store, last


def _framing(context: lf.AssembledContext, *, recall: bool) -> str:
    (framed,) = [
        m["content"]
        for m in to_chat_messages(context, recall=recall)
        if "Application-generated" in m["content"]
    ]
    return str(framed.split("\n", 1)[0])


def test_framing_after_a_purge_of_every_source_offers_no_recall(tmp_path: Path) -> None:
    """SPEC §15.5, §16.5: purged turns' text is gone from the ledger, so recall cannot return
    them, and the framing must not say it can."""
    store, last = _purged_store(tmp_path, "all")
    with store:
        context = store.context(CONVERSATION, POLICY.version)
        assert context.summary is not None and context.history_boundary is not None
        framing = _framing(context, recall=True)
        assert "can be fetched with the recall_history tool" not in framing
        assert f"through sequence {last} were deleted" in framing
        # Nothing recall could find: the purged turns are out of the index.
        assert store.search(CONVERSATION, "order note") == []
        # Without the tool, no recall is promised, but the deletion is still said.
        plain = _framing(context, recall=False)
        assert "recall_history" not in plain and f"through sequence {last} were deleted" in plain
        # The tool's own description does not promise deleted messages either.
        assert "deleted from the history" in RECALL_TOOL["function"]["description"]


def test_framing_after_a_partial_purge_names_what_recall_still_returns(tmp_path: Path) -> None:
    store, last = _purged_store(tmp_path, "part")
    with store:
        context = store.context(CONVERSATION, POLICY.version)
        summary = context.summary
        assert summary is not None and context.history_boundary is not None
        framing = _framing(context, recall=True)
        assert f"through sequence {last} were deleted" in framing
        assert f"sequences {last + 1} through {summary.through_sequence}" in framing
        assert "recall_history" in framing
        hits = store.search(CONVERSATION, "order note", limit=100)
        assert hits and min(hit.sequence for hit in hits) == last + 1


def test_framing_after_a_purge_from_a_store_that_does_not_say_it(tmp_path: Path) -> None:
    """A context whose summary item does not carry the purge (another store, an item built
    by hand) is framed from its `history_boundary`."""
    store, last = _purged_store(tmp_path, "all")
    with store:
        context = store.context(CONVERSATION, POLICY.version)
    marked = context.summary
    assert marked is not None and marked.purged_through == last
    unmarked = lf.SummaryItem(
        marked.id, marked.text, marked.through_sequence, marked.source_ids, marked.first_sequence
    )
    items = tuple(unmarked if item is marked else item for item in context.items)
    bounded = lf.AssembledContext(items, None, context.history_boundary)
    framing = _framing(bounded, recall=True)
    assert "can be fetched with the recall_history tool" not in framing
    assert f"through sequence {last} were deleted" in framing
