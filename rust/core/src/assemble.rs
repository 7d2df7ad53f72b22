//! Context layout (SPEC §8): which ledger turns stay raw and where the summary sorts.

/// `included`: positions of the turns that appear raw, ascending; the summary goes before
/// `included[summary_at]` (or last when `summary_at == included.len()`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub included: Vec<usize>,
    pub summary_at: usize,
}

/// `source_positions` must be strictly ascending and below `turn_count` (a current summary's
/// sources always are). The summary sorts at its last source: after every turn below it,
/// before every turn above it.
pub fn layout(turn_count: usize, source_positions: &[usize]) -> Layout {
    debug_assert!(source_positions.windows(2).all(|pair| pair[0] < pair[1]));
    let mut is_source = vec![false; turn_count];
    for &position in source_positions {
        is_source[position] = true;
    }
    let last_source = source_positions.last().copied();
    let mut included = Vec::with_capacity(turn_count - source_positions.len());
    let mut summary_at = 0;
    for (position, source) in is_source.iter().enumerate() {
        if !source {
            if last_source.is_some_and(|last| position < last) {
                summary_at += 1;
            }
            included.push(position);
        }
    }
    Layout {
        included,
        summary_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_sorts_at_its_last_source() {
        // Turns 0..6; sources 0, 1, 3; turn 2 (protected, kept) sorts before the summary.
        let result = layout(6, &[0, 1, 3]);
        assert_eq!(result.included, vec![2, 4, 5]);
        assert_eq!(result.summary_at, 1);
    }
}
