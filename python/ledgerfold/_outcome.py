"""How one compaction ends (SPEC §13, §17.8): `CompactionOutcome`, and `OutcomeRecorder`,
the `Compactor`'s methods that reach one — `_finish` (check the result, commit it, then
prune and retain), `_fail` with its failure record, `_skip` — and report it as an `Event`.

Logs (logger ``ledgerfold.compactor``) carry IDs, counts, reasons and exception type names
only: never turn bodies, summary text or exception messages.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ledgerfold import _validate
from ledgerfold._compaction_job import _envelope, _Job, too_long
from ledgerfold._errors import InvalidInput, StoreError
from ledgerfold._events import Event, EventHook, emit
from ledgerfold._plan import CompactionPlan
from ledgerfold._policy import CompactionPolicy
from ledgerfold._summary import SummaryEnvelope
from ledgerfold._worker import pause
from ledgerfold.store._protocol import Store, refused_keyword
from ledgerfold.store._sqlite_errors import is_damaged_row

__all__ = ["OUTCOME_STATUSES", "CompactionOutcome", "CompactionStatus", "OutcomeRecorder"]

_log = logging.getLogger("ledgerfold.compactor")

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
      ``store-error`` (the store failed to register the plan, or to save the result).
      Nothing but the failure record changed (none when no plan was registered).
    """

    status: CompactionStatus
    summary: SummaryEnvelope | None = None
    reason: str | None = None

    @property
    def accepted(self) -> bool:
        return self.status == "accepted"


class OutcomeRecorder:
    """The end of a compaction, for `Compactor` (its base): these methods read only the
    attributes annotated here, which `Compactor.__init__` sets."""

    store: Store
    policy: CompactionPolicy
    on_event: EventHook | None
    _summary_id_factory: Callable[[], str]
    #: Whether the store's `prune_versions` takes `keep_checkpoints` (SPEC §17.5; the
    #: `Store` protocol of v1.1 does not): read once, `inspect.signature` is slow.
    _prunes_checkpoints: bool

    def _finish(self, job: _Job, result: object) -> CompactionOutcome:
        if not isinstance(result, str):
            return self._fail(job, "summarizer-error", f"returned-{type(result).__name__}")
        if type(result) is not str:  # a subclass: its text, not its methods (which may raise)
            result = str.__str__(result)
        if not result.strip():
            return self._fail(job, "blank-summary", None, result)
        if too_long(result.strip(), self.policy):
            # SPEC §17.4: whatever the model was asked, an overlong text would ride along
            # in every later request; the previous summary stays current. The text that
            # would be stored (and ride along) is the stripped one (SPEC §5).
            return self._fail(job, "summary-too-long", None, result)
        summary_id = _validate.text("summary_id", self._summary_id_factory())
        try:
            envelope = _envelope(job, summary_id, self.policy.version, result)
        except InvalidInput:  # text that cannot be stored, e.g. lone surrogates
            return self._fail(job, "summarizer-error", "invalid-text", result)
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
            self._emit_outcome(job, "compaction.failed", "store-error", result)
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
            self._emit_outcome(job, "compaction.failed", "summarizer-error", result)
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
            # The compaction's events first (its seconds the compaction's own): pruning and
            # the policy's retention follow them (a purge has its own event).
            self._emit_outcome(job, "compaction.accepted", None, result, accepted.id)
            if job.sealed_lost:  # what this commit did, reported before what follows it
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
            pause()  # on a store's worker: the loop may take the GIL (`_worker.pause`)
            self._prune(accepted.conversation_id)
            self._retain(accepted.conversation_id)
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
            self._emit_outcome(job, "compaction.stale", write.detail or write.reason, result)
            return CompactionOutcome("stale", None, write.detail or write.reason)
        self._emit_outcome(job, "compaction.failed", write.detail or write.reason, result)
        return CompactionOutcome("failed", None, write.detail or write.reason)

    def _prune(self, conversation_id: str) -> None:
        keep = self.policy.keep_versions
        if keep is None:
            return
        try:
            if self._prunes_checkpoints:
                try:
                    self.store.prune_versions(  # type: ignore[call-arg]
                        conversation_id, keep=keep, keep_checkpoints=self.policy.keep_checkpoints
                    )
                    return
                except TypeError as error:
                    # A `**kwargs` proxy over a store of v1.1's protocol: the summary is
                    # saved, so prune as v1.1 does, now and from now on.
                    if not refused_keyword(error, "keep_checkpoints"):
                        raise
                    self._prunes_checkpoints = False
            # A v1.1 store of your own keeps no checkpoints: it rebases after an edit.
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
        self, conversation_id: str, plan: CompactionPlan | None, reason: str, started: float
    ) -> CompactionOutcome:
        """A compaction with nothing to do: its event's seconds are the due check's and the
        planning's (`started`: `time.perf_counter()` when the compaction began)."""
        _log.debug(
            "compaction skipped conversation_id=%s plan_id=%s reason=%s",
            conversation_id,
            plan.plan_id if plan is not None else None,
            reason,
        )
        if self.on_event is not None:
            seconds = time.perf_counter() - started
            emit(
                self.on_event,
                Event("compaction.skipped", conversation_id, reason=reason, seconds=seconds),
            )
        return CompactionOutcome("skipped", None, reason)

    def _unstarted(
        self, conversation_id: str, error: StoreError, started: float
    ) -> CompactionOutcome:
        """A compaction whose start failed in the store (a read of its due check, or its
        plan's registration: no plan registered, so no failure record can name it):
        ``failed``/``store-error`` and its event, as a failed
        save is (SPEC §13: a failed compaction changed nothing), not the store's error. A
        row changed outside ledgerfold is raised, as `load()` raises it: the ledger cannot
        be read, which no retry mends."""
        if is_damaged_row(error):
            raise error
        _log.warning(
            "compaction not started conversation_id=%s error_type=%s",
            conversation_id,
            type(error).__name__,
        )
        if self.on_event is not None:
            seconds = time.perf_counter() - started
            emit(
                self.on_event,
                Event("compaction.failed", conversation_id, reason="store-error", seconds=seconds),
            )
        return CompactionOutcome("failed", None, "store-error")

    def _fail(
        self, job: _Job, reason: str, error_type: str | None, text: object = None
    ) -> CompactionOutcome:
        """A failed attempt: its record and its event (`text`: what the summarizer returned,
        when it returned a text that was refused, for the event's `tokens_out`)."""
        _log.warning(
            "summarizer failed plan_id=%s conversation_id=%s reason=%s error_type=%s",
            job.plan.plan_id,
            job.plan.conversation_id,
            reason,
            error_type,
        )
        self._record_failure(job.plan, reason)
        self._emit_outcome(job, "compaction.failed", reason, text)
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
        turns and tokens of the request, tokens of the text returned (`text`, accepted or
        not: its tokens were produced either way), wall time."""
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
