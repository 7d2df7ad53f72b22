"""One rule for every Responses item that is a tool call or a call's output
(`integrations/_agents_links.py`): the table names every such type the installed `openai`
package defines (a type a later SDK adds fails here, not in a user's run), each with the
key its Responses type links it by; `LedgerfoldSession.add_items` refuses one without its
link where it needs one, or with one that is not a non-empty str (`InvalidInput` naming
`items[i].<key>`, none of the batch stored), and keeps what the SDK itself writes: a local
shell output linked by `call_id` (the SDK's) or `id` (the API's type), a server-run tool
search with none, an unknown `*_call` type as it came."""

from __future__ import annotations

import asyncio
import json
import typing
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
from agents.run_internal.items import _TOOL_CALL_TO_OUTPUT_TYPE
from agents.run_state import _LocalShellCallOutputPayload
from openai.types.conversations import conversation_item
from openai.types.responses import (
    response_input_item,
    response_input_item_param,
    response_item,
    response_output_item,
)

import ledgerfold as lf
from ledgerfold.integrations._agents_items import CALL_OUTPUTS
from ledgerfold.integrations._agents_links import HOSTED, LINKS
from ledgerfold.integrations.openai_agents import LedgerfoldSession

_UNIONS = (
    response_input_item_param.ResponseInputItemParam,
    response_input_item.ResponseInputItem,
    response_output_item.ResponseOutputItem,
    response_item.ResponseItem,
    conversation_item.ConversationItem,
)


def _members(union: Any) -> list[Any]:
    if get_origin(union) is typing.Annotated:
        return _members(get_args(union)[0])
    if get_origin(union) is typing.Union:
        return [member for arg in get_args(union) for member in _members(arg)]
    return [union]


def _keys(cls: Any) -> dict[str, bool]:
    """A TypedDict's or a pydantic model's fields, each with whether it is required."""
    if hasattr(cls, "model_fields"):
        return {name: field.is_required() for name, field in cls.model_fields.items()}
    required = cls.__required_keys__
    return {name: name in required for name in (*required, *cls.__optional_keys__)}


def _type_name(cls: Any) -> str | None:
    if hasattr(cls, "model_fields"):
        annotation = cls.model_fields["type"].annotation
    else:
        annotation = typing.get_type_hints(cls, include_extras=True)["type"]
    while get_origin(annotation) is not typing.Literal and get_args(annotation):
        annotation = next(arg for arg in get_args(annotation) if arg is not type(None))
    names = get_args(annotation)
    return names[0] if len(names) == 1 and isinstance(names[0], str) else None


def _package_types() -> dict[str, list[dict[str, bool]]]:
    """Every item type the installed package defines, with the fields of each of its
    classes (a param TypedDict, an input and an output model, …)."""
    found: dict[str, list[dict[str, bool]]] = {}
    for union in _UNIONS:
        for cls in _members(union):
            name = _type_name(cls)
            assert name is not None, cls  # every item class has one literal type
            found.setdefault(name, []).append(_keys(cls))
    return found


TYPES = _package_types()


def _is_tool_item(name: str, classes: list[dict[str, bool]]) -> bool:
    """A tool call or a call's output, by its shape: anything with a `call_id`, or named
    as one (`*_call`, `*_output`, `mcp_*`)."""
    named = name.endswith(("_call", "_output")) or name.startswith("mcp_")
    return named or any("call_id" in keys for keys in classes)


def test_every_call_and_output_type_the_package_defines_has_its_rule() -> None:
    tool_items = {name for name, classes in TYPES.items() if _is_tool_item(name, classes)}
    assert len(tool_items) > 20  # the enumeration found them (not an empty union)
    missing = tool_items - LINKS.keys() - HOSTED
    assert not missing, f"no link rule for {sorted(missing)}: add them to _agents_links"
    assert LINKS.keys().isdisjoint(HOSTED)
    assert not (LINKS.keys() | HOSTED) - TYPES.keys()  # no type the package does not have


#: A link key the SDK writes that the API's own type does not have.
_SDK_KEYS = {("local_shell_call_output", "call_id"): _LocalShellCallOutputPayload}
#: Required here though optional to the API (the SDK writes one on every result, and a
#: result without one is never served).
_STRICTER = {"function_call_output"}


@pytest.mark.parametrize("name", sorted(LINKS))
def test_each_link_is_the_key_the_packages_type_has(name: str) -> None:
    link, classes = LINKS[name], TYPES[name]
    for key in link.keys:
        sdk = _SDK_KEYS.get((name, key))
        assert any(key in keys for keys in classes) or key in sdk.__annotations__, (name, key)
    required = any(any(keys.get(key) for key in link.keys) for keys in classes)
    if link.optional:
        assert not required, name  # the API lets it be absent: so does the rule
    else:
        assert required or name in _STRICTER, name


@pytest.mark.parametrize("name", sorted(HOSTED))
def test_a_hosted_tools_item_has_nothing_that_links_it(name: str) -> None:
    assert all("call_id" not in keys for keys in TYPES[name])


def test_the_sdks_call_output_pairs_are_linked_alike() -> None:
    assert _TOOL_CALL_TO_OUTPUT_TYPE == CALL_OUTPUTS
    pairs = {**CALL_OUTPUTS, "mcp_approval_request": "mcp_approval_response"}
    for call, output in pairs.items():
        assert not LINKS[call].output and LINKS[output].output, (call, output)
    paired = set(pairs) | set(pairs.values())
    assert paired == LINKS.keys()  # every linked type is one side of a pair


def _refused(tmp_path: Path, item: dict[str, Any]) -> lf.InvalidInput:
    session = LedgerfoldSession("s", tmp_path / "refused.db")
    try:
        with pytest.raises(lf.InvalidInput) as raised:
            asyncio.run(session.add_items([{"role": "user", "content": "look"}, item]))
        assert asyncio.run(session.get_items()) == []  # none of the batch
    finally:
        session.close()
    return raised.value


@pytest.mark.parametrize("name", sorted(LINKS))
@pytest.mark.parametrize(
    ("value", "problem"), [(None, "wrong-type"), (7, "wrong-type"), ("", "empty")]
)
def test_a_link_that_is_not_a_non_empty_str_is_refused(
    tmp_path: Path, name: str, value: Any, problem: str
) -> None:
    link = LINKS[name]
    item = {"type": name, "output": "secret output", link.keys[0]: value}
    if value is None and link.optional:
        return  # absent is the API's own form (a server-run tool search): kept, below
    error = _refused(tmp_path, item)
    assert (error.field, error.problem) == (f"items[1].{link.keys[0]}", problem)
    assert "secret output" not in str(error)


def test_a_local_shell_output_without_call_id_or_id_is_refused_naming_call_id(
    tmp_path: Path,
) -> None:
    error = _refused(tmp_path, {"type": "local_shell_call_output", "output": "ok"})
    assert error.field == "items[1].call_id"
    error = _refused(tmp_path, {"type": "local_shell_call_output", "id": 7, "output": "ok"})
    assert (error.field, error.problem) == ("items[1].id", "wrong-type")


def _served(tmp_path: Path, batches: list[list[dict[str, Any]]]) -> list[Any]:
    with lf.SQLiteStore(tmp_path / "kept.db") as store:
        session = LedgerfoldSession("s", store=store)
        for batch in batches:
            asyncio.run(session.add_items(batch))
        served = asyncio.run(session.get_items())
        groups = [turn.group for turn in store.load("s").turns]
    return [served, groups]


LOCAL_SHELL_CALL = {
    "type": "local_shell_call",
    "id": "ls_1",
    "call_id": "s1",
    "status": "completed",
    "action": {"type": "exec", "command": ["ls"], "env": {}},
}


@pytest.mark.parametrize(
    "output",
    [
        {"type": "local_shell_call_output", "call_id": "s1", "output": "ok"},  # the SDK's
        {"type": "local_shell_call_output", "id": "s1", "output": "ok"},  # the API's type
    ],
    ids=["call_id", "id"],
)
def test_a_local_shell_output_is_served_with_its_call_by_either_key(
    tmp_path: Path, output: dict[str, Any]
) -> None:
    user = {"role": "user", "content": "list"}
    served, groups = _served(tmp_path, [[user, LOCAL_SHELL_CALL], [output]])
    assert served == [user, LOCAL_SHELL_CALL, output]
    assert groups[1] == groups[2] is not None  # one compaction unit across add_items


def test_a_server_run_tool_search_without_call_id_is_kept(tmp_path: Path) -> None:
    call = {"type": "tool_search_call", "id": "ts_1", "call_id": None, "arguments": {}}
    output = {"type": "tool_search_output", "id": "tso_1", "call_id": None, "tools": []}
    answer = {"role": "assistant", "content": "found"}
    user = {"role": "user", "content": "search"}
    served, _ = _served(tmp_path, [[user, call, output, answer]])
    assert served == [user, call, output, answer]


def test_an_unknown_call_type_is_kept_as_it_came_and_linked_by_its_call_id(
    tmp_path: Path,
) -> None:
    """A later SDK's type (`widget_call`): stored opaque; with a `call_id` its output is
    served with it as any call's is; without one (a hosted tool's shape) it is kept."""
    user = {"role": "user", "content": "go"}
    hosted = {"type": "widget_call", "id": "w_0", "status": "completed"}
    call = {"type": "widget_call", "call_id": "w1", "spec": {"size": 3}}
    output = {"type": "widget_call_output", "call_id": "w1", "output": "made"}
    served, groups = _served(tmp_path, [[user, hosted, call], [output]])
    assert served == [user, hosted, call, output]
    assert groups[2] == groups[3] is not None
    error = _refused(tmp_path, {**call, "call_id": 7})
    assert (error.field, error.problem) == ("items[1].call_id", "wrong-type")
    error = _refused(tmp_path, {**output, "call_id": ""})
    assert (error.field, error.problem) == ("items[1].call_id", "empty")


def test_a_server_run_tool_search_is_one_unit_with_its_output(tmp_path: Path) -> None:
    """Paired by order, not by a link: the response holding them is one compaction unit, so
    a summary never serves the output without its call (the SDK pairs a call with the
    anonymous output after it)."""
    eager = lf.CompactionPolicy("v1", keep_tail=1, trigger_tokens=None, min_new_turns=1)
    with lf.SQLiteStore(tmp_path / "search.db") as store:
        session = LedgerfoldSession("s", store=store, policy=eager)
        for n in range(4):
            call = {"type": "tool_search_call", "id": f"ts_{n}", "call_id": None, "arguments": {}}
            output = {"type": "tool_search_output", "id": f"to_{n}", "call_id": None, "tools": []}
            answer = {"role": "assistant", "content": f"found {n}"}
            asyncio.run(session.add_items([{"role": "user", "content": f"q{n}"}, call, output]))
            asyncio.run(session.add_items([answer]))
            served = [item.get("type") for item in asyncio.run(session.get_items())]
            for at, kind in enumerate(served):
                if kind == "tool_search_output":
                    assert served[at - 1] == "tool_search_call", served
        assert store.current_summary("s") is not None  # compaction did run
        turns = store.load("s").turns
        groups: dict[str, list[str | None]] = {"tool_search_call": [], "tool_search_output": []}
        for turn in turns:
            kind = json.loads((turn.meta or {})["agents_item"]).get("type")
            groups.get(kind, []).append(turn.group)
        calls, outputs = groups["tool_search_call"], groups["tool_search_output"]
        assert calls == outputs and None not in calls and len(set(calls)) == 4
