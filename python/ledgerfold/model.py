"""The ledger's values (SPEC §2) and fingerprint v1 (SPEC §3), implemented natively.

`Turn` and `Conversation` are frozen native classes: a turn's digest is computed once, when
it is built, so fingerprints and summary checks never re-hash bodies.
"""

from __future__ import annotations

from ledgerfold._native import Conversation, Turn, fingerprint_turns, same_ordered_ids

__all__ = [
    "PROTECTION_REASONS",
    "ROLES",
    "Conversation",
    "Turn",
    "fingerprint_turns",
    "same_ordered_ids",
]

ROLES = ("system", "user", "assistant", "tool")
PROTECTION_REASONS = (
    "pending-confirmation",
    "active-constraint",
    "audit-evidence",
    "unverified-provenance",
)
