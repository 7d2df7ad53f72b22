"""Recall's text segmentation (SPEC §16.5 "Normalisation" and "Hits"), computed in Rust.

- `index_passages(body)`: the body's passages as `(start, end, tokens)`: `body[start:end]`
  is the passage (offsets in characters), passages are consecutive and cover the body, and
  `tokens` is the passage's normalised tokens in order, joined by single spaces; passages
  without a token are left out. A passage is at most 600 characters: it ends after the last
  sentence end (`. ! ? 。！？` or a line break) in its window's second half, else after the
  window's last whitespace, else at 600 characters. `body` must be a `str` that encodes as
  UTF-8 (as every turn body does), else `InvalidInput` naming `body`.
- `index_passages_many(bodies)`: `index_passages` of each body, in one call that segments
  a large batch on every core (a non-`str` body is `InvalidInput` naming `body`).
- `query_terms(query)`: the query's tokens, distinct, in first-occurrence order, at most 64.
  Any `str` is valid: a lone surrogate separates words and is dropped. A non-`str` is
  `InvalidInput` naming `query`.

Tokens: each ANSI (ECMA-48) control sequence first made a space (`ESC [` or U+009B,
parameter bytes 0x30-0x3F, intermediate bytes 0x20-0x2F, a final byte 0x40-0x7E: a
command's colours, so `FAILED` between colour codes gives `fail`); the format characters
(Cf: soft hyphen, zero-width joiners, word joiner, BOM, bidi marks) dropped, so they never
split a word, all but U+200B ZERO WIDTH SPACE, a space; NFKC, case-folded, diacritics
removed (the nonspacing marks of Latin, Greek, Cyrillic, Arabic, Hebrew and Syriac, and of
no script in particular; not the vowel signs and viramas of the Brahmic scripts, nor the
kana voicing marks); the characters that only stretch, pad or restyle a word dropped (the
Arabic tatweel U+0640, the Hangul fillers U+115F, U+1160, U+3164, U+FFA0, the Mongolian free
variation selectors U+180B-U+180D, U+180F, the Khmer inherent vowels U+17B4, U+17B5; each
inside a word of its own script only, a separator elsewhere: `foo\u0640bar` is two words);
Arabic's teh marbuta (U+0629) made heh and its alef maksura (U+0649) made yeh, as Apache
Lucene's ArabicNormalizer does, and Persian's farsi yeh (U+06CC) made yeh, keheh (U+06A9)
kaf, heh goal (U+06C1) and heh with yeh above (U+06C0) heh, as its PersianNormalizer does
(not Urdu's yeh barree); every script's decimal digits made ASCII digits (`۳` is `3`); a
digit run is one token; codes split at `-`, `_`, `.`; ASCII words Snowball-English
(Porter2) stemmed; Han, Kana and Hangul runs become overlapping bigrams (a one-character
run stays one token) that digits never join.
A token is non-empty and its only ASCII characters are `a-z` and `0-9`.
`INDEX_VERSION` changes whenever the tokens or passages of some text would.
"""

from __future__ import annotations

from ledgerfold._native import INDEX_VERSION, index_passages, index_passages_many, query_terms

__all__ = ["INDEX_VERSION", "index_passages", "index_passages_many", "query_terms"]
