//! Compaction planning (SPEC §4, §17.2) over turns already ordered by sequence.

use std::collections::HashSet;

/// What planning needs of a turn: whether it must stay raw (protected, a preserved role,
/// an open call) and its compaction unit's root (`units::unit_roots`).
#[derive(Clone, Copy, Debug)]
pub struct PlanInput {
    pub protected: bool,
    pub unit: usize,
}

/// Positions (into the sequence-ordered turns) to compact and to preserve, both ascending.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlanLayout {
    pub compacted: Vec<usize>,
    pub preserved: Vec<usize>,
}

/// The last `keep_tail` turns are the tail. A prefix turn is compacted when no member of
/// its unit (itself included) is protected or in the tail; every other turn is preserved.
/// `keep_tail` must be at least 1 (validated by the caller).
pub fn plan_layout(turns: &[PlanInput], keep_tail: usize) -> PlanLayout {
    let tail_start = turns.len().saturating_sub(keep_tail);
    // Units that must stay raw whole: any member protected or in the tail.
    let pinned_units: HashSet<usize> = turns
        .iter()
        .enumerate()
        .filter(|(position, turn)| turn.protected || *position >= tail_start)
        .map(|(_, turn)| turn.unit)
        .collect();
    let mut layout = PlanLayout::default();
    for (position, turn) in turns.iter().enumerate() {
        let compactable = position < tail_start && !pinned_units.contains(&turn.unit);
        if compactable {
            layout.compacted.push(position);
        } else {
            layout.preserved.push(position);
        }
    }
    layout
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A turn whose unit is named by a small number (its root, in real use).
    fn turn(protected: bool, unit: usize) -> PlanInput {
        PlanInput { protected, unit }
    }

    #[test]
    fn tail_and_protected_are_preserved() {
        let turns = [
            turn(false, 1),
            turn(true, 2),
            turn(false, 3),
            turn(false, 4),
        ];
        let layout = plan_layout(&turns, 1);
        assert_eq!(layout.compacted, vec![0, 2]);
        assert_eq!(layout.preserved, vec![1, 3]);
    }

    #[test]
    fn a_group_reaching_into_the_tail_stays_whole() {
        let turns = [turn(false, 5), turn(false, 100), turn(false, 100)];
        let layout = plan_layout(&turns, 1);
        assert_eq!(layout.compacted, vec![0]);
        assert_eq!(layout.preserved, vec![1, 2]);
    }

    #[test]
    fn a_group_with_a_protected_member_stays_whole() {
        let turns = [
            turn(false, 100),
            turn(true, 100),
            turn(false, 10),
            turn(false, 11),
        ];
        let layout = plan_layout(&turns, 1);
        assert_eq!(layout.compacted, vec![2]);
    }

    #[test]
    fn tail_longer_than_conversation_compacts_nothing() {
        let turns = [turn(false, 12), turn(false, 13)];
        assert!(plan_layout(&turns, 5).compacted.is_empty());
    }
}
