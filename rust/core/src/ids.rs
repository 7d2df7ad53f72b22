//! Ordered-ID comparison.

/// True when `a` and `b` have the same length and the same ID at every position.
pub fn same_ordered_ids<A: AsRef<str>, B: AsRef<str>>(a: &[A], b: &[B]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.as_ref() == y.as_ref())
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
}
