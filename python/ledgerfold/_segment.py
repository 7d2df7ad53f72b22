"""PROVISIONAL pure-Python segmenter (SPEC §16.5 "Normalisation", "Hits").

PROVISIONAL: written by the `search` helper so the index can be built and tested before the
`seg` helper's module (Rust-backed, Porter-stemmed) is merged; the merge replaces this file
wholesale. Same interface as docs in tools/segment-interface.md: `INDEX_VERSION`,
`index_passages(body)`, `query_terms(query)`. Differences from the real one: no stemming,
and per-character work in Python (slow on 100 KB bodies).
"""

from __future__ import annotations

import unicodedata

__all__ = ["INDEX_VERSION", "MAX_QUERY_TERMS", "index_passages", "query_terms"]

INDEX_VERSION = 1

#: At most this many distinct query terms are used (SPEC §16.5).
MAX_QUERY_TERMS = 64

_WINDOW = 600
_SENTENCE_ENDS = frozenset(".!?。！？\n\r\u2028\u2029\x0b\x0c\x85")


def _cjk(char: str) -> bool:
    code = ord(char)
    return (
        0x3040 <= code <= 0x30FF  # Hiragana, Katakana
        or 0x31F0 <= code <= 0x31FF
        or 0x3400 <= code <= 0x4DBF  # CJK extension A
        or 0x4E00 <= code <= 0x9FFF  # CJK unified
        or 0xF900 <= code <= 0xFAFF
        or 0xAC00 <= code <= 0xD7AF  # Hangul syllables
        or 0x1100 <= code <= 0x11FF
        or 0x3130 <= code <= 0x318F
        or 0x20000 <= code <= 0x3FFFF
        or 0xFF66 <= code <= 0xFF9F
    )


def _fold(text: str) -> str:
    text = text.encode("utf-8", "ignore").decode("utf-8") if _has_surrogate(text) else text
    text = unicodedata.normalize("NFKC", text).casefold()
    decomposed = unicodedata.normalize("NFD", text)
    stripped = "".join(c for c in decomposed if not unicodedata.combining(c))
    return unicodedata.normalize("NFC", stripped)


def _has_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def _tokens(text: str) -> list[str]:
    """Normalised tokens in order, duplicates kept."""
    out: list[str] = []
    folded = _fold(text)
    run = ""  # a run of word characters of one class
    kind = ""  # "a" letters, "d" digits, "c" CJK

    def flush() -> None:
        if not run:
            return
        if kind == "c":
            if len(run) == 1:
                out.append(run)
            else:
                out.extend(run[i : i + 2] for i in range(len(run) - 1))
        else:
            out.append(run)

    for char in folded:
        if _cjk(char):
            new = "c"
        elif char.isdigit() and char.isascii():
            new = "d"
        elif char.isalnum():
            new = "a"
        else:
            new = ""
        if new != kind or not new:
            flush()
            run, kind = "", new
        if new:
            run += char
    flush()
    # Token alphabet guarantee: no ASCII other than a-z, 0-9.
    return [t for t in out if t and all(not c.isascii() or c.isalnum() for c in t)]


def _passage_end(body: str, start: int) -> int:
    if len(body) - start <= _WINDOW:
        return len(body)
    window = body[start : start + _WINDOW]
    for index in range(len(window) - 1, _WINDOW // 2 - 1, -1):
        if window[index] in _SENTENCE_ENDS:
            return start + index + 1
    for index in range(len(window) - 1, 0, -1):
        if window[index].isspace():
            return start + index + 1
    return start + _WINDOW


def index_passages(body: str) -> list[tuple[int, int, str]]:
    """`(start, end, tokens)` per passage of `body` holding at least one token."""
    passages: list[tuple[int, int, str]] = []
    start = 0
    while start < len(body):
        end = _passage_end(body, start)
        tokens = _tokens(body[start:end])
        if tokens:
            passages.append((start, end, " ".join(tokens)))
        start = end
    return passages


def query_terms(query: str) -> list[str]:
    """The query's distinct normalised tokens in first-occurrence order, at most 64."""
    return list(dict.fromkeys(_tokens(query)))[:MAX_QUERY_TERMS]
