"""Token counting for budgets and compaction triggers (SPEC §13).

`approx_tokens` is the default counter: a fast, model-independent approximation, not a
tokenizer. BPE tokenizers of current chat models average about four characters per token
on English, code and other Latin-script text, while each CJK ideograph, kana or hangul
syllable usually costs a token of its own (often more). So:

    tokens(text) = (CJK/kana/hangul characters) + ceil((all other characters) / 4)

counted in code points, not bytes, so accented Latin text is not overcounted. A model's
chat template also wraps every message in a few tokens of framing; `context_tokens` adds
`MESSAGE_OVERHEAD_TOKENS` per item for that. Pass the model's real tokenizer as
`CompactionPolicy(token_counter=...)` when exact counts matter: `tiktoken_counter()` gives
tiktoken's count when the `tiktoken` package is installed and the encoding's file is
already in tiktoken's cache (``TIKTOKEN_CACHE_DIR``, else ``DATA_GYM_CACHE_DIR``, else
``<tmp>/data-gym-cache``), and `approx_tokens` otherwise: it never downloads anything.
A context sent with `to_langchain_messages` is counted as sent with `LangChainCounter`
around the counter (a tool's images go to LangChain, not the line naming them).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from typing import Any

from ledgerfold._context import ContextItem, SummaryItem, TurnItem
from ledgerfold._errors import InvalidInput
from ledgerfold.adapters._chat_parts import session_parts, tool_content, user_content

__all__ = [
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD_TOKENS",
    "LangChainCounter",
    "TokenCounter",
    "approx_tokens",
    "context_tokens",
    "tiktoken_counter",
]

#: A token counter: the number of tokens one message's text costs.
TokenCounter = Callable[[str], int]

#: Framing tokens a chat template adds around every message (role markers, separators).
MESSAGE_OVERHEAD_TOKENS = 4

#: Tokens an image counts, whose data is not counted as text: what LangChain's
#: `count_tokens_approximately` charges (`tokens_per_image`, OpenAI's low-detail cost).
IMAGE_TOKENS = 85

# Scripts where one character is about one token: hangul jamo, CJK radicals through the
# unified ideographs (includes CJK punctuation, hiragana, katakana, bopomofo), hangul
# syllables, CJK compatibility ideographs and forms, full/half-width forms, the kana
# supplements and the supplementary ideograph planes.
_WIDE = re.compile(
    "[\u1100-\u11ff\u2e80-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f"
    "\uff00-\uffef\U0001b000-\U0001b16f\U00020000-\U0003ffff]"
)


# Characters that are never wide: all those before the first wide range. Taking their runs
# out first leaves `_WIDE` few characters to try (a regex skips a run of one range much
# faster than it tries a class of ranges at each character).
_NARROW_RUNS = re.compile("[\x00-\u10ff]+")


def wide_chars(text: str) -> int:
    """How many characters of `text` `approx_tokens` counts as one token each."""
    if text.isascii():
        return 0
    return len(_WIDE.findall(_NARROW_RUNS.sub("", text)))


def approx_tokens(text: str) -> int:
    """About one token per 4 characters, one per CJK/kana/hangul character (module doc)."""
    return approx_of_counts(len(text), wide_chars(text))


def approx_of_counts(chars: int, wide: int) -> int:
    """`approx_tokens` of a text of `chars` characters, `wide` of them wide: so a text's
    count can be made from its parts' counts without the text (`ExtractiveSummarizer`)."""
    return wide + (chars - wide + 3) // 4


def context_tokens(
    items: Iterable[ContextItem], token_counter: TokenCounter = approx_tokens
) -> int:
    """Tokens of a context's items: each item's text and meta values (tool calls are sent to
    the model too) plus `MESSAGE_OVERHEAD_TOKENS` per item. A message's `content_parts` (its
    image, audio and file parts, kept as JSON text by the chat adapter) are not counted: their
    text is the item's own, and an image's base64 data is not text the model reads; nor is
    the list of their types (`omitted_content_parts`), which is never sent; nor is a
    reasoning model's `reasoning_content` or a LangChain tool result's `artifact`, which are
    kept but not sent back, nor a data URL in any other meta value (an image in an Agents SDK
    item's copy), nor a reasoning item's `encrypted_content` there (opaque). Each image
    among them counts `IMAGE_TOKENS` instead: a budget still sees the images it sends. A tool
    turn with such parts counts as `to_chat_messages` sends it: its text, then the line naming
    them (`[image_url not shown: this tool result is sent as text only]`), not its images (a
    Chat Completions tool message takes text only); counted for LangChain
    (`LangChainCounter`), with its images and without the line, unless its parts cannot be
    sent."""
    return sum(item_tokens(item, token_counter) for item in items)


def item_tokens(item: ContextItem, token_counter: TokenCounter = approx_tokens) -> int:
    """Tokens of one context item, as `context_tokens` counts them."""
    if isinstance(item, SummaryItem) or not item.meta:
        return MESSAGE_OVERHEAD_TOKENS + _count(token_counter, item.text)
    meta = item.meta
    total = MESSAGE_OVERHEAD_TOKENS
    for key, value in meta.items():
        if key not in _NOT_COUNTED:
            images = value.count('"data:image/')
            total += _count(token_counter, _without_data(value)) + IMAGE_TOKENS * images
    parts = meta.get(_PARTS_KEY)
    text = item.text
    if item.role != "tool":  # a user turn's images go with its text
        total += IMAGE_TOKENS * _images(parts) if parts is not None else 0
    elif parts is not None or _OMITTED_KEY in meta:
        # A tool turn goes as its text, then the line naming its parts (`tool_content`: a
        # Chat Completions tool message takes text only), its images unsent; to LangChain
        # with its parts instead (a `ToolMessage` takes them), when they can be sent.
        if isinstance(token_counter, LangChainCounter) and _parts_sent(item, meta):
            total += IMAGE_TOKENS * _images(parts) if parts is not None else 0
        else:
            text = tool_content(text, meta.get(_OMITTED_KEY))
    return total + _count(token_counter, text)


class LangChainCounter:
    """A token counter for a context sent to a LangChain model (`to_langchain_messages`):
    `counter`'s counts (default `approx_tokens`), but `context_tokens` counts a tool turn as a
    `ToolMessage` gets it, with its image parts (each `IMAGE_TOKENS`) and without the line
    `to_chat_messages` sends in their place, which LangChain never sends for a turn whose parts
    go. `LedgerfoldMiddleware` wraps its policy's counter in one; give a `Compactor` of your
    own whose context goes through `to_langchain_messages` one too:
    `CompactionPolicy(..., token_counter=LangChainCounter(tiktoken_counter()))`. A `counter`
    that is not callable raises `InvalidInput` naming `counter`."""

    __slots__ = ("counter",)

    def __init__(self, counter: TokenCounter = approx_tokens) -> None:
        if not callable(counter):
            raise InvalidInput(
                f"counter: must be a callable str -> int, got {type(counter).__name__}",
                field="counter",
                problem="wrong-type",
            )
        self.counter = counter

    def __call__(self, text: str) -> int:
        return self.counter(text)

    def __repr__(self) -> str:
        return f"LangChainCounter({self.counter!r})"


def _parts_sent(item: TurnItem, meta: dict[str, str]) -> bool:
    """Whether a tool turn goes to LangChain with its kept parts (`to_langchain_messages`:
    its content a list of them), not as its text and the line naming them."""
    kept = meta.get(_PARTS_KEY) or session_parts(item.role, item.text, meta)
    return kept is not None and not isinstance(user_content(item.text, kept, every=True), str)


def _images(parts: str) -> int:
    """The image parts among a message's kept content parts (JSON text)."""
    if '"image' not in parts:
        return 0
    try:
        decoded = json.loads(parts)
    except (ValueError, RecursionError):
        return 0
    if not isinstance(decoded, list):
        return 0
    return sum(isinstance(p, dict) and p.get("type") in _IMAGE_TYPES for p in decoded)


#: The content parts that are images: Chat Completions', the Responses API's, LangChain's.
_IMAGE_TYPES = frozenset({"image_url", "input_image", "image"})
_PARTS_KEY = "content_parts"
_OMITTED_KEY = "omitted_content_parts"


def _without_data(value: str) -> str:
    """A meta value (JSON text, such as an Agents SDK item's copy) without its data URLs (an
    image or file sent inline as base64 is not text the model reads) and without a reasoning
    item's `encrypted_content` (opaque: no text the model reads as such)."""
    if '"data:' in value:
        value = _DATA_URL.sub('""', value)
    if '"encrypted_content"' in value:
        value = _ENCRYPTED.sub('"encrypted_content": ""', value)
    return value


# A JSON string that is a data URL (`"data:image/png;base64,..."`).
_DATA_URL = re.compile(r'"data:[^"\\]*"')
# A JSON object's `encrypted_content` string member (a reasoning item's, in an item's copy).
_ENCRYPTED = re.compile(r'"encrypted_content"\s*:\s*"[^"\\]*"')


#: Meta keys not counted as text: a chat message's content parts (their text is the turn's
#: own; their images count `IMAGE_TOKENS`) and their types (`omitted_content_parts`: never
#: sent; a tool turn's line naming them is counted instead), a reasoning model's
#: `reasoning_content` (kept, never sent back: `ledgerfold.adapters`) and a LangChain
#: `ToolMessage`'s `artifact` (kept, never sent to the model).
_NOT_COUNTED = frozenset(
    {"content_parts", "omitted_content_parts", "reasoning_content", "artifact"}
)


def _count(token_counter: TokenCounter, text: str) -> int:
    tokens = token_counter(text)
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise InvalidInput(
            f"token_counter: must return an int >= 0, got {type(tokens).__name__}",
            field="token_counter",
            problem="wrong-type",
        )
    return tokens


# Where tiktoken keeps the encodings it publishes (tiktoken_ext.openai_public).
_TIKTOKEN_BLOBS = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"


def _tiktoken_cached(name: str) -> bool:
    """Whether tiktoken would load encoding `name` from its cache, without a download."""
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR"))
    if cache_dir is None:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not cache_dir:  # caching disabled: every load would download
        return False
    key = hashlib.sha1(_TIKTOKEN_BLOBS.format(name=name).encode()).hexdigest()
    return os.path.isfile(os.path.join(cache_dir, key))


def tiktoken_counter(encoding: Any = "o200k_base", *, model: str | None = None) -> TokenCounter:
    """A token counter using tiktoken when it can work offline, else `approx_tokens`.

    `encoding` is a tiktoken encoding name (``o200k_base``, ``cl100k_base``, ...) or a
    `tiktoken.Encoding`; `model` (e.g. ``"gpt-4o"``) picks the encoding by tiktoken's model
    table instead. An encoding by name is used only when its file is already in tiktoken's
    cache (see the module doc): no download is ever tried. Otherwise, or without the
    `tiktoken` package, the result is `approx_tokens` itself, so `counter is approx_tokens`
    tells which one you got. Special-token text (``<|endoftext|>``) counts as ordinary text.
    """
    try:
        import tiktoken
    except ImportError:
        return approx_tokens
    if isinstance(encoding, tiktoken.Encoding):
        found = encoding
    else:
        if model is not None:
            try:
                encoding = tiktoken.encoding_name_for_model(model)
            except KeyError:
                return approx_tokens
        if not isinstance(encoding, str) or not _tiktoken_cached(encoding):
            return approx_tokens
        try:
            found = tiktoken.get_encoding(encoding)
        except Exception:  # a bad cache file, an unknown name: fall back, never fail
            return approx_tokens

    def count(text: str) -> int:
        return len(found.encode(text, disallowed_special=()))

    count.__name__ = f"tiktoken_{found.name}"
    return count
