//! A text's tokens (SPEC §16.5 "Normalisation"): normalised, each character classed, runs of
//! one class made tokens, ASCII words stemmed and CJK runs made bigrams (the rules are in
//! the `segment` module's documentation).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::OnceLock;

use caseless::Caseless;
use rust_stemmers::{Algorithm, Stemmer};
use unicode_normalization::UnicodeNormalization;
use unicode_properties::{GeneralCategory, GeneralCategoryGroup, UnicodeGeneralCategory};
use unicode_script::{Script, UnicodeScript};

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
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

pub(super) fn class_of(c: char) -> Class {
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
/// Slots of the front cache (a power of two).
const FRONT_SLOTS: usize = 4_096;

/// The remembered stems: a direct-mapped front (one word a slot, picked by a cheap hash of
/// the word; a word that lands on another's slot replaces it) before a `HashMap` with the
/// standard library's keyed hash. The front answers most words for one short hash and one
/// comparison; being direct-mapped, words made to share a slot cost misses, never a longer
/// search, and the map behind it keeps its keyed hash's guarantees.
struct StemCache {
    front: Vec<Option<(Box<str>, Box<str>)>>,
    map: HashMap<Box<str>, Box<str>>,
}

impl StemCache {
    fn new() -> Self {
        Self {
            front: vec![None; FRONT_SLOTS],
            map: HashMap::new(),
        }
    }

    /// FNV-1a over the word's bytes, folded to a slot.
    fn slot(word: &str) -> usize {
        let mut hash: u32 = 0x811c_9dc5;
        for &byte in word.as_bytes() {
            hash = (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193);
        }
        (hash ^ (hash >> 16)) as usize & (FRONT_SLOTS - 1)
    }

    /// Appends the stem of `word` to `out` (as [`TokenBuilder::emit`]), remembering it.
    fn push(&mut self, out: &mut String, word: &str) {
        let slot = Self::slot(word);
        if let Some((known, stem)) = &self.front[slot] {
            if &**known == word {
                TokenBuilder::emit(out, stem);
                return;
            }
        }
        let stem: Box<str> = if let Some(stem) = self.map.get(word) {
            stem.clone()
        } else {
            let stem: Box<str> = stem_of(word).into_boxed_str();
            if self.map.len() >= CACHED_WORDS {
                self.map.clear();
            }
            self.map.insert(word.into(), stem.clone());
            stem
        };
        TokenBuilder::emit(out, &stem);
        self.front[slot] = Some((word.into(), stem));
    }
}

thread_local! {
    static STEMS: RefCell<StemCache> = RefCell::new(StemCache::new());
}

/// Appends the stem of `word` (ASCII letters `a-z`) to `out`, as [`TokenBuilder::emit`].
fn push_stem(out: &mut String, word: &str) {
    if word.len() > CACHED_WORD_BYTES {
        TokenBuilder::emit(out, &stem_of(word));
        return;
    }
    STEMS.with_borrow_mut(|cache| cache.push(out, word));
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
    fn digit_runs_are_whole_and_never_join_cjk() {
        assert_eq!(toks("3号"), ["3", "号"]);
        assert_eq!(toks("13号"), ["13", "号"]);
        assert_eq!(toks("130"), ["130"]);
        assert_eq!(toks("sha256"), ["sha", "256"]);
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
    fn words_sharing_a_front_slot_keep_their_own_stems() {
        // Two words the front cache puts in one slot, alternating: each replaces the other.
        let mut by_slot = HashMap::new();
        let letters = || (b'a'..=b'z').map(char::from);
        let pair = letters()
            .flat_map(|a| {
                letters().flat_map(move |b| letters().map(move |c| format!("{a}{b}{c}ing")))
            })
            .find_map(|word| {
                let slot = StemCache::slot(&word);
                by_slot
                    .insert(slot, word.clone())
                    .map(|other| (other, word))
            })
            .expect("4,096 slots, 17,576 words");
        assert_ne!(pair.0, pair.1);
        let text = format!("{0} {1} {0} {1} {0}", pair.0, pair.1);
        let (first, second) = (stem_of(&pair.0), stem_of(&pair.1));
        assert_ne!(first, second);
        assert_eq!(
            tokens(&text),
            [&first, &second, &first, &second, &first].map(String::clone)
        );
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
}
