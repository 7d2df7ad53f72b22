"""The ledger's reads of `SQLiteStore` (SPEC §12, §16.1, §17.6, §17.8): the live ledger, turns
by ID, the IDs ever written, the operator's counts, the conversations, recall's search and the
purge boundary; each one read transaction. `SQLiteStore` holds one `LedgerReads` and its public
methods of these names delegate to it; the queries are in `ledger`, `stats` and `search`."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ledgerfold import _validate
from ledgerfold._context import HistoryBoundary
from ledgerfold._model import Conversation, Turn
from ledgerfold._search_hit import SearchHit
from ledgerfold.store import _ledger as ledger
from ledgerfold.store import _search as search_queries
from ledgerfold.store._database import Transaction
from ledgerfold.store._stats import StoreStats, read_stats

__all__ = ["LedgerReads"]

_log = logging.getLogger("ledgerfold.store")


class LedgerReads:
    """The ledger's read methods over the store's transaction (the store's docstrings
    describe them)."""

    def __init__(self, transaction: Transaction) -> None:
        self._transaction = transaction

    def load(self, conversation_id: str) -> Conversation:
        conversation_id = _validate.identifier("conversation_id", conversation_id)
        with self._transaction(write=False, operation="load") as conn:
            return ledger.load(conn, conversation_id)

    def get_turns(self, conversation_id: str, turn_ids: Iterable[str]) -> list[Turn]:
        conversation_id = _validate.identifier("conversation_id", conversation_id)
        wanted = _validate.identifiers("turn_ids", turn_ids)
        with self._transaction(write=False, operation="get_turns") as conn:
            return ledger.get_turns(conn, conversation_id, wanted)

    def known_ids(self, conversation_id: str, ids: Iterable[str]) -> set[str]:
        conversation_id = _validate.identifier("conversation_id", conversation_id)
        wanted = _validate.identifiers("ids", ids)
        if not wanted:
            return set()
        with self._transaction(write=False, operation="known_ids") as conn:
            return ledger.known_ids(conn, conversation_id, wanted)

    def stats(self, conversation_id: str | None = None) -> StoreStats:
        if conversation_id is not None:
            conversation_id = _validate.identifier("conversation_id", conversation_id)
        with self._transaction(write=False, operation="stats") as conn:
            return read_stats(conn, conversation_id)

    def conversation_ids(self) -> list[str]:
        with self._transaction(write=False, operation="conversation_ids") as conn:
            return [row[0] for row in conn.execute("SELECT id FROM conversations ORDER BY id")]

    def search(
        self, conversation_id: str, query: str, *, limit: int = 5, scope: str = "covered"
    ) -> list[SearchHit]:
        conversation_id = _validate.identifier("conversation_id", conversation_id)
        query, limit, scope = search_queries.check_args(query, limit, scope)
        with self._transaction(write=False, operation="search") as conn:
            hits = search_queries.search(conn, conversation_id, query, limit, scope)
        # Counts only: the query and the passages are never logged.
        _log.debug(
            "searched: conversation=%s scope=%s limit=%d hits=%d",
            conversation_id,
            scope,
            limit,
            len(hits),
        )
        return hits

    def history_boundary(self, conversation_id: str) -> HistoryBoundary | None:
        conversation_id = _validate.identifier("conversation_id", conversation_id)
        with self._transaction(write=False, operation="history_boundary") as conn:
            return ledger.boundary(conn, conversation_id)
