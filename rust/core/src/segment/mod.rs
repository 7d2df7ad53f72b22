//! Recall's text segmentation (SPEC §16.5 "Normalisation" and "Hits"): bodies into passages
//! of at most 600 characters, text into normalised search tokens.
//!
//! Normalisation, in this order: the format characters (`Cf`: soft hyphen, zero-width
//! joiner and non-joiner, word joiner, byte order mark, bidi marks) dropped, as invisible
//! characters that never split a word (`co\u{AD}operate` is `cooperate`), all but U+200B
//! ZERO WIDTH SPACE, a space (a word break in UAX #29); NFKC; full case folding; NFD, then
//! the diacritics dropped:
//! the nonspacing marks (`Mn`) of Latin, Greek, Cyrillic, Arabic, Hebrew or Syriac or of no
//! script in particular (`Inherited`): accents, and the vowel points that the abjads'
//! ordinary writing leaves out (`كَتَبَ` is `كتب`, `שָׁלוֹם` is `שלום`, and `أ` is `ا`: NFD
//! makes its hamza a mark); not the vowel signs and viramas that the Brahmic scripts spell
//! with (`नमस्ते` keeps its virama, `दुनिया` its vowel sign, `が` its voicing mark: dropping
//! them would make different words one); the characters that only stretch, pad or restyle
//! a word dropped (the Arabic tatweel: `كتـــاب` is `كتاب`; the Hangul fillers; the
//! Mongolian free variation selectors; the Khmer inherent vowels: each inside a word of its
//! script only, after a letter or mark of it, and a separator elsewhere), and Arabic's teh marbuta made heh and alef maksura
//! made yeh, as Apache Lucene's `ArabicNormalizer` does (`مدرسة` is `مدرسه`, `على` is `علي`),
//! and the Persian letters that an Arabic keyboard types otherwise made Arabic's, as Lucene's
//! `PersianNormalizer` does (farsi yeh, keheh and the heh variants: `کتاب` is `كتاب`, `ایران`
//! is `ايران`; the heh with yeh above is made heh before NFD; the `fold` module says why and
//! which letters stay apart); NFC (so Hangul syllables, decomposed by NFD, are whole
//! again). Then each character is one of four classes:
//! - *digit*: ASCII `0-9` and every other `Nd`, made its ASCII digit (`۳` and `٣` are `3`);
//! - *CJK*: a letter, mark or number (`L*`, `M*`, `Nl`, `No`) whose `Script_Extensions` name
//!   Han, Hiragana, Katakana or Hangul (so `ー` and `々` join their words);
//! - *letter*: ASCII `a-z` and every other `L*`, `M*`, `Nl`, `No`;
//! - *separator*: everything else (all other ASCII: space, punctuation, `-`, `_`, `.`).
//!
//! Before all this, each ECMA-48 control sequence (`ESC [` or U+009B, parameter bytes
//! `0x30..=0x3F`, intermediate bytes `0x20..=0x2F`, a final byte `0x40..=0x7E`: the colours
//! of a command's output) is made a space, so `\x1b[31mFAILED` gives `failed`.
//!
//! A token is a maximal run of one class (so `PO-9302` gives `po` and `9302`, `3号` gives
//! `3` and `号`, and `sha256` gives `sha` and `256`). A letter token of ASCII letters only is
//! stemmed with Snowball English (Porter2); a CJK run of two or more characters becomes its
//! overlapping bigrams. Token alphabet: a token is non-empty and its only ASCII characters
//! are `a-z` and `0-9`.
//!
//! Word boundaries come from the character classes above rather than UAX #29 word breaks:
//! the tokens are the same for the cases §16 names, and the rule is one that an independent
//! reference (`tests/segment_reference.py`) can state exactly with Python's own Unicode data.
//! Every Unicode property comes from a crate (`unicode-normalization`, `caseless`,
//! `unicode-properties`, `unicode-script`): no hand-written tables (SPEC §17.9).
//!
//! The parts: `tokenise` (normalisation, classes: a text's tokens), `stems` (ASCII words'
//! stems, remembered), `passages` (the index's passages of a body) and `query` (a query's
//! terms).

mod fold;
mod passages;
mod query;
mod stems;
mod tokenise;

pub use passages::{index_passages, passage_bounds, Passage, PassageBounds, PASSAGE_CHARS};
pub use query::{query_terms, MAX_QUERY_TERMS};
pub use tokenise::{push_tokens, tokens};

/// The segmenter's version, recorded with the index: any change of the tokens or passages a
/// text gives must bump it (the index is then rebuilt). 2: control sequences separate (1
/// read `\x1b[31mFAILED` as `31` and `mfail`). 3: Arabic, Hebrew and Syriac points are
/// diacritics (2 kept them, so `كَتَبَ` did not match `كتب`), and format characters are
/// dropped (2 split `co\u{AD}operate` into `co` and `oper`). 4: the Arabic tatweel is
/// dropped (3 kept it, so `كتـــاب` did not match `كتاب`), and so are the Hangul fillers
/// and the Mongolian free variation selectors (3 kept them inside a word); teh marbuta is
/// heh and alef maksura is yeh (3 told `مدرسة` from `مدرسه` and `على` from `علي`). 5: farsi
/// yeh is yeh, keheh is kaf, heh goal and heh with yeh above are heh (4 told `کتاب` from
/// `كتاب` and `ایران` from `ايران`, and made `ۀ` the Kurdish `ە`); the Khmer inherent
/// vowels are dropped (4 kept them inside a word); the dropped characters separate outside
/// a word of their script (4 made `foo\u{640}bar` one word); every script's decimal digits
/// are ASCII digits (4 told `۱۴۰۲` from `1402`).
pub const INDEX_VERSION: u32 = 5;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn punctuation_only_gives_nothing() {
        assert!(query_terms("").is_empty());
        assert!(query_terms("  ?! -- ... 。，").is_empty());
        assert!(index_passages("").is_empty());
        assert!(index_passages("!!! ???").is_empty());
    }
}
