//! What search folds beyond Unicode's normalisation and the diacritics (SPEC §16.5
//! "Normalisation"): characters that only stretch, pad or restyle a word, dropped, and two
//! Arabic letters that writers use for one another, folded. Applied to the decomposed text,
//! after the diacritics and before NFC, so a dropped character is as if it had never been
//! written: the characters around it compose as they would without it.

/// `c` as the index spells it, or None when it is dropped.
///
/// - U+0640 ARABIC TATWEEL (kashida) only elongates the joined letters around it
///   (justification, emphasis): `كتـــاب` is `كتاب`. Dropped, as Apache Lucene's
///   `ArabicNormalizer` (`org.apache.lucene.analysis.ar`) deletes it.
/// - The Hangul fillers (U+115F CHOSEONG FILLER, U+1160 JUNGSEONG FILLER, U+3164 HANGUL
///   FILLER, U+FFA0 HALFWIDTH HANGUL FILLER; NFKC makes the last two U+1160) stand for a
///   missing part of a syllable block and show nothing: `한\u{3164}국` is `한국`.
/// - The Mongolian free variation selectors (U+180B to U+180D, U+180F) choose a letter's
///   glyph, not the word: `ᠭ\u{180B}` is `ᠭ`.
///
/// Each is invisible or a shape only, and (as Unicode's `Default_Ignorable_Code_Point`
/// says of all but the tatweel) never makes one word another.
///
/// And as Apache Lucene's `ArabicNormalizer` folds them, for the spellings Arabic writers
/// use for one another (a final `ة` written `ه`, a final `ى` written `ي`, and back):
/// - U+0629 TEH MARBUTA is U+0647 HEH: `مدرسة` is `مدرسه`;
/// - U+0649 ALEF MAKSURA is U+064A YEH: `على` is `علي`.
///
/// Lucene's third fold, the alef with a madda or hamza (U+0622, U+0623, U+0625) to the bare
/// alef, is the diacritics' rule already: NFD makes the madda or hamza a mark, dropped.
/// No other letter is folded: Persian's and Urdu's own letters (`ی` U+06CC, `ہ` U+06C1,
/// `ۃ` U+06C3, `ە` U+06D5) stay themselves, as Lucene's Arabic rule leaves them.
pub(super) fn folded(c: char) -> Option<char> {
    // Below the first character this folds: the ASCII and most text's path, one comparison.
    if c < '\u{0629}' {
        return Some(c);
    }
    match c {
        '\u{0629}' => Some('\u{0647}'),
        '\u{0649}' => Some('\u{064A}'),
        // The tatweel; the Hangul fillers; the Mongolian free variation selectors.
        '\u{0640}'
        | '\u{115F}'
        | '\u{1160}'
        | '\u{3164}'
        | '\u{FFA0}'
        | '\u{180B}'..='\u{180D}'
        | '\u{180F}' => None,
        _ => Some(c),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tokens;

    #[test]
    fn tatweel_is_dropped() {
        assert_eq!(tokens("كتـــاب"), tokens("كتاب"));
        assert_eq!(tokens("كتـــاب"), ["كتاب"]);
        assert_eq!(tokens("ـكتابـ"), ["كتاب"]);
        // Alone, or in a compatibility form with a haraka (U+FE71: tatweel and fathatan).
        assert!(tokens("ـــ \u{FE71}").is_empty());
        assert_eq!(tokens("كت\u{FE71}اب"), ["كتاب"]);
        // Between letters of other scripts it is invisible too.
        assert_eq!(tokens("pass\u{640}word"), ["password"]);
    }

    #[test]
    fn hangul_fillers_are_dropped() {
        for filler in ['\u{115F}', '\u{1160}', '\u{3164}', '\u{FFA0}'] {
            assert_eq!(tokens(&format!("한{filler}국")), ["한국"], "{filler:?}");
            assert_eq!(tokens(&format!("{filler}한국어{filler}")), ["한국", "국어"]);
            assert!(tokens(&filler.to_string()).is_empty());
        }
        // An initial consonant alone, and a syllable without one.
        assert_eq!(tokens("\u{1100}\u{1160}"), ["\u{1100}"]);
        assert_eq!(tokens("\u{115F}\u{1161}"), ["\u{1161}"]);
    }

    #[test]
    fn mongolian_free_variation_selectors_are_dropped() {
        for selector in ['\u{180B}', '\u{180C}', '\u{180D}', '\u{180F}'] {
            let word = format!("ᠮᠣᠩᠭ{selector}ᠣᠯ");
            assert_eq!(tokens(&word), tokens("ᠮᠣᠩᠭᠣᠯ"), "{selector:?}");
            assert_eq!(tokens(&word), ["ᠮᠣᠩᠭᠣᠯ"]);
        }
    }

    #[test]
    fn teh_marbuta_is_heh_and_alef_maksura_is_yeh() {
        assert_eq!(tokens("مدرسة"), tokens("مدرسه"));
        assert_eq!(tokens("مدرسة"), ["مدرسه"]);
        assert_eq!(tokens("على"), ["علي"]);
        // And the presentation forms, which NFKC makes the letters.
        assert_eq!(tokens("مدرس\u{FE94}"), ["مدرسه"]);
        assert_eq!(tokens("عل\u{FEF0}"), ["علي"]);
        // The hamza and madda alefs are the bare alef (the diacritics' rule).
        assert_eq!(tokens("إلى آخر أحمد"), tokens("الي اخر احمد"));
        // Persian's and Urdu's own letters are not folded.
        for (letter, arabic) in [("ی", "ي"), ("ہ", "ه"), ("ۃ", "ه"), ("ە", "ه")] {
            assert_ne!(tokens(letter), tokens(arabic), "{letter}");
        }
    }
}
