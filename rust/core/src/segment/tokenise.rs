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
/// Sets of the front cache, of two words each: `1 << FRONT_BITS`.
const FRONT_BITS: u32 = 11;
const FRONT_SETS: usize = 1 << FRONT_BITS;

/// A word of at most [`CACHED_WORD_BYTES`] ASCII letters `a-z`, padded with zero bytes, as
/// little-endian 8-byte lanes: two keys are equal exactly when their words are (no word
/// holds a zero byte). Built in lanes rather than bytes, the key is read whole at once.
type Key = [u64; KEY_LANES];
const KEY_LANES: usize = CACHED_WORD_BYTES / 8;

/// The key of a word of at most [`CACHED_WORD_BYTES`] ASCII letters `a-z`.
fn key_of(word: &[u8]) -> Key {
    let mut key = [0; KEY_LANES];
    for (at, &byte) in word.iter().enumerate() {
        key[at / 8] |= u64::from(byte) << (8 * (at % 8));
    }
    key
}

/// One slot of the front cache: a word and its stem, held inline. The empty slot's word is
/// all zero bytes, which no key is (a word has at least one letter).
#[derive(Clone, Copy)]
struct FrontSlot {
    word: Key,
    stem_len: u8,
    stem: [u8; CACHED_WORD_BYTES],
}

impl FrontSlot {
    fn holds(&self, key: &Key) -> bool {
        (self.word[0] ^ key[0]) | (self.word[1] ^ key[1]) | (self.word[2] ^ key[2]) == 0
    }

    /// Appends the slot's stem to `out`, as [`emit`].
    fn push_stem(&self, out: &mut Vec<u8>) {
        if !out.is_empty() {
            out.push(b' ');
        }
        // A copy of fixed size, then cut to the stem: no call to copy a few bytes.
        let stem_at = out.len();
        out.extend_from_slice(&self.stem);
        out.truncate(stem_at + usize::from(self.stem_len));
    }
}

const EMPTY_SLOT: FrontSlot = FrontSlot {
    word: [0; KEY_LANES],
    stem_len: 0,
    stem: [0; CACHED_WORD_BYTES],
};

/// The remembered stems: a two-way set-associative front (two words a set, the set picked
/// by a cheap hash of the word; a word new to its set replaces the one of the two used less
/// recently) before a `HashMap` with the standard library's keyed hash. The front answers
/// most words for one short hash and one or two comparisons of fixed size, without following
/// a pointer; at two words a set, words made to share a set cost misses, never a longer
/// search, and the map behind it keeps its keyed hash's guarantees.
struct StemCache {
    /// Each set's two slots, the more recently used first.
    front: Box<[[FrontSlot; 2]]>,
    map: HashMap<Box<str>, Box<str>>,
}

impl StemCache {
    fn new() -> Self {
        Self {
            front: vec![[EMPTY_SLOT; 2]; FRONT_SETS].into_boxed_slice(),
            map: HashMap::new(),
        }
    }

    /// The key's three 8-byte lanes mixed, multiplied, shifted and multiplied again; the
    /// product's top bits pick the set.
    fn set_of(key: &Key) -> usize {
        let mixed = key[0] ^ key[1].rotate_left(21) ^ key[2].rotate_left(42);
        let mixed = mixed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let hash = (mixed ^ (mixed >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9) >> (64 - FRONT_BITS);
        usize::try_from(hash).expect("below FRONT_SETS")
    }

    /// Appends the stem of the word of `key` (its first `len` bytes) to `out`, as [`emit`],
    /// remembering it.
    // Inlined into the loops that build the key: the key stays in registers.
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn push(&mut self, out: &mut Vec<u8>, key: Key, len: usize) {
        let set = &mut self.front[Self::set_of(&key)];
        if set[0].holds(&key) {
            set[0].push_stem(out);
        } else if set[1].holds(&key) {
            set.swap(0, 1);
            set[0].push_stem(out);
        } else {
            self.push_missed(out, key, len);
        }
    }

    /// [`StemCache::push`] of a word that the front does not hold.
    #[cold]
    #[inline(never)]
    fn push_missed(&mut self, out: &mut Vec<u8>, key: Key, len: usize) {
        let mut bytes = [0; CACHED_WORD_BYTES];
        for (lane, chunk) in key.iter().zip(bytes.chunks_exact_mut(8)) {
            chunk.copy_from_slice(&lane.to_le_bytes());
        }
        let word = std::str::from_utf8(&bytes[..len]).expect("ASCII letters");
        let map = &mut self.map;
        let stem: &str = if let Some(stem) = map.get(word) {
            stem
        } else {
            if map.len() >= CACHED_WORDS {
                map.clear();
            }
            map.entry(word.into())
                .or_insert_with(|| stem_of(word).into_boxed_str())
        };
        emit(out, stem.as_bytes());
        // A stem longer than a slot holds (were there one) is left to the map.
        if stem.len() <= CACHED_WORD_BYTES {
            let set = &mut self.front[Self::set_of(&key)];
            set[1] = set[0];
            set[0].word = key;
            set[0].stem_len = u8::try_from(stem.len()).expect("at most 24");
            set[0].stem[..stem.len()].copy_from_slice(stem.as_bytes());
        }
    }

    /// Appends the stem of `word` (ASCII letters `a-z`) to `out`, as [`emit`].
    fn push_word(&mut self, out: &mut Vec<u8>, word: &[u8]) {
        if word.len() > CACHED_WORD_BYTES {
            let word = std::str::from_utf8(word).expect("ASCII letters");
            emit(out, stem_of(word).as_bytes());
            return;
        }
        self.push(out, key_of(word), word.len());
    }
}

thread_local! {
    static STEMS: RefCell<StemCache> = RefCell::new(StemCache::new());
}

/// The byte `0x01` eight times: a byte times `ONES` is that byte in every place of a lane.
const ONES: u64 = 0x0101_0101_0101_0101;
/// The bit `0x20` in every byte: lowercases an ASCII letter.
const LOWERCASE: u64 = 0x20 * ONES;
/// Each byte's high bit.
const HIGH_BITS: u64 = 0x80 * ONES;

/// The eight bytes of `bytes` from `at` as a little-endian `u64`, zero bytes past the end.
fn lane_at(bytes: &[u8], at: usize) -> u64 {
    if let Some(chunk) = bytes.get(at..at + 8) {
        u64::from_le_bytes(chunk.try_into().expect("8 bytes"))
    } else {
        let tail = &bytes[at.min(bytes.len())..];
        let mut lane = [0; 8];
        lane[..tail.len()].copy_from_slice(tail);
        u64::from_le_bytes(lane)
    }
}

/// The high bit of each byte of `lane` (eight ASCII bytes) set where the byte is in
/// `low..=high`: adding `0x80 - low` sets it from `low` on, and no byte carries into the
/// next (an ASCII byte plus at most `0x80` is below `0x100`).
fn bytes_in(lane: u64, low: u8, high: u8) -> u64 {
    let from_low = lane + u64::from(0x80 - low) * ONES;
    let past_high = lane + u64::from(0x7f - high) * ONES;
    from_low & !past_high & HIGH_BITS
}

/// The ASCII letters of `lane` (eight ASCII bytes): each one's high bit.
fn letter_bytes(lane: u64) -> u64 {
    // Setting 0x20 maps exactly `A-Z` and `a-z` onto `a-z`.
    bytes_in(lane | LOWERCASE, b'a', b'z')
}

/// The ASCII digits of `lane` (eight ASCII bytes): each one's high bit.
fn digit_bytes(lane: u64) -> u64 {
    bytes_in(lane, b'0', b'9')
}

/// How many bytes from the first on have their high bit set in `mask` (a mask of high bits
/// such as [`letter_bytes`] gives): the length of the run at the lane's start, up to eight.
fn run_length(mask: u64) -> usize {
    ((!mask & HIGH_BITS).trailing_zeros() / 8) as usize
}

/// A mask of the first `count` bytes (up to eight).
fn low_bytes(count: usize) -> u64 {
    if count >= 8 {
        u64::MAX
    } else {
        (1 << (8 * count)) - 1
    }
}

/// Appends `token` to `out`, preceded by a space when `out` is not empty.
fn emit(out: &mut Vec<u8>, token: &[u8]) {
    if !out.is_empty() {
        out.push(b' ');
    }
    out.extend_from_slice(token);
}

/// Appends the tokens of `text` to `out`, each preceded by a space when `out` is not empty.
pub fn push_tokens(text: &str, out: &mut String) {
    let mut bytes = std::mem::take(out).into_bytes();
    with_tokeniser(|tokeniser| tokeniser.push_tokens(text, &mut bytes));
    *out = String::from_utf8(bytes).expect("tokens are UTF-8");
}

/// Runs `work` with this thread's tokeniser (its remembered stems and its buffers).
pub(super) fn with_tokeniser<T>(work: impl FnOnce(&mut Tokeniser<'_>) -> T) -> T {
    STEMS.with_borrow_mut(|stems| {
        work(&mut Tokeniser {
            stems,
            class: Class::Separator,
            word: String::new(),
            cjk: Vec::new(),
        })
    })
}

/// Makes tokens, with the thread's remembered stems and buffers kept from text to text.
pub(super) struct Tokeniser<'a> {
    stems: &'a mut StemCache,
    /// The class of the current token of the general path.
    class: Class,
    /// The current letter or digit token of the general path.
    word: String,
    /// The current CJK run of the general path.
    cjk: Vec<char>,
}

impl Tokeniser<'_> {
    /// Appends the tokens of `text` to `out` (UTF-8), each preceded by a space when `out`
    /// is not empty.
    pub(super) fn push_tokens(&mut self, text: &str, out: &mut Vec<u8>) {
        // Normalisation never crosses ASCII whitespace (a starter that composes with
        // nothing; case folding is per character), so the text is its chunks between ASCII
        // whitespace, each on its own; an ASCII chunk takes the fast path, and so does a run
        // of ASCII chunks at once (the whitespace between them separates there too).
        let bytes = text.as_bytes();
        if bytes.is_ascii() {
            self.push_ascii(bytes, out);
            return;
        }
        let mut done = 0;
        while let Some(offset) = bytes[done..].iter().position(|b| !b.is_ascii()) {
            let at = done + offset;
            // The chunk around the first non-ASCII byte.
            let start = bytes[done..at]
                .iter()
                .rposition(u8::is_ascii_whitespace)
                .map_or(done, |space| done + space + 1);
            let end = bytes[at..]
                .iter()
                .position(u8::is_ascii_whitespace)
                .map_or(bytes.len(), |space| at + space);
            self.push_ascii(&bytes[done..start], out);
            self.push_general(&text[start..end], out);
            done = end;
        }
        self.push_ascii(&bytes[done..], out);
    }

    /// The tokens of ASCII text, as the general path would give them: runs of letters
    /// (lowercased, stemmed) and runs of digits; every other ASCII character separates.
    /// Read eight bytes at a time: each byte's class is found for the eight at once.
    fn push_ascii(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        let mut at = 0;
        while at < bytes.len() {
            let lane = lane_at(bytes, at);
            let letters = letter_bytes(lane);
            if letters & 0x80 != 0 {
                at = self.push_ascii_word(bytes, at, lane, out);
                continue;
            }
            let digits = digit_bytes(lane);
            if digits & 0x80 != 0 {
                let start = at;
                let mut digits = digits;
                loop {
                    let run = run_length(digits);
                    at += run;
                    if run < 8 {
                        break;
                    }
                    digits = digit_bytes(lane_at(bytes, at));
                }
                emit(out, &bytes[start..at]);
                continue;
            }
            // Separators, up to the next letter or digit.
            let alphanumeric = letters | digits;
            at += if alphanumeric == 0 {
                8
            } else {
                (alphanumeric.trailing_zeros() / 8) as usize
            };
        }
    }

    /// Pushes the stem of the letter run at `start` (its first eight bytes `lane`), and
    /// returns where the run ends.
    fn push_ascii_word(
        &mut self,
        bytes: &[u8],
        start: usize,
        lane: u64,
        out: &mut Vec<u8>,
    ) -> usize {
        // Lowercased into the key, lane by lane, as it is read.
        let mut key = [0; KEY_LANES];
        let (mut at, mut lane) = (start, lane);
        for slot in &mut key {
            let run = run_length(letter_bytes(lane));
            *slot = (lane | LOWERCASE) & low_bytes(run);
            at += run;
            if run < 8 {
                self.stems.push(out, key, at - start);
                return at;
            }
            lane = lane_at(bytes, at);
        }
        if letter_bytes(lane) & 0x80 == 0 {
            // Exactly CACHED_WORD_BYTES letters.
            self.stems.push(out, key, at - start);
            return at;
        }
        while at < bytes.len() && bytes[at].is_ascii_alphabetic() {
            at += 1;
        }
        self.stems
            .push_word(out, &bytes[start..at].to_ascii_lowercase());
        at
    }

    /// The tokens of a chunk (no ASCII whitespace) by the rules as written: normalised,
    /// each character classed.
    fn push_general(&mut self, chunk: &str, out: &mut Vec<u8>) {
        for c in chunk
            .chars()
            .nfkc()
            .default_case_fold()
            .nfd()
            .filter(|&c| keeps(c))
            .nfc()
        {
            let class = class_of(c);
            if class != self.class {
                self.flush(out);
                self.class = class;
            }
            match class {
                Class::Separator => {}
                Class::Cjk => self.cjk.push(c),
                Class::Letter | Class::Digit => self.word.push(c),
            }
        }
        self.flush(out);
    }

    fn flush(&mut self, out: &mut Vec<u8>) {
        match self.class {
            Class::Separator => {}
            Class::Digit => emit(out, self.word.as_bytes()),
            Class::Letter => {
                if self.word.bytes().all(|b| b.is_ascii_lowercase()) {
                    self.stems.push_word(out, self.word.as_bytes());
                } else {
                    emit(out, self.word.as_bytes());
                }
            }
            Class::Cjk => {
                if let [single] = self.cjk[..] {
                    emit(out, single.encode_utf8(&mut [0; 4]).as_bytes());
                } else {
                    let mut pair = [0; 8];
                    for chars in self.cjk.windows(2) {
                        let first = chars[0].len_utf8();
                        chars[0].encode_utf8(&mut pair);
                        let second = chars[1].encode_utf8(&mut pair[first..]).len();
                        emit(out, &pair[..first + second]);
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
    fn words_sharing_a_front_set_keep_their_own_stems() {
        // Three words the front cache puts in one set of two, in turn: each replaces the one
        // used least recently. The words differ in their first, second or third 8-byte lane
        // of the key only.
        for prefix in ["", "abcdefgh", "abcdefghijklmnop"] {
            let mut by_set: HashMap<usize, Vec<String>> = HashMap::new();
            let letters = || (b'a'..=b'z').map(char::from);
            let three = letters()
                .flat_map(|a| {
                    letters()
                        .flat_map(move |b| letters().map(move |c| format!("{prefix}{a}{b}{c}ing")))
                })
                .find_map(|word| {
                    let set = by_set
                        .entry(StemCache::set_of(&key_of(word.as_bytes())))
                        .or_default();
                    set.push(word);
                    (set.len() == 3).then(|| set.clone())
                })
                .expect("2,048 sets, 17,576 words");
            let stems: Vec<String> = three.iter().map(|word| stem_of(word)).collect();
            assert!(stems[0] != stems[1] && stems[1] != stems[2] && stems[0] != stems[2]);
            let order = [0, 1, 2, 0, 1, 2, 1, 0, 0, 2, 1];
            let text: Vec<&str> = order.iter().map(|&at| three[at].as_str()).collect();
            let expected: Vec<String> = order.iter().map(|&at| stems[at].clone()).collect();
            assert_eq!(tokens(&text.join(" ")), expected);
        }
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
