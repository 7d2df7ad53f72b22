"""Compaction orchestration (SPEC §13): what an agent calls on every turn.

`Compactor.compact` / `acompact` run one compaction: start a plan (registered as the
conversation's active plan) → give the summarizer only the turns to compact plus the
current summary's text → save through the store's atomic commit. Every exit is a
`CompactionOutcome`; a summarizer that raises, times out or returns blank text leaves the
ledger and the current summary exactly as they were. `Compactor.context` assembles what
goes to the model, within a token budget or not at all — it never drops a turn to fit.

Logs (logger ``ledgerfold.compactor``) carry IDs, counts, sequences, fingerprints and
exception type names only: never turn bodies, summary text or exception messages.
"""

from __future__ import annotations

import inspect
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

from ledgerfold import _due as due
from ledgerfold import _validate
from ledgerfold._context import AssembledContext, SummaryItem
from ledgerfold._errors import ContextBudgetExceeded, InvalidInput, StoreError
from ledgerfold._events import Event, EventHook, emit
from ledgerfold._fold import cut_text, fold_chunk
from ledgerfold._model import Turn
from ledgerfold._native import SourceDigests, SourceIds, fingerprint_digests
from ledgerfold._plan import CompactionPlan, starts_with_ids
from ledgerfold._policy import CompactionPolicy
from ledgerfold._summary import SummaryEnvelope, extended_fingerprint
from ledgerfold._worker import worker_for
from ledgerfold.store._protocol import REBASE_ONLY, Store
from ledgerfold.summarizers._base import (
    AwaitableInRunningLoop,
    Summarizer,
    SummaryRequest,
    call_summarizer,
    call_summarizer_async,
    failure_reason,
    in_running_loop,
    is_async_callable,
)
from ledgerfold.summarizers._extractive import ExtractiveSummarizer
from ledgerfold.tokens import context_tokens, item_tokens

__all__ = [
    "OUTCOME_STATUSES",
    "CompactionOutcome",
    "CompactionStatus",
    "Compactor",
]

_log = logging.getLogger("ledgerfold.compactor")

T = TypeVar("T")

CompactionStatus = Literal["accepted", "skipped", "stale", "failed"]
OUTCOME_STATUSES: tuple[CompactionStatus, ...] = ("accepted", "skipped", "stale", "failed")


@dataclass(frozen=True, slots=True)
class CompactionOutcome:
    """The result of one compaction.

    - ``accepted``: `summary` is the new current summary; `reason` None.
    - ``skipped``: `reason` ``nothing-to-compact`` or ``not-due``.
    - ``stale``: the commit was refused as ``stale-source``; `reason` is its detail
      (``superseded-plan``, ``source-modified``, ...).
    - ``failed``: `reason` ``summarizer-error``, ``summarizer-timeout``,
      ``blank-summary``, ``summary-too-long`` (over `max_summary_tokens` × 1.25) or
      ``store-error``. Nothing but the failure record changed.
    """

    status: CompactionStatus
    summary: SummaryEnvelope | None = None
    reason: str | None = None

    @property
    def accepted(self) -> bool:
        return self.status == "accepted"


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


class Compactor:
    """Runs compactions of one store under one policy.

    `summarizer` defaults to an `ExtractiveSummarizer` counting with the policy's
    `token_counter`. `timeout` (seconds, optional) bounds each summarizer call; on expiry
    the attempt fails as ``summarizer-timeout`` and a late result is discarded.
    `summary_id_factory` makes summary IDs (default: random UUIDs). `on_event` (optional)
    receives an `Event` for every outcome (accepted, skipped, stale, failed: turns, tokens
    in and out, seconds) and every context served from raw turns (SPEC §17.8). Store calls
    run on the calling thread; in `acompact` and `acontext`, on the store's worker thread
    (and so does the hook).
    """

    def __init__(
        self,
        store: Store,
        policy: CompactionPolicy,
        summarizer: Summarizer | None = None,
        *,
        timeout: float | None = None,
        summary_id_factory: Callable[[], str] | None = None,
        on_event: EventHook | None = None,
    ) -> None:
        _validate.instance("policy", policy, CompactionPolicy)
        _validate.callback("summarizer", summarizer, "SummaryRequest -> str")
        _validate.duration("timeout", timeout, unit="seconds", positive=True)
        _validate.callback("on_event", on_event, "Event -> None")
        self.on_event = on_event
        _validate.callback("summary_id_factory", summary_id_factory, "() -> str")
        self.store = store
        self.policy = policy
        # The default summarizer counts `max_summary_tokens` with the policy's counter.
        self.summarizer: Summarizer = (
            summarizer
            if summarizer is not None
            else ExtractiveSummarizer(token_counter=policy.token_counter)
        )
        self.timeout = None if timeout is None else float(timeout)
        self._summary_id_factory = summary_id_factory or _random_summary_id

    def __repr__(self) -> str:
        return (
            f"Compactor(store={type(self.store).__name__}, policy={self.policy!r}, "
            f"summarizer={type(self.summarizer).__name__}, timeout={self.timeout})"
        )

    # -- due check -----------------------------------------------------------------------

    def is_due(self, conversation_id: str) -> bool:
        """The trigger half of due-ness: whether the context as assembled now costs more than
        `policy.trigger_tokens` (always True when it is None). `compact` also needs
        `min_new_turns` uncovered turns (doubled per consecutive failure)."""
        conversation_id = _validate.text("conversation_id", conversation_id)
        return self._is_due(conversation_id)

    def _is_due(self, conversation_id: str) -> bool:
        trigger = self.policy.trigger_tokens
        if trigger is None:
            return True
        assembled = self.store.context(conversation_id, self.policy.version)
        tokens = context_tokens(assembled.items, self.policy.counter)
        _log.debug(
            "compaction due check conversation_id=%s tokens=%d trigger_tokens=%d due=%s",
            conversation_id,
            tokens,
            trigger,
            tokens > trigger,
        )
        return tokens > trigger

    # -- compaction ----------------------------------------------------------------------

    def compact(self, conversation_id: str, *, force: bool = False) -> CompactionOutcome:
        """Run one compaction synchronously (`force` skips the due check). An async
        summarizer runs in its own event loop; inside a running loop use `acompact`."""
        conversation_id = _validate.text("conversation_id", conversation_id)
        in_loop = in_running_loop()
        if in_loop and is_async_callable(self.summarizer):
            raise InvalidInput(
                "summarizer: is async and an event loop is running; use `await acompact(...)`",
                field="summarizer",
                problem="not-allowed",
            )
        begun = self._begin(conversation_id, force)
        if isinstance(begun, CompactionOutcome):
            return begun
        try:
            result = call_summarizer(self.summarizer, begun.request, self.timeout, in_loop)
        except AwaitableInRunningLoop:
            self._record_failure(begun.plan, "summarizer-error")
            raise InvalidInput(
                "summarizer: returned an awaitable while an event loop is running; "
                "use `await acompact(...)`",
                field="summarizer",
                problem="not-allowed",
            ) from None
        except Exception as error:
            return self._fail(begun, failure_reason(error), type(error).__name__)
        return self._finish(begun, result)

    async def acompact(self, conversation_id: str, *, force: bool = False) -> CompactionOutcome:
        """Run one compaction without blocking the event loop: the store work runs on the
        store's worker thread (SPEC §17.6, `ledgerfold._worker`), async summarizers are
        awaited and sync ones run in a thread of their own (not the store's: a slow
        summarizer must not hold up the store's other calls)."""
        conversation_id = _validate.text("conversation_id", conversation_id)
        return (await self._acompact(conversation_id, force))[0]

    async def _acompact(
        self,
        conversation_id: str,
        force: bool,
        before: Callable[[], object] | None = None,
        after: Callable[[], T] | None = None,
    ) -> tuple[CompactionOutcome, T | None]:
        """`acompact` for the integrations: `before` runs in the worker job that plans (an
        append), `after` in the job that ends the compaction (a read of the context), so a
        call costs one job of the store's worker when nothing is due: a second job would
        queue again behind every other session's."""
        worker = worker_for(self.store)

        def begin() -> tuple[_Job | CompactionOutcome, T | None]:
            if before is not None:
                before()
            begun = self._begin(conversation_id, force)
            ended = isinstance(begun, CompactionOutcome)
            return begun, (after() if ended and after is not None else None)

        begun, read = await worker.run(begin)
        if isinstance(begun, CompactionOutcome):
            return begun, read
        job = begun
        try:
            result = await call_summarizer_async(self.summarizer, job.request, self.timeout)
        except Exception as error:  # cancellation (BaseException) propagates untouched
            reason, error_type = failure_reason(error), type(error).__name__

            def end() -> CompactionOutcome:
                return self._fail(job, reason, error_type)
        else:

            def end() -> CompactionOutcome:
                return self._finish(job, result)

        def finish() -> tuple[CompactionOutcome, T | None]:
            outcome = end()
            return outcome, (after() if after is not None else None)

        return await worker.run(finish)

    async def acontext(
        self, conversation_id: str, max_tokens: int | None = None
    ) -> AssembledContext:
        """`context` on the store's worker thread, off the event loop (SPEC §17.6)."""
        return await worker_for(self.store).run(self.context, conversation_id, max_tokens)

    def _begin(self, conversation_id: str, force: bool) -> _Job | CompactionOutcome:
        """Due check, plan, and the summarizer's input: the uncovered turns (one chunk of
        them, within `max_input_tokens`) read in the plan's transaction."""
        policy = self.policy
        started = time.perf_counter()
        needed = 1
        if not force:
            if policy.trigger_tokens is not None and not self._is_due(conversation_id):
                # Below the trigger only what SPEC §15.8 makes due at once: a rebase when
                # coverage would shrink, or the rest of a backlog being folded.
                needed = REBASE_ONLY
            else:
                failures = self.store.consecutive_failures(conversation_id)
                needed = due.needed_turns(policy.min_new_turns, failures)
        work = self.store.begin_compaction(
            conversation_id,
            policy.keep_tail,
            policy.version,
            preserve_roles=policy.preserve_roles,
            min_new_turns=needed,
        )
        if work.plan is None:
            below_trigger = needed == REBASE_ONLY
            return self._skip(conversation_id, None, "not-due" if below_trigger else work.status)
        plan = work.plan
        _log.debug(
            "compaction plan started plan_id=%s conversation_id=%s source_revision=%d "
            "compacted=%d preserved=%d through_sequence=%d new=%d rolling=%s",
            plan.plan_id,
            conversation_id,
            plan.source_revision,
            len(plan.compacted_ids),
            len(plan.preserved_ids),
            plan.through_sequence,
            len(work.new_turns),
            work.parent is not None,
        )
        parent = work.parent
        previous, budget = _previous_and_budget(None if parent is None else parent.text, policy)
        chunk, items = fold_chunk(work.new_turns, budget, policy.counter)
        request = SummaryRequest(
            conversation_id=conversation_id,
            plan_id=plan.plan_id,
            policy_version=policy.version,
            turns=items,
            previous_summary=previous,
            covered_count=0 if parent is None else len(parent.source_ids),
            max_summary_tokens=policy.max_summary_tokens,
        )
        _log.debug(
            "summarizer called plan_id=%s turns=%d backlog=%d previous_summary_id=%s",
            plan.plan_id,
            len(items),
            len(work.new_turns),
            None if parent is None else parent.id,
        )
        return _Job(
            plan,
            parent,
            work.parent_digests,
            chunk,
            request,
            started,
            work.extends_parent,
            work.sealed_lost,
        )

    def _finish(self, job: _Job, result: object) -> CompactionOutcome:
        if not isinstance(result, str):
            return self._fail(job, "summarizer-error", f"returned-{type(result).__name__}")
        if not result.strip():
            return self._fail(job, "blank-summary", None)
        if too_long(result, self.policy):
            # SPEC §17.4: whatever the model was asked, an overlong text would ride along
            # in every later request; the previous summary stays current.
            return self._fail(job, "summary-too-long", None)
        summary_id = _validate.text("summary_id", self._summary_id_factory())
        try:
            envelope = _envelope(job, summary_id, self.policy.version, result)
        except InvalidInput:  # text that cannot be stored, e.g. lone surrogates
            return self._fail(job, "summarizer-error", "invalid-text")
        try:
            write = self.store.commit_summary(envelope)
        except StoreError as error:
            _log.warning(
                "summary commit failed plan_id=%s summary_id=%s error_type=%s",
                job.plan.plan_id,
                envelope.id,
                type(error).__name__,
            )
            self._record_failure(job.plan, "store-error")
            self._emit_outcome(job, "compaction.failed", "store-error")
            return CompactionOutcome("failed", None, "store-error")
        except InvalidInput as error:  # e.g. a summary ID the store already holds
            _log.warning(
                "summary commit refused plan_id=%s summary_id=%s field=%s problem=%s",
                job.plan.plan_id,
                envelope.id,
                error.field,
                error.problem,
            )
            self._record_failure(job.plan, "summarizer-error")
            self._emit_outcome(job, "compaction.failed", "summarizer-error")
            return CompactionOutcome("failed", None, "summarizer-error")
        if write.accepted:
            accepted = write.summary if write.summary is not None else envelope
            _log.info(
                "summary accepted summary_id=%s plan_id=%s conversation_id=%s "
                "fingerprint=%s sources=%d through_sequence=%d",
                accepted.id,
                accepted.plan_id,
                accepted.conversation_id,
                accepted.source_fingerprint,
                len(accepted.source_ids),
                job.plan.through_sequence,
            )
            self._prune(accepted.conversation_id)
            self._retain(accepted.conversation_id)
            self._emit_outcome(job, "compaction.accepted", None, result, accepted.id)
            if job.sealed_lost:
                _log.warning(
                    "purged turns' summary lost conversation_id=%s summary_id=%s",
                    accepted.conversation_id,
                    accepted.id,
                )
                emit(
                    self.on_event,
                    Event(
                        "summary.sealed-lost",
                        accepted.conversation_id,
                        reason="rebase",
                        summary_ids=(accepted.id,),
                    ),
                )
            return CompactionOutcome("accepted", accepted, None)
        _log.info(
            "summary rejected summary_id=%s plan_id=%s conversation_id=%s reason=%s detail=%s",
            envelope.id,
            job.plan.plan_id,
            job.plan.conversation_id,
            write.reason,
            write.detail,
        )
        if write.reason == "stale-source":
            self._emit_outcome(job, "compaction.stale", write.detail or write.reason)
            return CompactionOutcome("stale", None, write.detail or write.reason)
        self._emit_outcome(job, "compaction.failed", write.detail or write.reason)
        return CompactionOutcome("failed", None, write.detail or write.reason)

    def _prune(self, conversation_id: str) -> None:
        keep = self.policy.keep_versions
        if keep is None:
            return
        try:
            if _takes_checkpoints(self.store):
                self.store.prune_versions(  # type: ignore[call-arg]
                    conversation_id, keep=keep, keep_checkpoints=self.policy.keep_checkpoints
                )
            else:  # a v1.1 store of your own keeps no checkpoints: it rebases after an edit
                self.store.prune_versions(conversation_id, keep=keep)
        except StoreError as error:  # the summary is saved; pruning waits for the next one
            _log.warning(
                "pruning failed conversation_id=%s error_type=%s",
                conversation_id,
                type(error).__name__,
            )

    def _retain(self, conversation_id: str) -> None:
        """The policy's retention, right after an accepted summary (which it seals)."""
        if not self.policy.retains:
            return
        try:
            self.store.apply_retention(
                conversation_id,
                retain_turns=self.policy.retain_turns,
                retain_days=self.policy.retain_days,
                keep_roles=self.policy.preserve_roles,
            )
        except StoreError as error:  # retried after the next accepted summary
            _log.warning(
                "retention failed conversation_id=%s error_type=%s",
                conversation_id,
                type(error).__name__,
            )

    def _skip(
        self, conversation_id: str, plan: CompactionPlan | None, reason: str
    ) -> CompactionOutcome:
        _log.debug(
            "compaction skipped conversation_id=%s plan_id=%s reason=%s",
            conversation_id,
            plan.plan_id if plan is not None else None,
            reason,
        )
        emit(self.on_event, Event("compaction.skipped", conversation_id, reason=reason))
        return CompactionOutcome("skipped", None, reason)

    def _fail(self, job: _Job, reason: str, error_type: str | None) -> CompactionOutcome:
        _log.warning(
            "summarizer failed plan_id=%s conversation_id=%s reason=%s error_type=%s",
            job.plan.plan_id,
            job.plan.conversation_id,
            reason,
            error_type,
        )
        self._record_failure(job.plan, reason)
        self._emit_outcome(job, "compaction.failed", reason)
        return CompactionOutcome("failed", None, reason)

    def _record_failure(self, plan: CompactionPlan, reason: str) -> None:
        try:
            self.store.record_failure(plan.plan_id, reason)
        except StoreError as error:  # the attempt failed either way; nothing else changed
            _log.error(
                "failure record not saved plan_id=%s reason=%s error_type=%s",
                plan.plan_id,
                reason,
                type(error).__name__,
            )

    def _emit_outcome(
        self,
        job: _Job,
        name: str,
        reason: str | None,
        text: object = None,
        summary_id: str | None = None,
    ) -> None:
        """The outcome's event (SPEC §17.8): after the store's commit, outside its lock;
        turns and tokens of the request, tokens of the text returned, wall time."""
        if self.on_event is None:
            return
        counter = self.policy.counter
        request = job.request
        tokens_in = sum(counter(turn.text) for turn in request.turns)
        if request.previous_summary is not None:
            tokens_in += counter(request.previous_summary)
        emit(
            self.on_event,
            Event(
                name,
                request.conversation_id,
                reason=reason,
                summary_ids=() if summary_id is None else (summary_id,),
                turns=len(request.turns),
                tokens_in=tokens_in,
                tokens_out=counter(text) if isinstance(text, str) else 0,
                seconds=time.perf_counter() - job.started,
                extra=(("plan_id", job.plan.plan_id), ("rolling", int(job.parent is not None))),
            ),
        )

    # -- context -------------------------------------------------------------------------

    def context(self, conversation_id: str, max_tokens: int | None = None) -> AssembledContext:
        """The context to send: the current summary (if usable) and every other turn raw.

        With `max_tokens`, raise `ContextBudgetExceeded(needed, budget, protected)` when the
        context costs more — nothing is ever dropped to fit, protected turns least of all.
        Never calls the summarizer; compact and call again to make room.
        """
        conversation_id = _validate.text("conversation_id", conversation_id)
        if max_tokens is not None:
            _validate.integer("max_tokens", max_tokens, minimum=1)
        assembled = self.store.context(conversation_id, self.policy.version)
        if assembled.fallback is not None:
            emit(
                self.on_event,
                Event(
                    "context.fallback",
                    conversation_id,
                    reason=assembled.fallback,
                    turn_ids=() if assembled.fallback_id is None else (assembled.fallback_id,),
                    turns=len(assembled.items),
                ),
            )
            _log.debug(
                "context fallback conversation_id=%s fallback=%s fallback_id=%s items=%d",
                conversation_id,
                assembled.fallback,
                assembled.fallback_id,
                len(assembled.items),
            )
        if max_tokens is None:
            return assembled
        counter = self.policy.counter
        needed = context_tokens(assembled.items, counter)
        if needed <= max_tokens:
            return assembled
        protected_ids = {
            turn.id for turn in self.store.load(conversation_id).turns if turn.protected
        }
        protected = sum(
            item_tokens(item, counter)
            for item in assembled.items
            if not isinstance(item, SummaryItem) and item.id in protected_ids
        )
        _log.warning(
            "context over budget conversation_id=%s needed=%d budget=%d protected=%d items=%d",
            conversation_id,
            needed,
            max_tokens,
            protected,
            len(assembled.items),
        )
        raise ContextBudgetExceeded(needed, max_tokens, protected)


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


def _takes_checkpoints(store: Store) -> bool:
    """Whether the store's `prune_versions` takes `keep_checkpoints` (SPEC §17.5; the
    `Store` protocol of v1.1 does not)."""
    try:
        parameters = inspect.signature(store.prune_versions).parameters
    except (TypeError, ValueError):
        return False
    # A proxy forwarding **kwargs (to a store that takes it) counts as taking it.
    return "keep_checkpoints" in parameters or any(
        parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values()
    )


def _random_summary_id() -> str:
    return f"summary-{uuid.uuid4().hex}"
