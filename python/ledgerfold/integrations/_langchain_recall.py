"""`recall_history` (SPEC §16.2) as a LangChain tool, for `LedgerfoldMiddleware`: sync
calls run `run_recall` in place, async ones on the store's worker thread. A result that is
`run_recall`'s `{"error": ...}` (bad arguments, the store failing) is raised as a
`ToolException` that the tool handles (`handle_tool_error=True`): LangChain then gives the
model that same JSON text in a `ToolMessage` with `status="error"`, never an exception into
the agent loop."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, ToolException

from ledgerfold._worker import worker_for
from ledgerfold.store._protocol import Store
from ledgerfold.tools import RECALL_TOOL, run_recall

__all__ = ["recall_tool"]


class _RecallTool(StructuredTool):
    """A `StructuredTool` that hands the model's arguments to its function as one mapping
    (`arguments=`), never spread as keywords: a model's key such as `self` would otherwise
    collide with `StructuredTool._run`'s own parameters and raise a `TypeError` into the
    agent loop instead of being ignored (SPEC §16.5: unknown keys are ignored)."""

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        args, kwargs = super()._to_args_and_kwargs(tool_input, tool_call_id)
        return args, {"arguments": kwargs} if not args else {}


def recall_tool(store: Store, conversation: Callable[[], str]) -> BaseTool:
    """`recall_history` as a LangChain tool over the conversation `conversation()` names
    when it is called (the run's): the model's arguments go to `run_recall` as they came
    (its errors are results the model reads)."""
    function = RECALL_TOOL["function"]

    def recall(arguments: Any) -> str:
        return _checked(run_recall(store, conversation(), arguments))

    async def arecall(arguments: Any) -> str:
        # Off the event loop, in call order with the store's other async work.
        return _checked(await worker_for(store).run(run_recall, store, conversation(), arguments))

    return _RecallTool(
        func=recall,
        coroutine=arecall,
        name=function["name"],
        description=function["description"],
        args_schema=json.loads(json.dumps(function["parameters"])),
        handle_tool_error=True,  # the exception's text (the error JSON) is the content
    )


def _checked(result: str) -> str:
    """`run_recall`'s result, or a `ToolException` holding it when it is an error (its
    `{"error": message}`: the only result with that key; hits are `{"note"...` or
    `{"hits"...`)."""
    if result.startswith('{"error"'):
        raise ToolException(result)
    return result
