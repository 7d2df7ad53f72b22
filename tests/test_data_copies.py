"""The repository stands alone: its tests read the golden vectors and the real transcripts
from tests/data. Where the project's shared/ folder sits beside the checkout, the copies must
be byte-identical to it (a spec change that updates the vectors must reach the repository)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"
SHARED = Path(__file__).resolve().parents[2] / "shared"

COPIES = [
    ("fingerprint-v1-vectors.json", "spec/fingerprint-v1-vectors.json"),
    *(
        (f"transcripts/{name}", f"data/{name}")
        for name in (
            "tau_bench.jsonl",
            "openhands.jsonl",
            "swe_agent.jsonl",
            "docent_inspect.jsonl",
            "README.md",
            "stats.json",
        )
    ),
]


def test_the_repository_holds_what_its_tests_read() -> None:
    for ours, _ in COPIES:
        assert (DATA / ours).is_file(), ours
    with (DATA / "fingerprint-v1-vectors.json").open(encoding="utf-8") as handle:
        assert json.load(handle)["format"] == "ledgerfold fingerprint v1"
    stats = json.loads((DATA / "transcripts" / "stats.json").read_text(encoding="utf-8"))
    conversations = 0
    for path in sorted((DATA / "transcripts").glob("*.jsonl")):
        with path.open(encoding="utf-8") as lines:
            conversations += sum(1 for line in lines if line.strip())
    assert conversations == 244, stats


@pytest.mark.parametrize(("ours", "theirs"), COPIES, ids=[ours for ours, _ in COPIES])
def test_copies_equal_the_shared_originals(ours: str, theirs: str) -> None:
    original = SHARED / theirs
    if not SHARED.is_dir():
        pytest.skip("no shared/ beside the checkout: the repository's copies are the reference")
    assert (DATA / ours).read_bytes() == original.read_bytes(), f"{ours} differs from {original}"
