"""Importing an optional dependency (an extra) with an error that says what to install."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["require"]


def require(module: str, *, needed_by: str, install: str) -> Any:
    """`module`, or an `ImportError` naming who needs it and the `pip install` that brings
    it (chained to the original error)."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"{needed_by} needs {module.split('.')[0]}: pip install {install}"
        ) from error
