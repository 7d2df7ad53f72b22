//! The stems of ASCII words (SPEC §16.5: Snowball English), remembered: stemming is most
//! of the time spent on English text, and text repeats its words.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::OnceLock;

use rust_stemmers::{Algorithm, Stemmer};

fn english_stemmer() -> &'static Stemmer {
    static STEMMER: OnceLock<Stemmer> = OnceLock::new();
    STEMMER.get_or_init(|| Stemmer::create(Algorithm::English))
}

/// The stem of a word of ASCII letters `a-z`.
pub(super) fn stem_of(word: &str) -> String {
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
pub(super) const CACHED_WORD_BYTES: usize = 24;
/// The cache is emptied when it holds this many words (a bound on its memory).
const CACHED_WORDS: usize = 32_768;
/// Sets of the front cache, of two words each: `1 << FRONT_BITS`.
const FRONT_BITS: u32 = 11;
const FRONT_SETS: usize = 1 << FRONT_BITS;

/// A word of at most [`CACHED_WORD_BYTES`] ASCII letters `a-z`, padded with zero bytes, as
/// little-endian 8-byte lanes: two keys are equal exactly when their words are (no word
/// holds a zero byte). Built in lanes rather than bytes, the key is read whole at once.
pub(super) type Key = [u64; KEY_LANES];
pub(super) const KEY_LANES: usize = CACHED_WORD_BYTES / 8;

/// The key of a word of at most [`CACHED_WORD_BYTES`] ASCII letters `a-z`.
pub(super) fn key_of(word: &[u8]) -> Key {
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
pub(super) struct StemCache {
    /// Each set's two slots, the more recently used first.
    front: Box<[[FrontSlot; 2]]>,
    map: HashMap<Box<str>, Box<str>>,
}

impl StemCache {
    pub(super) fn new() -> Self {
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
    pub(super) fn push(&mut self, out: &mut Vec<u8>, key: Key, len: usize) {
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
    pub(super) fn push_word(&mut self, out: &mut Vec<u8>, word: &[u8]) {
        if word.len() > CACHED_WORD_BYTES {
            let word = std::str::from_utf8(word).expect("ASCII letters");
            emit(out, stem_of(word).as_bytes());
            return;
        }
        self.push(out, key_of(word), word.len());
    }
}

thread_local! {
    pub(super) static STEMS: RefCell<StemCache> = RefCell::new(StemCache::new());
}

/// Appends `token` to `out`, preceded by a space when `out` is not empty.
pub(super) fn emit(out: &mut Vec<u8>, token: &[u8]) {
    if !out.is_empty() {
        out.push(b' ');
    }
    out.extend_from_slice(token);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::tokens;

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
