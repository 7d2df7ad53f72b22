"""Shared fixtures: the repository's test data (tests/data: golden vectors, real transcripts),
turn builders, a fresh SQLite file store (`store`, on `db_path`) for the tests that need no
more, and the revalidation tests' ledger (`db`, a copy of `compacted_db`)."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledgerfold import SQLiteStore

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from ledgers import import_and_compact  # noqa: E402
from revalidate_support import POLICY  # noqa: E402

SHARED = Path(__file__).resolve().parents[1] / "tests" / "data"
VECTORS = SHARED / "fingerprint-v1-vectors.json"
DATA = SHARED / "transcripts"


def iter_raw_transcripts() -> Iterator[dict[str, Any]]:
    """Every conversation of tests/data/transcripts, read line by line (bodies contain U+2028)."""
    for path in sorted(DATA.glob("*.jsonl")):
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    yield json.loads(line)


@pytest.fixture(scope="session")
def vectors() -> dict[str, Any]:
    with VECTORS.open(encoding="utf-8") as handle:
        data: dict[str, Any] = json.load(handle)
    return data


@pytest.fixture(scope="session")
def raw_transcripts() -> list[dict[str, Any]]:
    return list(iter_raw_transcripts())


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[SQLiteStore]:
    with SQLiteStore(db_path) as opened:
        yield opened


@pytest.fixture(scope="session")
def compacted_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every real transcript imported and compacted once; tests work on copies."""
    path = tmp_path_factory.mktemp("revalidate") / "ledger.db"
    import_and_compact(path, POLICY)
    return path


@pytest.fixture
def db(compacted_db: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy.db"
    source = sqlite3.connect(compacted_db)
    target = sqlite3.connect(copy)
    source.backup(target)
    source.close()
    target.close()
    return copy
