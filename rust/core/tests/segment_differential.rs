//! Differential tests of recall's segmentation (SPEC §16.5): the segmenter, with its fast
//! paths (ASCII text read eight bytes at a time, remembered stems, passage ends found from
//! the window's end), against a plain statement of the rules here: the whole text
//! normalised at once, each character classed, runs made tokens, every ASCII word stemmed
//! afresh; passages cut by counting characters. On random Unicode and ASCII text, and on
//! every body of the real transcripts.

use std::path::Path;

use caseless::Caseless;
use ledgerfold_core::segment::{index_passages, query_terms, tokens, PASSAGE_CHARS};
use proptest::prelude::*;
use rust_stemmers::{Algorithm, Stemmer};
use unicode_normalization::UnicodeNormalization;
use unicode_properties::{GeneralCategory, GeneralCategoryGroup, UnicodeGeneralCategory};
use unicode_script::{Script, UnicodeScript};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Separator,
    Letter,
    Digit,
    Cjk,
}

fn names_one_of(c: char, scripts: &[Script]) -> bool {
    let extension = c.script_extension();
    !extension.is_common()
        && !extension.is_inherited()
        && scripts
            .iter()
            .any(|&script| extension.contains_script(script))
}

fn class(c: char) -> Class {
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
            let cjk = [
                Script::Han,
                Script::Hiragana,
                Script::Katakana,
                Script::Hangul,
            ];
            if names_one_of(c, &cjk) {
                Class::Cjk
            } else {
                Class::Letter
            }
        }
        _ => Class::Separator,
    }
}

fn is_diacritic(c: char) -> bool {
    let scripts = [
        Script::Latin,
        Script::Greek,
        Script::Cyrillic,
        Script::Arabic,
        Script::Hebrew,
        Script::Syriac,
    ];
    c.general_category() == GeneralCategory::NonspacingMark
        && (c.script_extension().is_inherited() || names_one_of(c, &scripts))
}

/// A character that only stretches, pads or restyles a word, dropped after the
/// diacritics: U+0640 ARABIC TATWEEL (Apache Lucene's `ArabicNormalizer` deletes it), the
/// Hangul fillers, the Mongolian free variation selectors and the Khmer inherent vowels.
fn is_dropped(c: char) -> bool {
    matches!(
        c,
        '\u{640}' | '\u{115f}' | '\u{1160}' | '\u{3164}' | '\u{ffa0}' | '\u{180b}'
            ..='\u{180d}' | '\u{180f}' | '\u{17b4}' | '\u{17b5}'
    )
}

/// Whether a dropped character after `previous` (the last character kept) is inside a word
/// of its own script: `previous` is a letter or mark one of whose scripts (its
/// `Script_Extensions`, Common and Inherited naming none) is one of the dropped character's.
/// Else the dropped character is a space.
fn inside_its_script(previous: char, dropped: char) -> bool {
    let ours = previous.script_extension();
    matches!(
        previous.general_category_group(),
        GeneralCategoryGroup::Letter | GeneralCategoryGroup::Mark
    ) && !ours.is_common()
        && !ours.is_inherited()
        && dropped
            .script_extension()
            .iter()
            .any(|script| ours.contains_script(script))
}

/// The decomposed text's dropped characters dropped inside a word of their script, made
/// spaces elsewhere; its letters folded.
fn drop_and_fold(decomposed: Vec<char>) -> Vec<char> {
    let mut out: Vec<char> = Vec::with_capacity(decomposed.len());
    for c in decomposed {
        let previous = out.last().copied().unwrap_or(' ');
        if !is_dropped(c) {
            out.push(arabic_letter(c));
        } else if !inside_its_script(previous, c) {
            out.push(' ');
        }
    }
    out
}

/// Arabic's teh marbuta is heh and its alef maksura is yeh (Apache Lucene's
/// `ArabicNormalizer`); Persian's farsi yeh is yeh, its keheh kaf, and Urdu's heh goal heh
/// (Lucene's `PersianNormalizer`, but for yeh barree); with the dropped characters.
fn arabic_letter(c: char) -> char {
    match c {
        '\u{629}' | '\u{6c1}' => '\u{647}',
        '\u{649}' | '\u{6cc}' => '\u{64a}',
        '\u{6a9}' => '\u{643}',
        _ => c,
    }
}

/// Persian's heh with yeh above is heh, before NFD (which would make it AE and a hamza).
fn persian_heh(c: char) -> char {
    if c == '\u{6c0}' {
        '\u{647}'
    } else {
        c
    }
}

/// A format character other than U+200B ZERO WIDTH SPACE: dropped before anything else.
fn is_ignorable(c: char) -> bool {
    c.general_category() == GeneralCategory::Format && c != '\u{200b}'
}

fn stem(word: &str) -> String {
    if !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return word.to_owned();
    }
    let stem = Stemmer::create(Algorithm::English).stem(word).into_owned();
    if !stem.is_empty() && stem.bytes().all(|b| b.is_ascii_lowercase()) {
        stem
    } else {
        word.to_owned()
    }
}

/// `text` with each ECMA-48 control sequence (`ESC [` or U+009B, parameter characters
/// `0`..=`?`, intermediate characters ` `..=`/`, a final character `@`..=`~`, as many as
/// there are) replaced by a space.
fn spaced(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut at = 0;
    while at < chars.len() {
        let csi = match chars[at] {
            '\u{1b}' if chars.get(at + 1) == Some(&'[') => 2,
            '\u{9b}' => 1,
            _ => 0,
        };
        if csi == 0 {
            out.push(chars[at]);
            at += 1;
            continue;
        }
        at += csi;
        while at < chars.len() && ('0'..='?').contains(&chars[at]) {
            at += 1;
        }
        while at < chars.len() && (' '..='/').contains(&chars[at]) {
            at += 1;
        }
        if at < chars.len() && ('@'..='~').contains(&chars[at]) {
            at += 1;
        }
        out.push(' ');
    }
    out
}

/// The text's tokens by the rules as written.
fn reference_tokens(text: &str) -> Vec<String> {
    let normal: Vec<char> = spaced(text)
        .chars()
        .filter(|&c| !is_ignorable(c))
        .nfkc()
        .default_case_fold()
        .map(persian_heh)
        .nfd()
        .filter(|&c| !is_diacritic(c))
        .collect();
    let normal: Vec<char> = drop_and_fold(normal).into_iter().nfc().collect();
    let mut out = Vec::new();
    let mut at = 0;
    while at < normal.len() {
        let kind = class(normal[at]);
        let start = at;
        while at < normal.len() && class(normal[at]) == kind {
            at += 1;
        }
        let run = &normal[start..at];
        match kind {
            Class::Separator => {}
            Class::Digit => out.push(run.iter().copied().map(digit_value).collect()),
            Class::Letter => out.push(stem(&run.iter().collect::<String>())),
            Class::Cjk if run.len() == 1 => out.push(run[0].to_string()),
            Class::Cjk => out.extend(run.windows(2).map(|pair| pair.iter().collect())),
        }
    }
    out
}

/// A decimal digit's ASCII digit: Unicode encodes each script's ten digits as one run of
/// code points from zero, so its value is how many `Nd` code points stand just before it,
/// modulo ten.
fn digit_value(c: char) -> char {
    let before = (0..u32::from(c))
        .rev()
        .take_while(|&code| {
            char::from_u32(code)
                .is_some_and(|d| d.general_category() == GeneralCategory::DecimalNumber)
        })
        .count();
    char::from_digit(u32::try_from(before % 10).expect("below ten"), 10).expect("a digit")
}

fn is_sentence_end(c: char) -> bool {
    ".!?。！？\n\r\u{b}\u{c}\u{85}\u{2028}\u{2029}".contains(c)
}

/// The body's token-bearing passages by the rule as written, in characters.
fn reference_passages(body: &str) -> Vec<(usize, usize, String)> {
    let chars: Vec<char> = body.chars().collect();
    let mut out = Vec::new();
    let mut start = 0;
    while start < chars.len() {
        let end = if chars.len() - start <= PASSAGE_CHARS {
            chars.len()
        } else {
            let window = &chars[start..start + PASSAGE_CHARS];
            let sentence = (PASSAGE_CHARS / 2..PASSAGE_CHARS)
                .rev()
                .find(|&i| is_sentence_end(window[i]));
            let space = (0..PASSAGE_CHARS)
                .rev()
                .find(|&i| window[i].is_whitespace());
            start + sentence.or(space).map_or(PASSAGE_CHARS, |i| i + 1)
        };
        let text: String = chars[start..end].iter().collect();
        let joined = reference_tokens(&text).join(" ");
        if !joined.is_empty() {
            out.push((start, end, joined));
        }
        start = end;
    }
    out
}

fn passages(body: &str) -> Vec<(usize, usize, String)> {
    index_passages(body)
        .into_iter()
        .map(|passage| (passage.start, passage.end, passage.tokens))
        .collect()
}

/// ASCII as the fast path reads it: words of every length around the eight-byte lanes and
/// the 24-byte remembered words (1 to 40 letters, mixed case), digit runs of up to 20,
/// every ASCII separator, and control characters.
fn ascii_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[a-z]{1,40}",
        "[a-zA-Z]{1,40}",
        "[A-Z]{7,9}|[a-z]{15,17}|[a-zA-Z]{23,26}",
        "[0-9]{1,20}",
        "[ -/:-@\\[-`{-~]{1,4}",
        "[\t\n\u{b}\u{c}\r ]{1,3}",
        "[\u{0}-\u{1f}\u{7f}]{1,2}",
        "\u{1b}\\[[0-9;]{0,4}[ -/]{0,1}[@-~]{0,1}",
        "(refus|connect|happi|generaliz|run|nation)(e|es|ed|ing|ation|ations|ness|ly|s)",
    ];
    prop::collection::vec(piece, 0..80).prop_map(|pieces| pieces.concat())
}

/// Any text, and ASCII with other text spliced in: the chunks between ASCII whitespace that
/// hold a non-ASCII character leave the fast path.
fn mixed_text() -> impl Strategy<Value = String> {
    let other = prop_oneof![
        "[éÉçñüßİıﬁⅫ①²\u{301}\u{308}\u{345}]{1,3}",
        "[ＡＢＣ１２３！？]{1,3}",
        "[我的护照放在号储物柜密码是。，がかきコーヒー\u{3099}한국어]{1,6}",
        "[\u{85}\u{a0}\u{2028}\u{2029}\u{3000}]{1,2}",
        "[كتابـ\u{fe71}\u{64e}ةىيهی\u{654}\u{670}\u{fe94}\u{fef0}\u{fc5d}]{1,6}",
        "[한국가\u{1100}\u{1161}\u{115f}\u{1160}\u{3164}\u{ffa0}]{1,6}",
        "[ᠮᠣᠩᠭ\u{180b}\u{180c}\u{180d}\u{180e}\u{180f}]{1,6}",
        "[یکہۀۂھےەكيه\u{654}\u{200c}\u{fbfc}\u{fb8e}\u{fba4}\u{6d5}]{1,6}",
        "[ខ្មែរកម្ពុជា\u{17b4}\u{17b5}]{1,6}",
        "[٠-٩۰-۹०-९๐-๙0-9号كa]{1,6}",
        "[abc1كت한ᠮកܫ\u{640}\u{3164}\u{1160}\u{180b}\u{17b4}\u{64e}\u{301}]{1,8}",
        "\u{9b}[0-9;]{0,4}[@-~]{0,1}",
        any::<char>().prop_map(String::from),
        "\\PC{1,8}",
    ];
    prop_oneof![
        any::<String>(),
        prop::collection::vec(prop_oneof![ascii_text(), other], 0..12)
            .prop_map(|pieces| pieces.concat()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn ascii_tokens_are_the_rules(text in ascii_text()) {
        let expected = reference_tokens(&text);
        prop_assert_eq!(&tokens(&text), &expected);
        // Twice: the second time from the remembered stems.
        prop_assert_eq!(&tokens(&text), &expected);
    }

    #[test]
    fn mixed_tokens_are_the_rules(text in mixed_text()) {
        let expected = reference_tokens(&text);
        prop_assert_eq!(&tokens(&text), &expected);
        prop_assert_eq!(&tokens(&text), &expected);
    }

    #[test]
    fn query_terms_are_the_tokens_per_word(text in mixed_text()) {
        // Every query term is a token of its whitespace-separated word, as the rules give it.
        let text = spaced(&text);
        let words: Vec<Vec<String>> = text.split(char::is_whitespace).map(reference_tokens).collect();
        for term in query_terms(&text) {
            prop_assert!(words.iter().flatten().any(|token| *token == term), "{term}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn passages_are_the_rules(
        parts in prop::collection::vec(prop_oneof![ascii_text(), mixed_text()], 1..40),
    ) {
        let body = parts.concat();
        prop_assert_eq!(passages(&body), reference_passages(&body));
    }
}

/// Every turn body of the real transcripts (`tests/data/transcripts` at the repository's
/// root), in file order.
fn real_bodies() -> Vec<String> {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/transcripts");
    let mut files: Vec<_> = std::fs::read_dir(&folder)
        .expect("the transcripts")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    files.sort();
    let mut bodies = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a transcript file");
        for line in text.split('\n').filter(|line| !line.trim().is_empty()) {
            let conversation: serde_json::Value = serde_json::from_str(line).expect("JSON");
            for turn in conversation["turns"].as_array().expect("turns") {
                bodies.push(turn["body"].as_str().expect("a body").to_owned());
            }
        }
    }
    bodies
}

#[test]
fn every_real_body_gives_the_rules_passages() {
    let bodies = real_bodies();
    assert!(bodies.len() > 6_000);
    for body in &bodies {
        assert_eq!(passages(body), reference_passages(body));
    }
}
