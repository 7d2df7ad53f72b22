"""`ChatCompletionsSummarizer` over the real `openai` SDK against a real HTTP server on
127.0.0.1 speaking chat completions (scripted replies, a bounded number of requests, it
stops itself), and `ChatModelSummarizer` over a LangChain fake chat model."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import openai
import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from ledgerfold import CompactionOutcome, CompactionPolicy, Compactor, SQLiteStore
from ledgerfold._context import TurnItem
from ledgerfold._errors import InvalidInput, SummarizerError
from ledgerfold.summarizers import (
    AsyncChatCompletionsSummarizer,
    AsyncChatModelSummarizer,
    ChatCompletionsSummarizer,
    ChatModelSummarizer,
)
from ledgerfold.summarizers._base import SummaryRequest


@dataclass
class Reply:
    status: int = 200
    content: str | None = "The summary."
    finish_reason: str = "stop"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Server:
    url: str
    received: list[dict[str, Any]]
    times: list[float]


@pytest.fixture
def serve() -> Iterator[Any]:
    """Start a server answering the given replies in order, one request each, then stop."""
    threads: list[tuple[threading.Thread, HTTPServer]] = []

    def start(*replies: Reply) -> Server:
        script = list(replies)
        received: list[dict[str, Any]] = []
        times: list[float] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                times.append(time.monotonic())
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append({"path": self.path, "json": json.loads(body)})
                reply = script.pop(0)
                if reply.status == 200:
                    document: dict[str, Any] = {
                        "id": "c1",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "m",
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": reply.finish_reason,
                                "message": {"role": "assistant", "content": reply.content},
                            }
                        ],
                    }
                else:
                    document = {"error": {"message": "slow down", "type": "rate_limit"}}
                data = json.dumps(document).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = HTTPServer(("127.0.0.1", 0), Handler)
        server.timeout = 10  # an expected request that never comes ends the server too

        def run() -> None:
            for _ in range(len(replies)):
                server.handle_request()
            server.server_close()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append((thread, server))
        return Server(f"http://127.0.0.1:{server.server_address[1]}/v1", received, times)

    yield start
    for thread, _ in threads:
        thread.join(timeout=15)
        assert not thread.is_alive()


def request_with_tools() -> SummaryRequest:
    calls = [
        {
            "id": "call-9",
            "type": "function",
            "function": {"name": "get_reservation", "arguments": '{"id": "ZFA04Y"}'},
        }
    ]
    return SummaryRequest(
        "c",
        "p",
        "v1",
        (
            TurnItem("a1", "assistant", "", 4, meta={"tool_calls": json.dumps(calls)}),
            TurnItem("t1", "tool", "cabin: economy", 5, meta={"tool_call_id": "call-9"}),
        ),
        previous_summary="User wants to change flight ZFA04Y.",
        covered_count=3,
        max_summary_tokens=300,
    )


def test_sends_tool_calls_rolling_framing_and_the_token_bound(serve: Any) -> None:
    server = serve(Reply())
    client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0)
    summarizer = ChatCompletionsSummarizer(client, "gpt-x", temperature=0)
    assert summarizer(request_with_tools()) == "The summary."
    (sent,) = server.received
    assert sent["path"] == "/v1/chat/completions"
    payload = sent["json"]
    assert payload["model"] == "gpt-x"
    assert payload["max_tokens"] == 300
    assert payload["temperature"] == 0
    user = payload["messages"][1]["content"]
    assert "Extend the previous summary, which covers the first 3 turns" in user
    assert "under 300 tokens" in user
    turns = json.loads(user.split("<turns>\n")[1].split("\n</turns>")[0])
    assert turns[0]["tool_calls"] == [
        {"id": "call-9", "name": "get_reservation", "arguments": '{"id": "ZFA04Y"}'}
    ]
    assert turns[1]["tool_call_id"] == "call-9"


def test_the_prompt_asks_for_a_seq_citation_per_statement(serve: Any) -> None:
    """SPEC §16.3: the model is asked to cite `[seq N]` for each statement, and every turn
    it reads carries its sequence."""
    server = serve(Reply())
    client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0)
    ChatCompletionsSummarizer(client, "m")(request_with_tools())
    system, user = (message["content"] for message in server.received[0]["json"]["messages"])
    assert "Cite evidence for each statement" in system and "[seq 12]" in system
    assert "one bracket each" in system  # `citations` reads the first number of a bracket
    turns = json.loads(user.split("<turns>\n")[1].split("\n</turns>")[0])
    assert [turn["sequence"] for turn in turns] == [4, 5]
    # The LangChain summarizers send the same prompt.
    llm = GenericFakeChatModel(messages=iter([AIMessage(content="s")]))
    summarizer = ChatModelSummarizer(llm)
    assert summarizer.system_prompt == system


def test_max_completion_tokens_and_a_base_url_kept_as_given(serve: Any) -> None:
    server = serve(Reply())
    # A provider path such as .../v1beta/openai/ is the SDK's to join, not ours to rewrite.
    base = server.url.replace("/v1", "/v1beta/openai/")
    client = openai.OpenAI(base_url=base, api_key="k", max_retries=0)
    ChatCompletionsSummarizer(client, "m", token_param="max_completion_tokens")(
        request_with_tools()
    )
    (sent,) = server.received
    assert sent["path"] == "/v1beta/openai/chat/completions"
    assert sent["json"]["max_completion_tokens"] == 300
    assert "max_tokens" not in sent["json"]
    assert "temperature" not in sent["json"]


def test_429_retry_after_is_honoured_by_the_sdk(serve: Any) -> None:
    server = serve(Reply(429, headers={"Retry-After": "2"}), Reply(content="After the wait."))
    client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=1)
    assert ChatCompletionsSummarizer(client, "m")(request_with_tools()) == "After the wait."
    assert len(server.received) == 2
    # The SDK's own back-off starts under a second; the 2 s are the server's Retry-After.
    assert server.times[1] - server.times[0] >= 1.9


def test_429_without_retries_is_a_summarizer_error_with_the_status(serve: Any) -> None:
    server = serve(Reply(429))
    client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0)
    with pytest.raises(SummarizerError) as caught:
        ChatCompletionsSummarizer(client, "m")(request_with_tools())
    assert caught.value.status == 429
    assert "ZFA04Y" not in str(caught.value)


def _filled_store() -> SQLiteStore:
    store = SQLiteStore()
    for index in range(8):
        store.append("c", "user" if index % 2 == 0 else "assistant", f"turn {index} body")
    return store


@pytest.mark.parametrize("call", ["compact", "acompact"])
def test_a_truncated_summary_fails_and_nothing_is_committed(serve: Any, call: str) -> None:
    server = serve(Reply(content="The user wants to chan", finish_reason="length"))
    if call == "compact":
        client: Any = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0)
    else:
        client = openai.AsyncOpenAI(base_url=server.url, api_key="k", max_retries=0)
    store = _filled_store()
    before = store.load("c")
    compactor = Compactor(
        store,
        CompactionPolicy("v1", min_new_turns=1, keep_tail=2, max_summary_tokens=50),
        ChatCompletionsSummarizer(client, "m"),
    )
    outcome = compactor.compact("c") if call == "compact" else asyncio.run(compactor.acompact("c"))
    assert outcome == CompactionOutcome("failed", None, "summarizer-error")
    assert store.current_summary("c") is None
    assert store.load("c") == before
    assert server.received[0]["json"]["max_tokens"] == 50


def test_async_client_gives_an_async_summarizer_that_compacts(serve: Any) -> None:
    server = serve(Reply(content="Async summary."))
    client = openai.AsyncOpenAI(base_url=server.url, api_key="k", max_retries=0)
    summarizer = ChatCompletionsSummarizer(client, "m")
    assert isinstance(summarizer, AsyncChatCompletionsSummarizer)
    store = _filled_store()
    compactor = Compactor(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), summarizer)
    outcome = asyncio.run(compactor.acompact("c"))
    assert outcome.accepted
    assert outcome.summary is not None and outcome.summary.text == "Async summary."


def test_arguments_are_checked_and_the_repr_hides_the_client() -> None:
    client = openai.OpenAI(base_url="http://127.0.0.1:1/v1", api_key="sk-secret")
    with pytest.raises(InvalidInput) as caught:
        ChatCompletionsSummarizer(object(), "m")
    assert caught.value.field == "client"
    with pytest.raises(InvalidInput) as caught:
        ChatCompletionsSummarizer(client, "m", token_param="max")
    assert caught.value.field == "token_param"
    assert "sk-secret" not in repr(ChatCompletionsSummarizer(client, "m"))


# -- LangChain chat models -------------------------------------------------------------------


def test_chat_model_summarizer_invokes_with_the_framed_request() -> None:
    llm = GenericFakeChatModel(messages=iter([AIMessage(content="LC summary.")]))
    assert ChatModelSummarizer(llm)(request_with_tools()) == "LC summary."


def test_chat_model_summarizer_refuses_a_truncated_reply() -> None:
    truncated = AIMessage(content="cut", response_metadata={"finish_reason": "length"})
    llm = GenericFakeChatModel(messages=iter([truncated]))
    store = _filled_store()
    compactor = Compactor(
        store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), ChatModelSummarizer(llm)
    )
    assert compactor.compact("c") == CompactionOutcome("failed", None, "summarizer-error")
    assert store.current_summary("c") is None


def test_async_chat_model_summarizer_uses_ainvoke() -> None:
    llm = GenericFakeChatModel(messages=iter([AIMessage(content="Async LC.")]))
    store = _filled_store()
    compactor = Compactor(
        store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), AsyncChatModelSummarizer(llm)
    )
    outcome = asyncio.run(compactor.acompact("c"))
    assert outcome.summary is not None and outcome.summary.text == "Async LC."
    with pytest.raises(InvalidInput):
        ChatModelSummarizer(object())
