"""Rows of the bad-input table (`bad_input_table.py`): the values of SPEC §2–§8 (turns,
conversations, plans, envelopes, checks, assembly); chat messages and transcripts are
`bad_input_rows_chat.py`'s."""

from __future__ import annotations

import ledgerfold as lf
from bad_input_support import (
    DUPLICATE,
    INVALID,
    POLICY,
    SECRET_BODY,
    SECRET_SUMMARY,
    SURROGATE,
    BadInput,
    _middleware,
    _middleware_append_outside_a_run,
    _NoSearch,
    _run_recall,
    _session_recall_tool,
    _stored_tool_calls,
    conversation,
    envelope,
    on_store,
    plan,
    row,
    turn,
    turns,
)

ROWS: tuple[BadInput, ...] = (
    # ---- Turn (SPEC §2)
    row(
        "Turn: id of the wrong type", "Turn(1, 1, 'user', body)", lambda: turn(id=1), INVALID, "id"
    ),
    row("Turn: empty id", "Turn('', 1, 'user', body)", lambda: turn(id=""), INVALID, "id"),
    row(
        "Turn: lone surrogate in id",
        "Turn('\\ud800', 1, 'user', body)",
        lambda: turn(id=SURROGATE),
        INVALID,
        "id",
    ),
    row(
        "Turn: sequence of the wrong type",
        "Turn('t1', '1', 'user', body)",
        lambda: turn(sequence="1"),
        INVALID,
        "sequence",
    ),
    row(
        "Turn: bool for an int",
        "Turn('t1', True, 'user', body)",
        lambda: turn(sequence=True),
        INVALID,
        "sequence",
    ),
    row(
        "Turn: negative sequence",
        "Turn('t1', -1, 'user', body)",
        lambda: turn(sequence=-1),
        INVALID,
        "sequence",
    ),
    row(
        "Turn: sequence beyond i64",
        "Turn('t1', 2**63, 'user', body)",
        lambda: turn(sequence=2**63),
        INVALID,
        "sequence",
    ),
    row(
        "Turn: unknown role",
        "Turn('t1', 1, 'admin', body)",
        lambda: turn(role="admin"),
        INVALID,
        "role",
    ),
    row(
        "Turn: role of the wrong type",
        "Turn('t1', 1, 2, body)",
        lambda: turn(role=2),
        INVALID,
        "role",
    ),
    row(
        "Turn: body of the wrong type",
        "Turn('t1', 1, 'user', None)",
        lambda: turn(body=None),
        INVALID,
        "body",
    ),
    row(
        "Turn: lone surrogate in body",
        "Turn('t1', 1, 'user', body + '\\ud800')",
        lambda: turn(body=SECRET_BODY + SURROGATE),
        INVALID,
        "body",
    ),
    row(
        "Turn: protected not a bool",
        "Turn(..., protected=1)",
        lambda: turn(protected=1),
        INVALID,
        "protected",
    ),
    row(
        "Turn: unknown protection reason",
        "Turn(..., protected=True, protection_reason='because')",
        lambda: turn(protected=True, protection_reason="because"),
        INVALID,
        "protection_reason",
    ),
    row(
        "Turn: protection reason without protected",
        "Turn(..., protection_reason='audit-evidence')",
        lambda: turn(protection_reason="audit-evidence"),
        INVALID,
        "protection_reason",
    ),
    row("Turn: empty group", "Turn(..., group='')", lambda: turn(group=""), INVALID, "group"),
    row(
        "Turn: group of the wrong type",
        "Turn(..., group=3)",
        lambda: turn(group=3),
        INVALID,
        "group",
    ),
    row(
        "Turn: meta not a mapping",
        "Turn(..., meta=[('k', 'v')])",
        lambda: turn(meta=[("k", "v")]),
        INVALID,
        "meta",
    ),
    row(
        "Turn: non-str meta key",
        "Turn(..., meta={1: 'v'})",
        lambda: turn(meta={1: SECRET_BODY}),
        INVALID,
        "meta",
    ),
    row(
        "Turn: non-str meta value",
        "Turn(..., meta={'k': 1})",
        lambda: turn(meta={"k": 1}),
        INVALID,
        "meta",
    ),
    row(
        "Turn: empty meta key",
        "Turn(..., meta={'': 'v'})",
        lambda: turn(meta={"": SECRET_BODY}),
        INVALID,
        "meta",
    ),
    row(
        "Turn: lone surrogate in meta",
        "Turn(..., meta={'k': '\\ud800'})",
        lambda: turn(meta={"k": SECRET_BODY + SURROGATE}),
        INVALID,
        "meta",
    ),
    row(
        "Turn.replace: unknown field",
        "turn.replace(colour='red')",
        lambda: turn().replace(colour="red"),
        INVALID,
        "replace",
    ),
    row(
        "Turn.replace: invalid value",
        "turn.replace(sequence=-1)",
        lambda: turn().replace(sequence=-1),
        INVALID,
        "sequence",
    ),
    # ---- Conversation
    row(
        "Conversation: duplicate turn id",
        "Conversation('c', 0, [Turn('a', 1, ...), Turn('a', 2, ...)])",
        lambda: lf.Conversation("c", 0, [turn(id="a"), turn(id="a", sequence=2)]),
        DUPLICATE,
        "id",
    ),
    row(
        "Conversation: duplicate sequence",
        "Conversation('c', 0, [Turn('a', 1, ...), Turn('b', 1, ...)])",
        lambda: lf.Conversation("c", 0, [turn(id="a"), turn(id="b")]),
        INVALID,
        "sequence",
    ),
    row(
        "Conversation: empty id",
        "Conversation('', 0, turns)",
        lambda: lf.Conversation("", 0, turns()),
        INVALID,
        "id",
    ),
    row(
        "Conversation: negative revision",
        "Conversation('c', -1, turns)",
        lambda: lf.Conversation("c", -1, turns()),
        INVALID,
        "revision",
    ),
    row(
        "Conversation: turns that are not Turns",
        "Conversation('c', 0, [1])",
        lambda: lf.Conversation("c", 0, [1]),  # type: ignore[list-item]
        INVALID,
        "turns",
    ),
    row(
        "fingerprint_turns: not Turns",
        "fingerprint_turns([1])",
        lambda: lf.fingerprint_turns([1]),  # type: ignore[list-item]
        INVALID,
        "turns",
    ),
    row(
        "same_ordered_ids: not an iterable of str",
        "same_ordered_ids(5, [])",
        lambda: lf.same_ordered_ids(5, []),  # type: ignore[arg-type]
        INVALID,
        "a",
    ),
    # ---- plan_compaction (SPEC §4)
    row(
        "plan_compaction: keep_tail 0",
        "plan_compaction(conversation, 0, 'p')",
        lambda: lf.plan_compaction(conversation(), 0, "p"),
        INVALID,
        "keep_tail",
    ),
    row(
        "plan_compaction: keep_tail bool",
        "plan_compaction(conversation, True, 'p')",
        lambda: lf.plan_compaction(conversation(), True, "p"),
        INVALID,
        "keep_tail",
    ),
    row(
        "plan_compaction: keep_tail float",
        "plan_compaction(conversation, 2.0, 'p')",
        lambda: lf.plan_compaction(conversation(), 2.0, "p"),  # type: ignore[arg-type]
        INVALID,
        "keep_tail",
    ),
    row(
        "plan_compaction: blank plan_id",
        "plan_compaction(conversation, 2, ' ')",
        lambda: lf.plan_compaction(conversation(), 2, " "),
        INVALID,
        "plan_id",
    ),
    row(
        "plan_compaction: not a Conversation",
        "plan_compaction([turn], 2, 'p')",
        lambda: lf.plan_compaction(turns(), 2, "p"),  # type: ignore[arg-type]
        INVALID,
        "conversation",
    ),
    # ---- envelopes, checks, acceptance, assembly (SPEC §5–§8)
    row(
        "create_summary_envelope: plan of the wrong type",
        "create_summary_envelope('p', conversation, 's', 'v', text)",
        lambda: lf.create_summary_envelope("p", conversation(), "s", POLICY, SECRET_SUMMARY),  # type: ignore[arg-type]
        INVALID,
        "plan",
    ),
    row(
        "create_summary_envelope: turns of the wrong type",
        "create_summary_envelope(plan, 5, 's', 'v', text)",
        lambda: lf.create_summary_envelope(plan(), 5, "s", POLICY, SECRET_SUMMARY),  # type: ignore[arg-type]
        INVALID,
        "turns",
    ),
    row(
        "create_summary_envelope: blank summary_id",
        "create_summary_envelope(plan, turns, '', 'v', text)",
        lambda: lf.create_summary_envelope(plan(), conversation(), "", POLICY, SECRET_SUMMARY),
        INVALID,
        "summary_id",
    ),
    row(
        "create_summary_envelope: text of the wrong type",
        "create_summary_envelope(plan, turns, 's', 'v', 5)",
        lambda: lf.create_summary_envelope(plan(), conversation(), "s", POLICY, 5),  # type: ignore[arg-type]
        INVALID,
        "text",
    ),
    row(
        "create_summary_envelope: lone surrogate in text",
        "create_summary_envelope(plan, turns, 's', 'v', text + '\\ud800')",
        lambda: lf.create_summary_envelope(
            plan(), conversation(), "s", POLICY, SECRET_SUMMARY + SURROGATE
        ),
        INVALID,
        "text",
    ),
    row(
        "SummaryEnvelope: field of the wrong type",
        "SummaryEnvelope(..., text=5)",
        lambda: lf.SummaryEnvelope("s", "p", "c", 0, ("t1",), "lf1:00", POLICY, 5),  # type: ignore[arg-type]
        INVALID,
        "text",
    ),
    row(
        "check_summary: summary of the wrong type",
        "check_summary('s', conversation, 'v')",
        lambda: lf.check_summary("s", conversation(), POLICY),  # type: ignore[arg-type]
        INVALID,
        "summary",
    ),
    row(
        "check_summary: conversation of the wrong type",
        "check_summary(envelope, 'c', 'v')",
        lambda: lf.check_summary(envelope(), "c", POLICY),  # type: ignore[arg-type]
        INVALID,
        "conversation",
    ),
    row(
        "check_summary: policy_version of the wrong type",
        "check_summary(envelope, conversation, 5)",
        lambda: lf.check_summary(envelope(), conversation(), 5),  # type: ignore[arg-type]
        INVALID,
        "policy_version",
    ),
    row(
        "citations: summary of the wrong type",
        "citations('s', conversation)",
        lambda: lf.citations("s", conversation()),  # type: ignore[arg-type]
        INVALID,
        "summary",
    ),
    row(
        "citations: conversation of the wrong type",
        "citations(envelope, 'c')",
        lambda: lf.citations(envelope(), "c"),  # type: ignore[arg-type]
        INVALID,
        "conversation",
    ),
    row(
        "accept_summary_result: candidate of the wrong type",
        "accept_summary_result('s', conversation, 'v', 'p')",
        lambda: lf.accept_summary_result("s", conversation(), POLICY, "p"),  # type: ignore[arg-type]
        INVALID,
        "candidate",
    ),
    row(
        "accept_summary_result: plan of the wrong type",
        "accept_summary_result(envelope, conversation, 'v', 'p', plan='p')",
        lambda: lf.accept_summary_result(envelope(), conversation(), POLICY, "p", plan="p"),  # type: ignore[arg-type]
        INVALID,
        "plan",
    ),
    row(
        "accept_summary_result: current of the wrong type",
        "accept_summary_result(envelope, conversation, 'v', 'p', current='s')",
        lambda: lf.accept_summary_result(envelope(), conversation(), POLICY, "p", current="s"),  # type: ignore[arg-type]
        INVALID,
        "current",
    ),
    row(
        "accept_summary_result: lineage not a bool",
        "accept_summary_result(envelope, conversation, 'v', 'p', lineage=1)",
        lambda: lf.accept_summary_result(envelope(), conversation(), POLICY, "p", lineage=1),  # type: ignore[arg-type]
        INVALID,
        "lineage",
    ),
    row(
        "accept_summary_result: sealed not a mapping",
        "accept_summary_result(envelope, conversation, 'v', 'p', sealed=['t1'])",
        lambda: lf.accept_summary_result(envelope(), conversation(), POLICY, "p", sealed=["t1"]),  # type: ignore[arg-type]
        INVALID,
        "sealed",
    ),
    row(
        "accept_summary_result: an unknown preserved role",
        "accept_summary_result(envelope, conversation, 'v', 'p', preserve_roles=['admin'])",
        lambda: lf.accept_summary_result(
            envelope(), conversation(), POLICY, "p", preserve_roles=["admin"]
        ),
        INVALID,
        "preserve_roles",
    ),
    row(
        "assemble_context: summary of the wrong type",
        "assemble_context(conversation, 's', 'v')",
        lambda: lf.assemble_context(conversation(), "s", POLICY),  # type: ignore[arg-type]
        INVALID,
        "summary",
    ),
    row(
        "assemble_context: policy_version None",
        "assemble_context(conversation, envelope, None)",
        lambda: lf.assemble_context(conversation(), envelope(), None),  # type: ignore[arg-type]
        INVALID,
        "policy_version",
    ),
    row(
        "assemble_context: preserved_ids a str",
        "assemble_context(conversation, envelope, 'v', 't1')",
        lambda: lf.assemble_context(conversation(), envelope(), POLICY, "t1"),
        INVALID,
        "preserved_ids",
    ),
    row(
        "to_chat_messages: not an AssembledContext",
        "to_chat_messages([message])",
        lambda: lf.to_chat_messages([{"role": "user", "content": SECRET_BODY}]),  # type: ignore[arg-type]
        INVALID,
        "context",
    ),
    row(
        "to_chat_messages: NaN in stored meta.tool_calls",
        "to_chat_messages(context)  # a turn's meta.tool_calls holds NaN",
        lambda: _stored_tool_calls('[{"id": "k1", "x": NaN}]'),
        INVALID,
        "meta.tool_calls",
    ),
    row(
        "to_chat_messages: system_prompt not a str",
        "to_chat_messages(context, system_prompt=['Be brief.'])",
        lambda: lf.to_chat_messages(lf.AssembledContext(()), system_prompt=[SECRET_BODY]),  # type: ignore[arg-type]
        INVALID,
        "system_prompt",
    ),
    row(
        "to_chat_messages: lone surrogate in system_prompt",
        "to_chat_messages(context, system_prompt='\\ud800')",
        lambda: lf.to_chat_messages(lf.AssembledContext(()), system_prompt=SURROGATE),
        INVALID,
        "system_prompt",
    ),
    row(
        "to_chat_messages: recall not a bool",
        "to_chat_messages(context, recall='yes')",
        lambda: lf.to_chat_messages(lf.AssembledContext(()), recall="yes"),  # type: ignore[arg-type]
        INVALID,
        "recall",
    ),
    row(
        "SQLiteStore.known_ids: one ID, not a list",
        "store.known_ids('c', 't1')",
        on_store(lambda store: store.known_ids("c", "t1")),  # type: ignore[arg-type]
        INVALID,
        "ids",
    ),
    row(
        "SQLiteStore.known_ids: an ID of the wrong type",
        "store.known_ids('c', ['t1', 2])",
        on_store(lambda store: store.known_ids("c", ["t1", 2])),  # type: ignore[list-item]
        INVALID,
        "ids[1]",
    ),
    row(
        "SQLiteStore.known_ids: blank conversation_id",
        "store.known_ids(' ', ['t1'])",
        on_store(lambda store: store.known_ids(" ", ["t1"])),
        INVALID,
        "conversation_id",
    ),
    row(
        "LedgerfoldMiddleware: system_prompt not a str",
        "LedgerfoldMiddleware(store, 'c', system_prompt=1)",
        on_store(lambda store: _middleware(store, "c", system_prompt=1)),
        INVALID,
        "system_prompt",
    ),
    row(
        "LedgerfoldMiddleware: blank conversation_id",
        "LedgerfoldMiddleware(store, ' ')",
        on_store(lambda store: _middleware(store, " ")),
        INVALID,
        "conversation_id",
    ),
    row(
        "LedgerfoldMiddleware without conversation_id, called outside a LangGraph run",
        "LedgerfoldMiddleware(store).append_new(messages)",
        on_store(_middleware_append_outside_a_run),
        INVALID,
        "conversation_id",
    ),
    row(
        "LedgerfoldMiddleware: recall not a bool",
        "LedgerfoldMiddleware(store, 'c', recall='yes')",
        on_store(lambda store: _middleware(store, "c", recall="yes")),
        INVALID,
        "recall",
    ),
    row(
        "LedgerfoldMiddleware: recall=True with a store that cannot search",
        "LedgerfoldMiddleware(v11_store, 'c', recall=True)",
        on_store(lambda store: _middleware(_NoSearch(store), "c", recall=True)),  # type: ignore[arg-type]
        INVALID,
        "store",
    ),
    row(
        "LedgerfoldSession.recall_tool: a store that cannot search",
        "LedgerfoldSession('c', store=v11_store).recall_tool()",
        on_store(lambda store: _session_recall_tool(_NoSearch(store))),
        INVALID,
        "store",
    ),
    row(
        "run_recall: a store that cannot search",
        "run_recall(object(), 'c', arguments)",
        lambda: _run_recall(object(), "c"),
        INVALID,
        "store",
    ),
    row(
        "run_recall: blank conversation_id",
        "run_recall(store, ' ', arguments)",
        on_store(lambda store: _run_recall(store, " ")),
        INVALID,
        "conversation_id",
    ),
)
