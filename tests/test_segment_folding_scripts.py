"""What recall's normalisation folds since segmenter version 5 (SPEC §16.5
"Normalisation"): the golden cases for both segmenters (Rust and the pure-Python
reference), a differential property over the characters concerned, the same through
`SQLiteStore.search` on a file database both ways (the query typed one way, the body the
other), and the index of segmenter version 4 rebuilt when the store opens.

- Persian typed on an Arabic keyboard, as Apache Lucene's PersianNormalizer folds it: U+06CC
  FARSI YEH is U+064A YEH (`ایران` is `ايران`), U+06A9 KEHEH is U+0643 KAF (`کتاب` is
  `كتاب`), U+06C1 HEH GOAL (Urdu's `ہ`) and U+06C0 HEH WITH YEH ABOVE (`ۀ`, composed or as
  heh and hamza) are U+0647 HEH. Not folded: U+06D2 YEH BARREE (Urdu's `ے`, which Lucene's
  Persian rule folds, is a letter apart from `ی` in Urdu), U+06BE HEH DOACHASHMEE, U+06D5 AE.
  The zero width non-joiner inside a Persian word is dropped (a format character, since
  version 3): `می‌خواهم` is `میخواهم`; Lucene's PersianCharFilter makes it a space instead.
- The Khmer inherent vowels U+17B4 and U+17B5 (deprecated, invisible, Default_Ignorable) are
  dropped, as ICU's and Lucene's folding ignore them.
- The decimal digits of every script are ASCII digits, as Lucene's DecimalDigitFilter (in
  its Persian and Arabic analysers) and ICU's native digit folding make them: `۱۴۰۲`
  (Persian), `١٤٠٢` (Arabic-Indic), `१४०२` (Devanagari) are `1402`.
- A dropped character (the tatweel, a Hangul filler, a Mongolian free variation selector, a
  Khmer inherent vowel) is dropped only inside a word of its own script: after a letter or
  mark of a script its Script_Extensions name. Anywhere else it separates, as a character
  that is no letter does: `foo\u0640bar` is `foo` and `bar` (version 4 made it `foobar`).
"""

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

#: (as a Persian keyboard types it, as an Arabic keyboard does): the same terms.
FOLDED = [
    pytest.param("ایران", "ايران", id="farsi-yeh"),
    pytest.param("کتاب", "كتاب", id="keheh"),
    pytest.param("یک کار کوچک", "يك كار كوچك", id="farsi-yeh-and-keheh"),
    pytest.param("کہ", "كه", id="heh-goal"),
    pytest.param("\u06c2", "\u0647", id="heh-goal-with-hamza"),
    pytest.param("خانۀ", "خانه", id="heh-with-yeh-above"),
    pytest.param("خانۀ", "خانهٔ", id="heh-with-yeh-above-as-heh-and-hamza"),
    pytest.param("خانه\u06d5\u0654", "خانهه", id="ae-and-hamza-is-heh-with-yeh-above"),
    pytest.param("\ufbfc\ufb8e\ufba6\ufba4", "يكهه", id="presentation-forms"),
    pytest.param("می\u200cخواهم", "ميخواهم", id="zwnj-inside-a-word"),
    pytest.param("کتاب\u200cها", "كتابها", id="zwnj-before-a-suffix"),
]

#: Letters that stay apart from the Arabic letter they look like.
NOT_FOLDED = [
    pytest.param("\u06d2", "\u064a", id="yeh-barree"),
    pytest.param("\u06be", "\u0647", id="heh-doachashmee"),
    pytest.param("\u06d5", "\u0647", id="ae"),
    pytest.param("\u06ce", "\u064a", id="yeh-with-small-v"),
]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize(("persian", "arabic"), FOLDED)
def test_persian_and_arabic_keyboards_give_the_same_terms(
    impl: ModuleType, persian: str, arabic: str
) -> None:
    assert impl.query_terms(persian) == impl.query_terms(arabic) != []
    assert joined_tokens(impl, f"ok {persian} 3") == joined_tokens(impl, f"ok {arabic} 3")


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize(("letter", "arabic"), NOT_FOLDED)
def test_urdu_and_kurdish_letters_of_their_own_stay_apart(
    impl: ModuleType, letter: str, arabic: str
) -> None:
    assert impl.query_terms(f"ک{letter}") != impl.query_terms(f"ک{arabic}")
    # Urdu's کے ("of", plural) is not کی ("of", feminine).
    assert impl.query_terms("کے") != impl.query_terms("کی")


#: The letters concerned and text around them (Arabic, Persian, Urdu, Kurdish letters,
#: hamza, ZWNJ, harakat, presentation forms, Latin, digits, separators).
PERSIAN = (
    "یکہۀۂھےەۃۓكيهةىکتابخانمو\u0654\u064e\u200c\ufbfc\ufb8e\ufba4\ufba6\u06d5\u06ce"
    "ab e\u0301 3٣۳ -."
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(st.sampled_from(PERSIAN), max_size=40))
def test_rust_and_the_reference_agree_on_persian(text: str) -> None:
    assert seg.query_terms(text) == ref.query_terms(text)
    assert seg.index_passages(text) == ref.index_passages(text)


# ---------------------------------------------------------------------- the store


def test_search_finds_persian_typed_either_way(store: lf.SQLiteStore) -> None:
    store.append("c", "user", "کتاب را در خانۀ دوستم در ایران گذاشتم", id="persian")
    store.append("c", "user", "كتبت رسالة في مكتب الشركة", id="arabic")
    store.append("c", "user", "nothing else here", id="other")
    # An Arabic keyboard's spelling finds the Persian body...
    assert ids(store.search("c", "كتاب")) == ["persian"]
    assert ids(store.search("c", "ايران")) == ["persian"]
    assert ids(store.search("c", "خانهٔ")) == ["persian"]
    # ... and a Persian keyboard's spelling finds the Arabic body.
    assert ids(store.search("c", "مکتب")) == ["arabic"]
    assert ids(store.search("c", "رسالۀ")) == ["arabic"]
    # The passage is the body as stored.
    assert store.search("c", "كتاب")[0].text == "کتاب را در خانۀ دوستم در ایران گذاشتم"
    assert store.check_search_index() == []


# ---------------------------------------------------------------------- index versions


#: Bodies, and the tokens ledgerfold's version-4 segmenter indexed them as: Persian's
#: letters kept, its heh with yeh above made U+06D5 AE.
VERSION_4_ROWS = {
    "p": ("کتاب در خانۀ ایران", "کتاب در خانە ایران"),
    "k": ("ក\u17b4ម្ពុជា", "ក\u17b4ម្ពុជា"),
    "s": ("deploy\u0640staging", "deploystag"),
    "d": ("سال ۱۴۰۲", "سال ۱۴۰۲"),
    "e": ("we refused the refund", "we refus the refund"),
}


def test_an_index_of_segmenter_version_4_is_rebuilt_at_open(tmp_path: Path) -> None:
    assert seg.INDEX_VERSION == 5
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as store:
        for turn_id, (body, _) in VERSION_4_ROWS.items():
            store.append("c", "user", body, id=turn_id)
    as_version_wrote_it(path, VERSION_4_ROWS, 4)
    # The old index: the words as an Arabic keyboard types them are not in it.
    assert index_has(path, "کتاب") and not index_has(path, "كتاب")
    assert not index_has(path, "خانه") and not index_has(path, "ايران")
    assert not index_has(path, "កម្ពុជា")
    assert not index_has(path, "stage") and index_has(path, "deploystag")
    assert not index_has(path, "1402")
    with lf.SQLiteStore(path) as store:
        assert ids(store.search("c", "كتاب")) == ["p"]
        assert ids(store.search("c", "خانهٔ ايران")) == ["p"]
        assert ids(store.search("c", "refunds")) == ["e"]
        assert ids(store.search("c", "កម្ពុជា")) == ["k"]
        assert ids(store.search("c", "staging")) == ["s"]
        assert ids(store.search("c", "1402")) == ["d"]
        state = store._connection().execute("SELECT index_version, complete FROM search_state")
        assert tuple(state.fetchone()) == (5, 1)
        assert store.check_search_index() == []
        # Every write path works on the rebuilt index (its rows delete with its tokens).
        store.edit("c", "p", body="کاغذ در خانه")
        assert store.search("c", "كتاب") == []
        assert ids(store.search("c", "كاغذ")) == ["p"]
        store.retract("c", "p", erase=True)
        assert store.search("c", "خانه") == []
        assert store.check_search_index() == []
    assert not index_has(path, "خانه")


# ---------------------------------------------------------------------- Khmer


KHMER_INHERENT_VOWELS = "\u17b4\u17b5"


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("vowel", KHMER_INHERENT_VOWELS)
def test_khmer_inherent_vowels_are_dropped(impl: ModuleType, vowel: str) -> None:
    # Deprecated, invisible, in no word's spelling: ICU's and Lucene's folding ignore them.
    assert impl.query_terms(f"ខ្មែរ{vowel}") == impl.query_terms("ខ្មែរ") == ["ខ្មែរ"]
    assert impl.query_terms(f"ក{vowel}ម្ពុជា") == ["កម្ពុជា"]
    assert joined_tokens(impl, f"ok ក{vowel}ម្ពុជា 3") == joined_tokens(impl, "ok កម្ពុជា 3")
    assert impl.query_terms(vowel * 2) == []
    # The vowel signs are the spelling: kept.
    assert impl.query_terms("កា") != impl.query_terms("ក")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(st.sampled_from("ខ្មែរកម្ពុជា\u17b4\u17b5\u17b6 3-"), max_size=30))
def test_rust_and_the_reference_agree_on_khmer(text: str) -> None:
    assert seg.query_terms(text) == ref.query_terms(text)
    assert seg.index_passages(text) == ref.index_passages(text)


def test_search_finds_khmer_without_its_inherent_vowels(store: lf.SQLiteStore) -> None:
    store.append("c", "user", "ប្រទេសក\u17b4ម្ពុជា ស្អាត", id="marked")
    store.append("c", "user", "nothing else here", id="other")
    assert ids(store.search("c", "ប្រទេសកម្ពុជា")) == ["marked"]
    assert ids(store.search("c", "ប្រទេសក\u17b5ម្ពុជា")) == ["marked"]
    assert store.check_search_index() == []


# ---------------------------------------------------------------------- outside its script


DROPPED = "\u0640\u115f\u1160\u3164\uffa0\u180b\u180c\u180d\u180f" + KHMER_INHERENT_VOWELS

#: (text, its tokens): a dropped character is dropped only after a letter or mark of its
#: own script; anywhere else it separates, as a character that is no letter does.
SEPARATES = [
    pytest.param("foo\u0640bar", ["foo", "bar"], id="tatweel-between-latin"),
    pytest.param("pass\u3164word", ["pass", "word"], id="hangul-filler-between-latin"),
    pytest.param("foo\u180bbar", ["foo", "bar"], id="mongolian-selector-between-latin"),
    pytest.param("foo\u17b4bar", ["foo", "bar"], id="khmer-vowel-between-latin"),
    pytest.param("12\u064034", ["12", "34"], id="tatweel-between-digits"),
    pytest.param("Café\u0640x", ["cafe", "x"], id="after-a-latin-letter-and-its-accent"),
    pytest.param("abc\u0640كتاب", ["abc", "كتاب"], id="latin-then-arabic"),
    pytest.param("한\u0640국", ["한", "국"], id="tatweel-between-hangul"),
    pytest.param("ក\u3164ខ", ["ក", "ខ"], id="hangul-filler-between-khmer"),
    pytest.param("\u0640كتاب", ["كتاب"], id="tatweel-first"),
    # After a letter of its script it is dropped, whatever follows.
    pytest.param("كتـــاب", ["كتاب"], id="tatweel-inside-arabic"),
    pytest.param("كَـتَب", ["كتب"], id="tatweel-after-a-haraka"),
    pytest.param("كتاب\u06403", ["كتاب", "3"], id="arabic-then-digit"),
    pytest.param("ܫܠ\u0640ܡܐ", ["ܫܠܡܐ"], id="tatweel-inside-syriac"),
    pytest.param("한\u3164국", ["한국"], id="hangul-filler-inside-hangul"),
]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize(("text", "expected"), SEPARATES)
def test_a_dropped_character_outside_its_script_separates(
    impl: ModuleType, text: str, expected: list[str]
) -> None:
    assert impl.query_terms(text) == expected
    assert joined_tokens(impl, text) == " ".join(expected)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.from_regex(r"[a-zA-Z0-9]{1,12}", fullmatch=True), min_size=1, max_size=6),
    st.sampled_from(DROPPED),
)
def test_between_ascii_words_a_dropped_character_is_a_space(words: list[str], dropped: str) -> None:
    for impl in (seg, ref):
        assert impl.query_terms(dropped.join(words)) == impl.query_terms(" ".join(words))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(st.sampled_from(DROPPED + "abc1 -كتاب한국ᠮកܫ\u064e\u0301\u0654ꦲ"), max_size=40))
def test_rust_and_the_reference_agree_on_where_a_character_is_dropped(text: str) -> None:
    assert seg.query_terms(text) == ref.query_terms(text)
    assert seg.index_passages(text) == ref.index_passages(text)


def test_search_keeps_words_apart_across_a_stray_dropped_character(
    store: lf.SQLiteStore,
) -> None:
    store.append("c", "user", "deploy\u0640staging failed", id="stray")
    store.append("c", "user", "اشتريت كتـــاب النحو", id="arabic")
    store.append("c", "user", "nothing else here", id="other")
    assert ids(store.search("c", "staging")) == ["stray"]
    assert ids(store.search("c", "deploy")) == ["stray"]
    assert store.search("c", "deploystaging") == []
    assert ids(store.search("c", "كتاب")) == ["arabic"]
    assert store.check_search_index() == []


# ---------------------------------------------------------------------- digits


DIGITS = [
    pytest.param("۱۴۰۲", "1402", id="persian"),
    pytest.param("١٤٠٢", "1402", id="arabic-indic"),
    pytest.param("१४०२", "1402", id="devanagari"),
    pytest.param("๑๔๐๒", "1402", id="thai"),
    pytest.param("১৪০২", "1402", id="bengali"),
    pytest.param("\U0001e951\U0001e954\U0001e950\U0001e952", "1402", id="adlam"),
    pytest.param("۱4٠2", "1402", id="mixed"),
    pytest.param("PO-۹۳۰۲", "PO-9302", id="in-a-code"),
    pytest.param("٣号", "3号", id="beside-cjk"),
]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize(("written", "ascii"), DIGITS)
def test_every_scripts_digits_are_ascii_digits(impl: ModuleType, written: str, ascii: str) -> None:
    assert impl.query_terms(written) == impl.query_terms(ascii) != []
    assert joined_tokens(impl, f"ok {written} x") == joined_tokens(impl, f"ok {ascii} x")


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_a_digit_run_stays_whole_and_exact(impl: ModuleType) -> None:
    assert impl.query_terms("۳") != impl.query_terms("۱۳")
    assert impl.query_terms("كتاب٣") == ["كتاب", "3"]
    # Only decimal digits: other numbers (Nl, No) stay what they were.
    assert impl.query_terms("Ⅻ ½") == impl.query_terms("xii 1⁄2")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(st.characters(categories=("Nd",)) | st.sampled_from("a号ك -"), max_size=30))
def test_rust_and_the_reference_agree_on_digits(text: str) -> None:
    assert seg.query_terms(text) == ref.query_terms(text)
    assert seg.index_passages(text) == ref.index_passages(text)


def test_search_finds_a_number_typed_on_any_keyboard(store: lf.SQLiteStore) -> None:
    store.append("c", "user", "رمز کمد شماره ۳ برابر ۵۱۰۰ است", id="persian")
    store.append("c", "user", "the code is 7734", id="latin")
    store.append("c", "user", "nothing else here", id="other")
    assert ids(store.search("c", "5100")) == ["persian"]
    assert ids(store.search("c", "٥١٠٠")) == ["persian"]
    assert ids(store.search("c", "۷۷۳۴")) == ["latin"]
    assert store.search("c", "51") == []
    assert store.check_search_index() == []
