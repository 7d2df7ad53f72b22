"""Events (SPEC §17.8): the hook contract (a raising hook is logged, never propagated; no
text in an event) and the OpenTelemetry hook, checked with the SDK's in-memory exporters."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from ledgerfold import CompactionPolicy, Compactor, SQLiteStore
from ledgerfold._events import EVENT_NAMES, Event, emit
from ledgerfold.integrations.opentelemetry import OpenTelemetryHook


@pytest.fixture
def otel() -> tuple[OpenTelemetryHook, InMemorySpanExporter, InMemoryMetricReader]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    hook = OpenTelemetryHook(
        tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[reader])
    )
    return hook, spans, reader


def metric_points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    assert data is not None
    points: dict[str, list[Any]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points.setdefault(metric.name, []).extend(metric.data.data_points)
    return points


def test_an_accepted_compaction_is_a_span_and_metrics(otel: Any) -> None:
    hook, spans, reader = otel
    hook(
        Event(
            "compaction.accepted",
            "conv-1",
            summary_ids=("s-1",),
            turns=12,
            tokens_in=900,
            tokens_out=120,
            seconds=0.25,
        )
    )
    [span] = spans.get_finished_spans()
    assert span.name == "ledgerfold.compaction.accepted"
    assert span.attributes["ledgerfold.conversation_id"] == "conv-1"
    assert span.attributes["ledgerfold.turns"] == 12
    assert list(span.attributes["ledgerfold.summary_ids"]) == ["s-1"]
    assert span.end_time - span.start_time == pytest.approx(0.25e9, rel=0.01)
    points = metric_points(reader)
    assert [p.value for p in points["ledgerfold.events"]] == [1]
    assert sorted(
        (dict(p.attributes)["ledgerfold.direction"], p.value)
        for p in points["ledgerfold.compaction.tokens"]
    ) == [("in", 900), ("out", 120)]
    [duration] = points["ledgerfold.compaction.duration"]
    assert duration.count == 1 and duration.sum == pytest.approx(0.25)
    assert [p.value for p in points["ledgerfold.turns"]] == [12]


def test_a_failure_is_an_error_span_counted_by_reason(otel: Any) -> None:
    hook, spans, reader = otel
    hook(Event("compaction.failed", "c", reason="summary-too-long", seconds=0.1))
    hook(Event("compaction.failed", "c", reason="summary-too-long", seconds=0.1))
    hook(Event("context.fallback", "c", reason="stale-summary:source-modified"))
    failed = [s for s in spans.get_finished_spans() if s.name.endswith("failed")]
    assert len(failed) == 2 and all(s.status.status_code is StatusCode.ERROR for s in failed)
    counts = {
        (dict(p.attributes)["ledgerfold.event"], dict(p.attributes).get("ledgerfold.reason")): (
            p.value
        )
        for p in metric_points(reader)["ledgerfold.events"]
    }
    assert counts == {
        ("compaction.failed", "summary-too-long"): 2,
        ("context.fallback", "stale-summary:source-modified"): 1,
    }


def test_a_raising_hook_is_logged_and_never_propagated(caplog: pytest.LogCaptureFixture) -> None:
    def broken(event: Event) -> None:
        raise RuntimeError("observer down")

    with caplog.at_level(logging.WARNING, logger="ledgerfold.events"):
        emit(broken, Event("retention.purged", "c", turns=3, sequence=9))
    [record] = caplog.records
    assert "RuntimeError" in record.getMessage() and "retention.purged" in record.getMessage()
    assert "observer down" not in record.getMessage()
    emit(None, Event("retention.purged", "c"))  # no hook: nothing happens


def test_events_have_known_names_and_no_text_fields() -> None:
    with pytest.raises(ValueError, match="unknown event name"):
        Event("compaction.exploded", "c")
    for name in EVENT_NAMES:
        Event(name, "c")
    text_like = {"body", "text", "summary", "query", "passage", "message", "content"}
    assert not text_like & set(Event.__dataclass_fields__)


def test_the_turns_counter_counts_only_turns_summarised_or_removed(otel: Any) -> None:
    """`ledgerfold.turns` is turns summarised, purged, erased or deleted: a context served
    raw (its `turns` the raw turns served) and a compaction that failed or went stale (its
    `turns` the request's) summarised or removed nothing."""
    hook, _, reader = otel
    hook(Event("context.fallback", "c", reason="no-summary", turns=40))
    hook(Event("compaction.failed", "c", reason="summarizer-error", turns=16, seconds=0.1))
    hook(Event("compaction.stale", "c", reason="source-modified", turns=16, seconds=0.1))
    hook(Event("compaction.accepted", "c", turns=12, seconds=0.1))
    hook(Event("retention.purged", "c", reason="retention", turns=3, sequence=9))
    hook(Event("retention.erased", "c", turns=1, sequence=10))
    hook(Event("conversation.deleted", "c", turns=7))
    counted = {
        dict(p.attributes)["ledgerfold.event"]: p.value
        for p in metric_points(reader)["ledgerfold.turns"]
    }
    assert counted == {
        "compaction.accepted": 12,
        "retention.purged": 3,
        "retention.erased": 1,
        "conversation.deleted": 7,
    }


def test_a_purges_own_reason_is_on_its_span_and_never_a_metric_label(otel: Any) -> None:
    """A purge's reason is the operator's free text (`purge_through(..., reason)`, the CLI's
    `--reason`): one per request would make `ledgerfold.events` a series per purge. Metric
    labels are the event's name and, where it is one of the library's own, its reason."""
    hook, spans, reader = otel
    for ticket in range(3):
        hook(Event("retention.purged", "c", reason=f"erasure request #{ticket}", turns=2))
    hook(Event("compaction.skipped", "c", reason="not-due"))
    assert {span.attributes["ledgerfold.reason"] for span in spans.get_finished_spans()} == {
        "erasure request #0",
        "erasure request #1",
        "erasure request #2",
        "not-due",
    }
    points = metric_points(reader)
    events = {
        tuple(sorted(dict(point.attributes).items())): point.value
        for point in points["ledgerfold.events"]
    }
    assert events == {
        (("ledgerfold.event", "retention.purged"),): 3,
        (("ledgerfold.event", "compaction.skipped"), ("ledgerfold.reason", "not-due")): 1,
    }
    assert [dict(point.attributes) for point in points["ledgerfold.turns"]] == [
        {"ledgerfold.event": "retention.purged"}
    ]


def test_spans_of_async_calls_are_children_of_the_callers_span(otel: Any, tmp_path: Path) -> None:
    """A group-commit batch hands its events to their hooks on the worker thread once it has
    committed: they used to run outside the caller's context, so the span of an `acompact`
    (or a session's) event was a root span, where a sync `compact()`'s is a child of the
    caller's current span. Each now runs in the context it was emitted in."""
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    hook = OpenTelemetryHook(tracer_provider=provider, meter_provider=MeterProvider())
    tracer = provider.get_tracer("app")
    store = SQLiteStore(tmp_path / "otel.db", on_event=hook)
    for conversation in ("sync", "async"):
        store.append_many(conversation, [{"role": "user", "body": f"t{n}"} for n in range(8)])
    compactor = Compactor(
        store, CompactionPolicy("otel-v1", keep_tail=2, min_new_turns=1), on_event=hook
    )

    async def request() -> None:
        with tracer.start_as_current_span("async-request"):
            assert (await compactor.acompact("async")).accepted

    with tracer.start_as_current_span("sync-request"):
        assert compactor.compact("sync").accepted
    asyncio.run(request())
    store.close()
    by_name: dict[str, list[Any]] = {}
    for span in spans.get_finished_spans():
        by_name.setdefault(span.name, []).append(span)
    parents = {span.parent.span_id for span in by_name["ledgerfold.compaction.accepted"]}
    callers = {by_name[name][0].context.span_id for name in ("sync-request", "async-request")}
    assert parents == callers
