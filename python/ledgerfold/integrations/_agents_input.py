"""The Agents SDK items `LedgerfoldSession.add_items` takes, checked: each a mapping, kept
as JSON (no NaN or ±Infinity, no lone surrogate), a call or result with its link
(`_agents_links`: a `call_id`, …), an `input_audio` part with its audio, and errors of the
chat messages made from them named by the item's own field (`items[i]...`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledgerfold import _validate
from ledgerfold._errors import InvalidInput
from ledgerfold.adapters._input_audio import check_audio
from ledgerfold.integrations._agents_items import kind, non_finite_at, stored
from ledgerfold.integrations._agents_links import link_of, link_value

__all__ = ["named_for_items", "plain_item", "stored_item"]


def plain_item(item: Any, index: int) -> dict[str, Any]:
    """The item as a dict (an SDK model dumped as JSON); `InvalidInput` naming `items[i]`
    when it is no mapping."""
    # A dict (the usual): neither question below needs asking.
    if type(item) is not dict and hasattr(item, "model_dump"):  # an SDK/pydantic item
        item = item.model_dump(exclude_unset=True, mode="json")
    if type(item) is not dict and not isinstance(item, Mapping):
        raise InvalidInput(
            f"items[{index}]: must be a mapping, got {type(item).__name__}",
            field=f"items[{index}]",
            problem="wrong-type",
        )
    _check_link(item, index)
    _check_audio(item, index)
    return dict(item)


def _check_audio(item: Mapping[str, Any], index: int) -> None:
    """`InvalidInput` naming the wrong key of a message's content part (or a result's
    output part) of type `input_audio` that holds no audio data and format, as the
    chat adapter refuses it (`check_audio`, one check for both): the SDK's Chat Completions
    converter raises at every run served it, and the Responses API takes no such part
    either."""
    field = "content" if kind(item) == "message" else "output"  # any result's output parts
    parts = item.get(field)
    if not isinstance(parts, list):
        return
    for at, part in enumerate(parts):
        if isinstance(part, Mapping) and part.get("type") == "input_audio":
            check_audio(part, f"items[{index}].{field}[{at}]")


def _check_link(item: Mapping[str, Any], index: int) -> None:
    """`InvalidInput` naming `items[i].<key>` when a call or a call's output (`LINKS`, and an
    unknown `*_call` or `*_call_output`) has no link where it needs one, or one that is not a
    non-empty str: a result would be stored and never served (no call is paired with it), a
    call would lose its input, and the API refuses both."""
    link = link_of(kind(item))
    if link is None:
        return
    key, value = link_value(item, link)
    if value is None and link.optional:
        return
    _check_call_id(value, f"items[{index}].{key}")


def _check_call_id(call_id: Any, field: str) -> None:
    """`InvalidInput` naming `field` unless `call_id` is a non-empty str (what the chat
    adapter takes as a call's `id` and a tool message's `tool_call_id`)."""
    if isinstance(call_id, str) and call_id:
        return
    if call_id is None:
        message, problem = "must be a non-empty str", "wrong-type"
    elif isinstance(call_id, str):
        message, problem = "must not be empty", "empty"
    else:
        message, problem = f"must be str, got {type(call_id).__name__}", "wrong-type"
    raise InvalidInput(f"{field}: {message}", field=field, problem=problem)


def stored_item(item: Mapping[str, Any], index: int, body: str | None = None) -> str:
    """The item's verbatim JSON (`stored`, with the turn's text `body`); an item JSON cannot
    keep is bad input, and so is NaN or ±Infinity anywhere in it (Python writes them, but
    they are not JSON: the item would come back in every request, which providers
    refuse)."""
    field = f"items[{index}]"
    try:
        text = stored(item, body)
    except (TypeError, ValueError):  # not JSON: an object, a key that is not a str
        found = non_finite_at(item)
        if found is not None:
            named = field + found
            raise InvalidInput(
                f"{named}: must not be NaN or Infinity (not JSON)",
                field=named,
                problem="not-allowed",
            ) from None
        raise InvalidInput(
            f"{field}: must be JSON (str keys; str, number, bool, null, list and dict values)",
            field=field,
            problem="wrong-type",
        ) from None
    try:
        return _validate.text(field, text, blank_ok=True)  # no lone surrogate in any field
    except InvalidInput:
        named = field + (_validate.unencodable_at(item) or "")  # where it sits
        raise InvalidInput(
            f"{named}: must encode as UTF-8 (lone surrogates are invalid)",
            field=named,
            problem="not-utf8",
        ) from None


_ITEM_FIELDS = (
    (".tool_calls[0].id", ".call_id"),
    (".tool_calls[0].function.name", ".name"),
    (".tool_calls[0].function.arguments", ".arguments"),
    (".tool_call_id", ".call_id"),
)


def named_for_items(error: InvalidInput, items: list[dict[str, Any]]) -> InvalidInput:
    """`error` of the chat messages made from the items (`messages[i]...`, one message an
    item) naming the item's field instead (`items[i]...`); a lone surrogate is named where
    it sits in the item (an output's or a summary's text is a message's content)."""
    field = error.field
    if field is None or not field.startswith("messages["):
        return error
    if error.problem == "not-utf8":
        for index, item in enumerate(items):
            found = _validate.unencodable_at(item)
            if found is not None:
                named = f"items[{index}]{found}"
                return InvalidInput(
                    f"{named}: must encode as UTF-8 (lone surrogates are invalid)",
                    field=named,
                    problem="not-utf8",
                )
    named = "items" + field[len("messages") :]
    for made, own in _ITEM_FIELDS:
        if named.endswith(made):
            named = named[: -len(made)] + own
            break
    message = str(error)
    message = named + message[len(field) :] if message.startswith(field) else message
    return InvalidInput(message, field=named, problem=error.problem)
