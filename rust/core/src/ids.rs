//! Ordered-ID comparison and duplicate detection.

use std::collections::HashSet;

/// True when `a` and `b` have the same length and the same ID at every position.
pub fn same_ordered_ids<A: AsRef<str>, B: AsRef<str>>(a: &[A], b: &[B]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.as_ref() == y.as_ref())
}

/// The first ID that occurs a second time, in iteration order.
pub fn first_duplicate<'a, I>(ids: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let ids = ids.into_iter();
    let mut seen = HashSet::with_capacity(ids.size_hint().0);
    ids.into_iter().find(|&id| !seen.insert(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_every_position_not_just_the_set() {
        assert!(same_ordered_ids(&["a", "b"], &["a", "b"]));
        assert!(!same_ordered_ids(&["a", "b"], &["b", "a"]));
        assert!(!same_ordered_ids(&["a"], &["a", "a"]));
        assert!(same_ordered_ids::<&str, &str>(&[], &[]));
    }

    #[test]
    fn finds_the_second_occurrence() {
        assert_eq!(first_duplicate(["a", "b", "c", "b", "a"]), Some("b"));
        assert_eq!(first_duplicate(["a", "b"]), None);
    }
}
