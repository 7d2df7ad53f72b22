//! Recall's text segmentation (SPEC §16.5 "Normalisation" and "Hits"): bodies into passages
//! of at most 600 characters, text into normalised search tokens.
//!
//! Normalisation, in this order: NFKC; full case folding; NFD, then the diacritics dropped:
//! the nonspacing marks (`Mn`) of Latin, Greek or Cyrillic or of no script in particular
//! (`Inherited`), not the vowel signs, viramas and points that other scripts write with
//! (`नमस्ते` keeps its virama, `が` its voicing mark); NFC (so Hangul syllables, decomposed by NFD, are whole again). Then each character is one
//! of four classes:
//! - *digit*: ASCII `0-9` and every other `Nd`;
//! - *CJK*: a letter, mark or number (`L*`, `M*`, `Nl`, `No`) whose `Script_Extensions` name
//!   Han, Hiragana, Katakana or Hangul (so `ー` and `々` join their words);
//! - *letter*: ASCII `a-z` and every other `L*`, `M*`, `Nl`, `No`;
//! - *separator*: everything else (all other ASCII: space, punctuation, `-`, `_`, `.`).
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

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::OnceLock;

use caseless::Caseless;
use rust_stemmers::{Algorithm, Stemmer};
use unicode_normalization::UnicodeNormalization;
use unicode_properties::{GeneralCategory, GeneralCategoryGroup, UnicodeGeneralCategory};
use unicode_script::{Script, UnicodeScript};

/// The segmenter's version, recorded with the index: any change of the tokens or passages a
/// text gives must bump it (the index is then rebuilt).
pub const INDEX_VERSION: u32 = 1;

/// A passage's window, in characters (code points).
pub const PASSAGE_CHARS: usize = 600;

/// A query uses at most this many distinct terms (the first ones).
pub const MAX_QUERY_TERMS: usize = 64;

/// One passage of a body: `start..end` in characters (code points) of the body, and its
/// tokens in order joined by single spaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passage {
    pub start: usize,
    pub end: usize,
    pub tokens: String,
}

/// The body's passages that hold at least one token, in order (SPEC §16.5 "Hits").
pub fn index_passages(body: &str) -> Vec<Passage> {
    let mut passages = Vec::new();
    let mut tokens = String::new();
    for bounds in passage_bounds(body) {
        tokens.clear();
        push_tokens(&body[bounds.start_byte..bounds.end_byte], &mut tokens);
        if !tokens.is_empty() {
            passages.push(Passage {
                start: bounds.start_char,
                end: bounds.end_char,
                tokens: tokens.clone(),
            });
        }
    }
    passages
}

/// The query's tokens, distinct, in first-occurrence order, at most [`MAX_QUERY_TERMS`].
///
/// A one-character CJK token next to a digit run (`3号`, `第3章`) is left out while
/// another term remains: the digits say which one is meant, and the lone character, a
/// token of every `13号` too, would make `3号` match `13号` (SPEC §16.5).
pub fn query_terms(query: &str) -> Vec<String> {
    let mut joined = String::new();
    push_tokens(query, &mut joined);
    let all: Vec<&str> = joined
        .split(' ')
        .filter(|token| !token.is_empty())
        .collect();
    let is_digits = |token: &str| token.chars().all(|c| class_of(c) == Class::Digit);
    let kept: Vec<&str> = all
        .iter()
        .enumerate()
        .filter(|&(at, token)| {
            let mut chars = token.chars();
            let lone_cjk = matches!((chars.next(), chars.next()), (Some(c), None) if class_of(c) == Class::Cjk);
            let by_digits = (at > 0 && is_digits(all[at - 1]))
                || all.get(at + 1).is_some_and(|next| is_digits(next));
            !(lone_cjk && by_digits)
        })
        .map(|(_, token)| *token)
        .collect();
    let chosen = if kept.is_empty() { &all } else { &kept };
    let mut terms: Vec<String> = Vec::new();
    for &token in chosen {
        if terms.len() == MAX_QUERY_TERMS {
            break;
        }
        // At most 64 terms: a linear scan beats hashing here.
        if !terms.iter().any(|term| term == token) {
            terms.push(token.to_owned());
        }
    }
    terms
}

/// The text's tokens in order (duplicates kept).
pub fn tokens(text: &str) -> Vec<String> {
    let mut joined = String::new();
    push_tokens(text, &mut joined);
    joined
        .split(' ')
        .filter(|token| !token.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A passage's place in the body, in bytes (to slice the `str`) and in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassageBounds {
    pub start_byte: usize,
    pub end_byte: usize,
    pub start_char: usize,
    pub end_char: usize,
}

fn is_sentence_end(c: char) -> bool {
    matches!(
        c,
        '.' | '!' | '?' | '。' | '！' | '？' | '\n' | '\r' | '\u{0B}' | '\u{0C}' | '\u{85}'
    ) || c == '\u{2028}'
        || c == '\u{2029}'
}

/// Every passage of the body, token-free ones included: consecutive, covering the body.
///
/// From `start` the window is the next 600 characters; when the rest of the body fits, it
/// is the last passage; else the passage ends after the last sentence end (`. ! ? 。！？`
/// or a line break) among the window's last 300 characters, else after the window's last
/// whitespace (Unicode `White_Space`), else after 600 characters.
pub fn passage_bounds(body: &str) -> Vec<PassageBounds> {
    let mut out = Vec::new();
    let (mut start_byte, mut start_char) = (0usize, 0usize);
    while start_byte < body.len() {
        let rest = &body[start_byte..];
        // (byte offset after, chars after) of the candidates, relative to `start`.
        let mut sentence_end: Option<(usize, usize)> = None;
        let mut whitespace: Option<(usize, usize)> = None;
        let mut window_end: Option<(usize, usize)> = None;
        for (count, (offset, c)) in rest.char_indices().enumerate() {
            if count == PASSAGE_CHARS {
                window_end = Some((offset, count));
                break;
            }
            let after = (offset + c.len_utf8(), count + 1);
            if count >= PASSAGE_CHARS / 2 && is_sentence_end(c) {
                sentence_end = Some(after);
            }
            if c.is_whitespace() {
                whitespace = Some(after);
            }
        }
        let (bytes, chars) = match window_end {
            // The rest of the body fits: the last passage.
            None => (rest.len(), rest.chars().count()),
            Some(full) => sentence_end.or(whitespace).unwrap_or(full),
        };
        out.push(PassageBounds {
            start_byte,
            end_byte: start_byte + bytes,
            start_char,
            end_char: start_char + chars,
        });
        start_byte += bytes;
        start_char += chars;
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Separator,
    Letter,
    Digit,
    Cjk,
}

fn is_cjk_script(c: char) -> bool {
    let scripts = c.script_extension();
    // Common and Inherited "contain" every script in this crate's model: they are not CJK.
    !scripts.is_common()
        && !scripts.is_inherited()
        && (scripts.contains_script(Script::Han)
            || scripts.contains_script(Script::Hiragana)
            || scripts.contains_script(Script::Katakana)
            || scripts.contains_script(Script::Hangul))
}

fn class_of(c: char) -> Class {
    if c.is_ascii() {
        return match c {
            'a'..='z' => Class::Letter,
            '0'..='9' => Class::Digit,
            _ => Class::Separator,
        };
    }
    if c.general_category() == GeneralCategory::DecimalNumber {
        return Class::Digit;
    }
    match c.general_category_group() {
        GeneralCategoryGroup::Letter
        | GeneralCategoryGroup::Mark
        | GeneralCategoryGroup::Number => {
            if is_cjk_script(c) {
                Class::Cjk
            } else {
                Class::Letter
            }
        }
        _ => Class::Separator,
    }
}

/// A decomposed character survives diacritic removal unless it is a nonspacing mark of
/// Latin, Greek or Cyrillic, or of no script in particular.
fn keeps(c: char) -> bool {
    if c.is_ascii() || c.general_category() != GeneralCategory::NonspacingMark {
        return true;
    }
    let scripts = c.script_extension();
    let diacritic = scripts.is_inherited()
        || (!scripts.is_common()
            && (scripts.contains_script(Script::Latin)
                || scripts.contains_script(Script::Greek)
                || scripts.contains_script(Script::Cyrillic)));
    !diacritic
}

fn english_stemmer() -> &'static Stemmer {
    static STEMMER: OnceLock<Stemmer> = OnceLock::new();
    STEMMER.get_or_init(|| Stemmer::create(Algorithm::English))
}

/// The stem of a word of ASCII letters `a-z`.
fn stem_of(word: &str) -> String {
    let stem = english_stemmer().stem(word);
    // The stemmer maps a-z words to a-z stems; keep the word if it ever did not, so that
    // the token alphabet holds whatever the crate does.
    if !stem.is_empty() && stem.bytes().all(|b| b.is_ascii_lowercase()) {
        stem.into_owned()
    } else {
        word.to_owned()
    }
}

/// Words this long or shorter are remembered with their stems: stemming is most of the
/// time spent on English text, and text repeats its words.
const CACHED_WORD_BYTES: usize = 24;
/// The cache is emptied when it holds this many words (a bound on its memory).
const CACHED_WORDS: usize = 32_768;

thread_local! {
    static STEMS: RefCell<HashMap<Box<str>, Box<str>>> = RefCell::new(HashMap::new());
}

/// Appends the stem of `word` (ASCII letters `a-z`) to `out`, as [`TokenBuilder::emit`].
fn push_stem(out: &mut String, word: &str) {
    if word.len() > CACHED_WORD_BYTES {
        TokenBuilder::emit(out, &stem_of(word));
        return;
    }
    STEMS.with_borrow_mut(|cache| {
        if let Some(stem) = cache.get(word) {
            TokenBuilder::emit(out, stem);
            return;
        }
        let stem = stem_of(word);
        TokenBuilder::emit(out, &stem);
        if cache.len() >= CACHED_WORDS {
            cache.clear();
        }
        cache.insert(word.into(), stem.into_boxed_str());
    });
}

/// Appends the tokens of `text` to `out`, each preceded by a space when `out` is not empty.
pub fn push_tokens(text: &str, out: &mut String) {
    let mut builder = TokenBuilder {
        out,
        class: Class::Separator,
        word: String::new(),
        cjk: Vec::new(),
    };
    // Normalisation never crosses ASCII whitespace (a starter that composes with nothing;
    // case folding is per character), so ASCII chunks take the fast path.
    for chunk in text.split(|c: char| c.is_ascii_whitespace()) {
        if chunk.is_ascii() {
            push_ascii_tokens(chunk, builder.out, &mut builder.word);
        } else {
            chunk
                .chars()
                .nfkc()
                .default_case_fold()
                .nfd()
                .filter(|&c| keeps(c))
                .nfc()
                .for_each(|c| builder.push(c));
        }
        builder.flush();
    }
}

/// The tokens of an ASCII chunk, as the general path would give them: runs of letters
/// (lowercased, stemmed) and runs of digits; every other ASCII character separates.
fn push_ascii_tokens(chunk: &str, out: &mut String, lower: &mut String) {
    let bytes = chunk.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let start = at;
        if bytes[at].is_ascii_alphabetic() {
            while at < bytes.len() && bytes[at].is_ascii_alphabetic() {
                at += 1;
            }
            lower.clear();
            lower.push_str(&chunk[start..at]);
            lower.make_ascii_lowercase();
            push_stem(out, lower);
        } else if bytes[at].is_ascii_digit() {
            while at < bytes.len() && bytes[at].is_ascii_digit() {
                at += 1;
            }
            TokenBuilder::emit(out, &chunk[start..at]);
        } else {
            at += 1;
        }
    }
    lower.clear();
}

struct TokenBuilder<'a> {
    out: &'a mut String,
    class: Class,
    /// The current letter or digit token.
    word: String,
    /// The current CJK run.
    cjk: Vec<char>,
}

impl TokenBuilder<'_> {
    fn push(&mut self, c: char) {
        let class = class_of(c);
        if class != self.class {
            self.flush();
            self.class = class;
        }
        match class {
            Class::Separator => {}
            Class::Cjk => self.cjk.push(c),
            Class::Letter | Class::Digit => self.word.push(c),
        }
    }

    fn emit(out: &mut String, token: &str) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(token);
    }

    fn flush(&mut self) {
        match self.class {
            Class::Separator => {}
            Class::Digit => Self::emit(self.out, &self.word),
            Class::Letter => {
                if self.word.bytes().all(|b| b.is_ascii_lowercase()) {
                    push_stem(self.out, &self.word);
                } else {
                    Self::emit(self.out, &self.word);
                }
            }
            Class::Cjk => {
                if let [single] = self.cjk[..] {
                    Self::emit(self.out, single.encode_utf8(&mut [0; 4]));
                } else {
                    for pair in self.cjk.windows(2) {
                        if !self.out.is_empty() {
                            self.out.push(' ');
                        }
                        self.out.push(pair[0]);
                        self.out.push(pair[1]);
                    }
                }
            }
        }
        self.word.clear();
        self.cjk.clear();
        self.class = Class::Separator;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(text: &str) -> Vec<String> {
        tokens(text)
    }

    #[test]
    fn cjk_query_terms_all_occur_in_the_fact() {
        let fact = toks("我的护照放在3号储物柜，密码是5100。");
        let terms = query_terms("护照 3号储物柜 密码");
        assert_eq!(terms, ["护照", "3", "号储", "储物", "物柜", "密码"]);
        for term in &terms {
            assert!(fact.contains(term), "{term} missing from {fact:?}");
        }
    }

    #[test]
    fn digit_runs_are_whole_and_never_join_cjk() {
        assert_eq!(toks("3号"), ["3", "号"]);
        assert_eq!(toks("13号"), ["13", "号"]);
        assert_eq!(toks("130"), ["130"]);
        assert_eq!(toks("sha256"), ["sha", "256"]);
    }

    #[test]
    fn a_lone_cjk_character_by_digits_leaves_the_query_while_another_term_remains() {
        assert_eq!(query_terms("3号"), ["3"]);
        assert_eq!(query_terms("第3章"), ["3"]);
        assert_eq!(query_terms("13号"), ["13"]);
        assert_eq!(query_terms("号"), ["号"]);
        assert_eq!(query_terms("护照 3号"), ["护照", "3"]);
        assert_eq!(query_terms("猫 狗"), ["猫", "狗"]);
    }

    #[test]
    fn codes_split_at_dash_underscore_and_dot() {
        assert_eq!(toks("PO-9302"), ["po", "9302"]);
        assert_eq!(toks("QZ_704.b"), ["qz", "704", "b"]);
    }

    #[test]
    fn english_inflections_share_a_stem() {
        let stems: Vec<_> = ["refuse", "refused", "refusing", "Refuses"]
            .iter()
            .map(|word| toks(word))
            .collect();
        assert!(stems.iter().all(|stem| stem == &stems[0]), "{stems:?}");
    }

    #[test]
    fn case_width_and_diacritics_fold() {
        assert_eq!(toks("Café"), toks("cafe"));
        assert_eq!(toks("Cafe\u{301}"), toks("cafe"));
        assert_eq!(toks("ＡＢＣ"), toks("abc"));
        assert_eq!(toks("ＡＢＣ"), ["abc"]);
        assert_eq!(toks("Straße"), toks("STRASSE"));
        assert_eq!(toks("１２３"), ["123"]);
    }

    #[test]
    fn only_latin_greek_cyrillic_and_shared_marks_are_diacritics() {
        assert_eq!(toks("Σίσυφος"), toks("ΣΙΣΥΦΟΣ"));
        assert_eq!(toks("Ёлка"), ["елка"]);
        assert_eq!(toks("façade"), toks("facade"));
        // Devanagari's virama and vowel signs, Thai's vowels and Hebrew's points are letters.
        assert_eq!(toks("नमस्ते"), ["नमस्ते"]);
        assert_ne!(toks("दुनिया"), toks("दनिया"));
        assert_ne!(toks("สวัสดี"), toks("สวสด"));
    }

    #[test]
    fn kana_voicing_marks_stay_and_hangul_stays_whole() {
        assert_ne!(toks("がき"), toks("かき"));
        assert_eq!(toks("がき"), ["がき"]);
        assert_eq!(toks("한국어"), ["한국", "국어"]);
        assert_eq!(toks("コーヒー"), ["コー", "ーヒ", "ヒー"]);
        assert_eq!(toks("字"), ["字"]);
    }

    #[test]
    fn punctuation_only_gives_nothing() {
        assert!(query_terms("").is_empty());
        assert!(query_terms("  ?! -- ... 。，").is_empty());
        assert!(index_passages("").is_empty());
        assert!(index_passages("!!! ???").is_empty());
    }

    #[test]
    fn query_terms_are_distinct_and_at_most_64() {
        assert_eq!(query_terms("b a b A"), ["b", "a"]);
        let many = (0..100)
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(" ");
        let terms = query_terms(&many);
        assert_eq!(terms.len(), MAX_QUERY_TERMS);
        assert_eq!(terms[63], "63");
    }

    #[test]
    fn remembered_stems_are_the_stemmer_s() {
        // More distinct words than the cache holds, twice, and words too long to remember.
        let words: Vec<String> = (0..CACHED_WORDS + 1_000)
            .map(|n| {
                let mut word = String::from("ing");
                let mut n = n;
                loop {
                    word.insert(0, char::from(b'a' + u8::try_from(n % 26).unwrap()));
                    n /= 26;
                    if n == 0 {
                        break word;
                    }
                }
            })
            .chain(["internationalizations", "antidisestablishmentarianisms"].map(String::from))
            .collect();
        let text = words.join(" ");
        let expected: Vec<String> = words
            .iter()
            .map(|word| english_stemmer().stem(word).into_owned())
            .collect();
        assert_eq!(tokens(&text), expected);
        assert_eq!(tokens(&text), expected);
    }

    #[test]
    fn passages_end_at_sentences_then_whitespace_then_600() {
        let sentence = "word ".repeat(70) + "end. "; // 355 characters
        let body = sentence.repeat(3);
        let bounds = passage_bounds(&body);
        assert_eq!(bounds[0].end_char, 355 - 1); // after the '.', before its space
        let spaced = "abcdefghi ".repeat(100);
        assert_eq!(passage_bounds(&spaced)[0].end_char, 600);
        let dense = "x".repeat(1_000);
        assert_eq!(passage_bounds(&dense)[0].end_char, 600);
        let early = format!("a. {}", "y".repeat(1_000));
        // A sentence end in the first half does not count; no whitespace after it either.
        assert_eq!(passage_bounds(&early)[0].end_char, 3);
    }

    #[test]
    fn passage_offsets_count_characters() {
        let body = "é".repeat(700);
        let bounds = passage_bounds(&body);
        assert_eq!(bounds.len(), 2);
        assert_eq!((bounds[0].start_char, bounds[0].end_char), (0, 600));
        assert_eq!((bounds[0].start_byte, bounds[0].end_byte), (0, 1200));
        assert_eq!((bounds[1].start_char, bounds[1].end_char), (600, 700));
    }
}
