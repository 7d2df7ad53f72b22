"""The key that links each Responses item that is a tool call, or a call's output, to the
other (SPEC §17.2's tool-call link), for `LedgerfoldSession`: one table (`LINKS`) for every
such type the installed `openai` package defines (tests/test_agents_links.py holds the
table to the package, so a type a later SDK adds fails that test until it is here), and the
one rule `add_items` checks it by (`_agents_input`).

- Most calls and their outputs link by `call_id`, which their Responses types require
  (`function_call_output`'s is optional to the API, but the SDK writes one on every result
  and a result without one is never served: required here).
- A `local_shell_call_output` links by `call_id` as the Agents SDK writes it, or by `id` as
  the API's own type has it (its `id` is "the unique ID of the local shell tool call").
- A `tool_search_call` and `tool_search_output` may have none (absent or null): the server
  ran the search and the SDK pairs them by order; when present it must be a link.
- An `mcp_approval_request` links by its `id`, its `mcp_approval_response` by
  `approval_request_id`.
- A hosted tool's item (`HOSTED`: a web search, a file search, …) is call and result in one
  item: nothing links it to another item, and nothing is checked.
- Any other `*_call` or `*_call_output` type (a later SDK's) is stored as it came, linked
  by its `call_id` when it has one; a `call_id` that is not a non-empty str is refused.
  Such an item may be a hosted tool's, which has no link (as `web_search_call` has none):
  refusing it would make every run of that tool fail in `add_items` until ledgerfold knew
  the type, while the table test fails for it the day the SDK is upgraded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["HOSTED", "LINKS", "Link", "link_of", "link_value", "unknown_call"]


@dataclass(frozen=True, slots=True)
class Link:
    """How an item type is linked: by the first of `keys` it has (not None); `output` when
    the item answers a call (else it makes one); `optional` when it may have none."""

    keys: tuple[str, ...]
    output: bool
    optional: bool = False


_CALL = Link(("call_id",), output=False)
_OUTPUT = Link(("call_id",), output=True)

#: Every Responses item type that is a tool call or a call's output, and its link.
LINKS: dict[str, Link] = {
    "function_call": _CALL,
    "function_call_output": _OUTPUT,
    "custom_tool_call": _CALL,
    "custom_tool_call_output": _OUTPUT,
    "computer_call": _CALL,
    "computer_call_output": _OUTPUT,
    "shell_call": _CALL,
    "shell_call_output": _OUTPUT,
    "apply_patch_call": _CALL,
    "apply_patch_call_output": _OUTPUT,
    "local_shell_call": _CALL,
    "local_shell_call_output": Link(("call_id", "id"), output=True),
    "program": _CALL,
    "program_output": _OUTPUT,
    "tool_search_call": Link(("call_id",), output=False, optional=True),
    "tool_search_output": Link(("call_id",), output=True, optional=True),
    "mcp_approval_request": Link(("id",), output=False),
    "mcp_approval_response": Link(("approval_request_id",), output=True),
}

#: The hosted tools' items: the call and its result in one item, which nothing answers.
HOSTED = frozenset(
    {
        "file_search_call",
        "web_search_call",
        "image_generation_call",
        "code_interpreter_call",
        "mcp_call",
        "mcp_list_tools",
    }
)

#: The link of a type no table names, ending in `_call` or `_call_output` (`unknown_call`).
_UNKNOWN_CALL = Link(("call_id",), output=False, optional=True)
_UNKNOWN_OUTPUT = Link(("call_id",), output=True, optional=True)


def unknown_call(name: Any) -> bool:
    """`name` is a `*_call` or `*_call_output` type neither `LINKS` nor `HOSTED` names."""
    return (
        isinstance(name, str)
        and name not in LINKS
        and name not in HOSTED
        and name.endswith(("_call", "_call_output"))
    )


def link_of(name: Any) -> Link | None:
    """The link of an item of type `name`: the table's, an unknown call's or output's (its
    `call_id`, when it has one), or None (no call, no output: a message, a hosted tool)."""
    if not isinstance(name, str):
        return None
    link = LINKS.get(name)
    if link is not None or not unknown_call(name):
        return link
    return _UNKNOWN_OUTPUT if name.endswith("_output") else _UNKNOWN_CALL


def link_value(item: Mapping[str, Any], link: Link) -> tuple[str, Any]:
    """The key that links `item` and its value: the first of `link.keys` the item has (not
    None), else the first key and None."""
    for key in link.keys:
        value = item.get(key)
        if value is not None:
            return key, value
    return link.keys[0], None
