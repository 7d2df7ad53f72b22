"""Checkpoints (SPEC §17.5): which superseded ancestors of the current summary pruning keeps,
and which one a compaction rebuilds from after an edit. Rules over plain values, one owner
outside storage (issue 26 item 1): a store reads its records, asks these, and acts.

A version's *ancestors* are the versions its text was built on: its parent, the parent's
parent, and so on. A store that deleted a link (pruning) may still know the ancestry by
other means; `SQLiteStore` also counts the versions that read a prefix of the same source
run (a run is append-only and only its head is ever extended in place, so those versions
form one chain).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Record", "lineage", "links", "rebuild_from", "spaced_checkpoints"]


@dataclass(frozen=True, slots=True)
class Record:
    """An accepted summary version as the rules see it (no text)."""

    pk: int  # insertion order: a parent is always older than its child
    id: str
    parent_id: str | None
    run: int | None  # the source run it reads a prefix of (None: not known)
    count: int  # how many turns it covers


def lineage(records: Iterable[Record], head_pk: int) -> tuple[Record, ...]:
    """The ancestors of the record `head_pk` among `records`, newest first (the head left
    out; empty when it is not among them)."""
    every = list(records)
    by_pk = {record.pk: record for record in every}
    head = by_pk.get(head_pk)
    if head is None:
        return ()
    by_id = {record.id: record for record in every}
    by_run: dict[int, list[Record]] = {}
    for record in every:
        if record.run is not None:
            by_run.setdefault(record.run, []).append(record)
    found: dict[int, Record] = {}
    frontier = [head]
    while frontier:
        child = frontier.pop()
        linked: list[Record] = []
        parent = None if child.parent_id is None else by_id.get(child.parent_id)
        if parent is not None:
            linked.append(parent)
        if child.run is not None:
            linked.extend(by_run[child.run])
        for record in linked:
            if (
                record.pk < child.pk
                and record.pk not in found
                and (record is parent or record.count < child.count)
            ):
                found[record.pk] = record
                frontier.append(record)
    return tuple(sorted(found.values(), key=lambda record: record.pk, reverse=True))


def links(records: Iterable[Record], head_pk: int, kept: set[int]) -> set[int]:
    """The versions that keep the way from the head to the `kept` checkpoints: where the
    lineage passes from one source run into another (a version built on a parent outside
    its run: a rebuild, an extension below the slot), both ends, when a kept checkpoint is
    older. Without them, pruning would cut the lineage there and the checkpoints behind
    the cut would no longer count as ancestors (nor be kept). A rebuild leaves none when
    its run adopts its parent's (`store._sources.adopt`)."""
    if not kept:
        return set()
    every = list(records)
    by_id = {record.id: record for record in every}
    oldest = min(kept)
    chosen: set[int] = set()
    for record in (
        *(r for r in every if r.pk == head_pk),
        *lineage(every, head_pk),
    ):
        parent = None if record.parent_id is None else by_id.get(record.parent_id)
        if parent is None or record.pk <= oldest:
            continue
        if record.run is None or parent.run != record.run:
            chosen.update((record.pk, parent.pk))
    chosen.discard(head_pk)
    return chosen


def spaced_checkpoints(covered: int, ancestors: Sequence[Record], keep: int) -> set[int]:
    """The pks of up to `keep` of `ancestors` to keep as checkpoints for a head covering
    `covered` turns, their coverage ends about 1/2, 1/4, 1/8 … of `covered` back: for
    k = 1 … keep - 1, with g the largest power of two within `covered / 2**k`, the newest
    ancestor covering at most `(covered // g - 1) * g` turns (between g and 2g back); and
    the newest covering at most `(covered // g) * g` for the finest g (the bridge).

    The targets sit on a grid of powers of two, so the set is stable as the head grows: a
    grid line of g is also one of 2g, and a line a level targets is targeted by the next
    coarser level once the head has moved on, so what a level needs was kept before (a
    target moving with `covered` itself would slide past every version pruned meanwhile).
    The bridge keeps the version at the finest line until that level reaches it. An edit d
    turns back (beyond the finest level) then re-reads at most about 3d turns."""
    targets: list[int] = []
    grid = 0
    for k in range(1, max(keep, 2)):
        back = covered >> k
        if back == 0:
            break
        grid = 1 << (back.bit_length() - 1)
        targets.append((covered // grid - 1) * grid)
    if keep >= 2 and grid:
        targets.append(covered // grid * grid)
    chosen: set[int] = set()
    newest_first = sorted(ancestors, key=lambda record: record.pk, reverse=True)
    for target in targets[:keep]:
        for record in newest_first:
            if record.count <= target:
                chosen.add(record.pk)
                break
    return chosen


def rebuild_from(candidates: Iterable[tuple[int, bool]]) -> int | None:
    """The checkpoint a stale summary is rebuilt from: of `candidates` (pk, whether all its
    sources are unchanged and within the new plan), newest first and possibly lazy, the
    first usable one; None when there is none (the compaction is then a rebase)."""
    for pk, usable in candidates:
        if usable:
            return pk
    return None
