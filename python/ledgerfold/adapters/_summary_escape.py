"""Escaping a summary's text for the delimited data block of the chat messages (SPEC §8,
§15.6), so it cannot pose as a turn, a delimiter or a chat-template token.

Summary escaping (`escape_summary_text`, reversed by `unescape_summary_text`) is one pass
over the text; every replacement is an HTML-style entity, so the text stays readable:

- ``&`` → ``&amp;`` when it starts something entity-shaped (``&name;``, ``&#91;``), so that
  unescaping is exact;
- ``<`` → ``&lt;`` when a tag or special token could start there: before a letter, ``/``,
  ``!``, ``?``, ``|`` or ``｜`` (``</ledgerfold-summary>``, ``<|im_start|>``, ``<s>``,
  ``</s>``, ``<|eot_id|>``, ``<start_of_turn>``, ``<｜User｜>``, ``<<SYS>>`` ...), and
  before blanks then ``/``, ``|``, ``｜`` or the frame's name (``< ledgerfold-summary>``);
  and ``>`` → ``&gt;`` after ``|``/``｜`` (the end of ``<|...|>`` tokens). ``a < b`` is left alone;
- ``[`` → ``&#91;`` before an all-caps bracket token (``[INST]``, ``[/INST]``,
  ``[SYSTEM_PROMPT]``, ``[TOOL_CALLS]`` ...);
- at the start of a line (after any Unicode spaces, such as U+00A0 or U+3000, and invisible
  ones such as U+200B; every Unicode line break counts), the colon of a role prefix
  (``system:``, ``user:``, ``assistant:``, ``tool:``, ``human:``, ``ai:``, ``developer:``,
  ``function:``, ``model:``, ``bot:``) → ``&#58;``, also inside markdown emphasis
  (``**User:**``, ``_user_:``), and the first ``#`` of a role heading (``### Instruction``,
  ``## Response``, ``### User`` ...) → ``&#35;``.

The rules are matched on the text as a reader (or a model) sees it: NFKC-normalised, with
the invisible format characters (Unicode category Cf: U+200B, U+00AD, bidi controls ...),
the other characters drawn as nothing (variation selectors, U+034F, Hangul fillers) and
the combining marks drawn on another (``<\u0301/`` is ``</`` to a reader) left out, and
the look-alikes of ``<`` and ``>`` that NFKC leaves as they are (Unicode's
confusables of them, ``˂`` U+02C2, ``ᐸ`` U+1438, ``‹`` U+2039 ..., and the angle
brackets ``⟨`` ``〈``) read as them, and so do the look-alikes of the role and heading
words' letters in other scripts (Cyrillic ``а`` ``ѕ`` ``у``, Greek ``ο`` ``Τ``, small
capitals ``ᴀ`` ...: ``_LOOKALIKE_LETTERS``) and of the colon (``∶`` U+2236, ``꞉`` U+A789
...: ``_COLONS``), so ``Ｕｓｅｒ:``, ``user：``, ``us\u200ber:``,
``user\ufe0f:``, ``Ѕуѕtem:``, ``＜/ledgerfold-summary＞`` and ``˂/ledgerfold-summary˃`` are
caught too.
The character that is replaced is the original one: an ASCII one by the entity above, any
other (``：``, ``＜``, ``˂`` ...) by its decimal entity
(``&#65306;``), so unescaping stays exact.
"""

from __future__ import annotations

import bisect
import re
import unicodedata

__all__ = ["escape_summary_text", "unescape_summary_text"]

_LINE_BREAKS = r"\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
_LINE_START = rf"(?:^|(?<=[{_LINE_BREAKS}]))"
# Any Unicode space but a line break, and the invisible characters a reader or a model skips
# as well: a prefix after U+00A0, U+3000 or U+200B still reads as a role (SPEC §15.6).
_BLANK = rf"(?:[^\S{_LINE_BREAKS}]|[\u180e\u200b-\u200d\u2060\ufeff])"
# Before and after a role word: blanks and markdown emphasis (`**User:**`, `_user_:`).
_LEAD = rf"(?:{_BLANK}|[*_~`])"
_ROLE_WORDS = r"system|user|assistant|tool|human|ai|developer|function|model|bot"
_HEADING_WORDS = r"instructions?|response|input|system|user|assistant|human|tool|context"
_ESCAPE_PATTERN = re.compile(
    r"(?P<amp>&)(?=[A-Za-z#][A-Za-z0-9]*;)"
    r"|(?P<lt><)(?=[A-Za-z/!?|｜]|\s+(?:[/|｜]|(?i:ledgerfold-summary)))"
    r"|(?<=[|｜])(?P<gt>>)"
    r"|(?P<bracket>\[)(?=/?[A-Z][A-Z0-9_]*\])"
    rf"|{_LINE_START}(?P<role>{_LEAD}*(?i:{_ROLE_WORDS}){_LEAD}*):"
    rf"|{_LINE_START}(?P<heading>{_BLANK}*)#(?=#*{_BLANK}*(?i:{_HEADING_WORDS})\b)"
)
_UNESCAPE_PATTERN = re.compile(r"&(amp|lt|gt|#[0-9]+);")
_UNESCAPES = {"amp": "&", "lt": "<", "gt": ">"}
# The ASCII character each rule replaces, and its entity.
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "[": "&#91;", ":": "&#58;", "#": "&#35;"}
_LINE_BREAK = re.compile(f"[{_LINE_BREAKS}]")
# Characters drawn as nothing that are not format characters (Cf), which a reader skips as
# well: Default_Ignorable_Code_Point minus Cf (variation selectors, U+034F, the Mongolian and
# Khmer invisible marks, the Hangul fillers, the reserved ranges). `<\ufe0f/...` reads as `</`.
_INVISIBLE = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180d\u180f\u3164\ufe00-\ufe0f\uffa0"
    "\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)
# Left out of the reader's view with the invisible characters: format characters (Cf), and
# combining marks (Mn, Me), which are drawn on the character before them: `<\u0301/...` is
# still `</...` to a reader.
_DRAWN_ON_OTHERS = frozenset(("Cf", "Mn", "Me"))
# Characters a reader (or a model) takes for `<` or `>` that NFKC leaves as they are: the
# confusables of U+003C and U+003E in Unicode's confusables.txt, and the angle brackets drawn
# as them. `˂/ledgerfold-summary˃` would otherwise close the frame to a reader, unescaped.
_ANGLES = {
    **dict.fromkeys("\u02c2\u1438\u16b2\u2039\u276e\U0001d236\u27e8\u3008", "<"),
    **dict.fromkeys("\u02c3\u1433\u203a\u276f\U00016f3f\U0001d237\u27e9\u3009", ">"),
}
# Letters of other scripts (Cyrillic, Greek, Armenian, Cherokee, Lisu, Coptic) and Latin
# small capitals a reader takes for the Latin letters of the role and heading words
# (`_ROLE_WORDS`, `_HEADING_WORDS`: a-f, h, i, l-p, r-v, x, y): for those letters, their
# look-alikes in Unicode's confusables.txt that NFKC leaves as they are (the idea of its
# skeleton, kept to the letters the rules match, not a general table), and the small
# capitals drawn as them. `Ѕуѕtem:` (Cyrillic Ѕ, у, ѕ) would otherwise pose as a role.
_LOOKALIKE_LETTERS = {
    "a": "аαɑᴀ",
    "A": "АΑᎪꓮ",
    "b": "ЬƄʙ",
    "B": "ВΒᏴꓐ",
    "c": "сϲᴄⲥ",
    "C": "СϹᏟꓚ",
    "d": "ԁᴅ",
    "D": "Ꭰꓓ",
    "e": "еҽᴇ",
    "E": "ЕΕᎬꓰ",
    "f": "ꜰ",
    "F": "Ϝꓝ",
    "h": "һнʜ",
    "H": "НΗᎻꓧ",
    "i": "іιɩıɪ",
    "I": "ІΙꓲ",
    "l": "ӏӀǀʟ",
    "L": "Ꮮꓡ",
    "m": "мᴍ",
    "M": "МΜᎷꓟ",
    "n": "ոɴ",
    "N": "Νꓠ",
    "o": "оοօσᴏⲟ",
    "O": "ОΟՕⲞꓳ",
    "p": "рρⲣᴘ",
    "P": "РΡᏢꓑ",
    "r": "гʀᴦ",
    "R": "ᎡꓣƦ",
    "s": "ѕꜱ",
    "S": "ЅᏚꓢՏ",
    "t": "тᴛ",
    "T": "ТΤᎢꓔ",
    "u": "υսᴜ",
    "U": "Սꓴ",
    "v": "νѵᴠ",
    "V": "ѴᏙꓦ",
    "x": "х",
    "X": "ХΧꓫ",
    "y": "уγүʏ",
    "Y": "ҮΥꓬ",
}
# The confusables of `:` in confusables.txt that NFKC leaves as they are (or makes `..`):
# `System∶` (U+2236 RATIO), `System꞉` (U+A789) read as a role prefix as `System:` does.
_COLONS = (
    "\u02d0\u02f8\u0589\u05c3\u0703\u0704\u0903\u0a83\u1365\u16ec\u1803\u1809"
    "\u205a\u2236\u2d42\ua4fd\ua789\ufe30"
)
# Each look-alike (an angle bracket, a letter, a colon) as the ASCII character a reader sees.
_LOOKALIKES = {
    **_ANGLES,
    **{look: ascii for ascii, looks in _LOOKALIKE_LETTERS.items() for look in looks},
    **dict.fromkeys(_COLONS, ":"),
}
# Where a match of `_ESCAPE_PATTERN` can start besides a line start: its other rules begin
# with one of these characters (`_escaped_at_all`).
_RULE_START = re.compile(r"[&<>\[]")


def _escaped_at(match: re.Match[str]) -> int:
    """The index (in the searched text) of the one character a match replaces: the colon of
    a role prefix, the `#` of a heading, else the match's first character."""
    if match["role"] is not None or match["heading"] is not None:
        return match.end() - 1
    return match.start()


def _escaped_at_all(view: str) -> list[int]:
    """`_escaped_at` of every match of `_ESCAPE_PATTERN.finditer(view)`, found by trying the
    pattern only where a match can start: at a line start (the role and heading rules) or
    at one of `&`, `<`, `>`, `[` (the others). In order, each tried at or after the end of
    the previous match, as `finditer` does (no match is empty); a match at a position is the
    same whether the pattern is searched or anchored there (`match(view, start)`: `^` is
    only the string's start, and lookbehind sees the text before `start`). Scanning every
    position with the whole pattern took 0.2-0.5 ms for a summary of 3,000 characters."""
    starts = set(_line_starts(view))
    starts.update(found.start() for found in _RULE_START.finditer(view))
    positions: list[int] = []
    end = 0
    for start in sorted(starts):
        if start < end:
            continue
        match = _ESCAPE_PATTERN.match(view, start)
        if match is not None:
            positions.append(_escaped_at(match))
            end = match.end()
    return positions


def _reader_table(text: str) -> dict[int, str | None]:
    """How a reader sees the characters of `text` that are not as they are: format
    characters (Cf), combining marks (Mn, Me: drawn on the character before them) and the
    other invisible ones (`_INVISIBLE`) dropped, others NFKC-normalised, a look-alike angle
    bracket or letter (before or after NFKC) then as the ASCII one (`_LOOKALIKES`; for
    `str.translate`). Line breaks are never changed, so a line of the view is the same line
    of `text`."""
    table: dict[int, str | None] = {}
    for char in set(text):
        if char.isascii():
            continue
        if unicodedata.category(char) in _DRAWN_ON_OTHERS or _INVISIBLE.match(char):
            table[ord(char)] = None
        else:
            seen = unicodedata.normalize("NFKC", char)
            seen = _LOOKALIKES.get(char) or _LOOKALIKES.get(seen, seen)
            if seen != char:
                table[ord(char)] = seen
    return table


def _view(text: str, table: dict[int, str | None]) -> str:
    """`text.translate(table)`. When every replacement is ASCII (or nothing), which no key
    is, replacing the table's characters one after another is the same, and faster than
    `translate` over non-ASCII text (its usual table is one character, `…` → `...`)."""
    if all(seen is None or seen.isascii() for seen in table.values()):
        for code, seen in table.items():
            text = text.replace(chr(code), seen or "")
        return text
    return text.translate(table)


def _line_starts(text: str) -> list[int]:
    return [0, *(found.end() for found in _LINE_BREAK.finditer(text))]


def escape_summary_text(text: str) -> str:
    """Escape summary text for the delimited data block (see the module docstring). Nothing
    is kept: the integrations keep the message of a summary they serve again only as long
    as its item lives (`adapters._summary_contents`), so no summary or recalled text stays
    in memory once erased."""
    return _escape(text)


def _escape(text: str) -> str:
    table = {} if text.isascii() else _reader_table(text)
    if not table:  # the text is its reader's view: each match's character is replaced
        return _replaced(text, {index: _ENTITIES[text[index]] for index in _escaped_at_all(text)})
    view = _view(text, table)
    matches = _escaped_at_all(view)
    if not matches:
        return text
    # Each match back to its character in `text`: the same line, walked from its start or
    # from the previous match on that line (matches are in increasing order), so the walk
    # over a line is done once, however many matches it holds (not once per match).
    view_lines, text_lines = _line_starts(view), _line_starts(text)
    replaced: dict[int, str] = {}
    walked_line = -1
    index = seen = 0
    for position in matches:
        line = bisect.bisect_right(view_lines, position) - 1
        if line != walked_line:
            index, seen, walked_line = text_lines[line], view_lines[line], line
        while True:
            width = len(table.get(ord(text[index]), text[index]) or "")
            if seen + width > position:
                break
            seen += width
            index += 1
        char = text[index]
        replaced[index] = _ENTITIES.get(char, f"&#{ord(char)};")
    return _replaced(text, replaced)


def _replaced(text: str, replaced: dict[int, str]) -> str:
    """`text` with the character at each index of `replaced` replaced by its entity."""
    pieces: list[str] = []
    done = 0
    for index in sorted(replaced):
        pieces += [text[done:index], replaced[index]]
        done = index + 1
    pieces.append(text[done:])
    return "".join(pieces)


def _unescape(match: re.Match[str]) -> str:
    name = match[1]
    if name[0] != "#":
        return _UNESCAPES[name]
    code = int(name[1:])
    # Only a code point is an entity escaping made; anything else is left as it is.
    return chr(code) if code <= 0x10FFFF else match[0]


def unescape_summary_text(escaped: str) -> str:
    """Exact inverse of `escape_summary_text`."""
    return _UNESCAPE_PATTERN.sub(_unescape, escaped)
