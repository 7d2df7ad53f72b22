"""Shared by the worker hand-over tests (`test_worker_handover.py`,
`test_worker_ready_handover.py`): a store stand-in, a GIL held by Python work, and no
forced switch of the GIL, so the loop's thread runs only when the worker hands it over."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager


class Holder:
    """A store stand-in: any object can have a worker."""


@contextmanager
def no_forced_switch() -> Iterator[None]:
    """The interpreter never takes the GIL from the worker by force meanwhile: the
    loop's thread runs only when the worker hands it over (or waits)."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(30.0)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def busy(seconds: float) -> None:
    """Python work, holding the GIL, for `seconds`."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
