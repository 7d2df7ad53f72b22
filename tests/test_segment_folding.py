"""What recall's normalisation folds away (SPEC §16.5 "Normalisation": NFKC, case-folded,
diacritics removed): the golden cases for both segmenters (Rust and the pure-Python
reference), the same through `SQLiteStore.search` on a file database, and the index of an
older segmenter version rebuilt when the store opens.

Format characters (general category Cf: soft hyphen, zero-width joiner and non-joiner, word
joiner, byte order mark, bidi marks) are invisible: dropped before anything else, they never
split a word. U+200B ZERO WIDTH SPACE is a space (a word break in UAX #29).

Diacritics are the nonspacing marks of Latin, Greek, Cyrillic, Arabic, Hebrew and Syriac
(accents; the harakat, niqqud and points that ordinary writing leaves out), and of no script
in particular; the vowel signs and viramas of the Brahmic scripts and the kana voicing
marks are part of the word and stay."""

from __future__ import annotations

import sqlite3
import sys
import unicodedata
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledgerfold as lf
from ledgerfold import _segment as seg

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from segment_folding_support import (  # noqa: E402
    IMPLEMENTATIONS,
    as_version_wrote_it,
    ids,
    ref,
)

#: (pointed, as ordinary writing has it): each pair must give the same terms.
POINTED = [
    pytest.param("كَتَبَ", "كتب", id="arabic-harakat"),
    pytest.param("مُدَرِّسٌ", "مدرس", id="arabic-shadda-tanwin"),
    pytest.param("الْقُرْآن", "القران", id="arabic-sukun-madda"),
    pytest.param("أحمد إلى", "احمد الى", id="arabic-hamza-on-alef"),
    pytest.param("שָׁלוֹם", "שלום", id="hebrew-niqqud"),
    pytest.param("בְּרֵאשִׁית", "בראשית", id="hebrew-dagesh-shin-dot"),
    pytest.param("\ufb2a\ufb31", "שב", id="hebrew-presentation-forms"),
    pytest.param("ܫܠܳܡܳܐ", "ܫܠܡܐ", id="syriac-points"),
    pytest.param("Σίσυφος", "σισυφος", id="greek-tonos"),
    pytest.param("Café", "cafe", id="latin-acute"),
]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize(("pointed", "plain"), POINTED)
def test_points_and_accents_are_folded_away(impl: ModuleType, pointed: str, plain: str) -> None:
    assert impl.query_terms(pointed) == impl.query_terms(plain)
    assert not any(unicodedata.category(c) == "Mn" for t in impl.query_terms(pointed) for c in t)
    # Whichever way the marks are ordered (NFD reorders them) and composed.
    decomposed = unicodedata.normalize("NFD", pointed)
    assert impl.query_terms(decomposed) == impl.query_terms(plain)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_the_marks_a_word_is_spelt_with_stay(impl: ModuleType) -> None:
    # Devanagari's virama and vowel signs, Thai's vowels, the kana voicing marks: dropping
    # them would make different words one (दुनिया "world", दनिया is not a word).
    assert impl.query_terms("नमस्ते") == ["नमस्ते"]
    assert impl.query_terms("दुनिया") != impl.query_terms("दनिया")
    assert impl.query_terms("स्त") != impl.query_terms("सत")
    assert impl.query_terms("สวัสดี") != impl.query_terms("สวสด")
    assert impl.query_terms("がき") != impl.query_terms("かき")


#: The format characters SPEC's "invisible" covers, each once: soft hyphen, Arabic letter
#: mark, Mongolian vowel separator, ZWNJ, ZWJ, LRM, RLM, the embeddings and overrides, word
#: joiner, invisible times, the isolates, BOM, a language tag and a tag letter.
FORMAT_CHARACTERS = (
    "\u00ad\u061c\u180e\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
    "\u2060\u2062\u2066\u2067\u2068\u2069\ufeff\U000e0001\U000e0041"
)


def test_the_format_characters_are_the_cf_ones() -> None:
    assert all(unicodedata.category(char) == "Cf" for char in FORMAT_CHARACTERS)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_a_soft_hyphen_does_not_split_a_word(impl: ModuleType) -> None:
    assert impl.query_terms("co\u00adoperate") == impl.query_terms("cooperate") == ["cooper"]
    assert impl.query_terms("Ko\u00adope\u00adra\u00adtion") == ["kooper"]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("char", list(FORMAT_CHARACTERS), ids=lambda c: f"U+{ord(c):04X}")
def test_a_format_character_in_or_around_a_word_changes_no_token(
    impl: ModuleType, char: str
) -> None:
    assert impl.query_terms(f"pass{char}word") == ["password"]
    assert impl.query_terms(f"{char}PO-9302{char}") == ["po", "9302"]
    assert impl.query_terms(f"{char}Refused{char} the refund") == impl.query_terms(
        "Refused the refund"
    )
    body = f"the {char}كَتَبَ{char} word 3{char}号"
    assert impl.index_passages(body) == [(0, len(body), "the كتب word 3 号")]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_joiners_and_bidi_isolates_in_real_writing(impl: ModuleType) -> None:
    # Persian writes a ZWNJ inside words; an RTL word in LTR text sits in an isolate.
    assert impl.query_terms("می\u200cخواهم") == impl.query_terms("میخواهم")
    assert impl.query_terms("\u2067שלום\u2069 ok") == ["שלום", "ok"]
    assert impl.query_terms("\ufeffhello") == ["hello"]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_a_zero_width_space_is_a_space(impl: ModuleType) -> None:
    assert impl.query_terms("foo\u200bbar") == ["foo", "bar"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.text(
        st.characters(exclude_categories=("Cs", "Cn"), exclude_characters="\x1b\x9b"),
        max_size=30,
    ),
    st.lists(st.tuples(st.integers(0, 30), st.sampled_from(FORMAT_CHARACTERS)), max_size=6),
)
def test_format_characters_are_invisible_to_both(text: str, inserts: list[tuple[int, str]]) -> None:
    # (Outside control sequences: a format character inside one would end it.)
    marked = text
    for at, char in inserts:
        marked = marked[:at] + char + marked[at:]
    for impl in (seg, ref):
        assert impl.query_terms(marked) == impl.query_terms(text)
        assert " ".join(joined for _, _, joined in impl.index_passages(marked)) == " ".join(
            joined for _, _, joined in impl.index_passages(text)
        )


# ---------------------------------------------------------------------- the store


def test_search_matches_pointed_and_unpointed_text_both_ways(store: lf.SQLiteStore) -> None:
    store.append("c", "user", "كَتَبَ الطالبُ الدرسَ", id="arabic-pointed")
    store.append("c", "user", "שלום לכולם", id="hebrew-plain")
    store.append("c", "user", "أحمد في المكتبة", id="arabic-hamza")
    store.append("c", "user", "nothing else here", id="other")
    assert ids(store.search("c", "كتب")) == ["arabic-pointed"]
    assert ids(store.search("c", "الدرس")) == ["arabic-pointed"]
    assert ids(store.search("c", "שָׁלוֹם")) == ["hebrew-plain"]
    assert ids(store.search("c", "احمد")) == ["arabic-hamza"]
    # The passage is the body as stored, points and all.
    assert store.search("c", "كتب")[0].text == "كَتَبَ الطالبُ الدرسَ"


def test_search_sees_through_soft_hyphens_joiners_and_bidi_marks(store: lf.SQLiteStore) -> None:
    store.append("c", "user", "We must co\u00adoperate on the re\u00adfund.", id="shy")
    store.append("c", "user", "The code is \u2066PO-9302\u2069 for \u200fשלום\u200f.", id="bidi")
    store.append("c", "user", "pass\u200dword and foo\u200bbar", id="joiners")
    assert ids(store.search("c", "cooperate")) == ["shy"]
    assert ids(store.search("c", "refunds")) == ["shy"]
    assert ids(store.search("c", "co\u00adoper\u00adation")) == ["shy"]
    assert ids(store.search("c", "PO-9302")) == ["bidi"]
    assert ids(store.search("c", "שלום")) == ["bidi"]
    assert ids(store.search("c", "password")) == ["joiners"]
    assert ids(store.search("c", "bar")) == ["joiners"]  # a zero width space separates
    assert store.check_search_index() == []


# ---------------------------------------------------------------------- index versions


#: Bodies, and the tokens ledgerfold's version-2 segmenter indexed them as: points kept (the
#: NFC words), a soft hyphen a separator.
VERSION_2_ROWS = {
    "a": ("كَتَبَ الطالبُ الدرسَ", unicodedata.normalize("NFC", "كَتَبَ الطالبُ الدرسَ")),
    "h": ("שָׁלוֹם לכולם", unicodedata.normalize("NFC", "שָׁלוֹם לכולם")),
    "e": ("we co\u00adoperate", "we co oper"),
}


def test_an_index_of_segmenter_version_2_is_rebuilt_at_open(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as store:
        for turn_id, (body, _) in VERSION_2_ROWS.items():
            store.append("c", "user", body, id=turn_id)
    as_version_wrote_it(path, VERSION_2_ROWS, 2)
    conn = sqlite3.connect(path)
    try:
        # The old index: the unpointed word and the whole word are not in it.
        for word in ("كتب", "cooper"):
            found = conn.execute(
                "SELECT COUNT(*) FROM search_fts WHERE search_fts MATCH ?", (f'"{word}"',)
            )
            assert found.fetchone() == (0,)
    finally:
        conn.close()
    with lf.SQLiteStore(path) as store:
        assert ids(store.search("c", "كتب")) == ["a"]
        assert ids(store.search("c", "שלום")) == ["h"]
        assert ids(store.search("c", "cooperation")) == ["e"]
        state = store._connection().execute("SELECT index_version, complete FROM search_state")
        assert tuple(state.fetchone()) == (seg.INDEX_VERSION, 1)
        assert store.check_search_index() == []
        # Every write path works on the rebuilt index (its rows delete with its tokens).
        store.edit("c", "a", body="قَرَأَ الكتاب")
        assert store.search("c", "كتب") == []
        assert ids(store.search("c", "قرا")) == ["a"]
        store.retract("c", "h", erase=True)
        assert store.search("c", "שלום") == []
        assert store.check_search_index() == []
