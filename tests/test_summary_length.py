"""Summary length (SPEC §17.4): a model server that ignores `max_tokens`
cannot make an overlong summary current, and no request carries more than
`max_input_tokens` of turn text plus `max_summary_tokens` of previous summary, whatever the
summarizer returns. Against a real chat-completions server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import openai
import pytest

import ledgerfold as lf
from ledgerfold.summarizers import ChatCompletionsSummarizer

PV = "p"
MAX_INPUT = 200
MAX_SUMMARY = 100


class Model:
    """A server that answers each request with the next scripted text (`finish_reason`
    stop, whatever `max_tokens` asked) and records what it was asked."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.asked: list[dict[str, Any]] = []
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                model.asked.append(body)
                document = {
                    "id": "c1",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "m",
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": model.replies.pop(0)},
                        }
                    ],
                }
                data = json.dumps(document).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def model() -> Iterator[Any]:
    started: list[Model] = []

    def start(replies: list[str]) -> Model:
        started.append(Model(replies))
        return started[-1]

    yield start
    for server in started:
        server.close()


class Recording:
    """The summarizer under test, recording each `SummaryRequest` it is given."""

    def __init__(self, url: str) -> None:
        client = openai.OpenAI(base_url=url, api_key="sk-test", max_retries=0)
        self.inner = ChatCompletionsSummarizer(client, "m")
        self.requests: list[lf.SummaryRequest] = []

    def __call__(self, request: lf.SummaryRequest) -> str:
        self.requests.append(request)
        return self.inner(request)


def _policy() -> lf.CompactionPolicy:
    return lf.CompactionPolicy(
        PV, keep_tail=2, min_new_turns=1, max_input_tokens=MAX_INPUT, max_summary_tokens=MAX_SUMMARY
    )


def _append(store: lf.SQLiteStore, first: int, count: int) -> None:
    for index in range(first, first + count):
        store.append("c", "user", f"turn {index} " + "word " * 15, id=f"t{index}")


def _words(tokens: int) -> str:
    text = "fact " * tokens
    counter = _policy().counter
    while counter(text) > tokens:
        text = text[:-5]
    return text.strip()


def test_an_overlong_reply_fails_and_the_previous_summary_stays(tmp_path: Path, model: Any) -> None:
    counter = _policy().counter
    huge = "fact " * 50_000  # a 50,000-word reply for a limit of 100
    server = model(["short summary", huge])
    store = lf.SQLiteStore(tmp_path / "a.db")
    _append(store, 0, 6)
    summarizer = Recording(server.url)
    compactor = lf.Compactor(store, _policy(), summarizer)
    first = compactor.compact("c")
    assert first.status == "accepted"
    _append(store, 6, 4)
    outcome = compactor.compact("c")
    assert outcome == lf.CompactionOutcome("failed", None, "summary-too-long")
    assert store.current_summary("c") == first.summary
    history = store.summary_history("c")
    assert (history[-1].status, history[-1].reason) == ("failed", "summary-too-long")
    assert counter(huge) > MAX_SUMMARY * 1.25
    store.close()


def test_a_reply_within_the_slack_is_accepted(tmp_path: Path, model: Any) -> None:
    server = model([_words(int(MAX_SUMMARY * 1.25))])
    store = lf.SQLiteStore(tmp_path / "a.db")
    _append(store, 0, 6)
    outcome = lf.Compactor(store, _policy(), Recording(server.url)).compact("c")
    assert outcome.status == "accepted"
    store.close()


def test_no_request_exceeds_the_input_and_summary_budgets(tmp_path: Path, model: Any) -> None:
    """Replies just under the slack (over `max_summary_tokens`), then far over it, over many
    rounds: every request's turn text plus previous text stays within the two budgets."""
    counter = _policy().counter
    replies = [_words(int(MAX_SUMMARY * 1.25)) if i % 3 else "fact " * 5_000 for i in range(1, 40)]
    server = model(replies)
    store = lf.SQLiteStore(tmp_path / "a.db")
    summarizer = Recording(server.url)
    compactor = lf.Compactor(store, _policy(), summarizer)
    for round_ in range(12):
        _append(store, 3 * round_, 3)
        compactor.compact("c", force=True)
    assert len(summarizer.requests) >= 8
    for request in summarizer.requests:
        turns = sum(counter(item.text) for item in request.turns)
        previous = 0 if request.previous_summary is None else counter(request.previous_summary)
        assert turns <= MAX_INPUT
        assert turns + previous <= MAX_INPUT + MAX_SUMMARY
    assert any(
        r.previous_summary is not None and counter(r.previous_summary) > MAX_SUMMARY
        for r in summarizer.requests
    )  # the slack was used, and the turns made room for it
    current = store.current_summary("c")
    assert current is not None and counter(current.text) <= MAX_SUMMARY * 1.25
    store.close()


def test_a_previous_summary_from_before_the_rule_is_cut_to_fit(tmp_path: Path) -> None:
    """A summary accepted before SPEC §17.4 (no check then) may be any length: the next
    request carries it cut to `max_summary_tokens`, marked."""
    counter = _policy().counter
    store = lf.SQLiteStore(tmp_path / "a.db")
    _append(store, 0, 6)
    plan = store.start_plan("c", 2, PV)
    old = lf.create_summary_envelope(plan, store.load("c"), "s-old", PV, "fact " * 2_000)
    assert old is not None and store.commit_summary(old).accepted
    _append(store, 6, 3)
    seen: list[lf.SummaryRequest] = []

    def summarizer(request: lf.SummaryRequest) -> str:
        seen.append(request)
        return "short"

    assert lf.Compactor(store, _policy(), summarizer).compact("c").status == "accepted"
    (request,) = seen
    assert request.previous_summary is not None
    assert counter(request.previous_summary) <= MAX_SUMMARY
    assert "characters cut" in request.previous_summary
    store.close()
