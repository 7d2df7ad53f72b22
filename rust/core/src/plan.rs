//! Compaction planning (SPEC §4) over turns already ordered by sequence.

use std::collections::HashSet;

/// What planning needs of a turn.
#[derive(Clone, Copy, Debug)]
pub struct PlanInput<'a> {
    pub protected: bool,
    pub group: Option<&'a str>,
}

/// Positions (into the sequence-ordered turns) to compact and to preserve, both ascending.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlanLayout {
    pub compacted: Vec<usize>,
    pub preserved: Vec<usize>,
}

/// The last `keep_tail` turns are the tail. A prefix turn is compacted when it is not
/// protected and no member of its group is protected or in the tail; every other turn is
/// preserved. `keep_tail` must be at least 1 (validated by the caller).
pub fn plan_layout(turns: &[PlanInput<'_>], keep_tail: usize) -> PlanLayout {
    let tail_start = turns.len().saturating_sub(keep_tail);
    // Groups that must stay raw whole: any member protected or in the tail.
    let pinned_groups: HashSet<&str> = turns
        .iter()
        .enumerate()
        .filter(|(position, turn)| turn.protected || *position >= tail_start)
        .filter_map(|(_, turn)| turn.group)
        .collect();
    let mut layout = PlanLayout::default();
    for (position, turn) in turns.iter().enumerate() {
        let compactable = position < tail_start
            && !turn.protected
            && turn
                .group
                .is_none_or(|group| !pinned_groups.contains(group));
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

    fn turn(protected: bool, group: Option<&str>) -> PlanInput<'_> {
        PlanInput { protected, group }
    }

    #[test]
    fn tail_and_protected_are_preserved() {
        let turns = [
            turn(false, None),
            turn(true, None),
            turn(false, None),
            turn(false, None),
        ];
        let layout = plan_layout(&turns, 1);
        assert_eq!(layout.compacted, vec![0, 2]);
        assert_eq!(layout.preserved, vec![1, 3]);
    }

    #[test]
    fn a_group_reaching_into_the_tail_stays_whole() {
        let turns = [
            turn(false, None),
            turn(false, Some("g")),
            turn(false, Some("g")),
        ];
        let layout = plan_layout(&turns, 1);
        assert_eq!(layout.compacted, vec![0]);
        assert_eq!(layout.preserved, vec![1, 2]);
    }

    #[test]
    fn a_group_with_a_protected_member_stays_whole() {
        let turns = [
            turn(false, Some("g")),
            turn(true, Some("g")),
            turn(false, None),
            turn(false, None),
        ];
        let layout = plan_layout(&turns, 1);
        assert_eq!(layout.compacted, vec![2]);
    }

    #[test]
    fn tail_longer_than_conversation_compacts_nothing() {
        let turns = [turn(false, None), turn(false, None)];
        assert!(plan_layout(&turns, 5).compacted.is_empty());
    }
}
