"""More disk faults for `wal_sync.py`'s shim, through the entry points an agent uses: the
OpenAI Agents session under a failing WAL sync, a batch committed early by an erasing call
while the sync or the checkpoint fails, a disk that fills in the middle of a batch, a
process killed mid-batch. Each scenario runs in a subprocess with the shim preloaded
(`wal_sync.run(..., script=wal_faults.SCRIPT)`) and notes what it saw as JSON lines
`<word> <json>` in the log. The async compactions and cancellations are
`wal_faults_async.py`'s, with these helpers. Used by `test_wal_faults.py`.

    python tests/wal_faults.py <scenario> <directory>
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wal_sync import _note, _queued

SCRIPT = Path(__file__).resolve()
SCENARIOS: dict[str, Callable[[Path], None]] = {}


def _scenario(function: Callable[[Path], None]) -> Callable[[Path], None]:
    SCENARIOS[function.__name__] = function
    return function


def _json(directory: Path, word: str, value: Any) -> None:
    _note(directory, word, json.dumps(value))


def _outcome(call: Callable[[], Any]) -> Any:
    """What a caller hears: "ok", or the error's type and message."""
    from ledgerfold import StoreError

    try:
        call()
    except StoreError as error:
        return {"error": str(error)}
    return "ok"


def _bodies(store: Any, conversation_id: str) -> list[str]:
    return [turn.body for turn in store.load(conversation_id).turns]


def _rows(path: Path, query: str) -> list[Any]:
    """A query of the file through a connection of its own (no ledgerfold code)."""
    conn = sqlite3.connect(path)
    try:
        return [list(row) for row in conn.execute(query)]
    finally:
        conn.close()


def _message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


@_scenario
def session(directory: Path) -> None:
    """`LedgerfoldSession.add_items` whose batch's WAL sync fails, then the disk back."""
    from ledgerfold import CompactionPolicy, SQLiteStore, StoreError
    from ledgerfold.integrations.openai_agents import LedgerfoldSession

    path = directory / "s.db"

    async def main() -> None:
        with SQLiteStore(path) as store:
            policy = CompactionPolicy("p", keep_tail=2, trigger_tokens=100_000)
            agent = LedgerfoldSession("s", store=store, policy=policy)
            await agent.add_items([_message("before")])
            (directory / "fail").touch()
            try:
                await agent.add_items([_message("secret one"), _message("secret two")])
                _json(directory, "add", "ok")
            except StoreError as error:
                _json(directory, "add", {"error": str(error)})
            _json(directory, "waited", repr(await agent.wait_compaction()))
            (directory / "fail").unlink()
            items = await agent.get_items()
            _json(directory, "items", [item["content"] for item in items])
            await agent.add_items([_message("after")])
            items = await agent.get_items()
            _json(directory, "again", [item["content"] for item in items])
            # `clear_session` (its deletion's checkpoint commits its batch early) while the
            # sync fails, then once the disk is back.
            for flag in ("fail", None):
                if flag is not None:
                    (directory / flag).touch()
                try:
                    await agent.clear_session()
                    _json(directory, "cleared", "ok")
                except StoreError as error:
                    _json(directory, "cleared", {"error": str(error)})
                if flag is not None:
                    (directory / flag).unlink()
                items = await agent.get_items()
                _json(directory, "left", [item["content"] for item in items])
        _json(directory, "erased", _holds(path, "after"))
        with SQLiteStore(path) as reopened:
            _json(directory, "reopened", _bodies(reopened, "s"))

    asyncio.run(main())


@_scenario
def deferred(directory: Path) -> None:
    """An `add_items` whose deferred compaction's batch fails to sync: the append landed,
    the compaction did not, and nothing of it is left (plan, summary, event)."""
    from ledgerfold import CompactionPolicy, SQLiteStore
    from ledgerfold.integrations.openai_agents import LedgerfoldSession

    path = directory / "s.db"
    events: list[str] = []

    async def main() -> None:
        with SQLiteStore(path) as store:
            policy = CompactionPolicy("p", keep_tail=2, trigger_tokens=50, min_new_turns=1)
            agent = LedgerfoldSession(
                "s", store=store, policy=policy, on_event=lambda e: events.append(e.name)
            )
            planned = agent.compactor._plan_and_end

            def failing(*args: Any) -> Any:  # the disk fails as the compaction's batch starts
                (directory / "fail").touch()
                return planned(*args)

            agent.compactor._plan_and_end = failing  # type: ignore[method-assign]
            words = " ".join(f"word{n}" for n in range(200))
            await agent.add_items([_message(f"turn {n} {words}") for n in range(6)])
            _json(directory, "added", len(_bodies(store, "s")))
            try:
                outcome = await agent.wait_compaction()
                _json(directory, "waited", outcome.status if outcome else None)
            except Exception as error:
                _json(directory, "waited", {"error": type(error).__name__, "text": str(error)})
            (directory / "fail").unlink()
            _json(directory, "events", events)
            _json(directory, "history", [r.status for r in store.summary_history("s")])
            _json(directory, "current", store.current_summary("s") is not None)
            agent.compactor._plan_and_end = planned  # type: ignore[method-assign]
            await agent.add_items([_message("after")])
            outcome = await agent.wait_compaction()
            _json(directory, "next", outcome.status if outcome else None)
        _json(directory, "plans", _rows(path, "SELECT count(*) FROM plans"))

    asyncio.run(main())


@_scenario
def erasing(directory: Path) -> None:
    """A batch of appends, an erasing retract (its checkpoint commits the batch early) and
    appends after it, with the WAL's sync failing from the start."""
    from ledgerfold import SQLiteStore

    path = directory / "s.db"
    with SQLiteStore(path) as store:
        store.append("c", "user", "keep", id="k")
        store.append("c", "user", "erase me", id="e")
        # The variant (`variant` file): "" the WAL's sync fails throughout; "back" the disk
        # is back after the erasure; "checkpoint" only the checkpoint fails (the database
        # file's sync).
        variant = (directory / "variant").read_text() if (directory / "variant").exists() else ""
        flag = directory / ("fail_db" if variant == "checkpoint" else "fail")
        flag.touch()
        jobs = [
            lambda: store.append("c", "user", "one"),
            lambda: store.retract("c", "e", erase=True),
            lambda: store.append("c", "user", "two"),
        ]
        if variant == "back":
            jobs.insert(2, flag.unlink)
        futures = _queued(store, jobs)
        heard = []
        for future in futures:
            try:
                future.result(timeout=30)
                heard.append("ok")
            except Exception as error:
                heard.append({"error": type(error).__name__, "text": str(error)})
        _json(directory, "heard", heard)
        flag.unlink(missing_ok=True)
        _json(directory, "seen", _bodies(store, "c"))
    _json(directory, "erased", _holds(path, "erase me"))
    with SQLiteStore(path) as reopened:
        _json(directory, "reopened", _bodies(reopened, "c"))


def _holds(path: Path, text: str) -> list[str]:
    """Which of the database's files hold `text`'s bytes."""
    found = []
    for suffix in ("", "-wal"):
        file = Path(str(path) + suffix)
        if file.exists() and text.encode() in file.read_bytes():
            found.append(suffix or "db")
    return found


@_scenario
def checkpoint(directory: Path) -> None:
    """An erasing retract whose checkpoint fails (the database file's sync): the erased
    text's pages, before and after the next write, and after a close."""
    from ledgerfold import SQLiteStore

    path = directory / "s.db"
    store = SQLiteStore(path)
    store.append("c", "user", "keep", id="k")
    store.append("c", "user", "zanzibar quixotic", id="e")
    (directory / "fail_db").touch()
    _json(directory, "erase", _outcome(lambda: store.retract("c", "e", erase=True)))
    _json(directory, "failed", _holds(path, "zanzibar"))
    (directory / "fail_db").unlink()
    store.append("c", "user", "next")
    _json(directory, "next", _holds(path, "zanzibar"))
    store.append("c", "user", "more quixotic", id="e2")
    (directory / "fail_db").touch()
    _json(directory, "erase", _outcome(lambda: store.retract("c", "e2", erase=True)))
    _json(directory, "closing", _outcome(store.close))
    _json(directory, "closed", _holds(path, "more quixotic"))
    (directory / "fail_db").unlink()
    with SQLiteStore(path) as reopened:
        _json(directory, "reopened", _bodies(reopened, "c"))
        _json(directory, "search", [h.turn_id for h in reopened.search("c", "quixotic")])
    _json(directory, "end", _holds(path, "more quixotic"))


@_scenario
def closing_fails(directory: Path) -> None:
    """A batch of appends and the store's close, the WAL's sync failing at the close's
    commit of the batch."""
    from ledgerfold import SQLiteStore

    path = directory / "s.db"
    store = SQLiteStore(path)
    store.append("c", "user", "before")
    (directory / "fail").touch()
    futures = _queued(store, [lambda: store.append("c", "user", "lost"), store.close])
    heard = []
    for future in futures:
        try:
            future.result(timeout=30)
            heard.append("ok")
        except Exception as error:
            heard.append({"error": type(error).__name__, "text": str(error)})
    _json(directory, "heard", heard)
    (directory / "fail").unlink()
    with SQLiteStore(path) as reopened:
        _json(directory, "reopened", _bodies(reopened, "c"))


def _failed_batch(directory: Path, store: Any) -> None:
    """A batch of two appends whose WAL sync fails (both callers hear it)."""
    (directory / "fail").touch()
    futures = _queued(
        store,
        [lambda: store.append("c", "user", "lost one"), lambda: store.append("c", "user", "two")],
    )
    _json(directory, "heard", [_outcome(lambda f=f: f.result(timeout=30)) for f in futures])


@_scenario
def killed_after_failure(directory: Path) -> None:
    """A failed batch, the disk back, a read, then the process killed: does the next
    open find the batch?"""
    import os
    import signal

    from ledgerfold import SQLiteStore

    store = SQLiteStore(directory / "s.db")
    store.append("c", "user", "before")
    _failed_batch(directory, store)
    (directory / "fail").unlink()
    _json(directory, "seen", _bodies(store, "c"))
    os.kill(os.getpid(), signal.SIGKILL)


@_scenario
def killed_after_direct_failure(directory: Path) -> None:
    """A call of its own (not on the worker) whose WAL sync fails, the disk back, a read,
    then the process killed."""
    import os
    import signal

    from ledgerfold import SQLiteStore

    store = SQLiteStore(directory / "s.db")
    store.append("c", "user", "before")
    (directory / "fail").touch()
    _json(directory, "heard", [_outcome(lambda: store.append("c", "user", "lost one"))])
    (directory / "fail").unlink()
    _json(directory, "seen", _bodies(store, "c"))
    os.kill(os.getpid(), signal.SIGKILL)


@_scenario
def closed_after_failure(directory: Path) -> None:
    """A failed batch, then the store closed while the disk still fails."""
    from ledgerfold import SQLiteStore

    store = SQLiteStore(directory / "s.db")
    store.append("c", "user", "before")
    _failed_batch(directory, store)
    _json(directory, "closing", _outcome(store.close))


@_scenario
def reopen(directory: Path) -> None:
    """What a fresh open finds (after another scenario)."""
    from ledgerfold import SQLiteStore

    with SQLiteStore(directory / "s.db") as store:
        _json(directory, "reopened", _bodies(store, "c"))


@_scenario
def filling(directory: Path) -> None:
    """A disk that fills in the middle of a batch of large appends: the WAL may grow by
    the bytes written in `limit` and no more."""
    import os

    from ledgerfold import SQLiteStore

    path = directory / "s.db"
    store = SQLiteStore(path)
    store.append("c", "user", "before")
    room = int((directory / "room").read_text()) if (directory / "room").exists() else 0
    (directory / "full").write_text(str(os.path.getsize(str(path) + "-wal") + room))
    big = " ".join(f"w{n}" for n in range(12_000))
    futures = _queued(
        store, [lambda n=n: store.append("c", "user", f"job{n} {big}") for n in range(40)]
    )
    heard = [_outcome(lambda f=f: f.result(timeout=60)) for f in futures]
    _json(directory, "heard", sorted({json.dumps(h) for h in heard}))
    (directory / "full").unlink()
    _json(directory, "seen", [b.split()[0] for b in _bodies(store, "c")])
    store.append("c", "user", "after")
    _json(directory, "search", len(store.search("c", "w5", limit=100, scope="all")))
    store.close()
    with SQLiteStore(path) as reopened:
        _json(directory, "reopened", [b.split()[0] for b in _bodies(reopened, "c")])
        _json(directory, "index", reopened.check_search_index())


#: The jobs of `killed`'s batch: each appends three turns (one call, all or nothing).
KILLED_JOBS = 12


def word(n: int) -> str:
    """A word of its own for each n (letters only: the index splits digits off)."""
    return "zq" + "".join("abcdefghij"[int(digit)] for digit in str(n))


@_scenario
def killed(directory: Path) -> None:
    """A batch of appends, the process killed at a write to the WAL (the `kill` file's
    count, written by the test): it never returns."""
    from ledgerfold import SQLiteStore

    store = SQLiteStore(directory / "s.db")
    seeds = [{"role": "user", "body": f"{word(n)} common", "id": f"s{n}"} for n in range(3)]
    store.append_many("c", seeds)
    (directory / "kill").write_text((directory / "at").read_text())
    filler = "common " + " ".join(f"f{n}" for n in range(3_000))
    futures = _queued(
        store,
        [
            lambda n=n: store.append_many(
                "c",
                [
                    {"role": "user", "body": f"{word(3 + 3 * n + k)} {filler}", "id": f"{n}.{k}"}
                    for k in range(3)
                ],
            )
            for n in range(KILLED_JOBS)
        ],
    )
    for future in futures:
        future.result(timeout=60)
    _note(directory, "not killed")


@_scenario
def killed_check(directory: Path) -> None:
    """What the next open finds after `killed`: the turns, and what search finds."""
    from ledgerfold import SQLiteStore

    with SQLiteStore(directory / "s.db") as store:
        _json(directory, "ids", [turn.id for turn in store.load("c").turns])
        words = [word(n) for n in range(3 + 3 * KILLED_JOBS)]
        found = [[h.turn_id for h in store.search("c", w, scope="all")] for w in words]
        _json(directory, "found", found)
        _json(directory, "common", len(store.search("c", "common", limit=100, scope="all")))
        _json(directory, "index", store.check_search_index())


if __name__ == "__main__":
    sys.path.insert(0, str(SCRIPT.parent))
    SCENARIOS[sys.argv[1]](Path(sys.argv[2]))
