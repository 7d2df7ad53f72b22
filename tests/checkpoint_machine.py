"""The model and the recording summarizer of `test_checkpoints_machine.py` (SPEC §15.1,
§15.4, §15.5, §17.5): what each turn said in each of its versions, which of those texts may
still be anywhere in the file, and what every summary text the summarizer wrote was built
from. The oracle never reads the store's index or caches: a summary's text literally holds
the body tokens it was built from, so an erased body is found in the file by its token."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import ledgerfold as lf

CONV = "c"
PV = "v1"


@dataclass
class ModelTurn:
    id: str
    sequence: int
    role: str
    tokens: list[str] = field(default_factory=list)  # every body it had, oldest first
    state: str = "live"  # live, retracted, erased or purged
    protected: bool = False

    @property
    def token(self) -> str:
        return self.tokens[-1]


def body(token: str) -> str:
    return f"{token} said something"


@dataclass
class Model:
    turns: dict[str, ModelTurn] = field(default_factory=dict)
    written: int = 0
    versions: int = 0

    def new_token(self, turn_id: str) -> str:
        self.versions += 1
        return f"sntl{turn_id}x{self.versions}q"

    def live(self) -> list[ModelTurn]:
        return sorted(
            (t for t in self.turns.values() if t.state == "live"), key=lambda t: t.sequence
        )

    def sound(self, turn_id: str, token: str) -> bool:
        """Whether a text built from `token` as `turn_id`'s body may still be used: the
        turn says it now, or a purge sealed it saying it."""
        turn = self.turns.get(turn_id)
        if turn is None:
            return False
        if turn.state == "live":
            return turn.token == token and not turn.protected
        return turn.state == "purged" and turn.token == token


def shown(text: str, said: str) -> bool:
    """Whether a request's text of a turn is what it says now: all of it, or its head and
    tail around the cut a turn over the budget gets (SPEC §15.8), or a head alone."""
    if said in text:
        return True
    pieces = re.split(r"\n\[\.\.\. \d+ characters cut \.\.\.\]\n", text)
    return (
        len(pieces) <= 2
        and said.startswith(pieces[0])
        and said.endswith(pieces[-1] if len(pieces) == 2 else "")
    )


class Recorder:
    """A summarizer recording what it was given. Each text it returns names its own
    derivation: `S<k>:` then every `turn=token` it was built from, so the file can be
    searched for an erased body's token and the oracle knows what each text saw."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.derived: dict[str, dict[str, str]] = {}
        self.parents: dict[str, str | None] = {}  # text -> the previous text it extended
        self.violations: list[str] = []
        self.mode = "ok"
        self.meddle: object = None  # a callable run inside the call (another connection)

    def __call__(self, request: lf.SummaryRequest) -> str:
        derived: dict[str, str] = {}
        if request.previous_summary is not None:
            previous = self.derived.get(request.previous_summary)
            if previous is None:
                self.violations.append("previous text not written by this summarizer")
                previous = {}
            for turn_id, token in previous.items():
                if not self.model.sound(turn_id, token):
                    self.violations.append(f"previous text saw {turn_id}={token}")
            derived.update(previous)
        for item in request.turns:
            turn = self.model.turns.get(item.id)
            if turn is None or turn.state != "live" or not shown(item.text, body(turn.token)):
                self.violations.append(f"request turn {item.id} is not its current text")
                continue
            if turn.protected:
                self.violations.append(f"request turn {item.id} is protected")
            if item.id in derived:
                self.violations.append(f"request turn {item.id} already covered")
            derived[item.id] = turn.token
        meddle, self.meddle = self.meddle, None
        if callable(meddle):
            meddle()
        if self.mode == "raise":
            raise RuntimeError("summarizer down")
        if self.mode == "blank":
            return "   "
        text = f"S{len(self.derived)}: " + " ".join(
            f"{turn_id}={token}" for turn_id, token in sorted(derived.items())
        )
        if self.mode == "long":  # over max_summary_tokens x 1.25: never accepted (SPEC §17.4)
            text += " pad" * 20_000
        self.derived[text] = derived
        self.parents[text] = request.previous_summary
        return text

    def ancestors(self, text: str) -> list[str]:
        """The texts `text` was built on, newest first (this summarizer's own record)."""
        found: list[str] = []
        parent = self.parents.get(text)
        while parent is not None and parent not in found:
            found.append(parent)
            parent = self.parents.get(parent)
        return found


def file_texts(path: Path) -> list[tuple[str, str]]:
    """Every text and blob cell of every table of the file, as `(table, text)`."""
    found: list[tuple[str, str]] = []
    with sqlite3.connect(path) as db:
        tables = [
            row[0]
            for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not str(row[0]).startswith("sqlite_")
        ]
        for table in tables:
            try:
                rows = db.execute(f'SELECT * FROM "{table}"').fetchall()
            except sqlite3.DatabaseError:  # a virtual table's module not loaded here
                continue
            for row in rows:
                for cell in row:
                    if isinstance(cell, str):
                        found.append((table, cell))
                    elif isinstance(cell, bytes):
                        found.append((table, cell.decode("utf-8", "replace")))
    return found
