"""The package reproduces every golden vector of fingerprint v1, byte for byte (SPEC §3)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from ledgerfold import Turn, fingerprint_turns


def build(turn: dict[str, Any]) -> Turn:
    return Turn(
        turn["id"],
        turn["sequence"],
        turn["role"],
        turn["body"],
        protected=turn["protected"],
        protection_reason=turn["protection_reason"],
        group=turn["group"],
        meta=turn["meta"],
    )


def test_every_golden_case_matches(vectors: dict[str, Any]) -> None:
    assert vectors["format"] == "ledgerfold fingerprint v1"
    assert len(vectors["cases"]) >= 14
    for case in vectors["cases"]:
        turns = [build(t) for t in case["turns"]]
        for turn, expected in zip(turns, case["turns"], strict=True):
            assert turn.encoding().hex() == expected["encoding_hex"], case["name"]
            assert turn.digest.hex() == expected["digest_hex"], case["name"]
        assert fingerprint_turns(turns) == case["fingerprint"], case["name"]
        assert fingerprint_turns(tuple(turns)) == case["fingerprint"], case["name"]
        assert fingerprint_turns(iter(turns)) == case["fingerprint"], case["name"]


def test_swapping_or_unprotecting_changes_the_fingerprint(vectors: dict[str, Any]) -> None:
    by_name = {case["name"]: case["fingerprint"] for case in vectors["cases"]}
    assert by_name["three-turns"] != by_name["three-turns-swapped"]
    assert by_name["three-turns"] != by_name["three-turns-protect-flag-changed"]


SCRIPT = """
import json, sys
from ledgerfold import Turn, fingerprint_turns
cases = json.load(open(sys.argv[1], encoding="utf-8"))["cases"]
out = []
for case in cases:
    turns = [Turn(t["id"], t["sequence"], t["role"], t["body"], protected=t["protected"],
                  protection_reason=t["protection_reason"], group=t["group"], meta=t["meta"])
             for t in case["turns"]]
    out.append(fingerprint_turns(turns))
print(json.dumps(out))
"""


def test_fingerprints_identical_across_processes(vectors: dict[str, Any]) -> None:
    vectors_path = Path(__file__).resolve().parent / "data" / "fingerprint-v1-vectors.json"
    runs = []
    for seed in ("0", "1", "random"):
        result = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(vectors_path)],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
        )
        runs.append(result.stdout)
    assert runs[0] == runs[1] == runs[2]
    assert runs[0].strip() == str([c["fingerprint"] for c in vectors["cases"]]).replace("'", '"')
