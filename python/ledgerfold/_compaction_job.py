"""One compaction in flight (SPEC §13, §17.4): the `_Job` the `Compactor` carries from its
plan to its result, the request's budget (`_previous_and_budget`, the summary-length rule
`too_long`) and the result's envelope (`_envelope`, `_merged` below the parent's slot).
Pure functions over the job and the policy: no store calls."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ledgerfold import _validate
from ledgerfold._errors import StoreError
from ledgerfold._fold import cut_text
from ledgerfold._model import Turn
from ledgerfold._native import SourceDigests, SourceIds, fingerprint_digests
from ledgerfold._plan import CompactionPlan, starts_with_ids
from ledgerfold._policy import CompactionPolicy
from ledgerfold._summary import SummaryEnvelope, extended_fingerprint
from ledgerfold.summarizers._base import SummaryRequest

__all__ = ["SUMMARY_SLACK", "too_long"]


@dataclass(frozen=True, slots=True)
class _Job:
    plan: CompactionPlan
    parent: SummaryEnvelope | None  # the summary the request's text extends (None: rebase)
    parent_digests: bytes | SourceDigests  # its stored source digests, source order
    chunk: tuple[Turn, ...]  # the turns the summarizer's input was read from
    request: SummaryRequest
    started: float  # time.perf_counter() when the compaction began (events' seconds)
    extends_parent: bool  # the store built plan.compacted_ids as parent.source_ids + new
    sealed_lost: bool = False  # accepting it drops the purged turns' summary (SPEC §17.5)


#: SPEC §17.4: a summary text may exceed `max_summary_tokens` by this factor, no more.
SUMMARY_SLACK = 1.25


def too_long(text: str, policy: CompactionPolicy) -> bool:
    """Whether a summary text is over `max_summary_tokens × 1.25` (the policy's counter)."""
    return policy.counter(text) > policy.max_summary_tokens * SUMMARY_SLACK


def _previous_and_budget(previous: str | None, policy: CompactionPolicy) -> tuple[str | None, int]:
    """The previous text a request carries and its turn-text budget, so that the two never
    exceed `max_input_tokens + max_summary_tokens` together: a previous
    text over `max_summary_tokens` (within the 1.25 slack) takes its excess from the turns'
    budget; one the slack cannot cover (accepted before SPEC §17.4) is cut to fit."""
    budget = policy.max_input_tokens
    if previous is None:
        return None, budget
    excess = policy.counter(previous) - policy.max_summary_tokens
    if excess <= 0:
        return previous, budget
    if excess < budget and not too_long(previous, policy):
        return previous, budget - excess
    return cut_text(previous, policy.max_summary_tokens, policy.counter), budget


def _envelope(job: _Job, summary_id: str, policy_version: str, text: str) -> SummaryEnvelope:
    """The envelope of a result: the chunk's turns, after the parent's sources when the text
    extends the parent, fingerprinted over the parent's stored digests and the chunk's."""
    _validate.text("text", text)
    parent = job.parent
    covered = () if parent is None else parent.source_ids
    added = tuple(turn.id for turn in job.chunk)
    planned = job.plan.compacted_ids
    # Without a backlog cut into chunks the sources are the plan's compacted IDs: reuse that
    # tuple rather than build another over every covered turn (it starts with the parent's
    # IDs, which `starts_with_ids` knows without comparing them when the store built it so).
    fingerprint: str | None = None
    source_ids: tuple[str, ...] | SourceIds
    # The store says when it built the plan's IDs on the parent's (the usual rolling case):
    # then no O(covered) comparison; a wrong word is caught by the commit's own check.
    prefix_ok = parent is None or job.extends_parent or starts_with_ids(planned, covered)
    if parent is not None and not prefix_ok:
        # New turns below the parent's slot (SPEC §17.5): the plan holds the sources in
        # sequence order, the parent's sealed ones first; keep the chunk's and the parent's.
        source_ids, fingerprint = _merged(job, covered)
    elif (
        len(planned) == len(covered) + len(added) and planned[len(covered) :] == added and prefix_ok
    ):
        source_ids = planned
    else:
        source_ids = covered + added
    if fingerprint is None:
        fingerprint = extended_fingerprint(job.parent_digests, job.chunk)
    return SummaryEnvelope(
        id=summary_id,
        plan_id=job.plan.plan_id,
        conversation_id=job.plan.conversation_id,
        source_revision=job.plan.source_revision,
        source_ids=source_ids,
        source_fingerprint=fingerprint,
        policy_version=policy_version,
        text=text.strip(),
        parent_id=None if parent is None else parent.id,
    )


def _merged(job: _Job, covered: tuple[str, ...] | SourceIds) -> tuple[tuple[str, ...], str]:
    """Sources and fingerprint of an extension whose new turns are not all after its
    parent's: the plan's order, over the parent's digests (bytes, source order) and the
    chunk's."""
    digests = job.parent_digests
    if not isinstance(digests, bytes):
        raise StoreError("the store handed no source digests for an extension below its slot")
    digest = {turn_id: digests[32 * i : 32 * i + 32] for i, turn_id in enumerate(covered)}
    digest.update((turn.id, turn.digest) for turn in job.chunk)
    source_ids = tuple(turn_id for turn_id in job.plan.compacted_ids if turn_id in digest)
    joined = b"".join(digest[turn_id] for turn_id in source_ids)
    return source_ids, fingerprint_digests(joined)


def _random_summary_id() -> str:
    """A new summary's ID when the `Compactor` is given no `summary_id_factory`."""
    return f"summary-{uuid.uuid4().hex}"
