"""OpenTelemetry: ledgerfold's events as spans and metrics (`ledgerfold[otel]`).

    from ledgerfold.integrations.opentelemetry import OpenTelemetryHook

    hook = OpenTelemetryHook()  # the global tracer and meter providers
    store = SQLiteStore("agent.db", on_event=hook)
    compactor = Compactor(store, policy, summarizer, on_event=hook)

Each event becomes one span named `ledgerfold.<event name>` (its duration the event's
`seconds`, where it has one), a child of the span current in the call that made the change
(also for an async call, whose events are handed over on the store's worker thread), and
counts in these instruments:

- `ledgerfold.events` (counter): every event, by `ledgerfold.event` and `ledgerfold.reason`
  (not a purge's: that is the caller's own text, `purge_through(..., reason)`, one series
  per purge; it is on the purge's span);
- `ledgerfold.compaction.duration` (histogram, s): accepted and failed compactions;
- `ledgerfold.compaction.tokens` (counter): summarizer input and output tokens, by
  `ledgerfold.direction` (`in`, `out`);
- `ledgerfold.turns` (counter): turns summarised (`compaction.accepted`), purged, erased or
  deleted, by event; the `turns` of a context served raw or of a compaction that failed or
  went stale are on their spans only (nothing was summarised or removed).

Attributes carry IDs, counts and reasons only — never text (SPEC §17.8). Only
`opentelemetry-api` is needed; the application chooses the SDK and exporters.
"""

from __future__ import annotations

import time
from typing import Any

from ledgerfold._errors import InvalidInput
from ledgerfold._events import Event
from ledgerfold._optional import require

__all__ = ["OpenTelemetryHook"]

_trace = require(
    "opentelemetry.trace", needed_by="ledgerfold's OpenTelemetry hook", install="'ledgerfold[otel]'"
)
_metrics = require(
    "opentelemetry.metrics",
    needed_by="ledgerfold's OpenTelemetry hook",
    install="'ledgerfold[otel]'",
)

_SCOPE = "ledgerfold"

# The events whose reason is the caller's text, not one of the library's: on spans only.
_FREE_REASONS = frozenset(("retention.purged",))
# The events whose `turns` were summarised or removed: what `ledgerfold.turns` counts.
_TURNS_COUNTED = frozenset(
    ("compaction.accepted", "retention.purged", "retention.erased", "conversation.deleted")
)


def _attributes(event: Event) -> dict[str, Any]:
    attributes: dict[str, Any] = {"ledgerfold.event": event.name}
    if event.conversation_id is not None:
        attributes["ledgerfold.conversation_id"] = event.conversation_id
    if event.reason is not None:
        attributes["ledgerfold.reason"] = event.reason
    if event.summary_ids:
        attributes["ledgerfold.summary_ids"] = list(event.summary_ids)
    if event.turn_ids:
        attributes["ledgerfold.turn_ids"] = list(event.turn_ids)
    for name in ("turns", "tokens_in", "tokens_out"):
        value = getattr(event, name)
        if value:
            attributes[f"ledgerfold.{name}"] = value
    if event.sequence is not None:
        attributes["ledgerfold.sequence"] = event.sequence
    for key, value in event.extra:
        attributes[f"ledgerfold.{key}"] = value
    return attributes


def _provider(field: str, value: Any, method: str) -> None:
    """None (the global provider) or an object with `method` (a `TracerProvider`, a
    `MeterProvider`): anything else is bad input, said here rather than at the first event."""
    if value is not None and not callable(getattr(value, method, None)):
        raise InvalidInput(
            f"{field}: must be None or an OpenTelemetry provider with {method}(),"
            f" got {type(value).__name__}",
            field=field,
            problem="wrong-type",
        )


class OpenTelemetryHook:
    """An event hook that records each event as a span and in metrics. `tracer_provider`
    and `meter_provider` default to OpenTelemetry's global ones; anything but a provider
    raises `InvalidInput` naming the argument."""

    def __init__(self, *, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        _provider("tracer_provider", tracer_provider, "get_tracer")
        _provider("meter_provider", meter_provider, "get_meter")
        self._tracer = _trace.get_tracer(_SCOPE, tracer_provider=tracer_provider)
        meter = (
            meter_provider.get_meter(_SCOPE)
            if meter_provider is not None
            else _metrics.get_meter(_SCOPE)
        )
        self._events = meter.create_counter(
            "ledgerfold.events", unit="{event}", description="ledgerfold events by name"
        )
        self._duration = meter.create_histogram(
            "ledgerfold.compaction.duration", unit="s", description="compaction wall time"
        )
        self._tokens = meter.create_counter(
            "ledgerfold.compaction.tokens", unit="{token}", description="summarizer tokens"
        )
        self._turns = meter.create_counter(
            "ledgerfold.turns", unit="{turn}", description="turns summarised or removed"
        )

    def __call__(self, event: Event) -> None:
        attributes = _attributes(event)
        end = time.time_ns()
        start = end - int((event.seconds or 0.0) * 1e9)
        span = self._tracer.start_span(
            f"ledgerfold.{event.name}", start_time=start, attributes=attributes
        )
        if event.name == "compaction.failed":
            span.set_status(_trace.Status(_trace.StatusCode.ERROR, event.reason or "failed"))
        span.end(end_time=end)
        by_name = {"ledgerfold.event": event.name}
        if event.reason is not None and event.name not in _FREE_REASONS:
            by_name["ledgerfold.reason"] = event.reason
        self._events.add(1, by_name)
        if event.name in ("compaction.accepted", "compaction.failed") and event.seconds:
            self._duration.record(event.seconds, {"ledgerfold.event": event.name})
        if event.tokens_in:
            self._tokens.add(event.tokens_in, {"ledgerfold.direction": "in"})
        if event.tokens_out:
            self._tokens.add(event.tokens_out, {"ledgerfold.direction": "out"})
        if event.turns and event.name in _TURNS_COUNTED:
            self._turns.add(event.turns, {"ledgerfold.event": event.name})
