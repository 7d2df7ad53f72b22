"""Summary envelopes (SPEC §5), their validity (SPEC §6) and acceptance (SPEC §7)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from ledgerfold import _native, _validate
from ledgerfold._errors import InvalidInput
from ledgerfold._native import Conversation, SourceDigests, SourceIds, Turn
from ledgerfold._plan import CompactionPlan, preserve_roles_arg
from ledgerfold._sized import sized

__all__ = [
    "CHECK_REASONS",
    "SummaryCheck",
    "SummaryEnvelope",
    "SummaryWrite",
    "accept_summary_result",
    "check_summary",
    "create_summary_envelope",
    "is_summary_current",
]

#: The reasons `check_summary` reports, in the order it checks them (the native core's).
CHECK_REASONS = _native.CHECK_REASONS


@dataclass(frozen=True, slots=True, repr=False)
class SummaryEnvelope:
    """A summary as a derived record bound to the exact IDs and fingerprint of its sources.

    Every summary has its own `id`; versions are never overwritten. `parent_id` names the
    summary this one extends (SPEC §15.1): its `source_ids` are then every turn it covers,
    the parent's sources included, so an edit of any of them makes it stale. The repr hides
    `text`.
    """

    id: str
    plan_id: str
    conversation_id: str
    source_revision: int
    #: A tuple, or a `SourceIds` (the store's rolling versions: equal to the tuple of its
    #: IDs and sharing its parent's storage, so it costs O(new turns) per version).
    source_ids: tuple[str, ...] | SourceIds
    source_fingerprint: str
    policy_version: str
    text: str
    parent_id: str | None = None

    def __post_init__(self) -> None:
        for name in ("id", "plan_id", "source_fingerprint", "policy_version"):
            _validate.text(name, getattr(self, name))
        if self.parent_id is not None:
            _validate.identifier("parent_id", self.parent_id)
        # Any valid conversation ID (SPEC §2: non-empty), even one of whitespace only.
        _validate.text("conversation_id", self.conversation_id, blank_ok=True, empty_ok=False)
        _validate.text("text", self.text, blank_ok=True)
        _validate.integer("source_revision", self.source_revision, minimum=0)
        if isinstance(self.source_ids, str) or not isinstance(self.source_ids, Iterable):
            raise InvalidInput(
                "source_ids: must be a sequence of str", field="source_ids", problem="wrong-type"
            )
        if not isinstance(self.source_ids, (tuple, SourceIds)):
            object.__setattr__(self, "source_ids", tuple(self.source_ids))

    def __repr__(self) -> str:
        return (
            f"SummaryEnvelope(id={self.id!r}, plan_id={self.plan_id!r}, "
            f"conversation_id={self.conversation_id!r}, source_revision={self.source_revision}, "
            f"source_ids={sized(len(self.source_ids), 'id')}, "
            f"source_fingerprint={self.source_fingerprint!r}, "
            f"policy_version={self.policy_version!r}, text={sized(len(self.text), 'char')}, "
            f"parent_id={self.parent_id!r})"
        )


@dataclass(frozen=True, slots=True)
class SummaryCheck:
    """`current`, or the first failing `reason` of `CHECK_REASONS`; `turn_id` names the
    offending turn where one exists."""

    current: bool
    reason: str | None = None
    turn_id: str | None = None


@dataclass(frozen=True, slots=True)
class SummaryWrite:
    """The verdict on a summary result: `reason` is None when accepted, else
    `invalid-summary` or `stale-source` with `detail` saying why."""

    accepted: bool
    summary: SummaryEnvelope | None
    reason: str | None = None
    detail: str | None = None


def create_summary_envelope(
    plan: CompactionPlan,
    turns: Conversation | Iterable[Turn],
    summary_id: str,
    policy_version: str,
    text: str,
    *,
    parent: SummaryEnvelope | None = None,
) -> SummaryEnvelope | None:
    """Bind `text` to the plan's compacted turns. With a `parent` (the summary this text
    extends), the sources are the parent's followed by the plan's compacted IDs not among
    them, in sequence order, and `turns` must hold all of them. None when the plan is empty,
    a source is missing from `turns`, or `text` is blank."""
    _validate.instance("plan", plan, CompactionPlan)
    summary_id = _validate.identifier("summary_id", summary_id)
    policy_version = _validate.text("policy_version", policy_version)
    text = _validate.text("text", text, blank_ok=True)
    if parent is not None:
        _validate.instance("parent", parent, SummaryEnvelope)
    if plan.is_empty or not text.strip():
        return None
    source_ids = plan.compacted_ids
    if parent is not None:
        covered = set(parent.source_ids)
        source_ids = parent.source_ids + tuple(i for i in plan.compacted_ids if i not in covered)
    fingerprint = _native.source_fingerprint(source_ids, turns)
    if fingerprint is None:
        return None
    if parent is not None:
        # In sequence order: the order the fingerprint was taken in.
        source_ids = _in_sequence_order(source_ids, turns)
    return SummaryEnvelope(
        id=summary_id,
        plan_id=plan.plan_id,
        conversation_id=plan.conversation_id,
        source_revision=plan.source_revision,
        source_ids=source_ids,
        source_fingerprint=fingerprint,
        policy_version=policy_version,
        text=text.strip(),
        parent_id=None if parent is None else parent.id,
    )


def extended_fingerprint(parent_digests: bytes | SourceDigests, turns: Iterable[Turn]) -> str:
    """The fingerprint of a summary's sources given as its parent's stored source digests
    (32 bytes each, source order; or their `SourceDigests` state, which takes O(new + log
    covered) work instead of O(covered)) followed by the turns it adds (SPEC §15.1)."""
    added = b"".join(t.digest for t in turns)
    if isinstance(parent_digests, SourceDigests):
        return parent_digests.fingerprint(added)
    return _native.fingerprint_digests(parent_digests, added)


def _in_sequence_order(
    source_ids: tuple[str, ...] | SourceIds, turns: Conversation | Iterable[Turn]
) -> tuple[str, ...]:
    if isinstance(turns, Conversation):
        sequence = {turn_id: turns.get(turn_id).sequence for turn_id in source_ids}  # type: ignore[union-attr]
    else:
        sequence = {turn.id: turn.sequence for turn in turns}
    return tuple(sorted(source_ids, key=sequence.__getitem__))


def check_summary(
    summary: SummaryEnvelope,
    conversation: Conversation,
    policy_version: str,
    *,
    sealed: Mapping[str, bytes] | None = None,
) -> SummaryCheck:
    """Is `summary` still a faithful derivation of `conversation`? Uses cached digests only.

    `sealed` maps the IDs of sources purged from the ledger to the 32-byte digests the
    store's source index kept for them (SPEC §15.5): such a source is checked by that digest
    instead of the ledger, and sorts before every live source."""
    _validate.instance("summary", summary, SummaryEnvelope)
    conversation = _validate.conversation(conversation)
    current, reason, turn_id = _native.check(
        summary, conversation, policy_version, _sealed_arg(sealed)
    )
    return SummaryCheck(current, reason, turn_id)


def _sealed_arg(sealed: Mapping[str, bytes] | None) -> dict[str, bytes] | None:
    if sealed is None or isinstance(sealed, dict):
        return sealed
    if not isinstance(sealed, Mapping):
        raise InvalidInput(
            "sealed: must be a mapping of str to bytes", field="sealed", problem="wrong-type"
        )
    return dict(sealed)


def is_summary_current(
    summary: SummaryEnvelope, conversation: Conversation, policy_version: str
) -> bool:
    """`check_summary(...).current`."""
    return check_summary(summary, conversation, policy_version).current


#: `invalid-summary` details (SPEC §15.4, §17.1): a source that must stay raw, or sources
#: or a parent the plan does not allow.
PROTECTED_SOURCE = "protected-source"
PLAN_MISMATCH = "plan-mismatch"


def kept_raw_source(turns: Iterable[Turn | None], preserve_roles: Iterable[str]) -> str | None:
    """The ID of the first of `turns` (sources, None for one not in the ledger) that is
    protected or of a preserved role: such a turn is never summarised away (SPEC §17.1)."""
    roles = frozenset(preserve_roles)
    for turn in turns:
        if turn is not None and (turn.protected or turn.role in roles):
            return turn.id
    return None


def outside_plan(source_ids: Iterable[str], allowed: Collection[str]) -> bool:
    """Whether a source is not among the plan's compacted IDs (SPEC §15.4)."""
    return any(turn_id not in allowed for turn_id in source_ids)


def breaks_lineage(
    candidate: SummaryEnvelope,
    current: SummaryEnvelope | None,
    allowed: Collection[str] | None = None,
) -> bool:
    """SPEC §15.1/§15.4: a candidate with a `parent_id` extends the current summary only,
    keeps all of its sources (coverage never shrinks) and adds at least one, unless its
    plan (`allowed`: its compacted IDs) compacts none that the parent does not cover (a
    re-layout, §17.3). `current`: the conversation's current summary, None when it has
    none. A rebase (`parent_id` None) is allowed."""
    if candidate.parent_id is None:
        return False
    if current is None or current.id != candidate.parent_id:
        return True
    sources, covered = set(candidate.source_ids), set(current.source_ids)
    if sources > covered:  # adds at least one source and drops none
        return False
    return not (sources == covered and allowed is not None and set(allowed) <= covered)


def verdict(
    candidate: SummaryEnvelope,
    conversation: Conversation,
    policy_version: str,
    *,
    allowed: Collection[str] | None,
    lineage: bool,
    current: SummaryEnvelope | None,
    sealed: Mapping[str, bytes] | None,
    preserve_roles: Iterable[str],
) -> SummaryWrite:
    """The acceptance rule after the active-plan check, for arguments already validated
    (`accept_summary_result` and every store's commit call it). `allowed`: the plan's
    compacted IDs, or None to skip that rule; `lineage`: whether the parent rules apply
    (`current` is then the current summary or None when there is none)."""
    if lineage and candidate.parent_id is not None:
        if current is None or current.id != candidate.parent_id:
            # The text extends something other than the current summary.
            return SummaryWrite(False, candidate, "invalid-summary", PLAN_MISMATCH)
        parent = check_summary(current, conversation, policy_version, sealed=sealed)
        if not parent.current:  # a stale summary is never extended
            return SummaryWrite(False, candidate, "stale-source", parent.reason)
    check = check_summary(candidate, conversation, policy_version, sealed=sealed)
    if not check.current:
        return SummaryWrite(False, candidate, "stale-source", check.reason)
    sources = (conversation.get(turn_id) for turn_id in candidate.source_ids)
    if kept_raw_source(sources, preserve_roles) is not None:
        return SummaryWrite(False, candidate, "invalid-summary", PROTECTED_SOURCE)
    if allowed is not None and outside_plan(candidate.source_ids, allowed):
        return SummaryWrite(False, candidate, "invalid-summary", PLAN_MISMATCH)
    if lineage and breaks_lineage(candidate, current, allowed):
        return SummaryWrite(False, candidate, "invalid-summary", PLAN_MISMATCH)
    return SummaryWrite(True, candidate, None, None)


def accept_summary_result(
    candidate: SummaryEnvelope | None,
    conversation: Conversation,
    policy_version: str,
    active_plan_id: str,
    *,
    plan: CompactionPlan | None = None,
    current: SummaryEnvelope | None = None,
    sealed: Mapping[str, bytes] | None = None,
    preserve_roles: Iterable[str] = (),
    lineage: bool | None = None,
) -> SummaryWrite:
    """The one acceptance rule (SPEC §7, §15.4, §17.1), which every store's commit applies.

    Refused, first failing: `invalid-summary` (no candidate); `stale-source`/`superseded-plan`
    (not the active plan); with `current` (the current summary) and a `parent_id`, the parent
    must be `current` (`invalid-summary`/`plan-mismatch`) and itself current (`stale-source`
    with its check reason); `stale-source` with the `check_summary` reason (`sealed` as
    there); `invalid-summary`/`protected-source` when a source is protected or of one of
    `preserve_roles`; with `plan`, `invalid-summary`/`plan-mismatch` when a source is not
    among its compacted IDs; with `current`, the same when the parent's sources are not all
    among the candidate's or it adds none while the plan compacts one it does not (without
    `plan`, it must add one). After the current summary went stale, a store
    rebuilding from a checkpoint (SPEC §17.5) passes that checkpoint as `current`: it is the
    head the candidate may extend, and must itself still be current.

    `lineage` says whether the parent rules apply: by default (None) when `current` is
    given. A store's commit passes `lineage=True`, since its conversation may have no
    current summary (none yet, or it went stale): `current=None` then means "none", and a
    candidate with a `parent_id` is refused (`invalid-summary`/`plan-mismatch`) — its text
    was built on a summary that is not current, perhaps on an edited turn's old content."""
    conversation = _validate.conversation(conversation)
    active_plan_id = _validate.identifier("active_plan_id", active_plan_id)
    if plan is not None:
        _validate.instance("plan", plan, CompactionPlan)
    if current is not None:
        _validate.instance("current", current, SummaryEnvelope)
    roles = preserve_roles_arg(preserve_roles)
    sealed_map = _sealed_arg(sealed)
    if lineage is not None:
        _validate.flag("lineage", lineage)
    if candidate is None:
        return SummaryWrite(False, None, "invalid-summary", None)
    _validate.instance("candidate", candidate, SummaryEnvelope)
    if candidate.plan_id != active_plan_id:
        return SummaryWrite(False, candidate, "stale-source", "superseded-plan")
    return verdict(
        candidate,
        conversation,
        policy_version,
        allowed=None if plan is None else frozenset(plan.compacted_ids),
        lineage=current is not None if lineage is None else lineage,
        current=current,
        sealed=sealed_map,
        preserve_roles=roles,
    )
