//! The query's side of segmentation (SPEC §16.5): a query's distinct terms, with the rule
//! for a lone CJK character beside digits.

use super::tokenise::{class_of, push_tokens, without_control_sequences, Class};

/// A query uses at most this many distinct terms (the first ones).
pub const MAX_QUERY_TERMS: usize = 64;

/// The query's tokens, distinct, in first-occurrence order, at most [`MAX_QUERY_TERMS`].
///
/// A one-character CJK token touching a digit run (`3号`, `第3章`: no whitespace between)
/// is left out while another term remains: the digits say which one is meant, and the lone
/// character, a token of every `13号` too, would make `3号` match `13号` (SPEC §16.5). A
/// character the query separates from the digits by whitespace (`猫 3`) is a word of its
/// own and stays.
pub fn query_terms(query: &str) -> Vec<String> {
    // A control sequence may hold a space (an intermediate byte): it goes before the split.
    let spaced = without_control_sequences(query);
    let query = spaced.as_deref().unwrap_or(query);
    // (whitespace-separated word of the query, token): the rule looks within a word only.
    let mut all: Vec<(usize, String)> = Vec::new();
    let mut joined = String::new();
    for (word, chunk) in query.split(char::is_whitespace).enumerate() {
        joined.clear();
        push_tokens(chunk, &mut joined);
        all.extend(
            joined
                .split(' ')
                .filter(|token| !token.is_empty())
                .map(|token| (word, token.to_owned())),
        );
    }
    let is_digits = |token: &str| token.chars().all(|c| class_of(c) == Class::Digit);
    let beside_digits = |at: usize, other: Option<&(usize, String)>| {
        other.is_some_and(|(word, token)| *word == all[at].0 && is_digits(token))
    };
    let kept: Vec<&str> = all
        .iter()
        .enumerate()
        .filter(|&(at, (_, token))| {
            let mut chars = token.chars();
            let lone_cjk = matches!((chars.next(), chars.next()), (Some(c), None) if class_of(c) == Class::Cjk);
            let by_digits = (at > 0 && beside_digits(at, all.get(at - 1)))
                || beside_digits(at, all.get(at + 1));
            !(lone_cjk && by_digits)
        })
        .map(|(_, (_, token))| token.as_str())
        .collect();
    let every: Vec<&str> = all.iter().map(|(_, token)| token.as_str()).collect();
    let chosen = if kept.is_empty() { &every } else { &kept };
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

#[cfg(test)]
mod tests {
    use super::super::tokens;
    use super::*;

    #[test]
    fn cjk_query_terms_all_occur_in_the_fact() {
        let fact = tokens("我的护照放在3号储物柜，密码是5100。");
        let terms = query_terms("护照 3号储物柜 密码");
        assert_eq!(terms, ["护照", "3", "号储", "储物", "物柜", "密码"]);
        for term in &terms {
            assert!(fact.contains(term), "{term} missing from {fact:?}");
        }
    }

    #[test]
    fn a_lone_cjk_character_by_digits_leaves_the_query_while_another_term_remains() {
        assert_eq!(query_terms("3号"), ["3"]);
        assert_eq!(query_terms("第3章"), ["3"]);
        assert_eq!(query_terms("13号"), ["13"]);
        assert_eq!(query_terms("号"), ["号"]);
        assert_eq!(query_terms("护照 3号"), ["护照", "3"]);
        assert_eq!(query_terms("猫 狗"), ["猫", "狗"]);
        // Whitespace between: the character is a word of its own.
        assert_eq!(query_terms("猫 3"), ["猫", "3"]);
        assert_eq!(query_terms("3 号"), ["3", "号"]);
        assert_eq!(query_terms("3\u{3000}号"), ["3", "号"]);
        assert_eq!(query_terms("猫 3号"), ["猫", "3"]);
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
}
