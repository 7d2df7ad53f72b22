"""Rows of the bad-input table (`bad_input_table.py`): orchestration (SPEC §13, §15):
`Compactor`, policies, summarizers, integrations."""

from __future__ import annotations

import ledgerfold as lf
from bad_input_support import (
    BUDGET,
    CONVERSATION_ID,
    INVALID,
    POLICY,
    BadInput,
    _middleware,
    _session,
    compactor,
    on_store,
    row,
)
from ledgerfold.tokens import LangChainCounter

ROWS: tuple[BadInput, ...] = (
    # ---- orchestration (SPEC §13)
    row(
        "CompactionPolicy: blank version",
        "CompactionPolicy('')",
        lambda: lf.CompactionPolicy(""),
        INVALID,
        "version",
    ),
    row(
        "CompactionPolicy: keep_tail 0",
        "CompactionPolicy('v', keep_tail=0)",
        lambda: lf.CompactionPolicy(POLICY, keep_tail=0),
        INVALID,
        "keep_tail",
    ),
    row(
        "CompactionPolicy: keep_tail bool",
        "CompactionPolicy('v', keep_tail=True)",
        lambda: lf.CompactionPolicy(POLICY, keep_tail=True),
        INVALID,
        "keep_tail",
    ),
    row(
        "CompactionPolicy: trigger_tokens 0",
        "CompactionPolicy('v', trigger_tokens=0)",
        lambda: lf.CompactionPolicy(POLICY, trigger_tokens=0),
        INVALID,
        "trigger_tokens",
    ),
    row(
        "CompactionPolicy: token_counter not callable",
        "CompactionPolicy('v', token_counter=5)",
        lambda: lf.CompactionPolicy(POLICY, token_counter=5),  # type: ignore[arg-type]
        INVALID,
        "token_counter",
    ),
    row(
        "LangChainCounter: counter not callable",
        "LangChainCounter(5)",
        lambda: LangChainCounter(5),  # type: ignore[arg-type]
        INVALID,
        "counter",
    ),
    row(
        "CompactionPolicy: keep_checkpoints negative",
        "CompactionPolicy('v', keep_checkpoints=-1)",
        lambda: lf.CompactionPolicy(POLICY, keep_checkpoints=-1),
        INVALID,
        "keep_checkpoints",
    ),
    row(
        "CompactionPolicy: keep_checkpoints None",
        "CompactionPolicy('v', keep_checkpoints=None)",
        lambda: lf.CompactionPolicy(POLICY, keep_checkpoints=None),  # type: ignore[arg-type]
        INVALID,
        "keep_checkpoints",
    ),
    row(
        "SQLiteStore.prune_versions: keep_checkpoints negative",
        "store.prune_versions('c', keep=4, keep_checkpoints=-1)",
        on_store(lambda store: store.prune_versions(CONVERSATION_ID, keep=4, keep_checkpoints=-1)),
        INVALID,
        "keep_checkpoints",
    ),
    row(
        "Compactor: policy of the wrong type",
        "Compactor(store, 'v')",
        on_store(lambda store: lf.Compactor(store, POLICY)),  # type: ignore[arg-type]
        INVALID,
        "policy",
    ),
    row(
        "Compactor: summarizer not callable",
        "Compactor(store, policy, 'summarize')",
        on_store(lambda store: lf.Compactor(store, lf.CompactionPolicy(POLICY), "x")),  # type: ignore[arg-type]
        INVALID,
        "summarizer",
    ),
    row(
        "Compactor: on_event not callable",
        "Compactor(store, policy, on_event=1)",
        on_store(lambda store: lf.Compactor(store, lf.CompactionPolicy(POLICY), on_event=1)),  # type: ignore[arg-type]
        INVALID,
        "on_event",
    ),
    row(
        "SQLiteStore: on_event not callable",
        "SQLiteStore(on_event='hook')",
        lambda: lf.SQLiteStore(on_event="hook"),  # type: ignore[arg-type]
        INVALID,
        "on_event",
    ),
    row(
        "LedgerfoldMiddleware: on_event not callable",
        "LedgerfoldMiddleware(store, 'c', on_event=1)",
        on_store(lambda store: _middleware(store, "c", on_event=1)),
        INVALID,
        "on_event",
    ),
    row(
        "LedgerfoldSession: on_event not callable",
        "LedgerfoldSession('c', store=store, on_event='hook')",
        on_store(lambda store: _session(store, on_event="hook")),
        INVALID,
        "on_event",
    ),
    row(
        "Compactor: timeout not > 0",
        "Compactor(store, policy, timeout=0)",
        on_store(lambda store: lf.Compactor(store, lf.CompactionPolicy(POLICY), timeout=0)),
        INVALID,
        "timeout",
    ),
    row(
        "Compactor: timeout infinite",
        "Compactor(store, policy, timeout=float('inf'))",
        on_store(
            lambda store: lf.Compactor(store, lf.CompactionPolicy(POLICY), timeout=float("inf"))
        ),
        INVALID,
        "timeout",
    ),
    row(
        "CompactionPolicy: retain_days NaN",
        "CompactionPolicy('v', retain_days=float('nan'))",
        lambda: lf.CompactionPolicy(POLICY, retain_days=float("nan")),
        INVALID,
        "retain_days",
    ),
    row(
        "apply_retention: retain_days negative",
        "store.apply_retention('c', retain_days=-1)",
        on_store(lambda store: store.apply_retention("c", retain_days=-1)),
        INVALID,
        "retain_days",
    ),
    row(
        "prune_versions: older_than infinite",
        "store.prune_versions(older_than=float('inf'))",
        on_store(lambda store: store.prune_versions(older_than=float("inf"))),
        INVALID,
        "older_than",
    ),
    row(
        "Compactor.compact: blank conversation_id",
        "compactor.compact('')",
        on_store(lambda store: compactor(store).compact("")),
        INVALID,
        "conversation_id",
    ),
    row(
        "Compactor.context: max_tokens 0",
        "compactor.context('c', max_tokens=0)",
        on_store(lambda store: compactor(store).context("c", max_tokens=0)),
        INVALID,
        "max_tokens",
    ),
    row(
        "Compactor.context: token_counter returns a non-int",
        "CompactionPolicy('v', token_counter=lambda text: -1)",
        on_store(lambda store: compactor(store, token_counter=lambda text: -1).context("c", 10)),
        INVALID,
        "token_counter",
    ),
    row(
        "Compactor.context: budget too small",
        "compactor.context('c', max_tokens=10)",
        on_store(lambda store: compactor(store).context("c", max_tokens=10)),
        BUDGET,
        None,
    ),
    row(
        "ExtractiveSummarizer: max_chars_per_turn too small",
        "ExtractiveSummarizer(max_chars_per_turn=2)",
        lambda: lf.ExtractiveSummarizer(max_chars_per_turn=2),
        INVALID,
        "max_chars_per_turn",
    ),
)
