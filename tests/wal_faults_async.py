"""Disk faults for `wal_sync.py`'s shim under an agent's async calls: `Compactor.acompact`
whose commit fails to sync (the built-in summarizer and a model of one's own), and a
caller cancelled while its batch fails. As `wal_faults.py`'s scenarios (whose helpers these
use), each runs in a subprocess with the shim preloaded
(`wal_sync.run(..., script=wal_faults_async.SCRIPT)`) and notes what it saw as JSON lines.
Used by `test_wal_faults.py`.

    python tests/wal_faults_async.py <scenario> <directory>
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from wal_faults import _bodies, _json, _message

SCRIPT = Path(__file__).resolve()
SCENARIOS: dict[str, Callable[[Path], None]] = {}


def _scenario(function: Callable[[Path], None]) -> Callable[[Path], None]:
    SCENARIOS[function.__name__] = function
    return function


def _noting_batch_ends(store: Any) -> Any:
    """A `threading.Event` set each time one of the store's worker batches has ended
    (committed or not): the store's batch hook, wrapped."""
    import threading

    ended = threading.Event()
    batch = store._worker_batch

    @contextmanager
    def noted() -> Iterator[Any]:
        try:
            with batch() as end:
                yield end
        finally:
            ended.set()

    store._worker_batch = noted
    return ended


def _failing_model(directory: Path, flag: str) -> Callable[[Any], Awaitable[str]]:
    """A model of one's own (the built-in summarizer's text) that, at its first call, makes
    the WAL's syncs fail: the flag file written with `flag` (`"once"`: one sync fails)."""
    from ledgerfold import ExtractiveSummarizer

    extractive = ExtractiveSummarizer()
    calls: list[None] = []

    async def model(request: Any) -> str:
        if not calls:
            (directory / "fail").write_text(flag)
        calls.append(None)
        return str(extractive(request))

    return model


@_scenario
def acompact(directory: Path) -> None:
    """`Compactor.acompact` whose commit's batch fails to sync: with the built-in summarizer
    (one job) and with a model of one's own (its plan's job commits, the commit's fails)."""
    from ledgerfold import CompactionPolicy, Compactor, SQLiteStore

    path = directory / "s.db"
    events: list[str] = []
    model = _failing_model(directory, "")  # the disk fails while the model writes, once

    async def main() -> None:
        with SQLiteStore(path) as store:
            for conversation in ("a", "b"):
                store.append_many(
                    conversation, [{"role": "user", "body": f"turn {n}"} for n in range(12)]
                )
            policy = CompactionPolicy("p", keep_tail=2, min_new_turns=1)
            built_in = Compactor(store, policy, on_event=lambda e: events.append(e.name))
            own = Compactor(store, policy, model, on_event=lambda e: events.append(e.name))
            for compactor, conversation in ((built_in, "a"), (own, "b")):
                if compactor is built_in:
                    (directory / "fail").touch()
                heard = await _aoutcome(compactor.acompact(conversation))
                _json(directory, "heard", heard)
                (directory / "fail").unlink()
                _json(directory, "history", [r.status for r in store.summary_history(conversation)])
                _json(directory, "events", events)
                events.clear()
                again = await compactor.acompact(conversation)
                _json(directory, "again", again.status)
                _json(directory, "history", [r.status for r in store.summary_history(conversation)])
                _json(directory, "events", events)
                events.clear()
        with SQLiteStore(path) as reopened:
            for conversation in ("a", "b"):
                history = [r.status for r in reopened.summary_history(conversation)]
                _json(directory, "reopened", history)

    asyncio.run(main())


@_scenario
def acompact_once(directory: Path) -> None:
    """`Compactor.acompact` with a model of one's own whose end's batch fails to sync once
    (the disk comes back at once): the compaction fails, the call does not."""
    from ledgerfold import CompactionPolicy, Compactor, SQLiteStore

    events: list[tuple[str, str | None]] = []
    model = _failing_model(directory, "once")  # the end's sync fails, once

    async def main() -> None:
        with SQLiteStore(directory / "s.db") as store:
            store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(12)])
            policy = CompactionPolicy("p", keep_tail=2, min_new_turns=1)
            compactor = Compactor(
                store, policy, model, on_event=lambda e: events.append((e.name, e.reason))
            )
            outcome = await compactor.acompact("c")
            _json(directory, "outcome", [outcome.status, outcome.reason])
            _json(directory, "events", events)
            _json(directory, "history", [(r.status, r.reason) for r in store.summary_history("c")])
            again = await compactor.acompact("c")
            _json(directory, "again", again.status)

    asyncio.run(main())


async def _aoutcome(call: Any) -> Any:
    from ledgerfold import StoreError

    try:
        outcome = await call
    except StoreError as error:
        return {"error": str(error)}
    return outcome.status


@_scenario
def cancelled(directory: Path) -> None:
    """An `add_items` cancelled while its job runs, whose batch's sync then fails: what
    `wait_compaction()` says of it (its items were not stored: no compaction)."""
    import threading

    from ledgerfold import CompactionPolicy, SQLiteStore
    from ledgerfold.integrations.openai_agents import LedgerfoldSession

    path = directory / "s.db"

    async def main() -> None:
        loop = asyncio.get_running_loop()
        with SQLiteStore(path) as store:
            policy = CompactionPolicy("p", keep_tail=2, trigger_tokens=50, min_new_turns=1)
            agent = LedgerfoldSession("s", store=store, policy=policy)
            appended = agent._append
            heard = threading.Event()

            # The variant (`variant` file): "" the caller gives up while its job runs;
            # "late" once its batch has ended, before it heard back.
            late = (directory / "variant").exists()
            ended = _noting_batch_ends(store)

            def cancel() -> None:  # on the loop
                if late:
                    ended.wait(30)  # the loop takes the cancellation before the answer
                task.cancel()

            def append(items: Any) -> int:  # on the worker
                (directory / "fail").touch()
                loop.call_soon_threadsafe(cancel)
                if not late:
                    heard.wait(30)
                return appended(items)

            agent._append = append  # type: ignore[method-assign]
            words = " ".join(f"word{n}" for n in range(200))
            items = [_message(f"{n} {words}") for n in range(6)]
            task = asyncio.ensure_future(agent.add_items(items))
            task.add_done_callback(lambda _task: heard.set())
            try:
                await task
                _json(directory, "add", "ok")
            except asyncio.CancelledError:
                _json(directory, "add", "cancelled")
            try:
                _json(directory, "waited", repr(await agent.wait_compaction()))
            except asyncio.CancelledError:
                _json(directory, "waited", "CancelledError")
            except Exception as error:
                _json(directory, "waited", type(error).__name__)
            (directory / "fail").unlink()
            _json(directory, "seen", len(_bodies(store, "s")))

    asyncio.run(main())


@_scenario
def cancelled_in_job(directory: Path) -> None:
    """An `add_items` below the trigger whose job compacts at once (the rest of a folded
    backlog), its caller cancelled once its batch had ended, that batch's sync failed: what
    `wait_compaction()` says (no summary was kept)."""

    from ledgerfold import CompactionPolicy, SQLiteStore
    from ledgerfold.integrations.openai_agents import LedgerfoldSession

    path = directory / "s.db"

    async def main() -> None:
        loop = asyncio.get_running_loop()
        with SQLiteStore(path) as store:
            policy = CompactionPolicy(
                "p", keep_tail=2, trigger_tokens=100_000, min_new_turns=1, max_input_tokens=300
            )
            agent = LedgerfoldSession("s", store=store, policy=policy)
            words = " ".join(f"word{n}" for n in range(60))
            await agent.add_items([_message(f"{n} {words}") for n in range(12)])
            first = await agent.compactor.acompact("s", force=True)  # one chunk: a backlog
            _json(directory, "first", first.status)
            ended = _noting_batch_ends(store)

            def cancel() -> None:  # on the loop: before the answer, once the batch ended
                ended.wait(30)
                task.cancel()

            appended = agent._append

            def append(items: Any) -> int:  # on the worker
                (directory / "fail").touch()
                ended.clear()
                loop.call_soon_threadsafe(cancel)
                return appended(items)

            agent._append = append  # type: ignore[method-assign]
            task = asyncio.ensure_future(agent.add_items([_message("one more")]))
            try:
                await task
                _json(directory, "add", "ok")
            except asyncio.CancelledError:
                _json(directory, "add", "cancelled")
            try:
                outcome = await agent.wait_compaction()
                _json(directory, "waited", outcome.status if outcome else None)
            except Exception as error:
                _json(directory, "waited", type(error).__name__)
            (directory / "fail").unlink()
            _json(directory, "history", [r.status for r in store.summary_history("s")])

    asyncio.run(main())


if __name__ == "__main__":
    sys.path.insert(0, str(SCRIPT.parent))
    SCENARIOS[sys.argv[1]](Path(sys.argv[2]))
