"""SPEC §1.10: logs carry IDs, counts, sequences and fingerprints — never turn bodies or
summary text. A whole compaction run over real transcripts, captured at DEBUG from the
``ledgerfold`` logger hierarchy (store, compactor, summarizers), must not leak either; nor
may the messages of the exceptions ledgerfold raises along the way."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import islice
from pathlib import Path
from typing import Any

import openai
import pytest

from ledgerfold import ContextBudgetExceeded, ExtractiveSummarizer, SQLiteStore
from ledgerfold._compactor import CompactionOutcome, CompactionPolicy, Compactor, SummaryRequest
from ledgerfold.summarizers import ChatCompletionsSummarizer

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "transcripts"
MIN_LEAK = 12  # shorter strings ("Thank you.") may appear in a log by coincidence
API_KEY = "sk-privacy-5b7c20"


def real_transcripts(per_file: int = 2) -> list[dict[str, Any]]:
    """The first conversations of every shared/data file, read line by line (bodies hold
    U+2028, which `str.splitlines` would split on)."""
    conversations: list[dict[str, Any]] = []
    for path in sorted(DATA.glob("*.jsonl")):
        with path.open(encoding="utf-8") as handle:
            conversations.extend(json.loads(line) for line in islice(handle, per_file))
    return conversations


class Capture(logging.Handler):
    """Keeps every record, formatted with its exception text and stack, if any."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.records: list[logging.LogRecord] = []
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.lines.append(self.format(record))


@pytest.fixture
def capture() -> Iterator[Capture]:
    logger = logging.getLogger("ledgerfold")
    handler = Capture()
    previous_level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous_level)


def leaks(texts: list[str]) -> set[str]:
    """Every body/summary, and each of its lines, long enough to be a real leak."""
    needles: set[str] = set()
    for text in texts:
        if len(text.strip()) >= MIN_LEAK:
            needles.add(text.strip())
        needles.update(line.strip() for line in text.splitlines() if len(line.strip()) >= MIN_LEAK)
    return needles


@pytest.fixture
def echo_server() -> Iterator[str]:
    """A chat-completions server whose "summary" quotes the turns verbatim, as a model may."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            turns = json.loads(
                payload["messages"][1]["content"].split("<turns>\n")[1].split("\n</turns>")[0]
            )
            content = "Model summary:\n" + "\n".join(turn["text"] for turn in turns[:3])
            body = json.dumps({"choices": [{"message": {"content": content}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def load_ledger(
    store: SQLiteStore, conversation: dict[str, Any], turns: list[dict[str, Any]]
) -> None:
    """Append transcript turns; a call and the results answering it share a group."""
    group_of_call: dict[str, str] = {}
    for turn in turns:
        call_ids = turn.get("tool_call_ids") or []
        group = None
        if turn["role"] == "assistant" and call_ids:
            group = f"calls-{turn['sequence']}"
            group_of_call.update(dict.fromkeys(call_ids, group))
        elif turn["role"] == "tool" and call_ids:
            group = group_of_call.get(call_ids[0])
        store.append(
            conversation["conversation_id"],
            turn["role"],
            turn["body"],
            id=turn["id"],
            group=group,
        )


def test_a_whole_run_over_real_transcripts_logs_no_body_and_no_summary_text(
    tmp_path: Path, capture: Capture, echo_server: str
) -> None:
    conversations = real_transcripts()
    assert len(conversations) >= 8
    bodies: list[str] = []
    outcomes: list[CompactionOutcome] = []
    errors: list[BaseException] = []
    policy = CompactionPolicy("v1", min_new_turns=1, keep_tail=4)

    with SQLiteStore(tmp_path / "ledger.db") as store:
        for number, conversation in enumerate(conversations):
            cid = conversation["conversation_id"]
            turns = conversation["turns"]
            bodies.extend(turn["body"] for turn in turns)
            half = len(turns) // 2
            load_ledger(store, conversation, turns[:half])
            compactor = Compactor(store, policy)

            # 1. A first compaction, by the extractive default or by a "model".
            if number % 2 == 0:
                outcomes.append(compactor.compact(cid))
            else:
                client = openai.OpenAI(
                    base_url=f"{echo_server}/v1", api_key=API_KEY, timeout=30, max_retries=2
                )
                http = Compactor(store, policy, ChatCompletionsSummarizer(client, "m"))
                outcomes.append(asyncio.run(http.acompact(cid)))
            compactor.context(cid)
            try:
                compactor.context(cid, max_tokens=1)
            except ContextBudgetExceeded as error:
                errors.append(error)

            # 2. More turns; a summarizer that fails with the turn text in its message.
            load_ledger(store, conversation, turns[half:])

            def leaky_failure(request: SummaryRequest) -> str:
                raise RuntimeError("could not summarise: " + request.turns[0].text)

            outcomes.append(Compactor(store, policy, leaky_failure).compact(cid))

            # 3. Two concurrent compactions finishing in reverse order: one is rejected.
            outcomes.extend(asyncio.run(reverse_order_compactions(store, policy, cid)))

            # 4. A source edited: the summary goes stale and the context falls back.
            current = store.current_summary(cid)
            if current is not None:
                edited = "edited: " + current.source_ids[0] + " now says something else entirely"
                bodies.append(edited)
                store.edit(cid, current.source_ids[0], body=edited)
                assert compactor.context(cid).fallback == "stale-summary:source-modified"

            # 5. Retention, then a fresh compaction on what is left.
            store.purge_through(cid, 2, "retention-test")
            outcomes.append(compactor.compact(cid, force=True))
            compactor.context(cid)

        summaries = [
            record.envelope.text
            for cid in store.conversation_ids()
            for record in store.summary_history(cid)
            if record.envelope is not None
        ]

    statuses = {outcome.status for outcome in outcomes}
    assert statuses == {"accepted", "failed", "stale"}
    assert summaries
    log_text = "\n".join(capture.lines)
    error_text = "\n".join(f"{type(error).__name__}: {error}" for error in errors)
    # The run did log: plans, acceptances, rejections, failures, fallbacks, budgets.
    for marker in (
        "compaction plan started",
        "summary accepted",
        "summary rejected",
        "summarizer failed",
        "context fallback",
        "context over budget",
        "chat completion received",
    ):
        assert marker in log_text, marker
    assert "error_type=RuntimeError" in log_text
    assert "could not summarise" not in log_text
    assert API_KEY not in log_text and API_KEY not in error_text

    leaked_bodies = sorted(needle for needle in leaks(bodies) if needle in log_text)
    assert leaked_bodies == []
    leaked_summaries = sorted(needle for needle in leaks(summaries) if needle in log_text)
    assert leaked_summaries == []
    assert [needle for needle in leaks(bodies + summaries) if needle in error_text] == []


async def reverse_order_compactions(
    store: SQLiteStore, policy: CompactionPolicy, conversation_id: str
) -> tuple[CompactionOutcome, CompactionOutcome]:
    first_started, second_started = asyncio.Event(), asyncio.Event()
    release_first = asyncio.Event()
    extractive = ExtractiveSummarizer()

    async def slow(request: SummaryRequest) -> str:
        first_started.set()
        await release_first.wait()
        return extractive(request)

    async def fast(request: SummaryRequest) -> str:
        second_started.set()
        return extractive(request)

    first = asyncio.create_task(
        Compactor(store, policy, slow).acompact(conversation_id, force=True)
    )
    await first_started.wait()
    second = await Compactor(store, policy, fast).acompact(conversation_id, force=True)
    release_first.set()
    late = await first
    assert second.status == "accepted"
    assert late == CompactionOutcome("stale", None, "superseded-plan")
    return late, second


def test_outcome_records_carry_ids_and_fingerprints(tmp_path: Path, capture: Capture) -> None:
    with SQLiteStore(tmp_path / "ledger.db") as store:
        for index in range(6):
            store.append("c", "user", f"body number {index} with enough text", id=f"t{index}")
        outcome = Compactor(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2)).compact(
            "c"
        )
    assert outcome.summary is not None
    accepted = [r for r in capture.records if r.getMessage().startswith("summary accepted")]
    assert len(accepted) == 1
    message = accepted[0].getMessage()
    assert accepted[0].name == "ledgerfold.compactor"
    assert accepted[0].levelno == logging.INFO
    assert f"summary_id={outcome.summary.id}" in message
    assert f"plan_id={outcome.summary.plan_id}" in message
    assert f"fingerprint={outcome.summary.source_fingerprint}" in message
    assert "sources=4" in message
    assert "through_sequence=4" in message


def test_failure_record_names_the_exception_type_only(tmp_path: Path, capture: Capture) -> None:
    def failing(request: SummaryRequest) -> str:
        raise ValueError("the secret turn text")

    with SQLiteStore(tmp_path / "ledger.db") as store:
        for index in range(6):
            store.append("c", "user", f"body {index}")
        outcome = Compactor(
            store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), failing
        ).compact("c")
    assert outcome.reason == "summarizer-error"
    (failed,) = [r for r in capture.records if r.getMessage().startswith("summarizer failed")]
    assert failed.levelno == logging.WARNING
    assert failed.exc_info is None
    assert "error_type=ValueError" in failed.getMessage()
    assert "reason=summarizer-error" in failed.getMessage()
    assert all("secret" not in line for line in capture.lines)


def test_an_application_without_logging_config_gets_no_stderr_lines() -> None:
    # Regression: a failing summarizer printed two WARNING lines per failure to the stderr of
    # an application that configured no logging (Python's "last resort" handler). The
    # failure itself is a WARNING record (see the test above); here nobody asked for it.
    script = """
import ledgerfold as lf

def failing(request):
    raise ValueError("boom")

with lf.SQLiteStore() as store:
    for index in range(6):
        store.append("c", "user", f"body {index}")
    compactor = lf.Compactor(store, lf.CompactionPolicy("v1", keep_tail=2), failing)
    outcomes = [compactor.compact("c", force=True) for _ in range(3)]
print(",".join(outcome.reason or "" for outcome in outcomes))
"""
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "summarizer-error,summarizer-error,summarizer-error\n"
    assert completed.stderr == ""
