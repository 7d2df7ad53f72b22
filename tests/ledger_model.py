"""The plain in-test model of a ledger that the stateful test (test_state_machine.py)
checks a real `SQLiteStore` against: turns, summary records, plans and purges as the SPEC says
they must be, plus the strategies and summarizers its rules draw from."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

import ledgerfold as lf
from ledgerfold import SummaryItem

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

import reference as ref  # noqa: E402

CONVERSATIONS = ("c1", "c2")
ROLES = ("system", "user", "assistant", "tool")
REASONS = ("pending-confirmation", "active-constraint", "audit-evidence", "unverified-provenance")
POLICIES = ("policy-1", "policy-2", "policy-3")
SHARED_GROUPS = ("g-shared-a", "g-shared-b")
SECRET = "SECRET-STATEFUL-\u2028"

conversations = st.sampled_from(CONVERSATIONS)
# Any valid text: no lone surrogates (those are bad input, tested by `reject_bad_input`).
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=24)
bodies = st.one_of(texts, texts.map(lambda text: SECRET + text))
keys = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=8)
metas = st.one_of(st.none(), st.dictionaries(keys, texts, max_size=3))
protections = st.one_of(
    st.just((False, None)),
    st.tuples(st.just(True), st.one_of(st.none(), st.sampled_from(REASONS))),
)
groups = st.one_of(st.none(), st.sampled_from(SHARED_GROUPS))
picks = st.integers(min_value=0, max_value=10_000)  # an index into the live turns, modulo


@dataclass(frozen=True)
class ModelTurn:
    """A turn as the model keeps it; `meta` is a sorted tuple of pairs or None."""

    id: str
    sequence: int
    role: str
    body: str
    protected: bool
    protection_reason: str | None
    group: str | None
    meta: tuple[tuple[str, str], ...] | None

    @classmethod
    def of(cls, turn: lf.Turn) -> ModelTurn:
        meta = turn.meta
        return cls(
            turn.id,
            turn.sequence,
            turn.role,
            turn.body,
            turn.protected,
            turn.protection_reason,
            turn.group,
            None if meta is None else tuple(sorted(meta.items())),
        )

    @property
    def meta_dict(self) -> dict[str, str] | None:
        return None if self.meta is None else dict(self.meta)

    def ref(self) -> ref.RefTurn:
        return ref.RefTurn(
            self.id,
            self.sequence,
            self.role,
            self.body,
            self.protected,
            self.protection_reason,
            self.group,
            self.meta_dict,
        )


def _meta(meta: dict[str, str] | None) -> tuple[tuple[str, str], ...] | None:
    # An empty mapping is no meta (the store and `Turn` read it back as None).
    return tuple(sorted(meta.items())) if meta else None


@dataclass
class ModelRecord:
    """One entry of `summary_history`: an accepted version (with its envelope), or a
    `failed` / `rejected` attempt."""

    summary_id: str | None
    status: str
    reason: str | None
    envelope: lf.SummaryEnvelope | None = None
    #: Every turn whose text this summary's text was made from, as it was then: the new
    #: turns of its request plus, for a rolling summary, everything its parent was made from.
    derived_from: dict[str, ModelTurn] = field(default_factory=dict)
    #: Live turns below its slot it did not cover when accepted (kept raw there).
    kept: frozenset[str] = frozenset()


@dataclass
class ModelConversation:
    turns: list[ModelTurn] = field(default_factory=list)  # live, ascending sequence
    revision: int = 0
    last_sequence: int = 0  # sequences are never reused, retracted and purged included
    exists: bool = False
    used_ids: set[str] = field(default_factory=set)  # every turn ID ever written
    purged: dict[str, int] = field(default_factory=dict)  # purged turn ID -> sequence
    # Turns as they were before a purge took them: a sealed summary's purged sources are
    # checked by their digests (SPEC §15.5).
    purged_turns: dict[str, ModelTurn] = field(default_factory=dict)
    retracted: list[ModelTurn] = field(default_factory=list)  # purge takes these too
    pointer: str | None = None  # the summary the conversation points at
    erased: int = 0  # versions purge erased (the store counts them as pruned)
    history: list[ModelRecord] = field(default_factory=list)
    boundary: tuple[int, str] | None = None
    active_plan: str | None = None  # the registered plan a commit must name
    recorded_plans: set[str] = field(default_factory=set)  # plans with any record

    def register_plan(self, plan_id: str) -> None:
        """A newly registered plan; the one it supersedes, if it ended without any record,
        gets `failed`/`abandoned` (SPEC §15.8)."""
        if self.active_plan is not None and self.active_plan not in self.recorded_plans:
            self.history.append(ModelRecord(None, "failed", "abandoned"))
            self.recorded_plans.add(self.active_plan)
        self.active_plan = plan_id

    def plan_recorded(self, plan_id: str, *, accepted: bool) -> None:
        self.recorded_plans.add(plan_id)
        if accepted:  # an accepted result clears the active plan
            self.active_plan = None

    @property
    def current(self) -> ModelRecord | None:
        found = [record for record in self.history if record.status == "current"]
        assert len(found) <= 1
        return found[0] if found else None

    @property
    def pointed(self) -> ModelRecord | None:
        """The last accepted version (what the conversation's summary pointer designates),
        unless a purge erased it."""
        if self.pointer is None:  # failed records carry no ID: they never match
            return None
        for record in self.history:
            if record.summary_id == self.pointer and record.status != "rejected":
                return record
        return None

    def sealed_turns(self, record: ModelRecord | None) -> list[ModelTurn]:
        """A version's purged sources, as they were (its sealed sources)."""
        if record is None or record.envelope is None:
            return []
        return [self.purged_turns[i] for i in record.envelope.source_ids if i in self.purged]

    def mark_stale(self, turn_id: str, reason: str) -> None:
        for record in self.history:
            if record.envelope is None or turn_id not in record.envelope.source_ids:
                continue
            if record.status in ("current", "superseded") or (
                record.status == "stale"
                and reason == "source-missing"
                and record.reason != "source-missing"
            ):
                record.status, record.reason = "stale", reason

    def mark_group_split(self, joined: list[str], *, answers_too: bool = False) -> None:
        """SPEC §15.4, §17.2: turns that join a unit holding a source of a version, without
        being its sources, split it: that version goes stale (`group-split`). A unit is
        joined through a group, or by a result answering a call (its caller, the newest
        assistant turn naming the call); an edit also joins an assistant turn to the results
        of its calls (`answers_too`)."""
        by_id = {turn.id: turn for turn in self.turns}
        groups = {by_id[turn_id].group for turn_id in joined if by_id[turn_id].group}
        members = {turn.id for turn in self.turns if turn.group in groups}
        joining = [by_id[turn_id].ref() for turn_id in joined]
        wanted = {
            (t.meta or {}).get("tool_call_id") for t in joining if t.role == "tool" and t.meta
        } - {None}
        for turn in reversed(self.turns):
            named = ref._call_ids(turn.ref()) if wanted else set()
            if named & wanted:
                members.add(turn.id)
                wanted -= named
        if answers_too:
            made = set().union(*(ref._call_ids(t) for t in joining))
            members |= {
                t.id
                for t in self.turns
                if t.role == "tool" and (t.meta_dict or {}).get("tool_call_id") in made
            }
        for record in self.history:
            if record.envelope is None or record.status not in ("current", "superseded"):
                continue
            sources = set(record.envelope.source_ids)
            if sources & members and not sources & set(joined):
                record.status, record.reason = "stale", "group-split"

    def failures(self) -> int:
        """`failed` records since the newest accepted version (the back-off's count)."""
        count = 0
        for record in reversed(self.history):
            if record.envelope is not None and record.status != "rejected":
                break
            count += record.status == "failed"
        return count

    def accept(
        self, envelope: lf.SummaryEnvelope, derived_from: dict[str, ModelTurn] | None = None
    ) -> None:
        self.plan_recorded(envelope.plan_id, accepted=True)
        if derived_from is None:  # made from exactly its sources, as they are now
            by_id = {turn.id: turn for turn in self.turns}
            derived_from = {i: by_id[i] for i in envelope.source_ids if i in by_id}
        for record in self.history:
            if record.status == "current":
                record.status = "superseded"
        sequence = {turn.id: turn.sequence for turn in self.turns} | self.purged
        slot = max(sequence[turn_id] for turn_id in envelope.source_ids)
        sources = set(envelope.source_ids)
        kept = frozenset(
            turn.id for turn in self.turns if turn.sequence < slot and turn.id not in sources
        )
        self.history.append(ModelRecord(envelope.id, "current", None, envelope, derived_from, kept))
        self.pointer = envelope.id

    def extended_sources(self, base: ModelRecord, added: tuple[str, ...]) -> tuple[str, ...]:
        """An extension's sources: the base's sealed ones first, then every live one in
        sequence order (new turns below the base's slot included, SPEC §17.5)."""
        assert base.envelope is not None
        by_id = {turn.id: turn for turn in self.turns}
        sealed_ids = [i for i in base.envelope.source_ids if i in self.purged]
        live_ids = [i for i in base.envelope.source_ids if i not in self.purged]
        live_ids = sorted([*live_ids, *added], key=lambda i: by_id[i].sequence)
        return (*sealed_ids, *live_ids)

    def missing_preserved(self, version: str) -> str | None:
        """SPEC §17.3: a protected turn the current summary kept raw below its slot, since
        retracted (the policies here preserve no role)."""
        current = self.pointed
        if current is None or current.status != "current" or current.envelope is None:
            return None
        if current.envelope.policy_version != version:
            return None
        gone = [t for t in self.retracted if t.id in current.kept and t.protected]
        return min(gone, key=lambda t: t.sequence).id if gone else None

    def prune(self, keep: int, spared: frozenset[str] = frozenset()) -> int:
        """SPEC §15.8: records other than the pointed one beyond the newest `keep` go (a
        conversation without any turn keeps its records: there is no tally to count them),
        except the versions in `spared` (the checkpoints the store kept, SPEC §17.5)."""
        if not self.exists:
            return 0
        pointed = self.pointed
        accepted = [
            i for i, r in enumerate(self.history) if r.status in ("current", "superseded", "stale")
        ]
        streak_from = accepted[-1] + 1 if accepted else 0
        # SPEC §17.5: the failures since the newest accepted version stay (the back-off).
        streak = [r for r in self.history[streak_from:] if r.status == "failed"]
        others = [
            r
            for r in self.history
            if r is not pointed and r.status != "current" and not any(r is f for f in streak)
        ]
        doomed = others[: max(0, len(others) - keep)]
        doomed = [r for r in doomed if r.summary_id is None or r.summary_id not in spared]
        self.history = [r for r in self.history if not any(r is d for d in doomed)]
        return len(doomed)


def _context_tuples(context: lf.AssembledContext) -> list[tuple[Any, ...]]:
    """Context items in the reference's tuple form."""
    out: list[tuple[Any, ...]] = []
    for item in context.items:
        if isinstance(item, SummaryItem):
            out.append(
                ("summary", item.id, item.text, item.through_sequence, tuple(item.source_ids))
            )
        else:
            out.append(("turn", item.id, item.role, item.text, item.sequence, item.meta))
    return out


def used_sources(summaries: list[SummaryItem]) -> set[str]:
    return set(summaries[0].source_ids) if summaries else set()


def _blank(request: lf.SummaryRequest) -> str:
    return " \n\t "


def _raising(request: lf.SummaryRequest) -> str:
    raise RuntimeError("summarizer crashed")


async def _too_slow(request: lf.SummaryRequest) -> str:
    await asyncio.sleep(3600)
    return "never"


SUMMARIZERS: dict[str, tuple[Any, float | None, str | None]] = {
    # name: (summarizer, compactor timeout, failure reason or None when it succeeds)
    "extractive": (lf.ExtractiveSummarizer(), None, None),
    "raises": (_raising, None, "summarizer-error"),
    "blank": (_blank, None, "blank-summary"),
    "timeout": (_too_slow, 0.01, "summarizer-timeout"),
}


def open_store(path: Path) -> lf.SQLiteStore:
    """A store on the file, without the fsync of every commit: no power loss is simulated
    here, and transactions, rollbacks and WAL behave the same, while the runtime is no longer
    bound by the disk of a busy machine."""
    store = lf.SQLiteStore(path)
    store._connection().execute("PRAGMA synchronous = OFF")
    return store
