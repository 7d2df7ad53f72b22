"""Argument checks of the Python layer, one per kind of value (text and IDs, integers,
flags, durations, names from a fixed set); each failure is an `InvalidInput` whose message
starts with the field's name. Every entry point checks a kind through the function here, so
one value is accepted or refused alike everywhere, with the same message."""

from __future__ import annotations

import functools
import inspect
import math
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from contextlib import suppress
from typing import Any

from ledgerfold._errors import InvalidInput
from ledgerfold._native import Conversation

#: Why a text that does not encode as UTF-8 is refused: every field's message ends so.
NOT_UTF8 = "must encode as UTF-8 (lone surrogates are invalid)"


def text(field: str, value: object, *, blank_ok: bool = False, empty_ok: bool = True) -> str:
    """A `str` that encodes as UTF-8; unless `blank_ok` not blank; unless `empty_ok` not ''."""
    if not isinstance(value, str):
        raise InvalidInput(
            f"{field}: must be str, got {type(value).__name__}", field=field, problem="wrong-type"
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{field}: {NOT_UTF8}", field=field, problem="not-utf8") from None
    if not empty_ok and not value:
        raise InvalidInput(f"{field}: must be a non-empty string", field=field, problem="empty")
    if not blank_ok and not value.strip():
        raise InvalidInput(f"{field}: must not be blank", field=field, problem="empty")
    return value


def identifier(field: str, value: object) -> str:
    """An ID given to the store or the loop (conversation, turn, summary, plan): a `str`
    that encodes as UTF-8 and is not blank."""
    return text(field, value)


def identifiers(field: str, values: object) -> list[str]:
    """An iterable (not one `str`) of IDs; the one at index i is named `field[i]`."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidInput(
            f"{field}: must be an iterable of str", field=field, problem="wrong-type"
        )
    return [identifier(f"{field}[{index}]", value) for index, value in enumerate(values)]


#: The largest integer SQLite stores (and the Rust core takes).
MAX_INT = 2**63 - 1


def integer(field: str, value: object, *, minimum: int, maximum: int = MAX_INT) -> int:
    """An `int` (never `bool`) within [minimum, maximum]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(
            f"{field}: must be int, got {type(value).__name__}", field=field, problem="wrong-type"
        )
    if not minimum <= value <= maximum:
        top = "2**63-1" if maximum == MAX_INT else str(maximum)
        raise InvalidInput(
            f"{field}: must be between {minimum} and {top}", field=field, problem="out-of-range"
        )
    return value


def flag(field: str, value: object) -> bool:
    """A `bool` (an int or a string is refused: `erase=1` is more likely a mistake)."""
    if not isinstance(value, bool):
        raise InvalidInput(
            f"{field}: must be bool, got {type(value).__name__}", field=field, problem="wrong-type"
        )
    return value


def duration(field: str, value: object, *, unit: str, positive: bool = False) -> float | None:
    """None, or a length of time in `unit`: an `int` or `float` (never `bool`), finite and
    >= 0 (> 0 with `positive`). Any finite length is valid; one reaching before year 1 just
    matches nothing (see `ledgerfold.store._rows.time_ago`)."""
    if value is None:
        return None
    length = math.nan
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        with suppress(OverflowError):  # an int beyond float has no finite length
            length = float(value)
    if not math.isfinite(length) or length < 0 or (positive and length == 0):
        bound = "> 0" if positive else ">= 0"
        raise InvalidInput(
            f"{field}: must be None or a finite number of {unit} {bound}",
            field=field,
            problem="out-of-range",
        )
    return length


def callback(field: str, value: object, signature: str) -> None:
    """None, or a callable (a hook, a summarizer, a token counter); `signature` says what it
    is called with and returns, for the message."""
    if value is not None and not callable(value):
        raise InvalidInput(
            f"{field}: must be None or a callable {signature}", field=field, problem="wrong-type"
        )


def hook(field: str, value: object) -> None:
    """None, or a plain callable `Event -> None`: an event hook is called where the change
    happens (the store's worker thread, say) and never awaited, so an `async def` hook,
    whose call only makes a coroutine, would lose every event."""
    callback(field, value, "Event -> None")
    function = value
    while isinstance(function, functools.partial):
        function = function.func
    if inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)  # noqa: B004 -- instances with async __call__
    ):
        raise InvalidInput(
            f"{field}: must be a plain function Event -> None (it is called, never awaited)",
            field=field,
            problem="not-allowed",
        )


def choice(field: str, value: object, allowed: Collection[str]) -> str:
    """One of the names in `allowed` (a scope, a durability, a status)."""
    if not isinstance(value, str) or value not in allowed:
        names = ", ".join(repr(name) for name in allowed)
        raise InvalidInput(f"{field}: must be one of {names}", field=field, problem="unknown-value")
    return value


def conversation(value: object) -> Conversation:
    if not isinstance(value, Conversation):
        raise InvalidInput(
            f"conversation: must be Conversation, got {type(value).__name__}",
            field="conversation",
            problem="wrong-type",
        )
    return value


def instance(field: str, value: Any, cls: type[Any] | tuple[type[Any], ...]) -> Any:
    """An instance of `cls` (or of one of the classes of a tuple)."""
    if not isinstance(value, cls):
        names = " or ".join(c.__name__ for c in (cls if isinstance(cls, tuple) else (cls,)))
        raise InvalidInput(
            f"{field}: must be {names}, got {type(value).__name__}",
            field=field,
            problem="wrong-type",
        )
    return value


# A key named in a field path: one that reads as a field name (any other key could be text).
_KEY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def non_finite_at(value: Any) -> str | None:
    """The path (`.key`, `[index]`) of the first NaN or ±Infinity float in `value` (dicts
    and lists walked, depth first), `""` for `value` itself, or None when there is none. A
    key that does not read as a field name ends the path at its mapping: no item text in it.
    """
    return _first_at(value, lambda v: isinstance(v, float) and not math.isfinite(v))


def unencodable_at(value: Any) -> str | None:
    """The path, as `non_finite_at` gives it, of the first str in `value` that UTF-8 cannot
    encode (a lone surrogate; in a key, its mapping's path), or None. It encodes every str
    it walks: for naming a field once such a value was refused, or for a small value."""
    return _first_at(value, _unencodable)


def _unencodable(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _first_at(value: Any, hit: Callable[[object], bool]) -> str | None:
    """The path of the first value `hit` holds for (see `non_finite_at`)."""
    stack: list[tuple[Any, str, bool]] = [(value, "", True)]
    seen: set[int] = set()  # containers walked (a cycle, or one shared, is walked once)
    while stack:
        current, path, named = stack.pop()
        if hit(current):
            return path
        if isinstance(current, (Mapping, list, tuple)):
            if id(current) in seen:
                continue
            seen.add(id(current))
        if isinstance(current, Mapping):
            if any(hit(key) for key in current):  # a key: its mapping is named
                return path
            children = [
                (child, f"{path}.{key}" if named else path, named)
                if isinstance(key, str) and _KEY_NAME.fullmatch(key)
                else (child, path, False)
                for key, child in current.items()
            ]
        elif isinstance(current, (list, tuple)):
            children = [
                (child, f"{path}[{at}]" if named else path, named)
                for at, child in enumerate(current)
            ]
        else:
            continue
        stack.extend(reversed(children))
    return None
