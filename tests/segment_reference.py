"""A slow pure-Python reference of recall's segmentation (SPEC §16.5), the differential
oracle for `ledgerfold._segment` (Rust). Written from the rules, not from the Rust code:
Python's own `unicodedata` and `str.casefold`, the `regex` module's Script_Extensions, and
the `snowballstemmer` package's English stemmer (the Snowball 2 generation that the Rust
crate `rust-stemmers` implements).

The rules, stated once:
- Control sequences: each ECMA-48 control sequence (`ESC [` or U+009B, then parameter bytes
  0x30-0x3F, intermediate bytes 0x20-0x2F and a final byte 0x40-0x7E, as many of them as
  there are) is a space, before anything else (a query's too, before it is split).
- Normalise: drop the format characters (Cf) but U+200B ZERO WIDTH SPACE; NFKC; full case
  folding; NFD; drop the nonspacing marks (Mn) whose Script_Extensions are Inherited or name
  Latin, Greek, Cyrillic, Arabic, Hebrew or Syriac; drop U+0640 ARABIC TATWEEL (it only
  stretches a word), the Hangul fillers U+115F, U+1160, U+3164, U+FFA0 and the Mongolian
  free variation selectors U+180B-U+180D, U+180F, the Khmer inherent vowels U+17B4,
  U+17B5, each where the character before it (the last one kept) is a letter or mark (L*,
  M*) of a script its Script_Extensions name, else make it a space; make U+0629 TEH
  MARBUTA and U+06C1 HEH GOAL U+0647 HEH, U+0649 ALEF MAKSURA and U+06CC FARSI YEH U+064A
  YEH, U+06A9 KEHEH U+0643 KAF; NFC. (U+06C0 HEH WITH YEH ABOVE is made U+0647 HEH after
  the case folding, before NFD.)
- Classify each character: ASCII `a-z` letter, ASCII `0-9` digit, other ASCII separator;
  otherwise `Nd` digit; `L*`, `M*`, `Nl`, `No` CJK when its Script_Extensions name one of
  the four scripts, else letter; anything else separator.
- Tokens: maximal runs of one class. A digit run is the ASCII digits of its digits' decimal
  values (`٣` and `۳` are `3`). Letter runs of ASCII letters only are stemmed. CJK runs of
  two or more characters become their overlapping bigrams.
- Query terms: the tokens, distinct, in first-occurrence order, at most 64; a one-character
  CJK token next to a digit-run token is left out while another term remains.
- Passages: from `start`, the next 600 characters; the rest of the body when it fits; else
  end after the last sentence end (`. ! ? 。！？` or a line break) in the window's second
  half, else after the window's last whitespace, else at 600 characters.
"""

from __future__ import annotations

import itertools
import unicodedata

import regex
import snowballstemmer

PASSAGE_CHARS = 600
MAX_QUERY_TERMS = 64

_CJK = regex.compile(r"[\p{scx=Han}\p{scx=Hiragana}\p{scx=Katakana}\p{scx=Hangul}]")
_DIACRITIC_SCRIPTS = regex.compile(
    r"[\p{scx=Zinh}\p{scx=Latin}\p{scx=Greek}\p{scx=Cyrillic}"
    r"\p{scx=Arabic}\p{scx=Hebrew}\p{scx=Syriac}]"
)
#: What is folded after the diacritics (before NFC): the characters that only stretch, pad
#: or restyle a word, dropped: U+0640 ARABIC TATWEEL (kashida), as Apache Lucene's
#: ArabicNormalizer deletes it; the Hangul fillers; the Mongolian free variation selectors;
#: the Khmer inherent vowels (deprecated, invisible; ICU's folding ignores them).
#: And Arabic's teh marbuta is heh, its alef maksura yeh, as that normaliser folds them;
#: Persian's farsi yeh is yeh, its keheh kaf and Urdu's heh goal heh, as Lucene's
#: PersianNormalizer folds them (not its yeh barree: Urdu's ے is a letter of its own).
_DROPPED = "\u0640\u115f\u1160\u3164\uffa0\u180b\u180c\u180d\u180f\u17b4\u17b5"
_FOLDS = str.maketrans(
    {
        "\u0629": "\u0647",
        "\u06c1": "\u0647",
        "\u0649": "\u064a",
        "\u06cc": "\u064a",
        "\u06a9": "\u0643",
    }
)
#: Before NFD: Persian's heh with yeh above is heh (NFD would make it U+06D5 AE, Kurdish's
#: vowel letter, and a hamza).
_COMPOSED_FOLDS = str.maketrans({"\u06c0": "\u0647"})
#: `regex`'s Script_Extensions values by name (its own Unicode data); 0, 1 and 4 are
#: Unknown, Common and Inherited, which name no script.
_SCRIPT_VALUES: dict[str, int] = regex._regex_core.PROPERTIES["SCRIPTEXTENSIONS"][1]
#: Each dropped character's scripts: a pattern of the characters of any of them.
_OWN_SCRIPTS = {
    char: regex.compile(
        "["
        + "".join(
            rf"\p{{scx={name}}}"
            for name, value in _SCRIPT_VALUES.items()
            if value not in (0, 1, 4) and regex.fullmatch(rf"\p{{scx={name}}}", char)
        )
        + "]"
    )
    for char in _DROPPED
}
#: The one format character that is a word break, not an invisible one.
_ZERO_WIDTH_SPACE = "\u200b"
_STEMMER = snowballstemmer.stemmer("english")
# The characters after which a passage may end as after a sentence: the sentence marks and
# the line breaks.
_SENTENCE_ENDS = frozenset(".!?。！？\n\r\x0b\x0c\x85\u2028\u2029")

_SEPARATOR, _LETTER, _DIGIT, _CJK_CLASS = range(4)
_CONTROL_SEQUENCE = regex.compile(r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?")


def spaced(text: str) -> str:
    """`text` with each control sequence made one space."""
    return _CONTROL_SEQUENCE.sub(" ", text)


def is_white_space(char: str) -> bool:
    """Unicode's White_Space property: `str.isspace` less the four information separators."""
    return char.isspace() and char not in "\x1c\x1d\x1e\x1f"


def normalise(text: str) -> str:
    visible = "".join(
        char for char in text if char == _ZERO_WIDTH_SPACE or unicodedata.category(char) != "Cf"
    )
    folded = unicodedata.normalize("NFKC", visible).casefold().translate(_COMPOSED_FOLDS)
    decomposed = unicodedata.normalize("NFD", folded)
    kept = "".join(
        char
        for char in decomposed
        if unicodedata.category(char) != "Mn" or _DIACRITIC_SCRIPTS.fullmatch(char) is None
    )
    return unicodedata.normalize("NFC", _drop_and_fold(kept))


def _drop_and_fold(decomposed: str) -> str:
    """The dropped characters dropped inside a word of their script (after a letter or mark
    of one of them), spaces elsewhere; the letters folded."""
    if not any(char in decomposed for char in _DROPPED):
        return decomposed.translate(_FOLDS)
    out: list[str] = []
    for char in decomposed:
        if char not in _DROPPED:
            out.append(char.translate(_FOLDS))
            continue
        previous = out[-1] if out else " "
        inside = (
            unicodedata.category(previous)[0] in "LM"
            and _OWN_SCRIPTS[char].fullmatch(previous) is not None
        )
        if not inside:
            out.append(" ")
    return "".join(out)


def char_class(char: str) -> int:
    if char.isascii():
        if "a" <= char <= "z":
            return _LETTER
        if "0" <= char <= "9":
            return _DIGIT
        return _SEPARATOR
    category = unicodedata.category(char)
    if category == "Nd":
        return _DIGIT
    if category[0] in "LMN":
        return _CJK_CLASS if _CJK.fullmatch(char) is not None else _LETTER
    return _SEPARATOR


def _stem(word: str) -> str:
    if not all("a" <= char <= "z" for char in word):
        return word
    stem: str = _STEMMER.stemWord(word)
    return stem if stem and all("a" <= char <= "z" for char in stem) else word


def tokens(text: str) -> list[str]:
    out: list[str] = []
    for kind, group in itertools.groupby(normalise(spaced(text)), key=char_class):
        run = "".join(group)
        if kind == _SEPARATOR:
            continue
        if kind == _DIGIT:
            out.append("".join(str(unicodedata.decimal(char)) for char in run))
        elif kind == _LETTER:
            out.append(_stem(run))
        elif len(run) == 1:
            out.append(run)
        else:
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
    return out


def query_terms(query: str) -> list[str]:
    # The Rust side reads a lone surrogate as U+FFFD, a separator.
    query = "".join("\ufffd" if "\ud800" <= char <= "\udfff" else char for char in query)
    query = spaced(query)
    # (whitespace-separated word of the query, token): the rule looks within a word only.
    words = "".join(" " if is_white_space(char) else char for char in query).split(" ")
    every = [(word, token) for word, chunk in enumerate(words) for token in tokens(chunk)]

    def by_digits(at: int) -> bool:
        around = every[max(at - 1, 0) : at] + every[at + 1 : at + 2]
        return any(
            word == every[at][0] and all(char_class(char) == _DIGIT for char in token)
            for word, token in around
        )

    # A lone CJK character touching a digit run is left out while another term remains.
    kept = [
        token
        for at, (_, token) in enumerate(every)
        if not (len(token) == 1 and char_class(token) == _CJK_CLASS and by_digits(at))
    ]
    terms: list[str] = []
    for token in kept or [token for _, token in every]:
        if token not in terms:
            terms.append(token)
    return terms[:MAX_QUERY_TERMS]


def passage_bounds(body: str) -> list[tuple[int, int]]:
    bounds = []
    start = 0
    while start < len(body):
        if len(body) - start <= PASSAGE_CHARS:
            end = len(body)
        else:
            window = body[start : start + PASSAGE_CHARS]
            sentence = [
                i for i in range(PASSAGE_CHARS // 2, PASSAGE_CHARS) if window[i] in _SENTENCE_ENDS
            ]
            space = [i for i in range(PASSAGE_CHARS) if is_white_space(window[i])]
            if sentence:
                end = start + sentence[-1] + 1
            elif space:
                end = start + space[-1] + 1
            else:
                end = start + PASSAGE_CHARS
        bounds.append((start, end))
        start = end
    return bounds


def index_passages(body: str) -> list[tuple[int, int, str]]:
    out = []
    for start, end in passage_bounds(body):
        joined = " ".join(tokens(body[start:end]))
        if joined:
            out.append((start, end, joined))
    return out
