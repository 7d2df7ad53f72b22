//! Property tests of the compaction units (SPEC §17.2) and of the chat sequence rule,
//! against brute-force references written out directly.

use std::collections::HashSet;

use ledgerfold_core::chat::{chat_order, is_valid_sequence, unsendable, ChatItem};
use ledgerfold_core::model::Role;
use ledgerfold_core::plan::{plan_layout, PlanInput};
use ledgerfold_core::units::{
    meta_value, open_makers, tool_call_ids, unit_roots, unit_split, UnitMember, Units,
};
use proptest::prelude::*;

type Links = (Option<u8>, Vec<u8>, Option<u8>);

fn links() -> impl Strategy<Value = Links> {
    (
        proptest::option::of(0..3_u8),
        proptest::collection::vec(0..6_u8, 0..3),
        proptest::option::of(0..6_u8),
    )
}

const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

fn members(links: &[Links]) -> Vec<UnitMember<'static>> {
    links
        .iter()
        .map(|(group, calls, answers)| UnitMember {
            group: group.map(|g| NAMES[usize::from(g)]),
            calls: calls.iter().map(|&c| NAMES[usize::from(c)]).collect(),
            answers: answers.map(|c| NAMES[usize::from(c)]),
        })
        .collect()
}

/// The call a result is paired with, written out: the last member before it naming its
/// call, else the first after it.
fn reference_maker(members: &[UnitMember<'_>], at: usize) -> Option<usize> {
    let call = members[at].answers?;
    let names = |other: &usize| members[*other].calls.contains(&call);
    (0..at)
        .rev()
        .find(names)
        .or_else(|| (at + 1..members.len()).find(names))
}

/// Two turns are directly linked when they share a group, or one is the call the other's
/// result is paired with; a unit is the transitive closure (graph search).
#[allow(clippy::needless_range_loop)] // positions are what the links name
fn reference_roots(members: &[UnitMember<'_>]) -> Vec<usize> {
    let makers: Vec<Option<usize>> = (0..members.len())
        .map(|at| reference_maker(members, at))
        .collect();
    let linked = |a: usize, b: usize| {
        (members[a].group.is_some() && members[a].group == members[b].group)
            || makers[a] == Some(b)
            || makers[b] == Some(a)
    };
    let mut root = vec![usize::MAX; members.len()];
    for start in 0..members.len() {
        if root[start] != usize::MAX {
            continue;
        }
        let mut stack = vec![start];
        root[start] = start;
        while let Some(at) = stack.pop() {
            for other in 0..members.len() {
                if root[other] == usize::MAX && linked(at, other) {
                    root[other] = start;
                    stack.push(other);
                }
            }
        }
    }
    root
}

/// The members with a call no result is paired with, written out.
fn reference_open(members: &[UnitMember<'_>]) -> Vec<usize> {
    (0..members.len())
        .filter(|&at| {
            members[at].calls.iter().any(|call| {
                !(0..members.len()).any(|other| {
                    members[other].answers == Some(*call)
                        && reference_maker(members, other) == Some(at)
                })
            })
        })
        .collect()
}

fn chat_item() -> impl Strategy<Value = (u8, Vec<u8>, Option<u8>)> {
    (
        0..3_u8,
        proptest::collection::vec(0..4_u8, 1..3),
        proptest::option::of(0..4_u8),
    )
}

fn chat_items(raw: &[(u8, Vec<u8>, Option<u8>)]) -> Vec<ChatItem<'static>> {
    raw.iter()
        .map(|(kind, calls, answer)| match kind {
            0 => ChatItem::Plain,
            1 => ChatItem::Calls(calls.iter().map(|&c| NAMES[usize::from(c)]).collect()),
            _ => ChatItem::Answer(answer.map(|c| NAMES[usize::from(c)])),
        })
        .collect()
}

/// Provider validity written out: each tool message directly follows (through tool
/// messages only) an assistant message naming its call, answered once; every assistant
/// block but the last is complete.
fn reference_valid(items: &[ChatItem<'_>]) -> bool {
    let mut block: Option<(HashSet<&str>, HashSet<&str>)> = None;
    for item in items {
        match item {
            ChatItem::Answer(call) => {
                let Some((calls, answered)) = block.as_mut() else {
                    return false;
                };
                let Some(call) = call else { return false };
                if !calls.contains(call) || !answered.insert(call) {
                    return false;
                }
            }
            other => {
                if let Some((calls, answered)) = block.take() {
                    if calls.len() != answered.len() {
                        return false;
                    }
                }
                if let ChatItem::Calls(calls) = other {
                    block = Some((calls.iter().copied().collect(), HashSet::new()));
                }
            }
        }
    }
    true
}

/// A turn as the unit rule sees it: role, group, sorted meta pairs.
type TurnLinks = (Role, Option<&'static str>, Vec<(String, String)>);

/// Turns of any role, with or without a group, `tool_calls` (sometimes malformed, or on a
/// role it does not count on), `tool_call_id` (sometimes on a role it does not count on),
/// and other meta.
fn link_turn() -> impl Strategy<Value = TurnLinks> {
    let role = prop_oneof![
        Just(Role::User),
        Just(Role::Assistant),
        Just(Role::Tool),
        Just(Role::System)
    ];
    let calls = prop_oneof![
        4 => proptest::collection::vec(0..6_u8, 0..3).prop_map(|ids| {
            let calls: Vec<String> = ids
                .iter()
                .map(|&c| format!(r#"{{"id": "{}", "type": "function"}}"#, NAMES[usize::from(c)]))
                .collect();
            format!("[{}]", calls.join(", "))
        }),
        1 => Just(r#"[{"id": ""}]"#.to_owned()),
        1 => Just("not json".to_owned()),
    ];
    (
        role,
        proptest::option::of(0..3_u8),
        proptest::option::of(calls),
        proptest::option::of(0..6_u8),
        any::<bool>(),
    )
        .prop_map(|(role, group, calls, answers, named)| {
            let mut meta = Vec::new();
            if named {
                meta.push(("name".to_owned(), "f".to_owned()));
            }
            if let Some(text) = calls {
                meta.push(("tool_calls".to_owned(), text));
            }
            if let Some(c) = answers {
                meta.push(("tool_call_id".to_owned(), NAMES[usize::from(c)].to_owned()));
            }
            meta.sort();
            (role, group.map(|g| NAMES[usize::from(g)]), meta)
        })
}

/// The dense rule written out per turn: every turn a member, its calls parsed here.
fn dense_roots(turns: &[TurnLinks]) -> Vec<usize> {
    let parsed: Vec<Vec<String>> = turns
        .iter()
        .map(
            |(role, _, meta)| match (role, meta_value(meta, "tool_calls")) {
                (Role::Assistant, Some(text)) => tool_call_ids(text).unwrap_or_default(),
                _ => Vec::new(),
            },
        )
        .collect();
    let members: Vec<UnitMember<'_>> = turns
        .iter()
        .zip(&parsed)
        .map(|((role, group, meta), calls)| UnitMember {
            group: *group,
            calls: calls.iter().map(String::as_str).collect(),
            answers: (*role == Role::Tool)
                .then(|| meta_value(meta, "tool_call_id"))
                .flatten(),
        })
        .collect();
    unit_roots(&members)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The sparse units a conversation keeps give the dense rule's roots and splits, whether
    /// built from every turn or only from those with a group or meta.
    #[test]
    fn sparse_units_match_the_dense_rule(
        turns in proptest::collection::vec(link_turn(), 0..48),
        mask in any::<u64>(),
        dense_sources in any::<bool>(),
    ) {
        let expected = dense_roots(&turns);
        let all = Units::of(
            turns.len(),
            turns.iter().enumerate().map(|(at, (role, group, meta))| (at, *role, *group, meta.as_slice())),
        );
        let some = Units::of(
            turns.len(),
            turns
                .iter()
                .enumerate()
                .filter(|(_, (_, group, meta))| group.is_some() || !meta.is_empty())
                .map(|(at, (role, group, meta))| (at, *role, *group, meta.as_slice())),
        );
        prop_assert_eq!(&all, &some);
        prop_assert_eq!(all.roots(), expected.clone());
        prop_assert_eq!(all.all_alone(), expected.iter().enumerate().all(|(at, &r)| at == r));
        // Sources: the mask's bits, or (to exercise long skips) all but the mask's bits.
        let sources: Vec<usize> = (0..turns.len())
            .filter(|&at| (mask >> at & 1 == 1) != dense_sources)
            .collect();
        prop_assert_eq!(all.split(&sources), unit_split(&expected, &sources));
    }

    #[test]
    fn roots_are_the_closure_of_the_links(raw in proptest::collection::vec(links(), 0..16)) {
        let members = members(&raw);
        prop_assert_eq!(unit_roots(&members), reference_roots(&members));
        prop_assert_eq!(open_makers(&members), reference_open(&members));
    }

    #[test]
    fn unit_split_finds_the_first_separated_member(
        raw in proptest::collection::vec(links(), 1..16),
        mask in any::<u16>(),
    ) {
        let roots = unit_roots(&members(&raw));
        let sources: Vec<usize> = (0..roots.len()).filter(|at| mask >> at & 1 == 1).collect();
        let expected = (0..roots.len()).find(|at| {
            !sources.contains(at) && sources.iter().any(|&s| roots[s] == roots[*at])
        });
        prop_assert_eq!(unit_split(&roots, &sources), expected);
    }

    #[test]
    fn a_plan_never_splits_a_unit(
        raw in proptest::collection::vec(links(), 0..16),
        protected in any::<u16>(),
        keep_tail in 1..6_usize,
    ) {
        let roots = unit_roots(&members(&raw));
        let inputs: Vec<PlanInput> = roots
            .iter()
            .enumerate()
            .map(|(at, &unit)| PlanInput { protected: protected >> at & 1 == 1, unit })
            .collect();
        let plan = plan_layout(&inputs, keep_tail);
        prop_assert_eq!(unit_split(&roots, &plan.compacted), None);
        // Nothing is held back that the rule would compact.
        let tail_start = roots.len().saturating_sub(keep_tail);
        for at in 0..roots.len() {
            let pinned = (0..roots.len()).any(|other| {
                roots[other] == roots[at] && (inputs[other].protected || other >= tail_start)
            });
            prop_assert_eq!(plan.compacted.contains(&at), !pinned);
        }
    }

    #[test]
    fn what_is_sent_is_a_valid_sequence(raw in proptest::collection::vec(chat_item(), 0..16)) {
        let items = chat_items(&raw);
        let dropped = unsendable(&items);
        prop_assert!(dropped.windows(2).all(|w| w[0] < w[1]));
        let order = chat_order(&items)
            .unwrap_or_else(|| (0..items.len()).collect());
        // Every item not left out is sent once.
        let mut sent = order.clone();
        sent.sort_unstable();
        let kept: Vec<usize> = (0..items.len())
            .filter(|at| dropped.binary_search(at).is_err())
            .collect();
        prop_assert_eq!(&sent, &kept);
        let ordered: Vec<ChatItem<'_>> = order.iter().map(|&at| items[at].clone()).collect();
        prop_assert!(reference_valid(&ordered));
        prop_assert!(is_valid_sequence(&ordered));
        // A valid sequence is sent as it is.
        prop_assert_eq!(reference_valid(&items), chat_order(&items).is_none());
        // Plain messages are never dropped, and only results move.
        for &at in &dropped {
            prop_assert_ne!(&items[at], &ChatItem::Plain);
        }
        let others: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&at| !matches!(items[at], ChatItem::Answer(_)))
            .collect();
        prop_assert!(others.windows(2).all(|w| w[0] < w[1]));
    }
}
