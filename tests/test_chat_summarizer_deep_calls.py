"""`ChatCompletionsSummarizer` and `ChatModelSummarizer` frame each assistant turn's tool
calls from its `meta["tool_calls"]` (SPEC §13: a summarizer is any callable over a
`SummaryRequest`, whose turns a `Store` of your own, or you, may give). That value is any
text: JSON nested deeper than Python's parser follows made framing it raise
`RecursionError`, so the summarizer call failed instead of summarising. Such a value frames
no call, as text that is not JSON does."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

import ledgerfold as lf
from ledgerfold.summarizers import ChatCompletionsSummarizer, ChatModelSummarizer

DEEP = "[" * 100_000 + "]" * 100_000


class Client:
    """A client of the `openai.OpenAI` shape whose `chat.completions.create` records what
    it is given and answers "The summary."."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, **arguments: Any) -> Any:
        self.asked.append(arguments)
        message = SimpleNamespace(content="The summary.")
        return SimpleNamespace(choices=[SimpleNamespace(finish_reason="stop", message=message)])


def _request(tool_calls: str) -> lf.SummaryRequest:
    turns = (
        lf.TurnItem("u1", "user", "Book a seat.", 1),
        lf.TurnItem("a1", "assistant", "Booking.", 2, meta={"tool_calls": tool_calls}),
    )
    return lf.SummaryRequest("c", "p", "v1", turns)


def _turns_block(arguments: dict[str, Any]) -> list[Any]:
    content = arguments["messages"][-1]["content"]
    block = content.split("<turns>\n", 1)[1].rsplit("\n</turns>", 1)[0]
    return json.loads(block)  # type: ignore[no-any-return]


def test_deeply_nested_tool_calls_frame_no_call() -> None:
    client = Client()
    summarizer = ChatCompletionsSummarizer(client, "m")
    assert summarizer(_request(DEEP)) == "The summary."
    assert summarizer(_request("not JSON")) == "The summary."
    deep, not_json = (_turns_block(arguments) for arguments in client.asked)
    assert deep == not_json
    assert deep[1] == {"sequence": 2, "role": "assistant", "text": "Booking.", "tool_calls": []}


def test_a_chat_model_summarizer_frames_them_so_too() -> None:
    llm = GenericFakeChatModel(messages=iter([AIMessage("The summary.")]))
    assert ChatModelSummarizer(llm)(_request(DEEP)) == "The summary."
