//! What search folds beyond Unicode's normalisation and the diacritics (SPEC §16.5
//! "Normalisation"): characters that only stretch, pad or restyle a word, dropped, and the
//! Arabic-script letters that writers use for one another, folded. Applied to the decomposed
//! text, after the diacritics and before NFC, so a dropped character is as if it had never
//! been written: the characters around it compose as they would without it; one Persian
//! letter, which NFD would decompose into another language's letter, folded before; and
//! every script's decimal digits made ASCII digits, in the digit class.

use unicode_properties::{GeneralCategory, GeneralCategoryGroup, UnicodeGeneralCategory};
use unicode_script::UnicodeScript;

/// `c` as the index spells it before the text is decomposed (after NFKC and case folding):
/// U+06C0 ARABIC LETTER HEH WITH YEH ABOVE (Persian's `ۀ`, a heh carrying the ezafe) is
/// U+0647 HEH, as Apache Lucene's `PersianNormalizer` folds it. It must be folded here: NFD
/// makes it U+06D5 AE (Kurdish's and Uyghur's vowel letter, not folded) and a hamza, so
/// `خانۀ` would not be `خانهٔ` (a heh and the hamza, which the diacritics' rule drops).
pub(super) fn composed_folded(c: char) -> char {
    if c == '\u{06C0}' {
        '\u{0647}'
    } else {
        c
    }
}

/// `c` as the index spells it, or None when it is dropped; `previous` is the last character
/// this gave for the text (a space at its start), and becomes the one it gives now.
///
/// - U+0640 ARABIC TATWEEL (kashida) only elongates the joined letters around it
///   (justification, emphasis): `كتـــاب` is `كتاب`. Dropped, as Apache Lucene's
///   `ArabicNormalizer` (`org.apache.lucene.analysis.ar`) deletes it.
/// - The Hangul fillers (U+115F CHOSEONG FILLER, U+1160 JUNGSEONG FILLER, U+3164 HANGUL
///   FILLER, U+FFA0 HALFWIDTH HANGUL FILLER; NFKC makes the last two U+1160) stand for a
///   missing part of a syllable block and show nothing: `한\u{3164}국` is `한국`.
/// - The Mongolian free variation selectors (U+180B to U+180D, U+180F) choose a letter's
///   glyph, not the word: `ᠭ\u{180B}` is `ᠭ`.
/// - The Khmer inherent vowels (U+17B4 KHMER VOWEL INHERENT AQ, U+17B5 KHMER VOWEL
///   INHERENT AA), deprecated, which show nothing and are in no word's spelling: `ខ្មែរ` is
///   `ខ្មែរ\u{17B4}`. Ignored, as ICU's and Apache Lucene's folding ignore them.
///
/// Each is invisible or a shape only, and (as Unicode's `Default_Ignorable_Code_Point`
/// says of all but the tatweel) never makes one word another. Each belongs to its scripts
/// (its `Script_Extensions`: the tatweel to Arabic, Syriac and the other scripts that join
/// letters with it, a filler to Hangul, a selector to Mongolian, an inherent vowel to
/// Khmer), and is dropped only inside a word of one of them: after a letter or mark of one
/// of its scripts ([`continues_word`]). Anywhere else (at the start of the text, after a
/// separator, a digit or another script's letter) it is a separator, as any other
/// character that is no letter: `foo\u{640}bar` is `foo` and `bar`, not `foobar`, and
/// `كتاب\u{640}3` keeps its digit apart.
///
/// And as Apache Lucene's `ArabicNormalizer` folds them, for the spellings Arabic writers
/// use for one another (a final `ة` written `ه`, a final `ى` written `ي`, and back):
/// - U+0629 TEH MARBUTA is U+0647 HEH: `مدرسة` is `مدرسه`;
/// - U+0649 ALEF MAKSURA is U+064A YEH: `على` is `علي`.
///
/// Lucene's third fold, the alef with a madda or hamza (U+0622, U+0623, U+0625) to the bare
/// alef, is the diacritics' rule already: NFD makes the madda or hamza a mark, dropped.
///
/// As Apache Lucene's `PersianNormalizer` (`org.apache.lucene.analysis.fa`) folds them, for
/// the Persian letters that an Arabic keyboard types as Arabic's (and Urdu's heh, which it
/// types as heh), so a Persian or Urdu word matches however it was typed:
/// - U+06CC FARSI YEH is U+064A YEH: `ایران` is `ايران`;
/// - U+06A9 KEHEH is U+0643 KAF: `کتاب` is `كتاب`;
/// - U+06C1 HEH GOAL (Urdu's `ہ`) is U+0647 HEH: `کہ` is `كه`; and U+06C0 HEH WITH YEH
///   ABOVE too ([`composed_folded`]). Lucene's last fold, the hamza above dropped, is the
///   diacritics' rule.
///
/// Not folded, although Lucene's Persian rule folds the first: U+06D2 YEH BARREE (Urdu's
/// `ے`, a letter apart from `ی` there: `کے` and `کی` are two words), and, as Lucene leaves
/// them, U+06BE HEH DOACHASHMEE (Urdu's aspiration letter: `کھ` is not `کہ`), U+06C3 TEH
/// MARBUTA GOAL, U+06D5 AE, U+0671 ALEF WASLA and the other languages' letters.
pub(super) fn folded(c: char, previous: &mut char) -> Option<char> {
    // Below the first character this folds: the ASCII and most text's path, one comparison.
    if c < '\u{0629}' {
        *previous = c;
        return Some(c);
    }
    let spelt = match c {
        '\u{0629}' | '\u{06C1}' => '\u{0647}',
        '\u{0649}' | '\u{06CC}' => '\u{064A}',
        '\u{06A9}' => '\u{0643}',
        // The tatweel; the Hangul fillers; the Mongolian free variation selectors; the Khmer
        // inherent vowels.
        '\u{0640}'
        | '\u{115F}'
        | '\u{1160}'
        | '\u{3164}'
        | '\u{FFA0}'
        | '\u{180B}'..='\u{180D}'
        | '\u{180F}'
        | '\u{17B4}'
        | '\u{17B5}' => {
            if continues_word(*previous, c) {
                return None;
            }
            ' '
        }
        _ => c,
    };
    *previous = spelt;
    Some(spelt)
}

/// The ASCII digit of a decimal digit (`Nd`) of any script: `٣` (Arabic-Indic), `۳`
/// (Persian), `३` (Devanagari) and `๓` (Thai) are `3`, as Apache Lucene's
/// `DecimalDigitFilter` (in its Persian, Arabic and Hindi analysers) and ICU's native digit
/// folding make them, so a number typed on a Persian keyboard is the number typed on an
/// Arabic or a Latin one. Unicode encodes each script's ten digits as one run of code
/// points, zero to nine, so a digit's value is its distance from the start of the stretch
/// of `Nd` it stands in, modulo ten (runs side by side are whole runs): no table.
pub(super) fn ascii_digit(c: char) -> char {
    if c.is_ascii_digit() {
        return c;
    }
    let code = u32::from(c);
    let mut first = code;
    while char::from_u32(first.wrapping_sub(1))
        .is_some_and(|before| before.general_category() == GeneralCategory::DecimalNumber)
    {
        first -= 1;
    }
    char::from_digit((code - first) % 10, 10).expect("a value below ten")
}

/// Whether a dropped character `c` after `previous` is inside a word of its own script:
/// `previous` is a letter or mark (`L*`, `M*`) whose `Script_Extensions` share a script
/// with `c`'s (Common and Inherited share none).
fn continues_word(previous: char, c: char) -> bool {
    let scripts = previous.script_extension();
    matches!(
        previous.general_category_group(),
        GeneralCategoryGroup::Letter | GeneralCategoryGroup::Mark
    ) && !scripts.is_common()
        && !scripts.is_inherited()
        && !scripts.intersection(c.script_extension()).is_empty()
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
        // Syriac joins its letters with it too.
        assert_eq!(tokens("ܫܠ\u{640}ܡܐ"), ["ܫܠܡܐ"]);
    }

    #[test]
    fn a_dropped_character_outside_its_script_separates() {
        for dropped in [
            '\u{640}', '\u{115F}', '\u{1160}', '\u{3164}', '\u{FFA0}', '\u{180B}', '\u{180F}',
            '\u{17B4}', '\u{17B5}',
        ] {
            assert_eq!(
                tokens(&format!("foo{dropped}bar")),
                ["foo", "bar"],
                "{dropped:?}"
            );
            assert_eq!(
                tokens(&format!("pass{dropped}{dropped}word")),
                ["pass", "word"]
            );
            assert_eq!(tokens(&format!("12{dropped}34")), ["12", "34"]);
            assert_eq!(tokens(&format!("Café{dropped}x")), ["cafe", "x"]);
        }
        // After a letter of its script it is dropped, whatever follows.
        assert_eq!(tokens("كتاب\u{640}3"), ["كتاب", "3"]);
        assert_eq!(tokens("كتاب\u{640}abc"), tokens("كتابabc"));
        // After another script's letter it separates, even from a letter of its own.
        assert_eq!(tokens("abc\u{640}كتاب"), ["abc", "كتاب"]);
        assert_eq!(tokens("한\u{640}국"), ["한", "국"]);
        assert_eq!(tokens("ក\u{3164}ខ"), ["ក", "ខ"]);
        // A haraka between the letter and the tatweel is gone by then.
        assert_eq!(tokens("كَـتَب"), ["كتب"]);
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
    fn every_scripts_decimal_digits_are_ascii_digits() {
        assert_eq!(tokens("٣٠ ۳۰ ३० ๓๐ ౩౦ 30"), ["30"; 6]);
        assert_eq!(tokens("۱۴۰۲"), ["1402"]);
        assert_eq!(tokens("١٢٣٤٥٦٧٨٩٠"), ["1234567890"]);
        // Still a digit run: never a CJK bigram's, never a letter's.
        assert_eq!(tokens("٣号"), ["3", "号"]);
        assert_eq!(tokens("كتاب٣"), ["كتاب", "3"]);
        // The mathematical digits (five runs side by side) NFKC makes ASCII already.
        assert_eq!(tokens("\u{1D7D7}\u{1D7E1}\u{1D7EB}"), ["999"]);
        // Adlam's, beyond the first plane.
        assert_eq!(tokens("\u{1E953}"), ["3"]);
    }

    #[test]
    fn khmer_inherent_vowels_are_dropped() {
        for vowel in ['\u{17B4}', '\u{17B5}'] {
            assert_eq!(tokens(&format!("ខ្មែរ{vowel}")), tokens("ខ្មែរ"), "{vowel:?}");
            assert_eq!(tokens(&format!("ក{vowel}ម្ពុជា")), ["កម្ពុជា"]);
            assert!(tokens(&vowel.to_string()).is_empty());
        }
        // The Khmer vowel signs are the spelling: kept.
        assert_ne!(tokens("កា"), tokens("ក"));
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
        // Urdu's and Kurdish letters of their own are not folded.
        for (letter, arabic) in [("ۃ", "ه"), ("ە", "ه"), ("ے", "ي"), ("ھ", "ه")] {
            assert_ne!(tokens(letter), tokens(arabic), "{letter}");
        }
    }

    #[test]
    fn persian_letters_are_the_arabic_keyboards() {
        // Farsi yeh and keheh, as a Persian and an Arabic keyboard type them.
        assert_eq!(tokens("ایران"), tokens("ايران"));
        assert_eq!(tokens("ایران"), ["ايران"]);
        assert_eq!(tokens("کتاب"), tokens("كتاب"));
        assert_eq!(tokens("یک کار کوچک"), tokens("يك كار كوچك"));
        // Urdu's heh goal, with a hamza above (U+06C2) too.
        assert_eq!(tokens("کہ"), tokens("كه"));
        assert_eq!(tokens("\u{06C2}"), ["\u{0647}"]);
        // The heh with yeh above (ezafe), composed or as heh and hamza, is heh.
        assert_eq!(tokens("خانۀ"), tokens("خانه"));
        assert_eq!(tokens("خانهٔ"), tokens("خانه"));
        assert_eq!(tokens("\u{06D5}\u{0654}"), ["\u{0647}"]);
        // Presentation forms, which NFKC makes the letters.
        assert_eq!(
            tokens("\u{FBFC}\u{FB8E}\u{FBA6}\u{FBA4}"),
            ["\u{064A}\u{0643}\u{0647}\u{0647}"]
        );
        // The zero width non-joiner inside a Persian word is dropped (a format character).
        assert_eq!(tokens("می\u{200C}خواهم"), tokens("ميخواهم"));
    }
}
