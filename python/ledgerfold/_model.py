"""The ledger's values (SPEC §2) and fingerprint v1 (SPEC §3), implemented natively.

`Turn` and `Conversation` are frozen native classes: a turn's digest is computed once, when
it is built, so fingerprints and summary checks never re-hash bodies.
"""

from __future__ import annotations

from collections.abc import Mapping

from ledgerfold import _native
from ledgerfold._native import Conversation, Turn, fingerprint_turns, same_ordered_ids

__all__ = [
    "PROTECTION_REASONS",
    "ROLES",
    "Conversation",
    "Turn",
    "fingerprint_turns",
    "same_ordered_ids",
]


def _by_code(codes: Mapping[str, int]) -> tuple[str, ...]:
    return tuple(sorted(codes, key=codes.__getitem__))


#: The roles and protection reasons in SPEC §3 code order, as the native core defines them.
ROLES = _by_code(_native.ROLE_CODES)
PROTECTION_REASONS = _by_code(_native.PROTECTION_REASON_CODES)
