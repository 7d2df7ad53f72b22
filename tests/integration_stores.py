"""Stores for the integration tests: a real SQLite file store behind a proxy that records
which thread ran each call, and refuses any private attribute (the integrations must work
with any `Store` through its public methods)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledgerfold import SQLiteStore


class RecordingStore:
    """Delegates every public method to a real `SQLiteStore`; records `(method, thread)`.

    `gate` (optional): `{method name: (started, release)}` events — the call sets `started`
    and waits for `release` before it runs, so a test can hold a call in progress.
    """

    def __init__(self, path: Path, *, known_ids: bool = True, search: bool = True) -> None:
        self.inner = SQLiteStore(path)
        self._has_search = search
        self.calls: list[tuple[str, threading.Thread]] = []
        self.gate: dict[str, tuple[threading.Event, threading.Event]] = {}
        self._has_known_ids = known_ids

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(f"{name}: private, not part of the Store protocol")
        if name == "known_ids" and not self._has_known_ids:
            raise AttributeError(name)  # a v1.1 store
        if name == "search" and not self._has_search:
            raise AttributeError(name)  # a v1.1 store: no recall
        target = getattr(self.inner, name)
        if not callable(target):
            return target
        return self._recorded(name, target)

    def _recorded(self, name: str, target: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, threading.current_thread()))
            if name in self.gate:
                started, release = self.gate[name]
                started.set()
                release.wait(timeout=60)  # a safety net for a failing test, not a timing
            return target(*args, **kwargs)

        return call

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def threads(self) -> set[threading.Thread]:
        return {thread for _, thread in self.calls}
