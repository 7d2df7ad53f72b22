//! Property tests of the core (issue 7): the canonical encoding is injective (a decoder
//! inverts it), digests and fingerprints are the `derive_key` hashes SPEC §3 names, summary
//! checks, planning and layout keep their invariants, the meta JSON reader reads what Python
//! writes, and batch revalidation never panics and agrees with a sequential reference.

mod support;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;

use ledgerfold_core::assemble::layout;
use ledgerfold_core::check::{check_summary, CheckReason, CheckResult, SummaryRef};
use ledgerfold_core::columns::{self, CurrentSummary, Packed, SourceColumns, TurnColumns};
use ledgerfold_core::encoding::{encode_turn_into, TURN_CONTEXT};
use ledgerfold_core::fingerprint::{parse_fingerprint, to_fingerprint_string, FINGERPRINT_CONTEXT};
use ledgerfold_core::meta_json::parse_flat_object;
use ledgerfold_core::model::normalise_meta;
use ledgerfold_core::plan::{plan_layout, PlanInput};
use ledgerfold_core::revalidate::{
    revalidate_many, row_digest, ConversationRows, SummaryRow, Totals, TurnRow, Verdict,
};
use ledgerfold_core::units::turn_unit_roots;
use ledgerfold_core::{
    encode_turn, fingerprint_digests, fingerprint_hex, turn_digest, ExtendableFingerprint,
    Fingerprinter, ProtectionReason, Role,
};
use proptest::prelude::*;
use proptest::sample::select;
use support::{
    decode_turn, python_json_dumps, spec_encoding, write_json_object, DecodeError, OwnedTurn,
    RowSpec,
};

// ------------------------------------------------------------------------------ strategies

/// Characters with the awkward ones over-represented: NUL, quotes, backslash, controls,
/// multi-byte and astral characters.
fn any_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => any::<char>(),
        1 => Just('\0'),
        2 => select(vec!['a', 'b', '"', '\\', '\n', '\u{7f}', 'é', '世', '😀', '\u{fffd}']),
    ]
}

fn text(min: usize, max: usize) -> BoxedStrategy<String> {
    proptest::collection::vec(any_char(), min..=max)
        .prop_map(String::from_iter)
        .boxed()
}

/// Bodies: empty, short, or long (a random chunk repeated, so generation stays cheap).
fn body() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just(String::new()),
        6 => text(0, 40),
        1 => (text(1, 16), 64..2048_usize).prop_map(|(chunk, times)| chunk.repeat(times)),
    ]
}

fn sequence() -> impl Strategy<Value = i64> {
    prop_oneof![
        4 => 0..=i64::MAX,
        2 => 0..1000_i64,
        1 => select(vec![0, 1, i64::MAX - 1, i64::MAX, 1 << 32, 255, 256]),
    ]
}

fn role() -> impl Strategy<Value = Role> {
    select(Role::ALL.to_vec())
}

fn protection() -> impl Strategy<Value = (bool, Option<ProtectionReason>)> {
    prop_oneof![
        Just((false, None)),
        Just((true, None)),
        select(ProtectionReason::ALL.to_vec()).prop_map(|reason| (true, Some(reason))),
    ]
}

/// A valid meta map: non-empty unique keys, sorted by their bytes (`String`'s order).
fn meta() -> impl Strategy<Value = Vec<(String, String)>> {
    proptest::collection::btree_map(text(1, 8), text(0, 16), 0..5)
        .prop_map(|map| map.into_iter().collect())
}

fn turn() -> impl Strategy<Value = OwnedTurn> {
    (
        text(1, 12),
        sequence(),
        role(),
        protection(),
        proptest::option::of(text(1, 8)),
        meta(),
        body(),
    )
        .prop_map(
            |(id, sequence, role, (protected, protection_reason), group, meta, body)| OwnedTurn {
                id,
                sequence,
                role,
                protected,
                protection_reason,
                group,
                meta,
                body,
            },
        )
}

/// Turns over a three-letter alphabet, so that equal and nearly equal pairs are common.
fn tiny_turn() -> impl Strategy<Value = OwnedTurn> {
    let tiny = |min: usize| {
        proptest::collection::vec(select(vec!['a', 'b', '\0']), min..=2).prop_map(String::from_iter)
    };
    (
        tiny(1),
        0..3_i64,
        select(vec![Role::User, Role::Tool]),
        protection(),
        proptest::option::of(tiny(1)),
        proptest::collection::btree_map(tiny(1), tiny(0), 0..3),
        tiny(0),
    )
        .prop_map(
            |(id, sequence, role, (protected, protection_reason), group, meta, body)| OwnedTurn {
                id,
                sequence,
                role,
                protected,
                protection_reason,
                group,
                meta: meta.into_iter().collect(),
                body,
            },
        )
}

/// A change to exactly one field of a turn (or a character moved across a field boundary).
#[derive(Clone, Debug)]
enum Mutation {
    Id(String),
    Sequence(i64),
    Role(usize),
    Protection(bool, Option<ProtectionReason>),
    Group(Option<String>),
    Meta(Vec<(String, String)>),
    MetaValue(String),
    Body(String),
    /// Move the last character of the id to the front of the body.
    ShiftIdIntoBody,
    /// Move the last character of the last meta value to the front of the body.
    ShiftValueIntoBody,
    /// Move the last character of the group to the front of the body.
    ShiftGroupIntoBody,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        text(1, 12).prop_map(Mutation::Id),
        sequence().prop_map(Mutation::Sequence),
        (1..4_usize).prop_map(Mutation::Role),
        protection().prop_map(|(protected, reason)| Mutation::Protection(protected, reason)),
        proptest::option::of(text(1, 8)).prop_map(Mutation::Group),
        meta().prop_map(Mutation::Meta),
        text(0, 16).prop_map(Mutation::MetaValue),
        body().prop_map(Mutation::Body),
        Just(Mutation::ShiftIdIntoBody),
        Just(Mutation::ShiftValueIntoBody),
        Just(Mutation::ShiftGroupIntoBody),
    ]
}

fn pop_char(text: &mut String) -> Option<char> {
    text.pop()
}

/// Applies `mutation`, nudging it when it would change nothing, so the result always differs.
fn mutate(turn: &OwnedTurn, mutation: &Mutation) -> OwnedTurn {
    let mut out = turn.clone();
    match mutation {
        Mutation::Id(id) => {
            out.id.clone_from(id);
            if out.id == turn.id {
                out.id.push('\0');
            }
        }
        Mutation::Sequence(sequence) => {
            // Flipping bit 0 keeps a non-negative i64 non-negative.
            out.sequence = if *sequence == turn.sequence {
                sequence ^ 1
            } else {
                *sequence
            };
        }
        Mutation::Role(step) => {
            let index = Role::ALL.iter().position(|r| *r == turn.role).unwrap();
            out.role = Role::ALL[(index + step) % Role::ALL.len()];
        }
        Mutation::Protection(protected, reason) => {
            let current = (turn.protected, turn.protection_reason);
            let wanted = if (*protected, *reason) == current {
                if current == (false, None) {
                    (true, None)
                } else {
                    (false, None)
                }
            } else {
                (*protected, *reason)
            };
            (out.protected, out.protection_reason) = wanted;
        }
        Mutation::Group(group) => {
            out.group.clone_from(group);
            if out.group == turn.group {
                out.group = match &turn.group {
                    None => Some("\0".to_owned()),
                    Some(_) => None,
                };
            }
        }
        Mutation::Meta(meta) => {
            out.meta.clone_from(meta);
            if out.meta == turn.meta {
                if out.meta.is_empty() {
                    out.meta.push(("k".to_owned(), String::new()));
                } else {
                    out.meta.pop();
                }
            }
        }
        Mutation::MetaValue(value) => match out.meta.first_mut() {
            Some(entry) => {
                entry.1.clone_from(value);
                if entry.1 == turn.meta[0].1 {
                    entry.1.push('\0');
                }
            }
            None => out.meta.push(("v".to_owned(), value.clone())),
        },
        Mutation::Body(body) => {
            out.body.clone_from(body);
            if out.body == turn.body {
                out.body.push('\0');
            }
        }
        Mutation::ShiftIdIntoBody => {
            let moved = if out.id.chars().count() > 1 {
                pop_char(&mut out.id)
            } else {
                None
            };
            out.body.insert(0, moved.unwrap_or('a'));
        }
        Mutation::ShiftValueIntoBody => {
            let moved = out.meta.last_mut().and_then(|entry| pop_char(&mut entry.1));
            out.body.insert(0, moved.unwrap_or('a'));
        }
        Mutation::ShiftGroupIntoBody => {
            let moved = match &mut out.group {
                Some(group) if group.chars().count() > 1 => pop_char(group),
                _ => None,
            };
            out.body.insert(0, moved.unwrap_or('a'));
        }
    }
    out
}

fn derive_key_hex(turns: &[OwnedTurn]) -> String {
    let mut material = u64::try_from(turns.len()).unwrap().to_le_bytes().to_vec();
    for turn in turns {
        material.extend_from_slice(&blake3::derive_key(TURN_CONTEXT, &spec_encoding(turn)));
    }
    to_fingerprint_string(&blake3::derive_key(FINGERPRINT_CONTEXT, &material))
}

// ------------------------------------------------------------- (1) injectivity, (2) digest

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The decoder is a left inverse of the encoder: the real proof of injectivity.
    #[test]
    fn decode_inverts_encode(turn in turn()) {
        let bytes = encode_turn(&turn.view());
        prop_assert_eq!(&bytes, &spec_encoding(&turn));
        prop_assert_eq!(decode_turn(&bytes), Ok(turn));
    }

    /// Two turns that differ in one field (or by a character moved across a field boundary)
    /// encode and hash differently.
    #[test]
    fn one_field_changed_changes_encoding_and_digest(turn in turn(), change in mutation()) {
        let changed = mutate(&turn, &change);
        prop_assert!(changed.is_valid());
        prop_assert_ne!(&changed, &turn);
        prop_assert_ne!(encode_turn(&changed.view()), encode_turn(&turn.view()));
        prop_assert_ne!(turn_digest(&changed.view()), turn_digest(&turn.view()));
    }

    #[test]
    fn random_pairs_encode_equal_only_when_equal(a in turn(), b in turn()) {
        prop_assert_eq!(a == b, encode_turn(&a.view()) == encode_turn(&b.view()));
    }

    #[test]
    fn near_pairs_encode_equal_only_when_equal(a in tiny_turn(), b in tiny_turn()) {
        let (left, right) = (encode_turn(&a.view()), encode_turn(&b.view()));
        prop_assert_eq!(a == b, left == right);
        prop_assert_eq!(a == b, turn_digest(&a.view()) == turn_digest(&b.view()));
    }

    /// The encoding is prefix-free: no strict prefix and no extension of an encoding decodes.
    #[test]
    fn truncated_or_extended_encodings_never_decode(
        turn in turn(),
        cut in any::<prop::sample::Index>(),
        extra in proptest::collection::vec(any::<u8>(), 1..9),
    ) {
        let bytes = encode_turn(&turn.view());
        let cut = cut.index(bytes.len());
        prop_assert!(decode_turn(&bytes[..cut]).is_err());
        let mut longer = bytes.clone();
        longer.extend_from_slice(&extra);
        prop_assert_eq!(decode_turn(&longer), Err(DecodeError::Trailing(extra.len())));
    }

    /// Whatever bytes the decoder accepts are exactly the encoding of what it returns.
    #[test]
    fn decoder_accepts_only_canonical_encodings(
        turn in tiny_turn(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        noise in proptest::collection::vec(any::<u8>(), 0..80),
    ) {
        let mut bytes = encode_turn(&turn.view());
        for (at, byte) in &flips {
            let at = at.index(bytes.len());
            bytes[at] = *byte;
        }
        for candidate in [bytes, noise] {
            if let Ok(decoded) = decode_turn(&candidate) {
                prop_assert!(decoded.is_valid());
                prop_assert_eq!(encode_turn(&decoded.view()), candidate);
            }
        }
    }

    /// Meta is encoded after normalisation: entry order in the input does not matter.
    #[test]
    fn meta_order_is_normalised(turn in turn(), seed in any::<u64>()) {
        let mut shuffled = turn.meta.clone();
        // A cheap deterministic shuffle (rotation then reversal by seed bits).
        if !shuffled.is_empty() {
            let by = usize::try_from(seed % 7).unwrap() % shuffled.len();
            shuffled.rotate_left(by);
            if seed & 8 != 0 {
                shuffled.reverse();
            }
        }
        normalise_meta(&mut shuffled).unwrap();
        prop_assert_eq!(&shuffled, &turn.meta);
        if let Some((key, _)) = turn.meta.first() {
            let mut repeated = turn.meta.clone();
            repeated.push((key.clone(), "again".to_owned()));
            prop_assert!(normalise_meta(&mut repeated).is_err());
        }
    }

    /// SPEC §3: `turn_digest = BLAKE3 derive_key("ledgerfold v1 turn", encoding)`, whether
    /// streamed into a hasher or hashed from the buffer.
    #[test]
    fn digest_is_derive_key_over_encoding(turn in turn()) {
        let expected = blake3::derive_key("ledgerfold v1 turn", &spec_encoding(&turn));
        prop_assert_eq!(turn_digest(&turn.view()), expected);
        let mut hasher = blake3::Hasher::new_derive_key(TURN_CONTEXT);
        encode_turn_into(&turn.view(), &mut hasher);
        prop_assert_eq!(*hasher.finalize().as_bytes(), expected);
    }
}

// ----------------------------------------------------------------------- (3) fingerprints

fn distinct_turns(range: std::ops::Range<usize>) -> impl Strategy<Value = Vec<OwnedTurn>> {
    proptest::collection::vec(turn(), range).prop_map(|turns| {
        let mut seen = HashSet::new();
        turns
            .into_iter()
            .filter(|turn| seen.insert(turn.clone()))
            .collect::<Vec<_>>()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn fingerprint_is_derive_key_over_count_and_digests(turns in distinct_turns(0..8)) {
        let digests: Vec<[u8; 32]> = turns.iter().map(|t| turn_digest(&t.view())).collect();
        let text = fingerprint_hex(digests.iter());
        prop_assert_eq!(&text, &derive_key_hex(&turns));
        let mut incremental = Fingerprinter::new(digests.len());
        for digest in &digests {
            incremental.push(digest);
        }
        prop_assert_eq!(&incremental.finish_hex(), &text);
        let mut packed = Fingerprinter::new(digests.len());
        packed.push_packed(&digests.concat());
        prop_assert_eq!(&packed.finish_hex(), &text);
        prop_assert_eq!(parse_fingerprint(&text), Some(fingerprint_digests(digests.iter())));
    }

    /// Long lists, pushed one by one and in packed runs in any mix (crossing the buffer
    /// `push` gathers digests in), give the fingerprint of SPEC §3 computed in one piece.
    #[test]
    fn fingerprint_of_long_lists_in_any_mix_of_pushes(
        seeds in prop::collection::vec(any::<u8>(), 0..2_200),
        cuts in prop::collection::vec((any::<bool>(), 1usize..700), 0..12),
    ) {
        let digests: Vec<[u8; 32]> = seeds
            .iter()
            .enumerate()
            .map(|(i, seed)| {
                let index = u64::try_from(i).unwrap().to_le_bytes();
                *blake3::hash(&[&[*seed][..], &index[..]].concat()).as_bytes()
            })
            .collect();
        let mut material = u64::try_from(digests.len()).unwrap().to_le_bytes().to_vec();
        for digest in &digests {
            material.extend_from_slice(digest);
        }
        let expected = to_fingerprint_string(&blake3::derive_key(FINGERPRINT_CONTEXT, &material));
        let mut mixed = Fingerprinter::new(digests.len());
        let mut at: usize = 0;
        for (packed, len) in cuts.iter().copied().chain(std::iter::once((false, usize::MAX))) {
            let end = at.saturating_add(len).min(digests.len());
            if packed {
                mixed.push_packed(&digests[at..end].concat());
            } else {
                for digest in &digests[at..end] {
                    mixed.push(digest);
                }
            }
            at = end;
        }
        prop_assert_eq!(mixed.finish_hex(), expected.clone());
        prop_assert_eq!(fingerprint_hex(digests.iter()), expected);
    }

    /// Any other order, a dropped turn or a repeated turn changes the fingerprint.
    #[test]
    fn fingerprint_is_order_and_count_sensitive(
        (turns, shuffled) in distinct_turns(2..8)
            .prop_flat_map(|turns| (Just(turns.clone()), Just(turns).prop_shuffle())),
        pick in any::<prop::sample::Index>(),
    ) {
        let digests = |list: &[OwnedTurn]| -> Vec<[u8; 32]> {
            list.iter().map(|t| turn_digest(&t.view())).collect()
        };
        let original = fingerprint_hex(digests(&turns).iter());
        prop_assert_eq!(original == fingerprint_hex(digests(&shuffled).iter()), turns == shuffled);
        let at = pick.index(turns.len());
        let mut dropped = turns.clone();
        dropped.remove(at);
        prop_assert_ne!(&original, &fingerprint_hex(digests(&dropped).iter()));
        let mut repeated = turns.clone();
        repeated.insert(at, turns[at].clone());
        prop_assert_ne!(&original, &fingerprint_hex(digests(&repeated).iter()));
    }
}

// ------------------------------------------------- (4) check_summary, plan_layout, layout

/// A ledger in sequence order: unique ids, strictly ascending sequences, a few groups.
fn ledger(range: std::ops::Range<usize>) -> impl Strategy<Value = Vec<OwnedTurn>> {
    let member = (
        text(0, 4),
        1..1000_i64,
        role(),
        protection(),
        proptest::option::of(select(vec!["g0", "g1", "g2"])),
        meta(),
        text(0, 12),
    );
    (0..1_000_000_i64, proptest::collection::vec(member, range)).prop_map(|(start, members)| {
        let mut sequence = start;
        members
            .into_iter()
            .enumerate()
            .map(
                |(
                    index,
                    (suffix, gap, role, (protected, protection_reason), group, meta, body),
                )| {
                    sequence += gap;
                    OwnedTurn {
                        // The index before the first ':' keeps ids unique.
                        id: format!("{index}:{suffix}"),
                        sequence,
                        role,
                        protected,
                        protection_reason,
                        group: group.map(str::to_owned),
                        meta,
                        body,
                    }
                },
            )
            .collect()
    })
}

fn plan_inputs(turns: &[OwnedTurn]) -> Vec<PlanInput> {
    let roots = turn_unit_roots(
        turns
            .iter()
            .map(|turn| (turn.role, turn.group.as_deref(), turn.meta.as_slice())),
    );
    turns
        .iter()
        .zip(roots)
        .map(|(turn, unit)| PlanInput {
            protected: turn.protected,
            unit,
        })
        .collect()
}

/// Checks a summary over `sources` (ids) against `turns`, the way the binding does.
fn check(
    turns: &[OwnedTurn],
    sources: &[String],
    fingerprint: &str,
    summary_conversation: &str,
    summary_policy: &str,
) -> CheckResult {
    let digests: Vec<[u8; 32]> = turns.iter().map(|t| turn_digest(&t.view())).collect();
    let position: HashMap<&str, usize> = turns
        .iter()
        .enumerate()
        .map(|(at, turn)| (turn.id.as_str(), at))
        .collect();
    let summary = SummaryRef {
        conversation_id: summary_conversation,
        policy_version: summary_policy,
        source_count: sources.len(),
        source_fingerprint: fingerprint,
    };
    check_summary(&summary, "conv", "policy", |index| {
        position
            .get(sources[index].as_str())
            .map(|&at| (at, &digests[at]))
    })
}

fn ids_at(turns: &[OwnedTurn], positions: &[usize]) -> Vec<String> {
    positions.iter().map(|&at| turns[at].id.clone()).collect()
}

fn fingerprint_at(turns: &[OwnedTurn], positions: &[usize]) -> String {
    let chosen: Vec<OwnedTurn> = positions.iter().map(|&at| turns[at].clone()).collect();
    derive_key_hex(&chosen)
}

/// Positions of a non-empty ascending subset of `0..len` chosen by `mask` bits.
fn subset(len: usize, mask: u64) -> Vec<usize> {
    let mut chosen: Vec<usize> = (0..len).filter(|&at| mask >> (at % 64) & 1 == 1).collect();
    if chosen.is_empty() && len > 0 {
        chosen.push(len - 1);
    }
    chosen
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn plan_layout_invariants(turns in ledger(0..24), keep_tail in 1..30_usize) {
        let inputs = plan_inputs(&turns);
        let plan = plan_layout(&inputs, keep_tail);
        let count = turns.len();
        let tail_start = count.saturating_sub(keep_tail);
        // Ascending, disjoint, and together every position.
        prop_assert!(plan.compacted.windows(2).all(|w| w[0] < w[1]));
        prop_assert!(plan.preserved.windows(2).all(|w| w[0] < w[1]));
        let mut all: Vec<usize> = plan.compacted.iter().chain(&plan.preserved).copied().collect();
        all.sort_unstable();
        prop_assert_eq!(all, (0..count).collect::<Vec<_>>());
        let compacted: HashSet<usize> = plan.compacted.iter().copied().collect();
        // Tail and protected turns are preserved.
        for (at, turn) in turns.iter().enumerate() {
            if at >= tail_start || turn.protected {
                prop_assert!(!compacted.contains(&at));
            }
        }
        // Groups are atomic.
        let mut fate: HashMap<&str, bool> = HashMap::new();
        for (at, turn) in turns.iter().enumerate() {
            if let Some(group) = turn.group.as_deref() {
                let is_compacted = compacted.contains(&at);
                prop_assert_eq!(*fate.entry(group).or_insert(is_compacted), is_compacted);
            }
        }
        // And nothing compactable is left behind (SPEC §4, written out directly).
        for (at, turn) in turns.iter().enumerate() {
            let group_pinned = turn.group.as_deref().is_some_and(|group| {
                turns.iter().enumerate().any(|(other_at, other)| {
                    other.group.as_deref() == Some(group)
                        && (other.protected || other_at >= tail_start)
                })
            });
            let expected = at < tail_start && !turn.protected && !group_pinned;
            prop_assert_eq!(compacted.contains(&at), expected);
        }
    }

    #[test]
    fn layout_places_the_summary_at_its_last_source(count in 0..40_usize, mask in any::<u64>()) {
        let sources = subset(count, mask);
        let result = layout(count, &sources);
        let source_set: HashSet<usize> = sources.iter().copied().collect();
        let complement: Vec<usize> = (0..count).filter(|at| !source_set.contains(at)).collect();
        prop_assert_eq!(&result.included, &complement);
        if let Some(&last) = sources.last() {
            prop_assert!(result.included[..result.summary_at].iter().all(|&at| at < last));
            prop_assert!(result.included[result.summary_at..].iter().all(|&at| at > last));
        } else {
            prop_assert_eq!(result.summary_at, 0);
        }
    }

    /// A summary of a plan's compacted turns is current; raw context = preserved turns.
    #[test]
    fn faithful_summary_is_current(turns in ledger(1..24), keep_tail in 1..6_usize, mask in any::<u64>()) {
        let plan = plan_layout(&plan_inputs(&turns), keep_tail);
        let sources = if plan.compacted.is_empty() { subset(turns.len(), mask) } else { plan.compacted.clone() };
        let fingerprint = fingerprint_at(&turns, &sources);
        let result = check(&turns, &ids_at(&turns, &sources), &fingerprint, "conv", "policy");
        prop_assert_eq!(result.reason, None);
        prop_assert_eq!(&result.positions, &sources);
        if !plan.compacted.is_empty() {
            prop_assert_eq!(layout(turns.len(), &result.positions).included, plan.preserved);
        }
        // Appending a turn never invalidates a summary.
        let mut appended = turns.clone();
        let mut extra = turns.last().unwrap().clone();
        extra.id = "appended".to_owned();
        extra.sequence += 1;
        appended.push(extra);
        prop_assert!(check(&appended, &ids_at(&turns, &sources), &fingerprint, "conv", "policy")
            .is_current());
    }

    /// Every reason of SPEC §6 is reached by the change that should cause it.
    #[test]
    fn each_check_reason_is_reachable(
        turns in ledger(2..16),
        mask in any::<u64>(),
        pick in any::<prop::sample::Index>(),
        change in mutation(),
    ) {
        let sources = subset(turns.len(), mask);
        let ids = ids_at(&turns, &sources);
        let fingerprint = fingerprint_at(&turns, &sources);
        let reason = |result: CheckResult| (result.reason, result.source_index);

        prop_assert_eq!(reason(check(&turns, &ids, &fingerprint, "other", "policy")),
            (Some(CheckReason::ConversationMismatch), None));
        prop_assert_eq!(reason(check(&turns, &ids, &fingerprint, "conv", "other")),
            (Some(CheckReason::PolicyMismatch), None));
        prop_assert_eq!(reason(check(&turns, &[], &fingerprint, "conv", "policy")),
            (Some(CheckReason::EmptySource), None));

        let k = pick.index(sources.len());
        let mut without = turns.clone();
        without.remove(sources[k]);
        prop_assert_eq!(reason(check(&without, &ids, &fingerprint, "conv", "policy")),
            (Some(CheckReason::SourceMissing), Some(k)));

        if ids.len() >= 2 {
            let j = (k + 1) % ids.len();
            let mut swapped = ids.clone();
            swapped.swap(k, j);
            prop_assert_eq!(reason(check(&turns, &swapped, &fingerprint, "conv", "policy")),
                (Some(CheckReason::SourceReordered), Some(k.min(j))));
        }
        let mut repeated = ids.clone();
        repeated.push(ids[k].clone());
        prop_assert_eq!(reason(check(&turns, &repeated, &fingerprint, "conv", "policy")),
            (Some(CheckReason::SourceReordered), Some(ids.len())));

        // Any change to a source that keeps its id and place in the ledger is a modification.
        let mut edited = turns.clone();
        let mut changed = mutate(&turns[sources[k]], &change);
        changed.id.clone_from(&turns[sources[k]].id);
        changed.sequence = turns[sources[k]].sequence;
        if changed != turns[sources[k]] {
            edited[sources[k]] = changed;
            prop_assert_eq!(reason(check(&edited, &ids, &fingerprint, "conv", "policy")),
                (Some(CheckReason::SourceModified), None));
        }
        // Editing a turn that is not a source changes nothing.
        if let Some(other) = (0..turns.len()).find(|at| !sources.contains(at)) {
            let mut edited = turns.clone();
            edited[other].body.push('!');
            prop_assert!(check(&edited, &ids, &fingerprint, "conv", "policy").is_current());
        }
    }

    /// Arbitrary source lists and fingerprint strings: no panic, and a current verdict is
    /// only ever given to sources that are present, in ledger order and faithfully hashed.
    #[test]
    fn check_never_panics_and_current_means_faithful(
        turns in ledger(0..10),
        picks in proptest::collection::vec(0..14_usize, 0..10),
        fingerprint in prop_oneof![
            text(0, 70),
            Just("lf1:".to_owned() + &"0".repeat(64)),
            Just("faithful".to_owned()),
        ],
    ) {
        let ids: Vec<String> = picks
            .iter()
            .map(|&pick| turns.get(pick).map_or_else(|| format!("unknown{pick}"), |t| t.id.clone()))
            .collect();
        let fingerprint = if fingerprint == "faithful" {
            let present: Vec<usize> = picks.iter().copied().filter(|&p| p < turns.len()).collect();
            fingerprint_at(&turns, &present)
        } else {
            fingerprint
        };
        let result = check(&turns, &ids, &fingerprint, "conv", "policy");
        if let Some(index) = result.source_index {
            prop_assert!(index <= ids.len());
        }
        if result.is_current() {
            prop_assert!(picks.iter().all(|&p| p < turns.len()));
            prop_assert!(picks.windows(2).all(|w| w[0] < w[1]));
            prop_assert_eq!(&result.positions, &picks);
            prop_assert_eq!(&fingerprint, &fingerprint_at(&turns, &picks));
        } else {
            prop_assert!(result.positions.is_empty());
        }
    }
}

// ---------------------------------------------------------------------------- (5) meta JSON

/// Entries as a Python dict could hold them (keys unique; empty keys are valid JSON).
fn json_entries() -> impl Strategy<Value = Vec<(String, String)>> {
    proptest::collection::btree_map(text(0, 8), text(0, 24), 0..6)
        .prop_map(|map| map.into_iter().collect())
}

/// Token soup that reaches the parser's deeper paths far more often than random text.
fn json_soup() -> impl Strategy<Value = String> {
    let token = select(vec![
        "{", "}", "\"", ":", ",", " ", "\\", "\\u", "\\ud83d", "\\ude00", "\\ud800", "\\u00e9",
        "d83d", "00", "k", "é", "\u{1}", "\\n", "\\x", "1", "[", "]", "\\\"",
    ]);
    proptest::collection::vec(token, 0..24).prop_map(|tokens| tokens.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// What Python's `json.dumps` writes (any `ensure_ascii`, any separators) reads back.
    #[test]
    fn parse_reads_what_python_writes(
        entries in json_entries(),
        ensure_ascii in any::<bool>(),
        separators in select(vec![(", ", ": "), (",", ":"), (" ,\n", "\t: "), ("\r\n,", " :")]),
    ) {
        let text = write_json_object(&entries, ensure_ascii, separators.0, separators.1);
        prop_assert_eq!(parse_flat_object(&text), Some(entries.clone()));
        prop_assert_eq!(parse_flat_object(&format!(" \n{text}\t ")), Some(entries.clone()));
        if ensure_ascii {
            prop_assert!(text.is_ascii());
        }
    }

    /// Duplicate keys read back in document order (normalisation then rejects them).
    #[test]
    fn parse_keeps_document_order(entries in proptest::collection::vec((text(0, 4), text(0, 4)), 0..6)) {
        prop_assert_eq!(parse_flat_object(&python_json_dumps(&entries)), Some(entries));
    }

    #[test]
    fn parse_never_panics_and_is_stable(text in prop_oneof![text(0, 60), json_soup(), any::<String>()]) {
        if let Some(entries) = parse_flat_object(&text) {
            prop_assert_eq!(parse_flat_object(&python_json_dumps(&entries)), Some(entries));
        }
    }

    /// Python writes lone surrogates (`json.dumps("\ud800")`); they are not text, never accepted.
    #[test]
    fn lone_surrogates_are_rejected(unit in 0xD800_u32..0xE000, before in text(0, 4), after in text(0, 4)) {
        let mut json = String::from("{\"k\": ");
        let mut value = String::new();
        support::write_json_string(&mut value, &before, true);
        value.pop();
        json.push_str(&value);
        write!(json, "\\u{unit:04x}").unwrap();
        let mut rest = String::new();
        support::write_json_string(&mut rest, &after, true);
        // `after` never starts with an escaped low surrogate: those are not chars.
        let rest = rest.trim_start_matches('"');
        json.push_str(rest);
        json.push('}');
        prop_assert_eq!(parse_flat_object(&json), None);
    }
}

// ---------------------------------------------------------------------- (6) revalidate_many

#[derive(Clone, Debug)]
struct SummarySpec {
    source_ids: Vec<String>,
    fingerprint: String,
}

#[derive(Clone, Debug)]
struct ConversationSpec {
    id: String,
    rows: Vec<RowSpec>,
    summaries: Vec<SummarySpec>,
}

fn borrow(conversations: &[ConversationSpec]) -> Vec<ConversationRows<'_>> {
    conversations
        .iter()
        .map(|conversation| ConversationRows {
            conversation_id: &conversation.id,
            turns: conversation.rows.iter().map(RowSpec::row).collect(),
            summaries: conversation
                .summaries
                .iter()
                .enumerate()
                .map(|(index, summary)| SummaryRow {
                    summary_id: if index % 2 == 0 { "s" } else { "t" },
                    source_ids: summary.source_ids.iter().map(String::as_str).collect(),
                    source_fingerprint: &summary.fingerprint,
                })
                .collect(),
        })
        .collect()
}

fn bogus_meta() -> impl Strategy<Value = String> {
    select(vec![
        "",
        "null",
        "[1]",
        "{",
        "{\"k\":1}",
        "{\"k\":\"v\",}",
        "{\"k\":\"\\ud800\"}",
        "{\"\":\"v\"}",
        "{\"k\":\"1\",\"k\":\"2\"}",
        "{\"k\":{\"a\":\"b\"}}",
    ])
    .prop_map(str::to_owned)
}

/// Rows as a corrupted or hostile store could hold them.
fn arbitrary_row() -> impl Strategy<Value = RowSpec> {
    (
        prop_oneof![
            select(vec!["a", "b", "c", "", "\0", "é"]).prop_map(str::to_owned),
            text(0, 3)
        ],
        prop_oneof![-3..5_i64, any::<i64>()],
        prop_oneof![
            3 => select(vec!["system", "user", "assistant", "tool"]),
            1 => select(vec!["", "User", "admin", "tool "]),
        ],
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..48),
            text(0, 24).prop_map(String::into_bytes),
            select(vec![
                b"\xff".to_vec(),
                b"a\xc3".to_vec(),
                b"\xed\xa0\x80".to_vec()
            ]),
        ],
        any::<bool>(),
        proptest::option::of(select(vec![
            "pending-confirmation",
            "active-constraint",
            "audit-evidence",
            "unverified-provenance",
            "bogus",
            "",
        ])),
        proptest::option::of(prop_oneof![
            select(vec!["", "g", "h"]).prop_map(str::to_owned),
            text(0, 3)
        ]),
        proptest::option::of(prop_oneof![
            json_entries().prop_map(|entries| python_json_dumps(&entries)),
            bogus_meta(),
            json_soup(),
            text(0, 20),
        ]),
    )
        .prop_map(
            |(id, sequence, role, body, protected, protection_reason, group, meta_json)| RowSpec {
                id,
                sequence,
                role: role.to_owned(),
                body,
                protected,
                protection_reason: protection_reason.map(str::to_owned),
                group,
                meta_json,
            },
        )
}

fn arbitrary_conversations() -> impl Strategy<Value = Vec<ConversationSpec>> {
    let summary = (
        proptest::collection::vec(
            prop_oneof![
                select(vec!["a", "b", "c", "", "\0", "é", "zz"]).prop_map(str::to_owned),
                text(0, 3)
            ],
            0..6,
        ),
        prop_oneof![
            text(0, 70),
            Just("faithful".to_owned()),
            Just("lf1:".to_owned() + &"f".repeat(64)),
        ],
    );
    let conversation = (
        select(vec!["c1", "c2", ""]),
        proptest::collection::vec(arbitrary_row(), 0..10),
        proptest::collection::vec(summary, 0..4),
    )
        .prop_map(|(id, rows, summaries)| {
            // "faithful": hash the first row carrying each cited id, so current verdicts occur.
            let summaries = summaries
                .into_iter()
                .map(|(source_ids, fingerprint)| {
                    let fingerprint = if fingerprint == "faithful" {
                        let digests: Vec<[u8; 32]> = source_ids
                            .iter()
                            .filter_map(|id| rows.iter().find(|row| &row.id == id))
                            .filter_map(|row| row_digest(&row.row()))
                            .collect();
                        fingerprint_hex(digests.iter())
                    } else {
                        fingerprint
                    };
                    SummarySpec {
                        source_ids,
                        fingerprint,
                    }
                })
                .collect();
            ConversationSpec {
                id: id.to_owned(),
                rows,
                summaries,
            }
        });
    proptest::collection::vec(conversation, 0..4)
}

/// How a row of a well-formed conversation may be broken; `Valid` rows are turns.
#[derive(Clone, Debug, PartialEq)]
enum Damage {
    Valid,
    Role(&'static str),
    NegativeSequence,
    ReasonUnprotected,
    EmptyGroup,
    BodyNotUtf8(Vec<u8>),
    Meta(String),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        12 => Just(Damage::Valid),
        1 => select(vec!["", "User", "admin"]).prop_map(Damage::Role),
        1 => Just(Damage::NegativeSequence),
        1 => Just(Damage::ReasonUnprotected),
        1 => Just(Damage::EmptyGroup),
        1 => select(vec![b"\xff".to_vec(), b"ok\xc3".to_vec(), b"\xed\xa0\x80".to_vec()])
            .prop_map(Damage::BodyNotUtf8),
        1 => bogus_meta().prop_map(Damage::Meta),
    ]
}

/// A stored form of `turn` (meta in any order and JSON style), broken as `damage` says.
fn stored_row(turn: &OwnedTurn, damage: &Damage, style: (bool, bool, u64)) -> RowSpec {
    let (meta_as_null, ensure_ascii, rotate) = style;
    let mut entries = turn.meta.clone();
    if !entries.is_empty() {
        let by = usize::try_from(rotate).unwrap() % entries.len();
        entries.rotate_left(by);
    }
    let mut row = RowSpec {
        id: turn.id.clone(),
        sequence: turn.sequence,
        role: turn.role.as_str().to_owned(),
        body: turn.body.clone().into_bytes(),
        protected: turn.protected,
        protection_reason: turn.protection_reason.map(|r| r.as_str().to_owned()),
        group: turn.group.clone(),
        meta_json: if entries.is_empty() && meta_as_null {
            None
        } else {
            Some(write_json_object(&entries, ensure_ascii, ", ", ": "))
        },
    };
    match damage {
        Damage::Valid => {}
        Damage::Role(role) => (*role).clone_into(&mut row.role),
        Damage::NegativeSequence => row.sequence = -row.sequence - 1,
        Damage::ReasonUnprotected => {
            row.protected = false;
            row.protection_reason = Some("audit-evidence".to_owned());
        }
        Damage::EmptyGroup => row.group = Some(String::new()),
        Damage::BodyNotUtf8(bytes) => row.body.clone_from(bytes),
        Damage::Meta(json) => row.meta_json = Some(json.clone()),
    }
    row
}

/// How a summary of a well-formed conversation is made.
#[derive(Clone, Debug)]
struct SummaryPlan {
    mask: u64,
    shuffle: bool,
    unknown_at: Option<prop::sample::Index>,
    fingerprint: Option<String>,
}

fn summary_plan() -> impl Strategy<Value = SummaryPlan> {
    (
        any::<u64>(),
        prop::bool::weighted(0.2),
        proptest::option::weighted(0.15, any::<prop::sample::Index>()),
        proptest::option::weighted(
            0.2,
            prop_oneof![text(0, 10), Just("lf1:".to_owned() + &"0".repeat(64))],
        ),
    )
        .prop_map(|(mask, shuffle, unknown_at, fingerprint)| SummaryPlan {
            mask,
            shuffle,
            unknown_at,
            fingerprint,
        })
}

/// Well-formed conversations: unique ids and sequences, rows in any input order, some rows
/// broken in known ways; with what each row is meant to be.
type Reference = Vec<(ConversationSpec, Vec<Option<OwnedTurn>>)>;

fn well_formed() -> impl Strategy<Value = Reference> {
    let conversation = (
        ledger(0..12),
        proptest::collection::vec((damage(), any::<bool>(), any::<bool>(), any::<u64>()), 12),
        proptest::collection::vec(summary_plan(), 0..4),
        any::<u64>(),
    )
        .prop_map(|(turns, damages, plans, order_seed)| {
            let mut rows = Vec::new();
            let mut meant = Vec::new();
            for (turn, (damage, null_meta, ascii, rotate)) in turns.iter().zip(&damages) {
                rows.push(stored_row(turn, damage, (*null_meta, *ascii, *rotate)));
                meant.push((*damage == Damage::Valid).then(|| turn.clone()));
            }
            // Rows arrive in any order; the ledger order is the sequence order.
            if !rows.is_empty() {
                let by = usize::try_from(order_seed).unwrap() % rows.len();
                rows.rotate_left(by);
                meant.rotate_left(by);
                if order_seed & 1 == 1 {
                    rows.reverse();
                    meant.reverse();
                }
            }
            let summaries = plans
                .iter()
                .map(|plan| {
                    let positions = if turns.is_empty() {
                        Vec::new()
                    } else {
                        subset(turns.len(), plan.mask)
                    };
                    let mut source_ids = ids_at(&turns, &positions);
                    let fingerprint = plan
                        .fingerprint
                        .clone()
                        .unwrap_or_else(|| fingerprint_at(&turns, &positions));
                    if plan.shuffle {
                        source_ids.reverse();
                    }
                    if let Some(at) = plan.unknown_at {
                        let at = at.index(source_ids.len() + 1);
                        source_ids.insert(at, "no-such-turn".to_owned());
                    }
                    SummarySpec {
                        source_ids,
                        fingerprint,
                    }
                })
                .collect();
            (
                ConversationSpec {
                    id: "conv".to_owned(),
                    rows,
                    summaries,
                },
                meant,
            )
        });
    proptest::collection::vec(conversation, 0..4)
}

/// The sequential reference: SPEC §6 order, hashing through the independent SPEC encoder.
/// A cited row that is no longer a valid turn is reported first, as `source-modified` at
/// that source (what `revalidate_many` documents), before the missing/reordered checks.
fn reference_revalidate(input: &Reference) -> (Vec<Verdict>, Totals) {
    let mut verdicts = Vec::new();
    let mut totals = Totals::default();
    for (conversation_index, (conversation, meant)) in input.iter().enumerate() {
        let mut order: Vec<usize> = (0..conversation.rows.len()).collect();
        order.sort_by_key(|&at| conversation.rows[at].sequence);
        let position: HashMap<&str, usize> = order
            .iter()
            .enumerate()
            .map(|(ledger_at, &row_at)| (conversation.rows[row_at].id.as_str(), ledger_at))
            .collect();
        let digest = |ledger_at: usize| {
            meant[order[ledger_at]]
                .as_ref()
                .map(|turn| blake3::derive_key(TURN_CONTEXT, &spec_encoding(turn)))
        };
        let cited: BTreeSet<usize> = conversation
            .summaries
            .iter()
            .flat_map(|summary| &summary.source_ids)
            .filter_map(|id| position.get(id.as_str()).copied())
            .collect();
        for &at in &cited {
            totals.turns_hashed += 1;
            totals.bytes_hashed += u64::try_from(conversation.rows[order[at]].body.len()).unwrap();
        }
        for (summary_index, summary) in conversation.summaries.iter().enumerate() {
            let verdict = |reason, source_index| Verdict {
                conversation: conversation_index,
                summary: summary_index,
                reason,
                source_index,
            };
            let found: Vec<Option<usize>> = summary
                .source_ids
                .iter()
                .map(|id| position.get(id.as_str()).copied())
                .collect();
            let first_invalid = found
                .iter()
                .position(|at| at.is_some_and(|at| digest(at).is_none()));
            if found.is_empty() {
                verdicts.push(verdict(Some(CheckReason::EmptySource), None));
            } else if let Some(k) = found.iter().position(Option::is_none) {
                verdicts.push(verdict(Some(CheckReason::SourceMissing), Some(k)));
            } else {
                let positions: Vec<usize> = found.into_iter().map(Option::unwrap).collect();
                let mut ledger_order = positions.clone();
                ledger_order.sort_unstable();
                ledger_order.dedup();
                if ledger_order == positions && first_invalid.is_some() {
                    // SPEC §6 order: after missing and reordered, an invalid row is modified.
                    verdicts.push(verdict(Some(CheckReason::SourceModified), first_invalid));
                } else if ledger_order == positions {
                    let mut material = u64::try_from(positions.len())
                        .unwrap()
                        .to_le_bytes()
                        .to_vec();
                    for &at in &positions {
                        material.extend_from_slice(&digest(at).unwrap());
                    }
                    let expected =
                        to_fingerprint_string(&blake3::derive_key(FINGERPRINT_CONTEXT, &material));
                    let reason =
                        (summary.fingerprint != expected).then_some(CheckReason::SourceModified);
                    verdicts.push(verdict(reason, None));
                } else {
                    let k = (0..positions.len())
                        .find(|&k| ledger_order.get(k) != Some(&positions[k]))
                        .unwrap();
                    verdicts.push(verdict(Some(CheckReason::SourceReordered), Some(k)));
                }
            }
        }
    }
    (verdicts, totals)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(384))]

    /// Hostile rows (bytes bodies, bogus roles and meta, duplicate ids and sequences, summaries
    /// citing anything): no panic, one verdict per summary in input order, deterministic, and
    /// the same whether conversations are checked together or one at a time.
    #[test]
    fn revalidate_never_panics_on_arbitrary_rows(conversations in arbitrary_conversations()) {
        let input = borrow(&conversations);
        let (verdicts, totals) = revalidate_many(&input);
        let expected: Vec<(usize, usize)> = conversations
            .iter()
            .enumerate()
            .flat_map(|(c, conversation)| (0..conversation.summaries.len()).map(move |s| (c, s)))
            .collect();
        let got: Vec<(usize, usize)> = verdicts.iter().map(|v| (v.conversation, v.summary)).collect();
        prop_assert_eq!(got, expected);
        for verdict in &verdicts {
            let sources = conversations[verdict.conversation].summaries[verdict.summary].source_ids.len();
            if let Some(index) = verdict.source_index {
                prop_assert!(index <= sources);
            }
            prop_assert!(verdict.reason != Some(CheckReason::ConversationMismatch));
            prop_assert!(verdict.reason != Some(CheckReason::PolicyMismatch));
        }
        prop_assert_eq!(revalidate_many(&input), (verdicts.clone(), totals));
        let mut one_by_one = Vec::new();
        let mut summed = Totals::default();
        for (index, conversation) in input.iter().enumerate() {
            let (part, part_totals) = revalidate_many(std::slice::from_ref(conversation));
            one_by_one.extend(part.into_iter().map(|v| Verdict { conversation: index, ..v }));
            summed.turns_hashed += part_totals.turns_hashed;
            summed.bytes_hashed += part_totals.bytes_hashed;
        }
        prop_assert_eq!((one_by_one, summed), (verdicts, totals));
    }

    #[test]
    fn revalidate_agrees_with_sequential_reference(input in well_formed()) {
        let specs: Vec<ConversationSpec> = input.iter().map(|(spec, _)| spec.clone()).collect();
        let rows = borrow(&specs);
        prop_assert_eq!(revalidate_many(&rows), reference_revalidate(&input));
    }
}

// ------------------------------------------------------------ (7) column-packed batches

/// What `ledgerfold.revalidate`'s aggregate query makes of rows: lengths and values per text
/// column, decimals per integer column, the flags code (9 for a role or reason no turn has).
struct PackedBatch {
    text: [(String, Vec<u8>); 4], // id, body, group, meta
    sequence: String,
    keys: String,
    sources: (String, Vec<u8>), // keys, turn IDs
}

fn push_text(column: &mut (String, Vec<u8>), value: Option<&[u8]>) {
    if !column.0.is_empty() {
        column.0.push(',');
    }
    match value {
        None => column.0.push_str("-1"),
        Some(bytes) => {
            write!(column.0, "{}", bytes.len()).unwrap();
            column.1.extend_from_slice(bytes);
        }
    }
}

fn push_integer(list: &mut String, value: i64) {
    if !list.is_empty() {
        list.push(',');
    }
    write!(list, "{value}").unwrap();
}

/// The row's turn key, as the batch query writes it (an unknown role or reason as the
/// unknown code).
fn turn_key(summary_index: usize, row: &RowSpec) -> i64 {
    let unknown = columns::format::UNKNOWN_CODE;
    let role = Role::parse(&row.role).map_or(unknown, |role| i64::from(role.code()));
    let reason = match row.protection_reason.as_deref() {
        None => 0,
        Some(reason) => ProtectionReason::parse(reason).map_or(unknown, |r| i64::from(r.code())),
    };
    columns::turn_key(summary_index, role, i64::from(row.protected), reason).unwrap()
}

/// The first summary of each distinct conversation that has one, packed with its rows (keyed
/// by the summary's index among them, as the batch query reads rows for its summaries only);
/// sources are listed in `rotate`d order with their positions, as an aggregate may meet them.
fn pack(conversations: &[ConversationSpec], rotate: usize) -> PackedBatch {
    let mut batch = PackedBatch {
        text: Default::default(),
        sequence: String::new(),
        keys: String::new(),
        sources: Default::default(),
    };
    let with_summary = conversations
        .iter()
        .enumerate()
        .filter(|(_, conversation)| !conversation.summaries.is_empty());
    for (summary_index, (_, conversation)) in with_summary.enumerate() {
        for row in &conversation.rows {
            push_text(&mut batch.text[0], Some(row.id.as_bytes()));
            push_text(&mut batch.text[1], Some(&row.body));
            push_text(&mut batch.text[2], row.group.as_deref().map(str::as_bytes));
            push_text(
                &mut batch.text[3],
                row.meta_json.as_deref().map(str::as_bytes),
            );
            push_integer(&mut batch.sequence, row.sequence);
            let key = turn_key(summary_index, row);
            push_integer(&mut batch.keys, key);
        }
        let summary = &conversation.summaries[0];
        let mut cited: Vec<(usize, &String)> = summary.source_ids.iter().enumerate().collect();
        if !cited.is_empty() {
            let by = rotate % cited.len();
            cited.rotate_left(by);
        }
        for (position, id) in cited {
            let key = columns::source_key(
                u8::try_from(summary_index).unwrap(),
                u32::try_from(position).unwrap(),
                u32::try_from(id.len()).unwrap(),
            )
            .unwrap();
            push_integer(&mut batch.sources.0, key);
            batch.sources.1.extend_from_slice(id.as_bytes());
        }
    }
    batch
}

fn packed(column: &(String, Vec<u8>)) -> Packed<'_> {
    Packed {
        lengths: column.0.as_bytes(),
        values: &column.1,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Unpacking a column-packed batch gives the verdicts and totals of the rows themselves,
    /// for hostile rows too (an unknown role or reason becomes the unreadable role: invalid
    /// either way), and sources in any order come back in position order.
    #[test]
    fn column_packed_batches_check_like_their_rows(
        conversations in arbitrary_conversations(),
        rotate in 0..6_usize,
    ) {
        let mut seen = HashSet::new();
        let mut distinct: Vec<ConversationSpec> = conversations
            .into_iter()
            .filter(|conversation| seen.insert(conversation.id.clone()))
            .collect();
        for conversation in &mut distinct {
            conversation.summaries.truncate(1);
        }
        let batch = pack(&distinct, rotate);
        let columns = TurnColumns {
            keys: batch.keys.as_bytes(),
            id: packed(&batch.text[0]),
            sequence: batch.sequence.as_bytes(),
            body: packed(&batch.text[1]),
            group: packed(&batch.text[2]),
            meta: packed(&batch.text[3]),
        };
        let source_columns = SourceColumns {
            keys: batch.sources.0.as_bytes(),
            turn_ids: &batch.sources.1,
        };
        let with_summary: Vec<(usize, &ConversationSpec)> = distinct
            .iter()
            .enumerate()
            .filter(|(_, conversation)| !conversation.summaries.is_empty())
            .collect();
        let current: Vec<CurrentSummary<'_>> = with_summary
            .iter()
            .map(|(index, conversation)| CurrentSummary {
                conversation_id: &conversation.id,
                summary_pk: i64::try_from(*index).unwrap(),
                summary_id: "s",
                source_fingerprint: &conversation.summaries[0].fingerprint,
            })
            .collect();
        let runs = columns::turn_runs(&columns).expect("a faithful packing lines up");
        prop_assert_eq!(
            runs.len(),
            with_summary.iter().filter(|(_, c)| !c.rows.is_empty()).count()
        );
        let rows: Vec<(&str, TurnRow<'_>)> = runs
            .iter()
            .flat_map(|(summary, rows)| {
                let conversation = current[*summary].conversation_id;
                rows.iter().map(move |row| (conversation, *row))
            })
            .collect();
        let originals: Vec<(&str, &RowSpec)> = with_summary
            .iter()
            .flat_map(|(_, c)| c.rows.iter().map(move |row| (c.id.as_str(), row)))
            .collect();
        prop_assert_eq!(rows.len(), originals.len());
        for ((conversation, row), (expected_conversation, original)) in rows.iter().zip(&originals) {
            prop_assert_eq!(conversation, expected_conversation);
            prop_assert_eq!(row.id, original.id.as_str());
            prop_assert_eq!(row.sequence, original.sequence);
            prop_assert_eq!(row.body, original.body.as_slice());
            prop_assert_eq!(row_digest(row), row_digest(&original.row()));
        }
        let sources = columns::sources(&source_columns, current.len()).expect("sources line up");
        // The packed path groups the runs and sources by summary index, the flat path
        // (`group`) rows one by one by conversation ID and sources by summary key: the same
        // conversations either way.
        let by_key: HashMap<i64, Vec<&str>> = current
            .iter()
            .zip(&sources)
            .map(|(summary, cited)| (summary.summary_pk, cited.clone()))
            .collect();
        let by_runs = columns::group_indexed(runs, sources, &current)
            .expect("every run names a summary");
        let unpacked = columns::group(rows, by_key, &current);
        let direct: Vec<ConversationSpec> =
            with_summary.iter().map(|(_, conversation)| (*conversation).clone()).collect();
        prop_assert_eq!(revalidate_many(&unpacked), revalidate_many(&borrow(&direct)));
        prop_assert_eq!(revalidate_many(&by_runs), revalidate_many(&unpacked));
    }
}

// ------------------------------------------------------------------- fixed regressions

/// Decoding the golden vectors gives back the fields they were made from.
#[test]
fn golden_vector_encodings_decode() {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/fingerprint-v1-vectors.json");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut decoded = 0;
    for case in doc["cases"].as_array().unwrap() {
        for turn in case["turns"].as_array().unwrap() {
            let hex = turn["encoding_hex"].as_str().unwrap();
            let bytes: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|at| u8::from_str_radix(&hex[at..at + 2], 16).unwrap())
                .collect();
            let back = decode_turn(&bytes).unwrap();
            assert_eq!(back.id, turn["id"].as_str().unwrap());
            assert_eq!(back.body, turn["body"].as_str().unwrap());
            assert_eq!(back.sequence, turn["sequence"].as_i64().unwrap());
            assert_eq!(back.role.as_str(), turn["role"].as_str().unwrap());
            assert_eq!(encode_turn(&back.view()), bytes);
            decoded += 1;
        }
    }
    assert!(decoded > 0);
}

/// More cited turns than the parallel-hashing threshold (2048) take the rayon path.
#[test]
fn parallel_hashing_path_agrees() {
    let turns: Vec<OwnedTurn> = (0..2100_i64)
        .map(|at| OwnedTurn {
            id: format!("m{at}"),
            sequence: at * 2,
            role: Role::ALL[usize::try_from(at).unwrap() % 4],
            protected: false,
            protection_reason: None,
            group: None,
            meta: Vec::new(),
            body: "x".repeat(usize::try_from(at % 7).unwrap()),
        })
        .collect();
    let mut specs = vec![ConversationSpec {
        id: "conv".to_owned(),
        rows: turns
            .iter()
            .rev()
            .map(|t| stored_row(t, &Damage::Valid, (true, true, 0)))
            .collect(),
        summaries: vec![SummarySpec {
            source_ids: turns.iter().map(|t| t.id.clone()).collect(),
            fingerprint: derive_key_hex(&turns),
        }],
    }];
    let (verdicts, totals) = revalidate_many(&borrow(&specs));
    assert_eq!(verdicts[0].reason, None);
    assert_eq!(totals.turns_hashed, 2100);
    // One tampered body among thousands is found.
    specs[0].rows[777].body.push(b'!');
    let (verdicts, _) = revalidate_many(&borrow(&specs));
    assert_eq!(verdicts[0].reason, Some(CheckReason::SourceModified));
    assert_eq!(verdicts[0].source_index, None);
}

// ------------------------------------------------ extendable fingerprint (SPEC §15.1 cost)

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any sequence of appends (including none, and ones that cross or land on 1 KiB chunk
    /// boundaries) gives the fingerprint of the whole list, and a fingerprint with `more`
    /// equals appending `more` first; the count prefix changes with every append.
    #[test]
    fn extendable_fingerprint_equals_the_plain_one(
        steps in proptest::collection::vec(0usize..160, 0..12),
        seed in any::<u8>(),
        more in 0usize..70,
    ) {
        let total: usize = steps.iter().sum::<usize>() + more;
        let digests: Vec<[u8; 32]> = (0..total)
            .map(|i| blake3::derive_key("test", &[&[seed][..], &(i as u64).to_le_bytes()].concat()))
            .collect();
        let packed: Vec<u8> = digests.iter().flatten().copied().collect();
        let mut state = ExtendableFingerprint::default();
        let mut held = 0;
        for step in steps {
            state.extend(&packed[held * 32..(held + step) * 32]);
            held += step;
            prop_assert_eq!(state.count(), held as u64);
            prop_assert_eq!(state.fingerprint(&[]), fingerprint_digests(digests[..held].iter()));
        }
        prop_assert_eq!(
            state.fingerprint(&packed[held * 32..]),
            fingerprint_digests(digests.iter())
        );
    }
}
