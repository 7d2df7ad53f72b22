"""What recall's normalisation folds beyond NFKC, case and the diacritics (SPEC §16.5
"Normalisation"), since segmenter version 4: the characters that only stretch, pad or
restyle a word are dropped, and two Arabic letters are folded. The golden cases for both
segmenters (Rust and the pure-Python reference), a differential property over the
characters concerned, the same through `SQLiteStore.search` on a file database, and the
index of segmenter version 3 rebuilt when the store opens.

- U+0640 ARABIC TATWEEL (kashida) elongates the joined letters around it (justification,
  emphasis): `كتـــاب` is `كتاب`. Apache Lucene's ArabicNormalizer deletes it too.
- The Hangul fillers U+115F, U+1160, U+3164 and U+FFA0 stand for a missing part of a
  syllable block and show nothing.
- The Mongolian free variation selectors U+180B-U+180D and U+180F choose a letter's glyph.
The fillers and the selectors are Default_Ignorable_Code_Point in Unicode. Since version 5
each is dropped inside a word of its own script only, and separates elsewhere
(test_segment_folding_scripts.py).
- As Apache Lucene's ArabicNormalizer folds them: U+0629 TEH MARBUTA is U+0647 HEH (`مدرسة`
  is `مدرسه`) and U+0649 ALEF MAKSURA is U+064A YEH (`على` is `علي`). Its third fold, the
  madda and hamza alefs (U+0622, U+0623, U+0625) to the bare alef, is the diacritics' rule:
  NFD makes the madda or hamza a mark. Urdu's and Kurdish letters of their own are not
  folded; Persian's letters that an Arabic keyboard types otherwise are, since version 5
  (test_segment_folding_scripts.py)."""

from __future__ import annotations

import sys
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
    index_has,
    joined_tokens,
    ref,
)

TATWEEL = "\u0640"
HANGUL_FILLERS = "\u115f\u1160\u3164\uffa0"
MONGOLIAN_SELECTORS = "\u180b\u180c\u180d\u180f"


#: (as written, as searched for): each pair must give the same terms.
FOLDED = [
    pytest.param("كتـــاب", "كتاب", id="tatweel-inside"),
    pytest.param("ـكتابـ", "كتاب", id="tatweel-around"),
    pytest.param("مـحـمـد", "محمد", id="tatweel-between-each"),
    pytest.param("كتـَـاب", "كتاب", id="tatweel-with-a-haraka"),
    pytest.param("كت\ufe71اب", "كتاب", id="tatweel-compatibility-form"),
    *(
        pytest.param(f"회의는 한{filler}국 시간", "회의는 한국 시간", id=f"U+{ord(filler):04X}")
        for filler in HANGUL_FILLERS
    ),
    pytest.param("\u3164한국어\uffa0", "한국어", id="hangul-fillers-around"),
    pytest.param("\u1100\u1160", "\u1100", id="hangul-initial-alone"),
    *(
        pytest.param(f"ᠮᠣᠩᠭ{selector}ᠣᠯ", "ᠮᠣᠩᠭᠣᠯ", id=f"U+{ord(selector):04X}")
        for selector in MONGOLIAN_SELECTORS
    ),
    pytest.param("مدرسة", "مدرسه", id="teh-marbuta"),
    pytest.param("المكتبة الجامعية", "المكتبه الجامعيه", id="teh-marbuta-two-words"),
    pytest.param("مدرس\ufe94", "مدرسه", id="teh-marbuta-final-form"),
    pytest.param("على", "علي", id="alef-maksura"),
    pytest.param("مستشفى", "مستشفي", id="alef-maksura-noun"),
    pytest.param("عل\ufef0", "علي", id="alef-maksura-final-form"),
    pytest.param("آخر", "اخر", id="alef-madda"),
    pytest.param("أحمد", "احمد", id="alef-hamza-above"),
    pytest.param("إلى", "الي", id="alef-hamza-below-and-maksura"),
    pytest.param("مدرسةٌ", "مدرسه", id="teh-marbuta-with-tanwin"),
]

#: Letters of the languages that write Arabic script with letters of their own, beside the
#: Arabic letter that looks alike: Lucene's Arabic rule leaves them apart, and so does this
#: (Persian's farsi yeh, keheh and heh goal are folded since version 5).
NOT_FOLDED = [
    pytest.param("\u06c3", "\u0647", id="teh-marbuta-goal"),
    pytest.param("\u06d5", "\u0647", id="ae"),
    pytest.param("\u0671", "\u0627", id="alef-wasla"),
    pytest.param("\u06d2", "\u064a", id="yeh-barree"),
    pytest.param("\u06be", "\u0647", id="heh-doachashmee"),
]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize(("written", "searched"), FOLDED)
def test_the_folded_form_gives_the_same_terms(
    impl: ModuleType, written: str, searched: str
) -> None:
    assert impl.query_terms(written) == impl.query_terms(searched) != []
    assert joined_tokens(impl, f"ok {written} 3") == joined_tokens(impl, f"ok {searched} 3")


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize(("letter", "arabic"), NOT_FOLDED)
def test_other_languages_letters_stay_apart(impl: ModuleType, letter: str, arabic: str) -> None:
    assert impl.query_terms(f"م{letter}ن") != impl.query_terms(f"م{arabic}ن")
    # And nothing of another script folds: Hebrew, Syriac, Latin.
    assert impl.query_terms("תורה") != impl.query_terms("תורת")
    assert impl.query_terms("ܐܠܗܐ") == ["ܐܠܗܐ"]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("char", TATWEEL + HANGUL_FILLERS + MONGOLIAN_SELECTORS)
def test_a_dropped_character_alone_is_no_word(impl: ModuleType, char: str) -> None:
    assert impl.query_terms(char * 3) == []
    assert impl.query_terms(f"كتاب {char} 3") == impl.query_terms("كتاب 3")


#: The characters this file is about, for the properties below.
FOLDING = (
    TATWEEL
    + "\ufe71"
    + HANGUL_FILLERS
    + MONGOLIAN_SELECTORS
    + "\u180e\u0629\u0649\u0647\u064a\u0654\u0670\ufe94\ufef0\ufc5d\u06cc\u06d5"
)
#: Text around them: Arabic letters and harakat, other scripts' letters and marks, CJK,
#: Hangul syllables and conjoining jamo, Mongolian, digits, separators.
AROUND = (
    "كتابمحدلةىيهأإآ\u064e\u0651ab e\u0301\u00e9क\u094dがか\u3099"
    "한국\uac00\u1100\u1161\u11a8ᠮᠣᠩᠭ3 -.。"
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.text(st.sampled_from(FOLDING + AROUND), max_size=40)
    | st.text(
        st.characters(exclude_categories=("Cs", "Cn"), exclude_characters="\x1b\x9b"),
        max_size=30,
    )
)
def test_rust_and_the_reference_agree_on_the_folded_characters(text: str) -> None:
    assert seg.query_terms(text) == ref.query_terms(text)
    assert seg.index_passages(text) == ref.index_passages(text)


#: A letter of each dropped character's script, after which it is inside a word (since
#: version 5, elsewhere it separates: test_segment_folding_scripts.py).
OWN_LETTER = {
    TATWEEL: "ك",
    **dict.fromkeys(HANGUL_FILLERS, "한"),
    **dict.fromkeys(MONGOLIAN_SELECTORS, "ᠮ"),
}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.text(st.sampled_from(AROUND), max_size=30),
    st.lists(
        st.tuples(
            st.integers(0, 30), st.sampled_from(TATWEEL + HANGUL_FILLERS + MONGOLIAN_SELECTORS)
        ),
        max_size=6,
    ),
)
def test_a_dropped_character_is_invisible_to_both_in_its_script(
    text: str, inserts: list[tuple[int, str]]
) -> None:
    # The same letters at the same places in both (the last place first), each followed by
    # a dropped character of its script in one.
    plain = marked = text
    for at, char in sorted(inserts, key=lambda insert: -min(insert[0], len(text))):
        at = min(at, len(text))
        plain = plain[:at] + OWN_LETTER[char] + plain[at:]
        marked = marked[:at] + OWN_LETTER[char] + char + marked[at:]
    for impl in (seg, ref):
        assert impl.query_terms(marked) == impl.query_terms(plain)
        assert joined_tokens(impl, marked) == joined_tokens(impl, plain)


# ---------------------------------------------------------------------- the store


def test_search_finds_a_stretched_word_and_is_found_by_one(store: lf.SQLiteStore) -> None:
    store.append("c", "user", "اشتريت كتـــاب النحو", id="stretched")
    store.append("c", "user", "قرأت كتابا آخر", id="other")
    store.append("c", "user", "المكتبة مغلقة اليوم", id="plain")
    assert ids(store.search("c", "كتاب")) == ["stretched"]
    assert ids(store.search("c", "النـــحـو")) == ["stretched"]
    # The passage is the body as stored, tatweel and all.
    assert store.search("c", "كتاب")[0].text == "اشتريت كتـــاب النحو"
    assert store.check_search_index() == []


def test_search_sees_through_hangul_fillers_and_mongolian_selectors(
    store: lf.SQLiteStore,
) -> None:
    store.append("c", "user", "회의는 한\u3164국 시간 3시", id="filler")
    store.append("c", "user", "ᠮᠣᠩᠭ\u180bᠣᠯ ᠬᠡᠯᠡ", id="selector")
    store.append("c", "user", "nothing else here", id="other")
    assert ids(store.search("c", "한국")) == ["filler"]
    assert ids(store.search("c", "ᠮᠣᠩᠭᠣᠯ")) == ["selector"]
    assert ids(store.search("c", "ᠮᠣᠩᠭ\u180dᠣᠯ")) == ["selector"]
    assert store.check_search_index() == []


def test_search_folds_teh_marbuta_and_alef_maksura_both_ways(store: lf.SQLiteStore) -> None:
    store.append("c", "user", "ذهبت إلى المدرسة صباحا", id="marbuta")
    store.append("c", "user", "المستشفي قريب من بيتي", id="yeh")
    store.append("c", "user", "nothing else here", id="other")
    assert ids(store.search("c", "المدرسه")) == ["marbuta"]
    assert ids(store.search("c", "الي")) == ["marbuta"]
    assert ids(store.search("c", "المستشفى")) == ["yeh"]
    assert store.search("c", "المدرسة")[0].text == "ذهبت إلى المدرسة صباحا"
    assert store.check_search_index() == []


# ---------------------------------------------------------------------- index versions


#: Bodies, and the tokens ledgerfold's version-3 segmenter indexed them as: tatweel, Hangul
#: fillers (NFKC made U+3164 U+1160) and Mongolian selectors kept, teh marbuta and alef
#: maksura not folded.
VERSION_3_ROWS = {
    "t": ("اشتريت كتـــاب النحو", "اشتريت كتـــاب النحو"),
    "k": ("회의는 한\u3164국 시간에", "회의 의는 한\u1160 \u1160국 시간 간에"),
    "m": ("ᠮᠣᠩᠭ\u180bᠣᠯ ᠬᠡᠯᠡ", "ᠮᠣᠩᠭ\u180bᠣᠯ ᠬᠡᠯᠡ"),
    "a": ("ذهبت إلى المدرسة", "ذهبت الى المدرسة"),
    "e": ("we refused the refund", "we refus the refund"),
}


def test_an_index_of_segmenter_version_3_is_rebuilt_at_open(tmp_path: Path) -> None:
    assert seg.INDEX_VERSION >= 4
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as store:
        for turn_id, (body, _) in VERSION_3_ROWS.items():
            store.append("c", "user", body, id=turn_id)
    as_version_wrote_it(path, VERSION_3_ROWS, 3)
    # The old index: the word as searched for is not in it.
    assert index_has(path, "كتـــاب") and not index_has(path, "كتاب")
    assert not index_has(path, "한국") and not index_has(path, "ᠮᠣᠩᠭᠣᠯ")
    assert not index_has(path, "المدرسه") and not index_has(path, "الي")
    with lf.SQLiteStore(path) as store:
        assert ids(store.search("c", "كتاب")) == ["t"]
        assert ids(store.search("c", "한국")) == ["k"]
        assert ids(store.search("c", "ᠮᠣᠩᠭᠣᠯ")) == ["m"]
        assert ids(store.search("c", "المدرسه الي")) == ["a"]
        assert ids(store.search("c", "refunds")) == ["e"]
        state = store._connection().execute("SELECT index_version, complete FROM search_state")
        assert tuple(state.fetchone()) == (seg.INDEX_VERSION, 1)
        assert store.check_search_index() == []
        # Every write path works on the rebuilt index (its rows delete with its tokens).
        store.edit("c", "t", body="بعت كتـاب الصرف")
        assert store.search("c", "النحو") == []
        assert ids(store.search("c", "الصرف")) == ["t"]
        store.retract("c", "t", erase=True)
        assert store.search("c", "كتاب") == []
        assert store.check_search_index() == []
    assert not index_has(path, "كتاب")
