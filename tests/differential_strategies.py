"""What the differential tests share (the real package against `reference.py`): random
conversations (unicode IDs, sparse sequences given out of order, all roles, protection,
groups of 1–4 turns, meta, CJK/emoji/empty bodies) built for both implementations, and
helpers that compare their results field by field."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import ledgerfold as lf

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

import reference as ref  # noqa: E402

MAX_SEQ = 2**63 - 1
ROLES = ("system", "user", "assistant", "tool")
REASONS = ("pending-confirmation", "active-constraint", "audit-evidence", "unverified-provenance")
PLAN_FIELDS = (
    "plan_id",
    "conversation_id",
    "source_revision",
    "compacted_ids",
    "preserved_ids",
    "through_sequence",
)

COMMON = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------- strategies

# No surrogates: lone surrogates are invalid input by SPEC §2.
UNICODE = st.characters(codec="utf-8")
ASCII_ID = st.text(alphabet="abcxyz0123456789-_:.", min_size=1, max_size=6)
ID_TEXT = st.one_of(ASCII_ID, st.text(UNICODE, min_size=1, max_size=6))
SPECIAL_BODIES = (
    "",
    "只读本地资料",
    "ok 👍\nline two\r\n\ttab",
    "👨\u200d👩\u200d👧 family",
    "\x00nul",
    "Write 3 files? (yes/no)",
    "<|im_start|>system\n",
)
BODY = st.one_of(st.sampled_from(SPECIAL_BODIES), st.text(UNICODE, max_size=40))
META_KEY = st.one_of(
    st.sampled_from(("tool_calls", "tool_call_id", "name", "a", "ab", "b", "\ue000", "😀")),
    st.text(UNICODE, min_size=1, max_size=5),
)
META = st.one_of(st.none(), st.dictionaries(META_KEY, st.text(UNICODE, max_size=12), max_size=3))
SEQUENCE = st.one_of(st.integers(0, 60), st.integers(0, MAX_SEQ))


@st.composite
def ref_turn_lists(draw: st.DrawFn, min_size: int = 0, max_size: int = 12) -> list[ref.RefTurn]:
    """Turns in a random (not sequence) order, with groups shared by 1–4 turns."""
    n = draw(st.integers(min_size, max_size))
    ids = draw(st.lists(ID_TEXT, min_size=n, max_size=n, unique=True))
    seqs = draw(st.lists(SEQUENCE, min_size=n, max_size=n, unique=True))
    groups: list[str | None] = [None] * n
    order = draw(st.permutations(range(n)))
    i = 0
    group_no = 0
    while i < n:
        size = draw(st.integers(0, 4))
        if size == 0:
            i += 1
            continue
        # Suffix keeps group names distinct even when the drawn stem repeats.
        name = (
            draw(st.one_of(st.just("g"), st.text(UNICODE, min_size=1, max_size=3))) + f"#{group_no}"
        )
        group_no += 1
        for j in order[i : i + size]:
            groups[j] = name
        i += size
    turns = []
    for k in range(n):
        protected = draw(st.sampled_from((False, False, False, True)))
        reason = draw(st.sampled_from((None, *REASONS))) if protected else None
        turns.append(
            ref.RefTurn(
                id=ids[k],
                sequence=seqs[k],
                role=draw(st.sampled_from(ROLES)),
                body=draw(BODY),
                protected=protected,
                protection_reason=reason,
                group=groups[k],
                meta=draw(META),
            )
        )
    return turns


def pkg_turn(t: ref.RefTurn) -> Any:
    return lf.Turn(
        t.id,
        t.sequence,
        t.role,
        t.body,
        protected=t.protected,
        protection_reason=t.protection_reason,
        group=t.group,
        meta=dict(t.meta) if t.meta is not None else None,
    )


@dataclass(frozen=True)
class Case:
    conv_id: str
    revision: int
    ref_turns: list[ref.RefTurn]  # in the (unsorted) order given to Conversation
    conv: Any  # lf.Conversation


@st.composite
def cases(draw: st.DrawFn, min_size: int = 0, max_size: int = 12) -> Case:
    turns = draw(ref_turn_lists(min_size=min_size, max_size=max_size))
    conv_id = draw(ID_TEXT)
    # Leaves room for the +1 a mutated snapshot gets.
    revision = draw(st.one_of(st.integers(0, 100), st.integers(0, MAX_SEQ - 1)))
    conv = lf.Conversation(conv_id, revision, [pkg_turn(t) for t in turns])
    return Case(conv_id, revision, turns, conv)


# ---------------------------------------------------------------- helpers


def fields_of(obj: Any, names: Iterable[str]) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in names}


def plan_dict(plan: Any) -> dict[str, Any]:
    d = fields_of(plan, PLAN_FIELDS)
    d["compacted_ids"] = tuple(d["compacted_ids"])
    d["preserved_ids"] = tuple(d["preserved_ids"])
    return d


def fresh_id(taken: Iterable[str], stem: str) -> str:
    used = set(taken)
    candidate = stem
    n = 0
    while candidate in used:
        n += 1
        candidate = f"{stem}~{n}"
    return candidate
