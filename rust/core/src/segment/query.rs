//! The query's side of segmentation (SPEC §16.5): a query's distinct terms, with the rule
//! for a lone CJK character beside digits.

use super::tokenise::{class_of, push_tokens, Class};

/// A query uses at most this many distinct terms (the first ones).
pub const MAX_QUERY_TERMS: usize = 64;

/// The query's tokens, distinct, in first-occurrence order, at most [`MAX_QUERY_TERMS`].
///
/// A one-character CJK token next to a digit run (`3号`, `第3章`) is left out while
/// another term remains: the digits say which one is meant, and the lone character, a
/// token of every `13号` too, would make `3号` match `13号` (SPEC §16.5).
pub fn query_terms(query: &str) -> Vec<String> {
    let mut joined = String::new();
    push_tokens(query, &mut joined);
    let all: Vec<&str> = joined
        .split(' ')
        .filter(|token| !token.is_empty())
        .collect();
    let is_digits = |token: &str| token.chars().all(|c| class_of(c) == Class::Digit);
    let kept: Vec<&str> = all
        .iter()
        .enumerate()
        .filter(|&(at, token)| {
            let mut chars = token.chars();
            let lone_cjk = matches!((chars.next(), chars.next()), (Some(c), None) if class_of(c) == Class::Cjk);
            let by_digits = (at > 0 && is_digits(all[at - 1]))
                || all.get(at + 1).is_some_and(|next| is_digits(next));
            !(lone_cjk && by_digits)
        })
        .map(|(_, token)| *token)
        .collect();
    let chosen = if kept.is_empty() { &all } else { &kept };
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
