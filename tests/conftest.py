"""Shared fixtures: the repository's test data (tests/data: golden vectors, real transcripts),
turn builders, and a fresh SQLite file store (`store`, on `db_path`) for the tests that
need no more."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledgerfold.store import SQLiteStore

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
