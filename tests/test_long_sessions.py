"""The agent loop (SPEC §15), checked black-box through the public API on real transcripts and a
real SQLite file. ~330 real exchanges in one session. After every step no context carries
summary text derived from a turn whose content has since changed, and no tool message is sent
without its call; over the session each turn is summarised about once, no request exceeds its
budget and the file stays bounded by the ledger."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

from ledgerfold import (
    CompactionPolicy,
    Compactor,
    ExtractiveSummarizer,
    SQLiteStore,
    SummaryEnvelope,
    SummaryItem,
    SummaryRequest,
    Turn,
    to_chat_messages,
)
from ledgerfold.tokens import approx_tokens

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from loop_support import (  # noqa: E402
    CONV,
    fingerprint_of,
    ledger_map,
    orphan_tool_messages,
    spec_of,
    transcripts,
)


def session_turns(exchanges: int) -> list[dict[str, Any]]:
    """Real tau-bench conversations one after another, with only the first system prompt,
    until `exchanges` user turns. Trials of one task reuse tool-call IDs, so each
    conversation's call IDs get its number as a prefix (in meta, groups and body lines)."""
    specs: list[dict[str, Any]] = []
    users = 0
    for number, transcript in enumerate(transcripts("tau_bench.jsonl")):
        for turn in transcript.turns:
            if turn.role == "system" and specs:
                continue
            specs.append(_renamed_calls(spec_of(turn), f"n{number}-"))
            users += turn.role == "user"
        if users >= exchanges:
            return specs
    raise AssertionError("not enough transcripts")


def _renamed_calls(spec: dict[str, Any], prefix: str) -> dict[str, Any]:
    meta = dict(spec["meta"] or {})
    if "tool_calls" in meta:
        calls = json.loads(meta["tool_calls"])
        for call in calls:
            call["id"] = prefix + call["id"]
        meta["tool_calls"] = json.dumps(calls)
    if "tool_call_ids" in meta:
        meta["tool_call_ids"] = json.dumps([prefix + i for i in json.loads(meta["tool_call_ids"])])
    if "tool_call_id" in meta:
        meta["tool_call_id"] = prefix + meta["tool_call_id"]
    lines = []
    for line in spec["body"].split("\n"):
        if line.startswith('{"tool_call":'):
            line_call = json.loads(line)
            line_call["tool_call"]["id"] = prefix + line_call["tool_call"]["id"]
            line = json.dumps(line_call)
        lines.append(line)
    group = spec["group"]
    return {
        **spec,
        "body": "\n".join(lines),
        "meta": meta or None,
        "group": None if group is None else f"{prefix}{group}",
    }


# -- long real sessions -----------------------------------------------------------------------


class SoundnessModel:
    """A summarizer (the real extractive one inside) that records what each summary's text was
    derived from: the ledger turns of its request plus, when it extends one, everything the
    previous summary's text was derived from."""

    def __init__(self, store: SQLiteStore, rng: random.Random) -> None:
        self.store = store
        self.rng = rng
        self.derived: dict[str, dict[str, Turn]] = {}
        self.pending: dict[str, Turn] | None = None
        self.expect_parent: str | None = None
        self.requests: list[tuple[SummaryRequest, CompactionPolicy]] = []
        self.policy = CompactionPolicy("v1")
        self.fail_next = False
        self.race_next = False

    def __call__(self, request: SummaryRequest) -> str:
        self.requests.append((request, self.policy))
        ledger = ledger_map(self.store)
        derived: dict[str, Turn] = {}
        self.expect_parent = None
        if request.previous_summary is not None:
            # The current summary, or after an edit the checkpoint it is rebuilt from
            # (SPEC §17.5): a kept version with that text and coverage.
            parents = [
                record.envelope
                for record in self.store.summary_history(CONV)
                if record.envelope is not None
                and record.status in ("current", "superseded")
                and record.envelope.text == request.previous_summary
                and len(record.envelope.source_ids) == request.covered_count
            ]
            assert parents
            parent = parents[-1]
            derived.update(self.derived[parent.id])
            self.expect_parent = parent.id
        else:
            assert request.covered_count == 0
        for item in request.turns:
            derived[item.id] = ledger[item.id]
        self.pending = derived
        if self.race_next:  # the user corrects a turn while the model is summarising
            self.race_next = False
            victim = self.rng.choice(sorted(derived))
            self.store.edit(CONV, victim, body=ledger[victim].body + " (corrected mid-call)")
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("model unavailable")
        return ExtractiveSummarizer()(request)

    def accepted(self, summary: SummaryEnvelope) -> None:
        assert self.pending is not None
        assert summary.parent_id == self.expect_parent
        assert set(summary.source_ids) == set(self.pending)
        self.derived[summary.id] = self.pending

    def check(self, assembled_items: tuple[Any, ...], ledger: dict[str, Turn]) -> None:
        for item in assembled_items:
            if isinstance(item, SummaryItem):
                for turn_id, seen in self.derived[item.id].items():
                    assert ledger.get(turn_id) == seen, (item.id, turn_id)


def test_a_long_real_session_never_serves_a_stale_fact_nor_an_orphan_tool_message(
    tmp_path: Path,
) -> None:
    """~330 real exchanges with edits (also mid-call), failures, late duplicate tool results,
    keep_tail changes and chunked folds; every step checked. (durability="normal", the
    phone setting, keeps the 1,300 single-turn appends fast.)"""
    with SQLiteStore(tmp_path / "ledger.db", durability="normal") as store:
        _long_session(store)


def _long_session(store: SQLiteStore) -> None:
    specs = session_turns(330)
    rng = random.Random(17)
    model = SoundnessModel(store, rng)
    policies = [
        CompactionPolicy(
            "v1",
            keep_tail=6,
            trigger_tokens=4000,
            max_input_tokens=3000,
            max_summary_tokens=400,
            keep_versions=3,
        ),
        CompactionPolicy(
            "v1",
            keep_tail=12,
            trigger_tokens=4000,
            max_input_tokens=3000,
            max_summary_tokens=400,
            keep_versions=3,
        ),
    ]
    statuses: dict[str, int] = {}
    for step, spec in enumerate(specs):
        store.append_many(CONV, [spec])
        policy = policies[(step // 400) % 2]
        model.policy = policy
        if step % 89 == 88:
            model.fail_next = True
        if step % 211 == 210:
            model.race_next = True
        if step % 157 == 156:  # the user corrects an older turn
            turns = store.load(CONV).turns
            victim = rng.choice(turns[: max(1, len(turns) - 6)])
            store.edit(CONV, victim.id, body=victim.body + " [edited]")
        if step % 97 == 96:  # a duplicate late result joins a summarised call's group
            summary = store.current_summary(CONV)
            ledger = ledger_map(store)
            calls = [
                ledger[i]
                for i in (summary.source_ids if summary else ())
                if i in ledger and "tool_calls" in (ledger[i].meta or {})
            ]
            if calls:
                call = json.loads((calls[-1].meta or {})["tool_calls"])[0]["id"]
                store.append_chat_messages(
                    CONV, [{"role": "tool", "tool_call_id": call, "content": "late again"}]
                )
        outcome = Compactor(store, policy, model).compact(CONV)
        statuses[outcome.status] = statuses.get(outcome.status, 0) + 1
        if outcome.accepted:
            assert outcome.summary is not None
            model.accepted(outcome.summary)
            assert outcome.summary.source_fingerprint == fingerprint_of(
                store, outcome.summary.source_ids
            )
        context = store.context(CONV, "v1")
        ledger = store.load(CONV).turns
        model.check(context.items, {turn.id: turn for turn in ledger})
        ids = [item.id for item in context.items]
        assert len(ids) == len(set(ids))
        newest = [turn.id for turn in ledger[-6:]]
        assert set(newest) <= set(ids)
        assert orphan_tool_messages(to_chat_messages(context)) == [], step
    for request, policy in model.requests:
        assert sum(policy.counter(turn.text) for turn in request.turns) <= policy.max_input_tokens
        assert request.max_summary_tokens == policy.max_summary_tokens
    assert statuses.get("accepted", 0) > 20 and statuses.get("failed", 0) >= 3
    # keep_versions, the current one, and the checkpoints (SPEC §17.5).
    assert len(store.summary_history(CONV)) <= 3 + 1 + policies[0].keep_checkpoints


def test_an_agent_session_stays_within_its_cost_bounds(tmp_path: Path) -> None:
    """The agent-session bounds on 330 real exchanges (trigger_tokens=4000): each turn
    summarised about once, no request over budget, compactions bounded by min_new_turns,
    derived data bounded by the ledger."""
    specs = session_turns(330)
    path = tmp_path / "ledger.db"
    requests: list[SummaryRequest] = []

    def counting(request: SummaryRequest) -> str:
        requests.append(request)
        return ExtractiveSummarizer()(request)

    policy = CompactionPolicy("v1", keep_tail=6, trigger_tokens=4000)
    with SQLiteStore(path) as store:
        compactor = Compactor(store, policy, counting)
        accepted = 0
        for spec in specs:
            store.append_many(CONV, [spec])
            accepted += compactor.compact(CONV).accepted
        context = compactor.context(CONV)
    appended = sum(approx_tokens(spec["body"]) for spec in specs)
    summarised = sum(approx_tokens(turn.text) for request in requests for turn in request.turns)
    assert summarised <= 1.5 * appended
    assert all(sum(approx_tokens(t.text) for t in r.turns) <= 8000 for r in requests)
    assert accepted == len(requests) <= len(specs) / policy.min_new_turns
    raw_bytes = sum(len(spec["body"].encode()) for spec in specs)
    assert path.stat().st_size <= 2 * raw_bytes + (1 << 20)
    assert context.fallback is None and context.summary is not None
