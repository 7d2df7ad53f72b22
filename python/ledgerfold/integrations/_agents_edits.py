"""An Agents SDK item whose turn was edited (`LedgerfoldSession`, SPEC §17.6: the ledger is
the record). A str text field is kept once, as the turn's text, so an edit of the turn is
what the item gives back. A message's list of content parts, or a result's list output,
stays in the item's verbatim copy, and its turn holds their text: the copy then carries a
digest of that text (`BODY_KEY`), and when the turn's text no longer matches it (an edit,
e.g. a redaction) the item is served with the turn's text in place of its parts' text,
its images and files kept. A copy stored before the digest was kept is served as stored.
A reasoning item's turn holds its summary's text, else (an open-weight model's, whose
summary is empty) its `reasoning_text` content's (`reasoning_field`): that field is kept
so too. Also the shapes of a result's output that hold its text (`is_part`,
`output_streams`)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

__all__ = [
    "BODY_KEY",
    "TEXTS_KEY",
    "body_digest",
    "held_text",
    "is_part",
    "output_streams",
    "reasoning_field",
    "text_restored",
    "with_text",
]

#: The key of the digest of the turn's text in an item's verbatim copy.
BODY_KEY = "__ledgerfold_body__"

# The content parts whose text the turn holds (`_agents_items._TEXT_PARTS`).
_TEXT_PARTS = frozenset({None, "text", "input_text", "output_text", "refusal"})

#: The key of a text part's length in the copy, where the part's text is the turn's.
LENGTH_KEY = "__ledgerfold_length__"
#: The key marking a copy whose text parts hold their lengths (`parts_without_text`).
TEXTS_KEY = "__ledgerfold_texts__"

# The key of each text part's text (as the chat adapter joins them into the turn's text).
_TEXT_KEY: dict[object, str] = {
    "text": "text",
    "input_text": "text",
    "output_text": "text",
    "refusal": "refusal",
    "summary_text": "text",
    "reasoning_text": "text",
}

#: A reasoning item's fields that may hold the turn's text, and the type of their parts.
_REASONING_PARTS = {"summary": "summary_text", "content": "reasoning_text"}


def body_digest(text: str) -> str:
    """What the copy knows the turn's text by (not the text: it is in the turn)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def with_text(item: dict[str, Any], field: str, text: str, role: Any) -> dict[str, Any]:
    """`item` with `text` as the text of its `field` (`content` or `output`): a list of parts
    keeps its other parts after one text part; a shell's output one entry with `text` as
    its stdout; any other output becomes `text`."""
    value = item.get(field)
    if item.get("type") == "reasoning" and field in _REASONING_PARTS:
        return {**item, field: [{"type": _REASONING_PARTS[field], "text": text}] if text else []}
    if not isinstance(value, list):
        return {**item, field: text}
    if value and all(_shell_entry(entry) for entry in value):
        first = value[0]
        return {**item, field: [{**first, "stdout": text, "stderr": ""}]}
    kept = [
        part for part in value if isinstance(part, Mapping) and part.get("type") not in _TEXT_PARTS
    ]
    if role == "assistant" and field == "content":
        said: dict[str, Any] = {"type": "output_text", "text": text, "annotations": []}
    else:
        said = {"type": "input_text", "text": text}
    return {**item, field: [said, *kept] if text or not kept else kept}


def _shell_entry(entry: Any) -> bool:
    return (
        isinstance(entry, Mapping)
        and "type" not in entry
        and ("stdout" in entry or "stderr" in entry)
    )


def output_streams(output: list[Any]) -> list[str]:
    """The non-empty `stdout` and `stderr` texts of a `shell_call_output`'s output."""
    return [
        text
        for entry in output
        if isinstance(entry, Mapping)
        for text in (entry.get("stdout"), entry.get("stderr"))
        if isinstance(text, str) and text
    ]


def is_part(part: Any) -> bool:
    """A content part of a result's output (a str, or a mapping with a `type`)."""
    return isinstance(part, str) or (
        isinstance(part, Mapping) and isinstance(part.get("type"), str)
    )


def parts_without_text(parts: Any, body: str) -> list[Any] | None:
    """A message's content parts as its copy keeps them when their texts, joined, are the
    turn's text `body`: each text part holds its length (`LENGTH_KEY`) instead of its text,
    which the turn holds, so the text is stored, and counted as context tokens, once. None
    (keep the parts as they are) when they are anything else."""
    if not isinstance(parts, list):
        return None
    kept: list[Any] = []
    texts: list[str] = []
    for part in parts:
        key = _TEXT_KEY.get(part.get("type")) if isinstance(part, Mapping) else None
        if key is None:
            kept.append(part)
            continue
        said = part.get(key)
        if not isinstance(said, str) or LENGTH_KEY in part:
            return None
        texts.append(said)
        kept.append({**{k: v for k, v in part.items() if k != key}, LENGTH_KEY: len(said)})
    if not texts or "".join(texts) != body:
        return None
    return kept


def parts_refilled(parts: Any, text: str) -> Any:
    """The parts `parts_without_text` kept (a copy marked `TEXTS_KEY`), each text part's text
    cut again from the turn's `text` (unedited: its digest is the copy's). A text part
    without its length, or lengths that do not add up to the text, are a damaged copy:
    `ValueError`."""
    if not isinstance(parts, list):
        raise ValueError("not a list of parts")
    start = 0
    for part in parts:
        key = _TEXT_KEY.get(part.get("type")) if isinstance(part, dict) else None
        if key is None:
            continue
        length = part.pop(LENGTH_KEY, None)
        if not isinstance(length, int) or isinstance(length, bool) or length < 0:
            raise ValueError("not a part's length")
        part[key] = text[start : start + length]
        start += length
    if start != len(text):
        raise ValueError("the parts' lengths are not the text's")
    return parts


def held_text(item: Mapping[str, Any], field: str, body: str) -> Mapping[str, Any]:
    """The copy of an item whose `field` (a list of parts, a result's output) the turn
    holds the text `body` of: with the text's digest (`BODY_KEY`) and, for a message's
    parts, each text part's length instead of its text (`parts_without_text`, `TEXTS_KEY`).
    A copy that has the digest already is kept as it is."""
    if BODY_KEY in item:
        return item
    item = {**item, BODY_KEY: body_digest(body)}
    if field in _REASONING_PARTS and TEXTS_KEY not in item:
        parts = parts_without_text(item[field], body)
        if parts is not None:  # (`True`: the content's, as a message's copy says it)
            item.update({field: parts, TEXTS_KEY: True if field == "content" else field})
    return item


def reasoning_field(item: Mapping[str, Any]) -> str | None:
    """The field of a reasoning item (or its copy) whose text is the turn's: the one its copy
    cut (`TEXTS_KEY`), else `summary` when it has text, else `content` when it has text."""
    cut = item.get(TEXTS_KEY)
    if cut is not None:
        return "content" if cut is True else cut if cut in _REASONING_PARTS else None
    for field in _REASONING_PARTS:
        parts = item.get(field)
        if isinstance(parts, list) and any(
            isinstance(part, Mapping) and part.get("text") for part in parts
        ):
            return field
    return None


def text_restored(item: dict[str, Any], field: str | None, text: str) -> dict[str, Any]:
    """The item a `held_text` copy was made of, from the turn's `text`: as it came, or with
    the turn's text in place of its parts' when the turn was edited (`with_text`). A copy
    without the digest (stored before it was kept) is the item."""
    held = item.pop(BODY_KEY, None)
    cut = item.pop(TEXTS_KEY, None)
    if held is not None and field is not None and held != body_digest(text):
        return with_text(item, field, text, item.get("role"))  # the turn was edited
    if cut is not None and field in _REASONING_PARTS:
        item[field] = parts_refilled(item[field], text)
    return item
