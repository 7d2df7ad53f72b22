"""The reference oracle must reproduce every fingerprint-v1 vector byte for byte."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

import reference as ref  # noqa: E402

VECTORS_PATH = _HERE / "data" / "fingerprint-v1-vectors.json"


def _load_cases() -> list[dict[str, Any]]:
    with VECTORS_PATH.open(encoding="utf-8") as fh:
        data = json.load(fh)
    assert data["format"] == "ledgerfold fingerprint v1"
    cases: list[dict[str, Any]] = data["cases"]
    return cases


CASES = _load_cases()


def _ref_turn(raw: dict[str, Any]) -> ref.RefTurn:
    return ref.RefTurn(
        id=raw["id"],
        sequence=raw["sequence"],
        role=raw["role"],
        body=raw["body"],
        protected=raw["protected"],
        protection_reason=raw["protection_reason"],
        group=raw["group"],
        meta=raw["meta"],
    )


def test_vectors_file_is_not_trivial() -> None:
    # Guards against silently checking an empty or truncated file.
    assert len(CASES) >= 10
    assert any(not c["turns"] for c in CASES), "expected the empty-list case"
    assert sum(len(c["turns"]) for c in CASES) >= 10


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_encoding_digest_and_fingerprint(case: dict[str, Any]) -> None:
    turns = [_ref_turn(raw) for raw in case["turns"]]
    for raw, turn in zip(case["turns"], turns, strict=True):
        assert ref.encode_turn(turn).hex() == raw["encoding_hex"]
        assert ref.turn_digest(turn).hex() == raw["digest_hex"]
    assert ref.fingerprint_turns(turns) == case["fingerprint"]


def test_fingerprint_is_order_sensitive() -> None:
    by_name = {c["name"]: c for c in CASES}
    straight = [_ref_turn(r) for r in by_name["three-turns"]["turns"]]
    swapped = [_ref_turn(r) for r in by_name["three-turns-swapped"]["turns"]]
    assert ref.fingerprint_turns(straight) != ref.fingerprint_turns(swapped)
    assert ref.fingerprint_turns(list(reversed(swapped))) != ref.fingerprint_turns(straight)
