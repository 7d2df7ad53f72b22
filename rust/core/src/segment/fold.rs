//! What search folds beyond Unicode's normalisation and the diacritics (SPEC §16.5
//! "Normalisation"): characters that only stretch a word, dropped. Applied to the decomposed
//! text, after the diacritics and before NFC, so a dropped character is as if it had never
//! been written: the characters around it compose as they would without it.

/// `c` as the index spells it, or None when it is dropped.
///
/// - U+0640 ARABIC TATWEEL (kashida) only elongates the joined letters around it
///   (justification, emphasis): `كتـــاب` is `كتاب`. Dropped, as Apache Lucene's
///   `ArabicNormalizer` (`org.apache.lucene.analysis.ar`) deletes it.
pub(super) fn folded(c: char) -> Option<char> {
    // Below the first character this folds: the ASCII and most text's path, one comparison.
    if c < '\u{0640}' {
        return Some(c);
    }
    match c {
        '\u{0640}' => None,
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
}
