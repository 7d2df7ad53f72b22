"""A store that is only the `Store` protocol: it forwards the protocol's method names (v1.1's
`Store`, or `SearchableStore` when asked) to a real store and raises `AttributeError` for
every other name, private ones included. What the integrations and the `Compactor` may use
of a store of one's own is exactly this."""

from __future__ import annotations

import functools
from typing import Any

from ledgerfold import Store
from ledgerfold.store import SearchableStore


def protocol_names(protocol: type) -> frozenset[str]:
    """The public method names a protocol class declares (its bases' included)."""
    return frozenset(
        name
        for klass in protocol.__mro__
        if klass not in (object,) and klass.__module__.startswith("ledgerfold")
        for name, value in vars(klass).items()
        if not name.startswith("_") and callable(value)
    )


class ProtocolOnly:
    """Forwards exactly the methods of `Store` (or `SearchableStore` with `searchable=True`)
    to `inner`; records each call's name in `calls`."""

    def __init__(self, inner: Any, *, searchable: bool = False) -> None:
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_names", protocol_names(SearchableStore if searchable else Store))
        object.__setattr__(self, "calls", [])

    def __getattribute__(self, name: str) -> Any:
        if name == "calls":
            return object.__getattribute__(self, "calls")
        if name in ("__class__", "__repr__", "__eq__", "__hash__", "__init__"):
            return object.__getattribute__(self, name)
        if name not in object.__getattribute__(self, "_names"):
            raise AttributeError(f"{name}: not a method of the Store protocol")
        target = getattr(object.__getattribute__(self, "_inner"), name)
        calls = object.__getattribute__(self, "calls")

        @functools.wraps(target)  # its signature: which keywords the store takes
        def call(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return target(*args, **kwargs)

        return call
