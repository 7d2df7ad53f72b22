//! Property tests of recall's segmentation (SPEC §16.5): no input panics, every token keeps
//! the token alphabet, passages are consecutive, cover the body, fit the 600-character
//! window and sit on character boundaries, query terms are distinct and at most 64, and
//! format characters (soft hyphens, joiners, bidi marks) and the characters that only
//! stretch, pad or restyle a word (the Arabic tatweel, the Hangul fillers, the Mongolian
//! free variation selectors, the Khmer inherent vowels) change no token inside a word of
//! their script, and separate words of another.

use ledgerfold_core::segment::{
    index_passages, passage_bounds, query_terms, tokens, MAX_QUERY_TERMS, PASSAGE_CHARS,
};
use proptest::prelude::*;

/// Text that mixes every kind of character the segmenter treats apart: ASCII words, codes
/// and numbers, punctuation and line breaks, Latin with diacritics, fullwidth forms, CJK,
/// kana marks, Hangul, combining marks, and arbitrary code points.
fn text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[a-zA-Z]{1,12}",
        "[0-9]{1,6}",
        "[A-Z]{2}-[0-9]{3,4}",
        "[ .!?\n\r\t_-]{1,3}",
        "[éÉçñüß\u{301}\u{308}]{1,3}",
        "[ＡＢＣ１２３！？]{1,3}",
        "[我的护照放在号储物柜密码是。，]{1,6}",
        "[がかきコーヒー\u{3099}\u{309b}]{1,4}",
        "[한국어]{1,3}",
        any::<char>().prop_map(String::from),
        "\\PC{1,8}",
    ];
    prop::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
}

/// Long text, so that bodies span several passages.
fn long_text() -> impl Strategy<Value = String> {
    prop::collection::vec(text(), 1..12).prop_map(|parts| parts.concat().repeat(3))
}

/// Long text of ASCII only, or ASCII runs of passage length around other text: the scans
/// that read a window of ASCII bytes as characters, and the windows that end mid-run.
fn ascii_long_text() -> impl Strategy<Value = String> {
    // Separators with sentence ends, with whitespace only, and none at all: each of the
    // passage rule's three cuts.
    let ascii = prop_oneof!["[ .!?\n\r\t\x0b\x0c_-]{1,3}", "[ \t_-]{1,3}", "[_-]{1,3}",]
        .prop_flat_map(|separators| {
            prop::collection::vec(prop_oneof![Just(separators), "[a-zA-Z0-9]{1,40}"], 40..200)
        })
        .prop_map(|pieces| pieces.concat());
    prop_oneof![
        ascii.clone(),
        (ascii.clone(), text(), ascii).prop_map(|(a, b, c)| format!("{a}{b}{c}")),
    ]
}

fn passage_body() -> impl Strategy<Value = String> {
    prop_oneof![long_text(), ascii_long_text()]
}

/// A format character (`Cf`) other than U+200B ZERO WIDTH SPACE: soft hyphen, joiners, word
/// joiner, byte order mark, bidi marks, embeddings and isolates, and a few of other kinds.
fn format_character() -> impl Strategy<Value = char> {
    prop::sample::select(vec![
        '\u{AD}',
        '\u{61C}',
        '\u{180E}',
        '\u{200C}',
        '\u{200D}',
        '\u{200E}',
        '\u{200F}',
        '\u{202A}',
        '\u{202B}',
        '\u{202C}',
        '\u{202D}',
        '\u{202E}',
        '\u{2060}',
        '\u{2062}',
        '\u{2066}',
        '\u{2067}',
        '\u{2068}',
        '\u{2069}',
        '\u{FEFF}',
        '\u{E0001}',
        '\u{E0041}',
    ])
}

/// The characters that only stretch, pad or restyle a word, dropped inside a word of their
/// script: the Arabic tatweel, the Hangul fillers, the Mongolian free variation selectors,
/// the Khmer inherent vowels.
const DROPPED: [char; 11] = [
    '\u{640}', '\u{115F}', '\u{1160}', '\u{3164}', '\u{FFA0}', '\u{180B}', '\u{180C}', '\u{180D}',
    '\u{180F}', '\u{17B4}', '\u{17B5}',
];

/// A dropped character after a letter of its script: (the letter, the character).
fn dropped_in_its_script() -> impl Strategy<Value = (char, char)> {
    prop::sample::select(vec![
        ('ك', '\u{640}'),
        ('ت', '\u{640}'),
        ('ܫ', '\u{640}'),
        ('한', '\u{115F}'),
        ('ᄀ', '\u{1160}'),
        ('국', '\u{3164}'),
        ('한', '\u{FFA0}'),
        ('ᠮ', '\u{180B}'),
        ('ᠭ', '\u{180C}'),
        ('ᠭ', '\u{180D}'),
        ('ᠣ', '\u{180F}'),
        ('ក', '\u{17B4}'),
        ('ម', '\u{17B5}'),
    ])
}

fn assert_alphabet(token: &str) {
    assert!(!token.is_empty());
    assert!(
        token
            .bytes()
            .all(|b| !b.is_ascii() || b.is_ascii_lowercase() || b.is_ascii_digit()),
        "token {token:?} breaks the alphabet"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn tokens_keep_the_alphabet(text in text()) {
        for token in tokens(&text) {
            assert_alphabet(&token);
        }
        for term in query_terms(&text) {
            assert_alphabet(&term);
        }
    }

    #[test]
    fn passages_cover_the_body(body in passage_body()) {
        let bounds = passage_bounds(&body);
        let chars: Vec<char> = body.chars().collect();
        let (mut byte, mut char_at) = (0, 0);
        for passage in &bounds {
            prop_assert_eq!(passage.start_byte, byte);
            prop_assert_eq!(passage.start_char, char_at);
            prop_assert!(passage.end_char > passage.start_char);
            prop_assert!(passage.end_char - passage.start_char <= PASSAGE_CHARS);
            prop_assert!(body.is_char_boundary(passage.end_byte));
            let text: String = chars[passage.start_char..passage.end_char].iter().collect();
            prop_assert_eq!(&body[passage.start_byte..passage.end_byte], text.as_str());
            byte = passage.end_byte;
            char_at = passage.end_char;
        }
        prop_assert_eq!(byte, body.len());
        prop_assert_eq!(char_at, chars.len());
    }

    #[test]
    fn indexed_passages_are_the_token_bearing_ones(body in passage_body()) {
        let bounds = passage_bounds(&body);
        let indexed = index_passages(&body);
        let expected: Vec<(usize, usize, String)> = bounds
            .iter()
            .map(|b| (b.start_char, b.end_char, tokens(&body[b.start_byte..b.end_byte]).join(" ")))
            .filter(|(_, _, joined)| !joined.is_empty())
            .collect();
        let got: Vec<(usize, usize, String)> =
            indexed.into_iter().map(|p| (p.start, p.end, p.tokens)).collect();
        prop_assert_eq!(got, expected);
    }

    #[test]
    fn a_passage_is_cut_where_the_rule_says(body in passage_body()) {
        let chars: Vec<char> = body.chars().collect();
        for passage in passage_bounds(&body) {
            let length = passage.end_char - passage.start_char;
            if passage.end_char == chars.len() {
                continue; // the last passage is the rest of the body
            }
            let window = &chars[passage.start_char..passage.start_char + PASSAGE_CHARS];
            let sentence_end = |c: char| ".!?。！？\n\r\u{b}\u{c}\u{85}\u{2028}\u{2029}".contains(c);
            let last_sentence = (PASSAGE_CHARS / 2..PASSAGE_CHARS).rev().find(|&i| sentence_end(window[i]));
            let last_space = (0..PASSAGE_CHARS).rev().find(|&i| window[i].is_whitespace());
            let expected = last_sentence.or(last_space).map_or(PASSAGE_CHARS, |i| i + 1);
            prop_assert_eq!(length, expected);
        }
    }

    #[test]
    fn query_terms_are_distinct_first_tokens(text in long_text()) {
        let terms = query_terms(&text);
        prop_assert!(terms.len() <= MAX_QUERY_TERMS);
        // A one-character CJK token beside a digit-run token of the same word is left out
        // while another term remains.
        // (whitespace-separated word, token): a lone CJK character is left out only beside
        // digits of its own word.
        let words: Vec<(usize, String)> = text
            .split(char::is_whitespace)
            .enumerate()
            .flat_map(|(word, chunk)| tokens(chunk).into_iter().map(move |token| (word, token)))
            .collect();
        let every: Vec<String> = words.iter().map(|(_, token)| token.clone()).collect();
        // A digit run joins the digits around it; nothing else does.
        let digits = |token: &String| tokens(&format!("1{token}1")).len() == 1;
        // A CJK character does not join the letters around it; a letter (α) would.
        let lone_cjk = |token: &String| {
            token.chars().count() == 1
                && !digits(token)
                && tokens(&format!("x{token}x")).len() == 3
        };
        let kept: Vec<String> = every
            .iter()
            .enumerate()
            .filter(|&(at, token)| {
                let same_word = |other: usize| words[other].0 == words[at].0;
                let beside = (at > 0 && same_word(at - 1) && digits(&every[at - 1]))
                    || (at + 1 < every.len() && same_word(at + 1) && digits(&every[at + 1]));
                !(lone_cjk(token) && beside)
            })
            .map(|(_, token)| token.clone())
            .collect();
        let mut distinct: Vec<String> = Vec::new();
        for token in if kept.is_empty() { every } else { kept } {
            if !distinct.contains(&token) {
                distinct.push(token);
            }
        }
        distinct.truncate(MAX_QUERY_TERMS);
        prop_assert_eq!(terms, distinct);
    }

    #[test]
    fn format_characters_are_invisible(
        text in text(),
        inserts in prop::collection::vec((any::<prop::sample::Index>(), format_character()), 1..8),
    ) {
        // Outside control sequences (a format character inside one ends it).
        let text: String = text
            .chars()
            .map(|c| if matches!(c, '\u{1b}' | '\u{9b}') { ' ' } else { c })
            .collect();
        let mut chars: Vec<char> = text.chars().collect();
        for (at, format) in inserts {
            chars.insert(at.index(chars.len() + 1), format);
        }
        let marked: String = chars.into_iter().collect();
        prop_assert_eq!(tokens(&marked), tokens(&text));
        prop_assert_eq!(query_terms(&marked), query_terms(&text));
    }

    #[test]
    fn dropped_characters_are_invisible_in_their_script(
        text in text(),
        inserts in prop::collection::vec(
            (any::<prop::sample::Index>(), dropped_in_its_script()),
            1..8,
        ),
    ) {
        let text: Vec<char> = text
            .chars()
            .map(|c| if matches!(c, '\u{1b}' | '\u{9b}') { ' ' } else { c })
            .collect();
        // The same letters inserted in both at the same places (the last place first, so
        // that the earlier ones stay where they are); the dropped characters after them in
        // one.
        let mut places: Vec<(usize, (char, char))> = inserts
            .into_iter()
            .map(|(at, pair)| (at.index(text.len() + 1), pair))
            .collect();
        places.sort_by_key(|place| std::cmp::Reverse(place.0));
        let (mut plain, mut marked) = (text.clone(), text);
        for (at, (letter, dropped)) in places {
            plain.insert(at, letter);
            marked.splice(at..at, [letter, dropped]);
        }
        let plain: String = plain.into_iter().collect();
        let marked: String = marked.into_iter().collect();
        prop_assert_eq!(tokens(&marked), tokens(&plain));
        prop_assert_eq!(query_terms(&marked), query_terms(&plain));
    }

    #[test]
    fn dropped_characters_between_ascii_letters_separate(
        words in prop::collection::vec("[a-zA-Z0-9]{1,12}", 1..8),
        dropped in prop::sample::select(DROPPED.to_vec()),
    ) {
        let marked = words.join(&dropped.to_string());
        prop_assert_eq!(tokens(&marked), tokens(&words.join(" ")));
    }

    #[test]
    fn any_string_is_segmented_without_panic(text in any::<String>()) {
        let _ = index_passages(&text);
        let _ = query_terms(&text);
    }
}
