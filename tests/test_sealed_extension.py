"""A sealed summary never stops compaction (SPEC §17.5 last bullet): a turn
kept raw below its slot that becomes compactable (a confirmation resolved, a call answered)
is folded into an extension of it; the sealed record of the purged turns stays, and the
context stays bounded however long the conversation runs."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import ledgerfold as lf
from ledgerfold.tokens import context_tokens

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

import reference as ref  # noqa: E402

PV = "p"
CALL = {"id": "call-1", "type": "function", "function": {"name": "find", "arguments": "{}"}}


def neutral(request: lf.SummaryRequest) -> str:
    return f"summary of {request.covered_count} + {len(request.turns)} turns"


def _policy() -> lf.CompactionPolicy:
    return lf.CompactionPolicy(PV, keep_tail=4, min_new_turns=2, retain_turns=4, keep_versions=None)


def _chat(store: lf.SQLiteStore, first: int, count: int) -> None:
    for index in range(first, first + count):
        role = "user" if index % 2 == 0 else "assistant"
        store.append("c", role, f"turn {index} " + "x" * 80, id=f"t{index}")


def _purged_ids(store: lf.SQLiteStore, summary: lf.SummaryEnvelope) -> set[str]:
    """The summary's sources a purge took from the ledger."""
    live = {turn.id for turn in store.load("c").turns}
    assert store.history_boundary("c") is not None
    return set(summary.source_ids) - live


def _run(store: lf.SQLiteStore, compactor: lf.Compactor, rounds: int, first: int) -> list[int]:
    """Append two turns and compact, `rounds` times; the context's sizes."""
    sizes = []
    for round_ in range(rounds):
        _chat(store, first + 2 * round_, 2)
        compactor.compact("c")
        context = store.context("c", PV)
        assert context.fallback is None
        sizes.append(context_tokens(context.items, lf.CompactionPolicy(PV).counter))
    return sizes


def test_a_confirmation_resolved_below_a_sealed_summary_is_folded_in(tmp_path: Path) -> None:
    store = lf.SQLiteStore(tmp_path / "a.db")
    _chat(store, 0, 3)
    store.append(
        "c",
        "assistant",
        "Delete the file? (pending)",
        id="t3",
        protected=True,
        protection_reason="pending-confirmation",
    )
    _chat(store, 4, 12)
    compactor = lf.Compactor(store, _policy(), neutral)
    sealed = compactor.compact("c").summary
    assert sealed is not None and "t3" not in sealed.source_ids
    purged = _purged_ids(store, sealed)
    assert purged and purged <= set(sealed.source_ids)  # sealed: it alone holds them now
    store.edit("c", "t3", protected=False, protection_reason=None)  # confirmed

    sizes = _run(store, compactor, 12, 16)
    current = store.current_summary("c")
    assert current is not None and current.id != sealed.id
    assert "t3" in current.source_ids  # the resolved confirmation was compacted
    assert purged <= set(current.source_ids)  # the purged turns' record is kept
    assert "t3" not in {turn.id for turn in store.load("c").turns}  # and later purged
    assert max(sizes[4:]) <= sizes[3] + 200  # bounded: no growth with the conversation
    lineage = _lineage(store, current)
    assert sealed.id in lineage  # extended, never rebased away
    store.close()


def test_a_late_tool_result_below_a_sealed_summary_is_folded_in(tmp_path: Path) -> None:
    store = lf.SQLiteStore(tmp_path / "a.db")
    _chat(store, 0, 3)
    store.append_chat_messages(
        "c", [{"id": "call", "role": "assistant", "content": None, "tool_calls": [CALL]}]
    )
    _chat(store, 4, 12)
    compactor = lf.Compactor(store, _policy(), neutral)
    sealed = compactor.compact("c").summary
    assert sealed is not None and "call" not in sealed.source_ids  # an open call stays raw
    purged = _purged_ids(store, sealed)
    assert purged
    store.append_chat_messages(
        "c", [{"id": "result", "role": "tool", "tool_call_id": "call-1", "content": "found"}]
    )

    sizes = _run(store, compactor, 12, 16)
    current = store.current_summary("c")
    assert current is not None
    assert {"call", "result"} <= set(current.source_ids)
    assert purged <= set(current.source_ids)
    assert sealed.id in _lineage(store, current)
    assert max(sizes[4:]) <= sizes[3] + 200
    messages = lf.to_chat_messages(store.context("c", PV))
    assert all(m["role"] != "tool" for m in messages)  # the pair went together
    store.close()


def test_an_unsealed_summary_is_extended_below_its_slot_too(tmp_path: Path) -> None:
    """Without a purge the same work is an extension (cheaper than a rebase, same content);
    the new summary's sources are in sequence order and it is current."""
    store = lf.SQLiteStore(tmp_path / "a.db")
    _chat(store, 0, 3)
    store.append(
        "c",
        "assistant",
        "pending",
        id="t3",
        protected=True,
        protection_reason="pending-confirmation",
    )
    _chat(store, 4, 12)
    policy = lf.CompactionPolicy(PV, keep_tail=4, min_new_turns=1)
    compactor = lf.Compactor(store, policy, neutral)
    first = compactor.compact("c").summary
    assert first is not None
    store.edit("c", "t3", protected=False, protection_reason=None)
    second = compactor.compact("c").summary
    assert second is not None and second.parent_id == first.id
    ledger = store.load("c")
    sequences = [ledger.get(i).sequence for i in second.source_ids]  # type: ignore[union-attr]
    assert sequences == sorted(sequences) and "t3" in second.source_ids
    assert lf.check_summary(second, ledger, PV).current
    context = store.context("c", PV)
    assert context.fallback is None and "t3" not in context.ids
    store.close()


def test_a_turn_kept_below_the_boundary_joins_after_the_sealed_sources(tmp_path: Path) -> None:
    """A protected turn a purge kept raw below its boundary, resolved, joins the sealed
    summary after its purged sources though its sequence is lower: sealed sources first,
    then live ones in sequence order, in the core and in the reference alike."""
    store = lf.SQLiteStore(tmp_path / "a.db")
    store.append("c", "system", "pending", id="p0", protected=True)
    _chat(store, 1, 5)
    policy = lf.CompactionPolicy(PV, keep_tail=2, min_new_turns=1, preserve_roles=())
    compactor = lf.Compactor(store, policy, neutral)
    sealed = compactor.compact("c").summary
    assert sealed is not None and "p0" not in sealed.source_ids
    before = {turn.id: turn for turn in store.load("c").turns}
    store.purge_through("c", 4, "retention")  # the protected turn stays raw below it
    store.edit("c", "p0", protected=False)
    current = compactor.compact("c").summary
    assert current is not None and current.parent_id == sealed.id
    assert current.source_ids == (*sealed.source_ids, "p0")
    ledger = store.load("c")
    purged = [before[i] for i in current.source_ids if ledger.get(i) is None]
    digests = {turn.id: turn.digest for turn in purged}
    assert lf.check_summary(current, ledger, PV, sealed=digests).current
    assert ref.check_summary(current, "c", ledger.turns, PV, purged) == (True, None, None)
    assert store.context("c", PV).fallback is None
    # Not the other way round: a live source before a sealed one is out of order in both.
    swapped = dataclasses.replace(current, source_ids=("p0", *sealed.source_ids))
    assert lf.check_summary(swapped, ledger, PV, sealed=digests).reason == "source-reordered"
    assert ref.check_summary(swapped, "c", ledger.turns, PV, purged)[1] == "source-reordered"
    store.close()


def test_a_sealed_extension_lists_the_purged_sources_before_a_turn_kept_below_them(
    tmp_path: Path,
) -> None:
    """The order of an extension of a sealed summary over a turn kept raw below its purged
    sources: the sealed sources first (known by their digests, not their place), then the
    live ones in sequence order. The store's context and the slow reference agree on it."""
    store = lf.SQLiteStore(tmp_path / "a.db")
    _chat(store, 0, 2)
    store.append("c", "assistant", "pending", id="t2", protected=True)
    _chat(store, 3, 5)
    compactor = lf.Compactor(store, lf.CompactionPolicy(PV, keep_tail=2, min_new_turns=1), neutral)
    sealed = compactor.compact("c").summary
    assert sealed is not None and sealed.source_ids == ("t0", "t1", "t3", "t4", "t5")
    before = {turn.id: turn for turn in store.load("c").turns}
    store.purge_through("c", before["t5"].sequence, "retention")
    assert _purged_ids(store, sealed) == set(sealed.source_ids)
    store.edit("c", "t2", protected=False)  # confirmed: below the purged sources
    _chat(store, 8, 2)
    extension = compactor.compact("c").summary
    assert extension is not None and extension.parent_id == sealed.id
    assert extension.source_ids == (*sealed.source_ids, "t2", "t6", "t7")

    context = store.context("c", PV)
    assert context.fallback is None and context.summary is not None
    expected = ref.assemble_context(
        "c",
        store.load("c").turns,
        extension,
        PV,
        sealed=[before[turn_id] for turn_id in sealed.source_ids],
    )
    assert (_items(context), context.fallback) == expected[:2]
    # A sealed source after a live one is out of order, for both.
    swapped = dataclasses.replace(
        extension, source_ids=("t0", "t1", "t3", "t4", "t2", "t5", "t6", "t7")
    )
    sealed_digests = {turn_id: before[turn_id].digest for turn_id in sealed.source_ids}
    checked = lf.check_summary(swapped, store.load("c"), PV, sealed=sealed_digests)
    assert checked.reason == "source-reordered"
    assert ref.check_summary(
        swapped, "c", store.load("c").turns, PV, [before[i] for i in sealed.source_ids]
    )[:2] == (False, "source-reordered")
    store.close()


def _items(context: lf.AssembledContext) -> list[tuple[Any, ...]]:
    """The context's items in the reference's tuple form."""
    return [
        ("summary", item.id, item.text, item.through_sequence, tuple(item.source_ids))
        if isinstance(item, lf.SummaryItem)
        else ("turn", item.id, item.role, item.text, item.sequence, item.meta)
        for item in context.items
    ]


def _lineage(store: lf.SQLiteStore, summary: lf.SummaryEnvelope) -> list[str]:
    by_id = {r.envelope.id: r.envelope for r in store.summary_history("c")}
    chain = [summary.id]
    while by_id.get(chain[-1]) is not None and by_id[chain[-1]].parent_id is not None:
        chain.append(by_id[chain[-1]].parent_id)  # type: ignore[arg-type]
    return chain
