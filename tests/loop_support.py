"""What the black-box agent-loop tests share: real transcript material (tau-bench and OpenHands
bodies, whole tau-bench sessions with their tool-call IDs made unique), a recording summarizer,
and readers of the ledger and of chat messages."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ledgerfold import SQLiteStore, SummaryRequest, Turn, fingerprint_turns
from ledgerfold._transcripts import Transcript, iter_transcripts

SHARED = Path(__file__).resolve().parents[1] / "tests" / "data"
DATA = SHARED / "transcripts"
CONV = "agent"


def words(text: str) -> int:
    """A token counter unlike the default one, so tests tell which counter was used."""
    return len(text.split())


# -- real transcript material ---------------------------------------------------------------


def transcripts(name: str) -> Iterator[Transcript]:
    yield from iter_transcripts(DATA / name)


def real_bodies(count: int) -> list[str]:
    """`count` real user/assistant bodies (tau-bench, then OpenHands), in file order."""
    bodies: list[str] = []
    for name in ("tau_bench.jsonl", "openhands.jsonl"):
        for transcript in transcripts(name):
            for turn in transcript.turns:
                if turn.role in ("user", "assistant") and turn.body.strip() and not turn.meta:
                    bodies.append(turn.body)
                    if len(bodies) == count:
                        return bodies
    raise AssertionError("not enough real bodies")


def spec_of(turn: Turn) -> dict[str, Any]:
    return {
        "id": turn.id,
        "role": turn.role,
        "body": turn.body,
        "group": turn.group,
        "meta": turn.meta,
    }


class Recorder:
    """A summarizer that keeps every request and answers with the sequences it saw."""

    def __init__(self, fail: bool = False) -> None:
        self.requests: list[SummaryRequest] = []
        self.fail = fail

    def __call__(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        if self.fail:
            raise RuntimeError("model unavailable")
        return "facts of " + ",".join(str(turn.sequence) for turn in request.turns)


def talk(store: SQLiteStore, bodies: list[str], start: int, count: int, conv: str = CONV) -> None:
    for index in range(start, start + count):
        role = "user" if index % 2 == 0 else "assistant"
        store.append(conv, role, bodies[index % len(bodies)] + f" #{index}", id=f"t{index}")


def ledger_map(store: SQLiteStore, conv: str = CONV) -> dict[str, Turn]:
    return {turn.id: turn for turn in store.load(conv).turns}


def fingerprint_of(store: SQLiteStore, source_ids: tuple[str, ...], conv: str = CONV) -> str:
    turns = ledger_map(store, conv)
    return fingerprint_turns([turns[turn_id] for turn_id in source_ids])


def orphan_tool_messages(messages: list[dict[str, Any]]) -> list[str]:
    """Tool messages whose call no earlier assistant message makes (a provider rejects them)."""
    called: set[str] = set()
    orphans: list[str] = []
    for message in messages:
        for call in message.get("tool_calls") or ():
            called.add(call["id"])
        if message["role"] == "tool" and message.get("tool_call_id") not in called:
            orphans.append(str(message.get("tool_call_id")))
    return orphans
