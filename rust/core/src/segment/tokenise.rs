//! A text's tokens (SPEC §16.5 "Normalisation"): normalised, each character classed, runs of
//! one class made tokens, ASCII words stemmed and CJK runs made bigrams (the rules are in
//! the `segment` module's documentation).

use caseless::Caseless;
use unicode_normalization::UnicodeNormalization;
use unicode_properties::{GeneralCategory, GeneralCategoryGroup, UnicodeGeneralCategory};
use unicode_script::{Script, UnicodeScript};

use super::fold::{ascii_digit, composed_folded, folded};
use super::stems::{emit, StemCache, KEY_LANES, STEMS};

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

/// The scripts whose nonspacing marks are diacritics: accents and stress marks of the
/// alphabets, and the vowel points, shadda, sukun and hamza of the abjads (Arabic harakat,
/// Hebrew niqqud and cantillation, Syriac points), which ordinary writing leaves out. The
/// other scripts' nonspacing marks are part of the spelling: the vowel signs and viramas of
/// Devanagari, Thai and the other Brahmic scripts, the kana voicing marks.
const DIACRITIC_SCRIPTS: [Script; 6] = [
    Script::Latin,
    Script::Greek,
    Script::Cyrillic,
    Script::Arabic,
    Script::Hebrew,
    Script::Syriac,
];

/// A decomposed character survives diacritic removal unless it is a nonspacing mark of one
/// of [`DIACRITIC_SCRIPTS`], or of no script in particular.
fn keeps(c: char) -> bool {
    if c.is_ascii() || c.general_category() != GeneralCategory::NonspacingMark {
        return true;
    }
    let scripts = c.script_extension();
    let diacritic = scripts.is_inherited()
        || (!scripts.is_common()
            && DIACRITIC_SCRIPTS
                .iter()
                .any(|&script| scripts.contains_script(script)));
    !diacritic
}

/// Whether `c` is a format character (`Cf`: the soft hyphen, the zero-width joiner and
/// non-joiner, the word joiner, the byte order mark, the bidi marks, embeddings and
/// isolates, ...), which is invisible and never splits a word: it is dropped before
/// anything else (`co\u{AD}operate` is `cooperate`). U+200B ZERO WIDTH SPACE is a space:
/// a word break in Unicode's word rules (UAX #29), and it stays a separator.
fn ignorable(c: char) -> bool {
    !c.is_ascii() && c != '\u{200B}' && c.general_category() == GeneralCategory::Format
}

/// `text` with each ECMA-48 control sequence (terminal colours and cursor moves in a
/// command's output) made one space, or None when it holds none. A control sequence is
/// `ESC [` or U+009B, then parameter bytes `0x30..=0x3F`, intermediate bytes `0x20..=0x2F`
/// and a final byte `0x40..=0x7E` (what there is of them: a sequence cut short ends where
/// its bytes do): `\x1b[31mFAILED\x1b[0m` is the word `failed`, not `31` and `mfail`.
pub(super) fn without_control_sequences(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    // ESC, or the second byte of U+009B (0xC2 0x9B); a scan that costs little.
    if !bytes.iter().any(|&b| b == 0x1b || b == 0x9b) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        // 0xC2 is only ever a lead byte, so 0xC2 0x9B is U+009B.
        let introducer = matches!(bytes[at..], [0x1b, b'[', ..] | [0xc2, 0x9b, ..]);
        if !introducer {
            out.push(bytes[at]);
            at += 1;
            continue;
        }
        at += 2;
        for range in [0x30..=0x3f, 0x20..=0x2f] {
            while bytes.get(at).is_some_and(|b| range.contains(b)) {
                at += 1;
            }
        }
        if bytes.get(at).is_some_and(|b| (0x40..=0x7e).contains(b)) {
            at += 1;
        }
        out.push(b' ');
    }
    // Only whole characters (ASCII ones and U+009B) were replaced.
    Some(String::from_utf8(out).expect("still UTF-8"))
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
        let spaced = without_control_sequences(text);
        let text = spaced.as_deref().unwrap_or(text);
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
        // The last character the folds gave: a dropped character after a separator separates.
        let mut previous = ' ';
        for c in chunk
            .chars()
            .filter(|&c| !ignorable(c))
            .nfkc()
            .default_case_fold()
            .map(composed_folded)
            .nfd()
            .filter(|&c| keeps(c))
            .filter_map(|c| folded(c, &mut previous))
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
                Class::Letter => self.word.push(c),
                Class::Digit => self.word.push(ascii_digit(c)),
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
    fn control_sequences_separate() {
        assert_eq!(toks("\u{1b}[38;21mHEX\u{1b}[0m"), ["hex"]);
        assert_eq!(toks("\u{1b}[31mFAILED\u{1b}[0m"), toks("failed"));
        assert_eq!(toks("\u{9b}1mbold"), ["bold"]);
        assert_eq!(toks("café\u{1b}[0m数据"), toks("café 数据"));
        assert_eq!(toks("[31mFAILED"), ["31", "mfail"]);
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
    fn only_the_marks_of_alphabets_and_abjads_are_diacritics() {
        assert_eq!(toks("Σίσυφος"), toks("ΣΙΣΥΦΟΣ"));
        assert_eq!(toks("Ёлка"), ["елка"]);
        assert_eq!(toks("façade"), toks("facade"));
        // Arabic harakat, shadda, sukun and hamza, Hebrew niqqud, Syriac points.
        assert_eq!(toks("كَتَبَ"), ["كتب"]);
        assert_eq!(toks("مُدَرِّسٌ"), toks("مدرس"));
        assert_eq!(toks("أحمد"), toks("احمد"));
        assert_eq!(toks("שָׁלוֹם"), ["שלום"]);
        assert_eq!(toks("\u{FB2A}"), ["ש"]);
        assert_eq!(toks("ܫܠܳܡܳܐ"), ["ܫܠܡܐ"]);
        // Devanagari's virama and vowel signs and Thai's vowels are part of the word.
        assert_eq!(toks("नमस्ते"), ["नमस्ते"]);
        assert_ne!(toks("दुनिया"), toks("दनिया"));
        assert_ne!(toks("สวัสดี"), toks("สวสด"));
    }

    #[test]
    fn format_characters_never_split_a_word() {
        assert_eq!(toks("co\u{AD}operate"), toks("cooperate"));
        assert_eq!(toks("co\u{AD}operate"), ["cooper"]);
        for format in [
            '\u{200C}', '\u{200D}', '\u{2060}', '\u{FEFF}', '\u{200E}', '\u{202B}',
        ] {
            assert_eq!(
                toks(&format!("pass{format}word")),
                ["password"],
                "{format:?}"
            );
            assert_eq!(toks(&format!("{format}PO-9302{format}")), ["po", "9302"]);
        }
        assert_eq!(
            toks("\u{2067}שלום\u{2069} 13\u{2066}号"),
            ["שלום", "13", "号"]
        );
        assert_eq!(toks("می\u{200C}خواهم"), toks("میخواهم"));
        // The zero width space is a space.
        assert_eq!(toks("foo\u{200B}bar"), ["foo", "bar"]);
    }

    #[test]
    fn kana_voicing_marks_stay_and_hangul_stays_whole() {
        assert_ne!(toks("がき"), toks("かき"));
        assert_eq!(toks("がき"), ["がき"]);
        assert_eq!(toks("한국어"), ["한국", "국어"]);
        assert_eq!(toks("コーヒー"), ["コー", "ーヒ", "ヒー"]);
        assert_eq!(toks("字"), ["字"]);
    }
}
