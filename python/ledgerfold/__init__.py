"""ledgerfold: versioned, verifiable compaction of long agent conversations.

Raw turns are an append-only ledger; a summary is a derived, versioned record bound to the
exact IDs and BLAKE3 fingerprint of its sources, used only while it still matches them.

The public names (`ledgerfold._public`) are imported on the first use of one of them, not
by `import ledgerfold` itself, which imports next to nothing: the `ledgerfold` console
script, whose module is in this package, then handles Ctrl-C from its first line on, also
while the library is being imported (`ledgerfold._entry`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ledgerfold._public import *  # noqa: F403
    from ledgerfold._public import __all__ as __all__
else:

    def __getattr__(name: str) -> Any:
        """A public name (or `__all__`): every one of them is imported at its first use."""
        if name.startswith("_") and name != "__all__":  # a submodule not imported yet
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        try:
            from ledgerfold import _public
        except AttributeError as error:
            # Out of this function, it would read as "no such name": `from ledgerfold
            # import X` would say only "cannot import name", `hasattr` False. The library
            # failed to import (a stale build of the extension lacking a name, say).
            raise ImportError(f"ledgerfold failed to import: {error}") from error

        names = globals()
        # Only names not set yet: one set since (`mock.patch.object(ledgerfold, ...)`, an
        # assignment) stays when another name is looked up, and missing names are too.
        for key in _public.__all__:
            names.setdefault(key, getattr(_public, key))
        names.setdefault("__all__", _public.__all__)
        if name not in names:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return names[name]

    def __dir__() -> list[str]:
        __getattr__("__all__")  # first: the import also adds the subpackages (`store`, …)
        return sorted(globals())


__version__ = "0.1.0"

# A library's records go where the application configures logging, and nowhere otherwise:
# without a handler, Python's "last resort" would print WARNING records to stderr.
logging.getLogger("ledgerfold").addHandler(logging.NullHandler())
