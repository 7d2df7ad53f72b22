"""Compaction orchestration (SPEC §13): what an agent calls on every turn. `compact` /
`acompact` start a plan → give the summarizer only the turns to compact plus the current
summary's text → save through the store's atomic commit; every exit is a
`CompactionOutcome`, and a summarizer that raises, times out or returns blank text leaves
the ledger and the current summary as they were. `context` assembles what goes to the model,
within a token budget or not at all. How a compaction ends is `_outcome.OutcomeRecorder`
(the base); the job from plan to result is `_compaction_job`. Logs
(``ledgerfold.compactor``) carry IDs, counts, sequences, fingerprints and exception type
names only: never turn bodies, summary text or exception messages."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from ledgerfold import _due as due
from ledgerfold import _validate
from ledgerfold._compaction_job import _Job, _previous_and_budget, _random_summary_id
from ledgerfold._context import AssembledContext, SummaryItem
from ledgerfold._context_tokens import ContextTokens
from ledgerfold._deferred import After as _After
from ledgerfold._deferred import came_to as _came_to
from ledgerfold._deferred import defer as _defer
from ledgerfold._deferred import not_landed as _not_landed
from ledgerfold._deferred import wait_queued as _wait_queued
from ledgerfold._errors import ContextBudgetExceeded, InvalidInput, StoreError
from ledgerfold._events import Event, EventHook, emit, kept_whatever_commits
from ledgerfold._fold import fold_chunk
from ledgerfold._outcome import (
    OUTCOME_STATUSES,
    CompactionOutcome,
    CompactionStatus,
    OutcomeRecorder,
)
from ledgerfold._policy import CompactionPolicy
from ledgerfold._worker import pause, running_on, worker_for
from ledgerfold.store._protocol import Store, refused_keyword, takes_keyword
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


class Compactor(OutcomeRecorder):
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
        _validate.instance("store", store, Store)
        if isinstance(store, type):  # the class has the methods too: `store=SQLiteStore`
            raise InvalidInput(
                f"store: must be a store, got the class {store.__name__}",
                field="store",
                problem="wrong-type",
            )
        _validate.instance("policy", policy, CompactionPolicy)
        _validate.callback("summarizer", summarizer, "SummaryRequest -> str")
        _validate.duration("timeout", timeout, unit="seconds", positive=True)
        _validate.hook("on_event", on_event)
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
        # The built-in summarizer (no deadline asked) runs inside the worker job that plans,
        # in `_acompact`: it is quick and bounded by the chunk (its only callback, the
        # policy's token counter, already runs on the worker for the due check), and a
        # compaction then costs one job of the store's worker, not two with a thread hop
        # between them, each queued behind every other session's jobs.
        # Checked at each compaction: `summarizer` and `timeout` are attributes one may set.
        self._built_in: Summarizer | None = self.summarizer if summarizer is None else None
        self._summary_id_factory = summary_id_factory or _random_summary_id
        self._due_tokens = ContextTokens()
        # A store of v1.1's protocol takes no `only_due_at_once`: it is not asked below the trigger.
        self._asks_due_at_once = takes_keyword(
            getattr(store, "begin_compaction", None), "only_due_at_once"
        )
        # Nor `keep_checkpoints` in `prune_versions` (`OutcomeRecorder._prune`).
        self._prunes_checkpoints = takes_keyword(
            getattr(store, "prune_versions", None), "keep_checkpoints"
        )

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
        tokens = self._due_tokens.count(conversation_id, assembled.items, self.policy.counter)
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
        _validate.flag("force", force)
        in_loop = in_running_loop()
        if in_loop and is_async_callable(self.summarizer):
            raise InvalidInput(
                "summarizer: is async and an event loop is running; use `await acompact(...)`",
                field="summarizer",
                problem="not-allowed",
            )
        _wait_queued(self.store, conversation_id)  # a plan now would supersede its plan
        begun = self._begin(conversation_id, force)
        if isinstance(begun, CompactionOutcome):
            return begun
        try:
            result = call_summarizer(self.summarizer, begun.request, self.timeout, in_loop)
        except AwaitableInRunningLoop:
            # A failed attempt like any other (its record, its event); the caller is told why.
            self._fail(begun, "summarizer-error", "awaitable-in-running-loop")
            raise InvalidInput(
                "summarizer: returned an awaitable while an event loop is running; "
                "use `await acompact(...)`",
                field="summarizer",
                problem="not-allowed",
            ) from None
        except Exception as error:
            return self._fail(begun, failure_reason(error), type(error).__name__)
        except BaseException:  # interrupted: the plan, without a result, is recorded
            # `failed`/`abandoned` at the next one (§15.5), reported now as `acompact`'s (§17.8)
            self._emit_outcome(begun, "compaction.failed", "abandoned")
            raise
        return self._finish(begun, result)

    async def acompact(self, conversation_id: str, *, force: bool = False) -> CompactionOutcome:
        """Run one compaction without blocking the event loop: the store work runs on the
        store's worker thread (SPEC §17.6, `ledgerfold._worker`), async summarizers are
        awaited and sync ones run in a thread of their own (not the store's: a slow
        summarizer must not hold up the store's other calls). The built-in summarizer (none
        given, no `timeout`) is quick and bounded: it runs in the worker job that plans,
        which then also commits (one job a compaction)."""
        conversation_id = _validate.text("conversation_id", conversation_id)
        _validate.flag("force", force)
        outcome = (await self._acompact(conversation_id, force))[0]
        assert isinstance(outcome, CompactionOutcome)  # not deferred
        return outcome

    async def _acompact(
        self,
        conversation_id: str,
        force: bool,
        before: Callable[[], object] | None = None,
        after: Callable[[], T] | None = None,
        *,
        defer: bool = False,
        landed: Callable[[Future[Any]], None] | None = None,
    ) -> tuple[CompactionOutcome | Future[CompactionOutcome], T | None]:
        """`acompact` for the integrations: `before` runs in the worker job that plans (an
        append), `after` in the job that ends the compaction (a read of the context), so a
        call costs one job of the store's worker when nothing is due (a second job would
        queue again behind every other session's). With `defer`, a compaction the built-in
        summarizer makes one job (`_in_job_summarizer`) is not awaited when the trigger is
        reached (or there is none): the whole of it (due check, plan, summary, commit) runs
        as the store's next job, in a batch of its own once this call's batch has answered
        its callers (`submit_after_batch`), so every call made after this one returns sees
        it; its future is returned. Below the trigger, what is due at once (§15.8) still
        runs in this job. When the caller is cancelled, `landed` gets (on the loop, before
        the cancellation propagates) the future of a job queued behind the planning one,
        giving what this call's compaction check came to (`came_to`)."""
        worker = worker_for(self.store)
        inline = running_on(worker)  # in its job (a hook): nothing queued runs meanwhile
        # The plan registered and not yet ended, if any: a cancelled call leaves it without a
        # result, which the store records `failed`/`abandoned` when the next plan starts (SPEC
        # §15.5), and which is reported when that happens (§17.8), at whichever await.
        pending: list[_Job] = []
        # Set (under the lock) when the caller is cancelled: a compaction `begin` has not
        # deferred yet then runs in its job, so a call made after the cancellation, queued
        # meanwhile, finds it done (a cancelled call lands whole, SPEC §17.6).
        cancelled, deciding = threading.Event(), threading.Lock()

        # What the planning job came to, for `landed` (written on the worker thread).
        began: list[Any] = []

        def begin(
            again: bool = False,
        ) -> tuple[_Job | CompactionOutcome | Future[CompactionOutcome] | _After, T | None]:
            begun = plan(again)
            began[:] = [begun[0]]
            return begun

        def plan(
            again: bool,
        ) -> tuple[_Job | CompactionOutcome | Future[CompactionOutcome] | _After, T | None]:
            if before is not None and not again:
                before()
            in_job = self._in_job_summarizer()
            queued = None if inline else worker.deferred.get(conversation_id)
            if queued is not None and not queued.done() and not (defer and in_job is not None):
                # An `add_items`' compaction of this conversation is queued (a call batched
                # with it): a plan left open now (a model's call) would be superseded by it.
                # This call plans once it has awaited it; a deferring call's own check is
                # deferred behind it below (or, below the trigger, ends in this job).
                return _After(queued), None
            # Whether the trigger is reached, once asked here: `_begin` does not ask again.
            reached = None
            if defer and in_job is not None and not force:
                try:
                    reached = self._trigger_reached(conversation_id)
                except StoreError as error:  # as in `_begin`
                    failed = self._unstarted(conversation_id, error, time.perf_counter())
                    return failed, (after() if after is not None else None)
            if reached and in_job is not None:
                # The whole compaction (due check, plan, summary, commit) is the deferred
                # job: no plan is left open between batches for another call to supersede.
                check = functools.partial(self._plan_and_end, conversation_id, force, in_job)
                with deciding:
                    if not cancelled.is_set():
                        return _defer(worker, conversation_id, check), None
                outcome = check()  # the caller was cancelled: in this job
                return outcome, (after() if after is not None else None)
            begun = self._begin(conversation_id, force, reached)
            if isinstance(begun, _Job) and in_job is not None:
                # Below the trigger (a compaction due at once, §15.8), or not deferred.
                begun = self._summarize_and_end(begun, in_job)
            ended = isinstance(begun, CompactionOutcome)
            if isinstance(begun, _Job):
                pending.append(begun)
            return begun, (after() if ended and after is not None else None)

        def abandoned(undone: Future[Any] | None = None, ending: _Job | None = None) -> None:
            """After the cancelled call's jobs: its plan's event. `undone` (the job it was
            cancelled in) not landed: no plan, or (`ending`) the plan left without a result."""
            if undone is not None and _not_landed(undone):
                pending[:] = [] if ending is None else [ending]
            if pending:  # no failed commit of this job's batch undoes it (SPEC §17.8)
                with kept_whatever_commits():
                    self._emit_outcome(pending.pop(), "compaction.failed", "abandoned")

        planning: Future[Any] = Future()  # the planning job's outcome, for `_came_to`
        try:
            begun, read = await worker.run_job(planning, begin)
            while isinstance(begun, _After):  # another call's: awaited, never cancelled here
                await asyncio.wait([asyncio.wrap_future(begun.future)])
                planning = Future()
                begun, read = await worker.run_job(planning, begin, True)
        except asyncio.CancelledError:  # `begin` ran whole, or never: reported accordingly
            with deciding:
                cancelled.set()
            if landed is not None:  # first: in the planning's batch if it still runs
                landed(worker.submit(_came_to, began, planning))
            worker.submit_after_batch(abandoned, planning)  # once the planning's batch ended
            raise
        if isinstance(begun, (CompactionOutcome, Future)):
            return begun, read
        job = begun
        text: object = None  # the model's, and why the compaction fails if its end fails:
        unlanded = "store-error"
        try:
            result = await call_summarizer_async(self.summarizer, job.request, self.timeout)
        except Exception as error:
            reason, error_type = failure_reason(error), type(error).__name__
            unlanded = reason

            def end() -> CompactionOutcome:
                return self._fail(job, reason, error_type)
        except BaseException:  # cancelled or interrupted: reported as `compact()`'s is
            worker.submit(abandoned)
            raise
        else:
            text = result

            def end() -> CompactionOutcome:
                return self._finish(job, result)

        def finish() -> tuple[CompactionOutcome, T | None]:
            pending.clear()  # the plan ends here, with its own outcome and event
            outcome = end()
            return outcome, (after() if after is not None else None)

        def failed_end() -> tuple[CompactionOutcome, T | None]:
            self._record_failure(job.plan, unlanded)
            self._emit_outcome(job, "compaction.failed", unlanded, text)
            failed = CompactionOutcome("failed", None, unlanded)
            return failed, (after() if after is not None else None)

        finishing: Future[Any] = Future()
        try:
            return await worker.run_job(finishing, finish)
        except asyncio.CancelledError:  # `finish` ran whole, or never: reported accordingly
            worker.submit_after_batch(abandoned, finishing, job)  # once its batch has ended
            raise
        except StoreError:  # the end's batch failed to commit, its writes undone
            try:  # a failed compaction, as a commit failing alone (`_finish`); the call's
                return await worker.run(failed_end)  # own writes (an append) stay
            except StoreError:  # still failing: the plan is left without a result
                pending[:] = [job]
                with contextlib.suppress(StoreError):  # its event comes all the same
                    await worker.run(abandoned)  # before the caller hears
                raise

    def _in_job_summarizer(self) -> Summarizer | None:
        """The built-in summarizer this compactor made, if it is still the summarizer and
        there is no deadline (see `__init__`), else None (read once: the object checked)."""
        built_in, summarizer = self._built_in, self.summarizer
        if built_in is not None and summarizer is built_in and self.timeout is None:
            return built_in
        return None

    def _trigger_reached(self, conversation_id: str) -> bool:
        """Whether `_begin` would ask the store for a plan beyond what is due at once: no
        trigger, or the context past it (`_is_due`)."""
        return self.policy.trigger_tokens is None or self._is_due(conversation_id)

    def _plan_and_end(
        self, conversation_id: str, force: bool, summarizer: Summarizer
    ) -> CompactionOutcome:
        """The due check, plan, summary and end of a deferred compaction, in one job."""
        begun = self._begin(conversation_id, force)
        if isinstance(begun, _Job):
            return self._summarize_and_end(begun, summarizer)
        return begun

    def _summarize_and_end(self, job: _Job, summarizer: Summarizer) -> CompactionOutcome:
        """The built-in summarizer's call and the compaction's end, in the job that planned
        (`_in_job_summarizer`); between its steps the loop may take the GIL (`pause`)."""
        pause()
        try:
            result = summarizer(job.request)
        except Exception as error:
            return self._fail(job, failure_reason(error), type(error).__name__)
        pause()
        return self._finish(job, result)

    async def acontext(
        self, conversation_id: str, max_tokens: int | None = None
    ) -> AssembledContext:
        """`context` on the store's worker thread, off the event loop (SPEC §17.6)."""
        return await worker_for(self.store).run(self.context, conversation_id, max_tokens)

    def _begin(
        self, conversation_id: str, force: bool, reached: bool | None = None
    ) -> _Job | CompactionOutcome:
        """Due check, plan, and the summarizer's input: the uncovered turns (one chunk of
        them, within `max_input_tokens`) read in the plan's transaction. `reached`: what
        `_trigger_reached` said in this job, when the caller asked it (not asked again)."""
        policy = self.policy
        started = time.perf_counter()
        needed = 1
        below_trigger = False
        if not force:
            try:  # a failed read fails the compaction as the plan's registration does
                below_trigger = policy.trigger_tokens is not None and not (
                    self._is_due(conversation_id) if reached is None else reached
                )
                if not below_trigger:
                    failures = self.store.consecutive_failures(conversation_id)
                    needed = due.needed_turns(policy.min_new_turns, failures)
            except StoreError as error:
                return self._unstarted(conversation_id, error, started)
            # Below the trigger only what SPEC §15.8 makes due at once (a rebase, a backlog).
            if below_trigger and not self._asks_due_at_once:
                return self._skip(conversation_id, None, "not-due", started)
        # Below the trigger `only_due_at_once` (protocol 2), else what a v1.1 store takes.
        asked: dict[str, Any] = (
            {"only_due_at_once": True} if below_trigger else {"min_new_turns": needed}
        )
        try:
            work = self.store.begin_compaction(
                conversation_id,
                policy.keep_tail,
                policy.version,
                preserve_roles=policy.preserve_roles,
                **asked,
            )
        except StoreError as error:  # no plan registered: nothing was written
            return self._unstarted(conversation_id, error, started)
        except TypeError as error:
            # A `**kwargs` proxy over a store of v1.1's protocol: not asked again.
            if not below_trigger or not refused_keyword(error, "only_due_at_once"):
                raise
            self._asks_due_at_once = False
            return self._skip(conversation_id, None, "not-due", started)
        if work.plan is None:
            return self._skip(
                conversation_id, None, "not-due" if below_trigger else work.status, started
            )
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
            purged_through=None if parent is None else work.purged_through,
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

    # -- context -------------------------------------------------------------------------

    def context(self, conversation_id: str, max_tokens: int | None = None) -> AssembledContext:
        """The context to send: the current summary (if usable) and every other turn raw.

        With `max_tokens`, raise `ContextBudgetExceeded(needed, budget, protected)` when the
        context costs more — nothing is ever dropped to fit, protected turns least of all.
        Never calls the summarizer; compact and call again to make room."""
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
