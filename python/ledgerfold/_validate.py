"""Argument checks of the Python layer; each failure is an `InvalidInput` naming the field."""

from __future__ import annotations

from typing import Any

from ledgerfold._errors import InvalidInput
from ledgerfold._native import Conversation


def text(field: str, value: object, *, blank_ok: bool = False, empty_ok: bool = True) -> str:
    """A `str` that encodes as UTF-8; unless `blank_ok` not blank; unless `empty_ok` not ''."""
    if not isinstance(value, str):
        raise InvalidInput(
            f"{field}: must be str, got {type(value).__name__}", field=field, problem="wrong-type"
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(
            f"{field}: must encode as UTF-8 (lone surrogates are invalid)",
            field=field,
            problem="not-utf8",
        ) from None
    if not empty_ok and not value:
        raise InvalidInput(f"{field}: must be a non-empty string", field=field, problem="empty")
    if not blank_ok and not value.strip():
        raise InvalidInput(f"{field}: must not be blank", field=field, problem="empty")
    return value


def integer(field: str, value: object, *, minimum: int) -> int:
    """An `int` (never `bool`) within [minimum, 2**63 - 1]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(
            f"{field}: must be int, got {type(value).__name__}", field=field, problem="wrong-type"
        )
    if value < minimum or value > 2**63 - 1:
        raise InvalidInput(
            f"{field}: must be between {minimum} and 2**63-1", field=field, problem="out-of-range"
        )
    return value


def conversation(value: object) -> Conversation:
    if not isinstance(value, Conversation):
        raise InvalidInput(
            f"conversation: must be Conversation, got {type(value).__name__}",
            field="conversation",
            problem="wrong-type",
        )
    return value


def instance(field: str, value: Any, cls: type[Any]) -> Any:
    if not isinstance(value, cls):
        raise InvalidInput(
            f"{field}: must be {cls.__name__}, got {type(value).__name__}",
            field=field,
            problem="wrong-type",
        )
    return value
