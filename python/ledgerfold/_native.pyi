"""Type stubs of the native module `ledgerfold._native` (Rust, PyO3)."""

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, final

__all__ = [
    "CHECK_REASONS",
    "INDEX_VERSION",
    "PACKED_MAX_SUMMARIES",
    "PACKED_NULL_LENGTH",
    "PACKED_SEPARATOR",
    "PACKED_SOURCE_ID_LENGTH_BITS",
    "PACKED_SOURCE_POSITION_BITS",
    "PACKED_SOURCE_POSITION_SHIFT",
    "PACKED_SOURCE_SUMMARY_SHIFT",
    "PACKED_TURN_KEY_PROTECTED",
    "PACKED_TURN_KEY_REASON",
    "PACKED_TURN_KEY_ROLE",
    "PACKED_TURN_KEY_SUMMARY",
    "PACKED_UNKNOWN_CODE",
    "PROTECTION_REASON_CODES",
    "ROLE_CODES",
    "Conversation",
    "SourceDigests",
    "Turn",
    "TurnItem",
    "assemble",
    "check",
    "fingerprint_digests",
    "fingerprint_turns",
    "index_passages",
    "plan",
    "query_terms",
    "revalidate_columns",
    "revalidate_flat",
    "same_ordered_ids",
    "source_fingerprint",
    "starts_with_ids",
    "unit_roots",
    "unsendable",
]

#: SPEC §3's codes by name, read-only, in code order.
ROLE_CODES: Mapping[str, int]
PROTECTION_REASON_CODES: Mapping[str, int]
#: The reasons `check` reports, in the order it checks them.
CHECK_REASONS: tuple[str, ...]

# The packed revalidation format (`ledgerfold_core::columns::format`): the separator of list
# entries and the length of a NULL text value; a turn key's multipliers (summary index, then
# one decimal digit each for role, protection flag and reason) and the digit of a value no
# valid turn has; a source key's shifts and widths; how many summaries one batch may name.
PACKED_SEPARATOR: str
PACKED_NULL_LENGTH: int
PACKED_TURN_KEY_SUMMARY: int
PACKED_TURN_KEY_ROLE: int
PACKED_TURN_KEY_PROTECTED: int
PACKED_TURN_KEY_REASON: int
PACKED_UNKNOWN_CODE: int
PACKED_SOURCE_SUMMARY_SHIFT: int
PACKED_SOURCE_POSITION_SHIFT: int
PACKED_SOURCE_POSITION_BITS: int
PACKED_SOURCE_ID_LENGTH_BITS: int
PACKED_MAX_SUMMARIES: int
#: `(id, sequence, role, body, protected, protection_reason, group, meta_json, digest)`.
_StoredRow = tuple[str, int, str, str, bool | int, str | None, str | None, str | None, bytes]

@final
class Turn:
    """An immutable ledger turn (SPEC §2); its 32-byte digest is computed once."""

    def __new__(
        cls,
        id: str,
        sequence: int,
        role: str,
        body: str,
        *,
        protected: bool | None = None,
        protection_reason: str | None = None,
        group: str | None = None,
        meta: Mapping[str, str] | None = None,
    ) -> Turn: ...
    @classmethod
    def _from_fields(
        cls,
        id: str,
        sequence: int,
        role: str,
        body: str,
        protected: bool,
        protection_reason: str | None,
        group: str | None,
        meta: Mapping[str, str] | None,
    ) -> Turn: ...
    @property
    def id(self) -> str: ...
    @property
    def sequence(self) -> int: ...
    @property
    def role(self) -> str: ...
    @property
    def body(self) -> str: ...
    @property
    def protected(self) -> bool: ...
    @property
    def protection_reason(self) -> str | None: ...
    @property
    def group(self) -> str | None: ...
    @property
    def meta(self) -> dict[str, str] | None: ...
    @property
    def digest(self) -> bytes: ...
    def encoding(self) -> bytes: ...
    def replace(self, **changes: Any) -> Turn: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __reduce__(self) -> tuple[Any, ...]: ...
    def __copy__(self) -> Turn: ...
    def __deepcopy__(self, memo: Any, /) -> Turn: ...

@final
class Conversation:
    """An immutable snapshot: turns in ascending sequence, O(1) lookup by ID."""

    def __new__(cls, id: str, revision: int, turns: Iterable[Turn]) -> Conversation: ...
    # Rows as the store reads them, each stored digest trusted (not recomputed).
    @classmethod
    def _from_rows(cls, id: str, revision: int, rows: Iterable[_StoredRow]) -> Conversation: ...
    @property
    def id(self) -> str: ...
    @property
    def revision(self) -> int: ...
    @property
    def turns(self) -> tuple[Turn, ...]: ...
    @property
    def turn_ids(self) -> tuple[str, ...]: ...
    def get(self, turn_id: str) -> Turn | None: ...
    def index_of(self, turn_id: str) -> int | None: ...
    def __contains__(self, key: object, /) -> bool: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[Turn]: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __reduce__(self) -> tuple[Any, ...]: ...

@final
class TurnItem:
    """A raw turn in an assembled context."""

    def __new__(
        cls, id: str, role: str, text: str, sequence: int, meta: Mapping[str, str] | None = None
    ) -> TurnItem: ...
    @property
    def kind(self) -> str: ...
    @property
    def id(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def sequence(self) -> int: ...
    @property
    def meta(self) -> dict[str, str] | None: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __reduce__(self) -> tuple[Any, ...]: ...

def fingerprint_turns(turns: Iterable[Turn]) -> str: ...
def fingerprint_digests(digests: bytes, more: bytes | None = None) -> str: ...

@final
class SourceDigests:
    """The fingerprint state of source digests: extended in O(more + log count)."""

    def __new__(cls, digests: bytes | None = None) -> SourceDigests: ...
    def fingerprint(self, more: bytes | None = None) -> str: ...
    def extended(self, more: bytes) -> SourceDigests: ...
    def __len__(self) -> int: ...

def same_ordered_ids(a: Iterable[str], b: Iterable[str]) -> bool: ...
def starts_with_ids(ids: tuple[str, ...], prefix: tuple[str, ...]) -> bool: ...
def plan(
    conversation: Conversation, keep_tail: int, pinned: Iterable[str] | None = None
) -> tuple[tuple[str, ...], tuple[str, ...], int]: ...
def unit_roots(turns: Iterable[Turn]) -> list[int]: ...
def unsendable(items: Iterable[object]) -> list[int]: ...
def check(
    summary: Any,
    conversation: Conversation,
    policy_version: str,
    sealed: dict[str, bytes] | None = None,
) -> tuple[bool, str | None, str | None]: ...
def assemble(
    conversation: Conversation,
    summary: Any | None,
    policy_version: str,
    preserved_ids: Iterable[str] | None,
    sealed: dict[str, bytes] | None = None,
) -> tuple[tuple[TurnItem, ...], int | None, int | None, str | None, str | None]: ...
def source_fingerprint(
    source_ids: Iterable[str], turns: Conversation | Iterable[Turn]
) -> str | None: ...
def revalidate_flat(
    rows: Iterable[tuple[Any, ...]],
    sources: Iterable[tuple[int, str | bytes]],
    summaries: Iterable[tuple[str, int, str, str]],
    threads: int | None = None,
    *,
    per_summary: bool = False,
) -> tuple[list[tuple[Any, ...]], int, int]: ...
def revalidate_columns(
    turn_columns: tuple[bytes | str | None, ...],
    source_columns: tuple[bytes | str | None, ...],
    summaries: Iterable[tuple[str, int, str, str]],
    threads: int | None = None,
) -> tuple[list[tuple[Any, ...]], int, int] | None: ...

#: The segmenter's version (SPEC §16.5), recorded with the search index.
INDEX_VERSION: int

def index_passages(body: str) -> list[tuple[int, int, str]]: ...
def query_terms(query: str) -> list[str]: ...
