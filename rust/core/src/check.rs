//! Summary validity (SPEC §6).

use crate::fingerprint::{parse_fingerprint, Fingerprinter};

/// Why a summary is not current, in the order the checks run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckReason {
    ConversationMismatch,
    PolicyMismatch,
    EmptySource,
    SourceMissing,
    SourceReordered,
    SourceModified,
    GroupSplit,
}

impl CheckReason {
    /// Every reason, in the order the checks run.
    pub const ALL: [CheckReason; 7] = [
        CheckReason::ConversationMismatch,
        CheckReason::PolicyMismatch,
        CheckReason::EmptySource,
        CheckReason::SourceMissing,
        CheckReason::SourceReordered,
        CheckReason::SourceModified,
        CheckReason::GroupSplit,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CheckReason::ConversationMismatch => "conversation-mismatch",
            CheckReason::PolicyMismatch => "policy-mismatch",
            CheckReason::EmptySource => "empty-source",
            CheckReason::SourceMissing => "source-missing",
            CheckReason::SourceReordered => "source-reordered",
            CheckReason::SourceModified => "source-modified",
            CheckReason::GroupSplit => "group-split",
        }
    }
}

/// What a check needs of a summary envelope; its source IDs are reached through the lookup.
#[derive(Clone, Copy, Debug)]
pub struct SummaryRef<'a> {
    pub conversation_id: &'a str,
    pub policy_version: &'a str,
    pub source_count: usize,
    pub source_fingerprint: &'a str,
}

/// The outcome; `source_index` points into the source IDs at the offending turn, if one
/// exists. When current, `positions` are the sources' ledger positions (ascending).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckResult {
    pub reason: Option<CheckReason>,
    pub source_index: Option<usize>,
    pub positions: Vec<usize>,
}

impl CheckResult {
    fn failed(reason: CheckReason, source_index: Option<usize>) -> Self {
        CheckResult {
            reason: Some(reason),
            source_index,
            positions: Vec::new(),
        }
    }

    pub fn is_current(&self) -> bool {
        self.reason.is_none()
    }
}

/// How one source resolves: a live ledger turn (its position and cached digest), a sealed
/// source (purged, checked by the digest its summary's source index keeps, SPEC §15.5), or a
/// sealed ID named a second time.
#[derive(Clone, Copy, Debug)]
pub enum Source<'d> {
    Live(usize, &'d [u8; 32]),
    Sealed(&'d [u8; 32]),
    SealedAgain,
}

/// Checks `summary` against a conversation. `lookup(i)` resolves the i-th source ID to its
/// position in the conversation's sequence order and its cached digest; no body is
/// re-hashed here. Lookups happen in source order, so a caller may walk the ledger in step.
pub fn check_summary<'d, F>(
    summary: &SummaryRef<'_>,
    conversation_id: &str,
    policy_version: &str,
    mut lookup: F,
) -> CheckResult
where
    F: FnMut(usize) -> Option<(usize, &'d [u8; 32])>,
{
    check_sealed(summary, conversation_id, policy_version, |index| {
        lookup(index).map(|(position, digest)| Source::Live(position, digest))
    })
}

/// `check_summary` where a source may be sealed (SPEC §15.5). A sealed source sorts before
/// every live turn above the purge boundary, so every sealed source must come before every
/// live one in source order (`source-reordered` otherwise). `positions` are the live
/// sources' positions only.
pub fn check_sealed<'d, F>(
    summary: &SummaryRef<'_>,
    conversation_id: &str,
    policy_version: &str,
    mut lookup: F,
) -> CheckResult
where
    F: FnMut(usize) -> Option<Source<'d>>,
{
    if summary.conversation_id != conversation_id {
        return CheckResult::failed(CheckReason::ConversationMismatch, None);
    }
    if summary.policy_version != policy_version {
        return CheckResult::failed(CheckReason::PolicyMismatch, None);
    }
    if summary.source_count == 0 {
        return CheckResult::failed(CheckReason::EmptySource, None);
    }
    let mut positions = Vec::with_capacity(summary.source_count);
    let mut fingerprint = Fingerprinter::new(summary.source_count);
    let mut misplaced_sealed: Option<usize> = None;
    for index in 0..summary.source_count {
        match lookup(index) {
            Some(Source::Live(position, digest)) => {
                positions.push(position);
                fingerprint.push(digest);
            }
            Some(Source::Sealed(digest)) => {
                if !positions.is_empty() && misplaced_sealed.is_none() {
                    misplaced_sealed = Some(index);
                }
                fingerprint.push(digest);
            }
            Some(Source::SealedAgain) => {
                misplaced_sealed.get_or_insert(index);
            }
            None => return CheckResult::failed(CheckReason::SourceMissing, Some(index)),
        }
    }
    if let Some(index) = misplaced_sealed {
        return CheckResult::failed(CheckReason::SourceReordered, Some(index));
    }
    if !positions.windows(2).all(|pair| pair[0] < pair[1]) {
        let sealed = summary.source_count - positions.len();
        return CheckResult::failed(
            CheckReason::SourceReordered,
            Some(sealed + first_misplaced(&positions)),
        );
    }
    if parse_fingerprint(summary.source_fingerprint) != Some(fingerprint.finish()) {
        return CheckResult::failed(CheckReason::SourceModified, None);
    }
    CheckResult {
        reason: None,
        source_index: None,
        positions,
    }
}

/// The first index at which the given source order differs from the ledger's order of the
/// same (distinct) turns; with a repeated ID the ledger list is shorter and the index past
/// its end names the repeat.
fn first_misplaced(positions: &[usize]) -> usize {
    let mut ledger_order = positions.to_vec();
    ledger_order.sort_unstable();
    ledger_order.dedup();
    positions
        .iter()
        .enumerate()
        .find(|(index, position)| ledger_order.get(*index) != Some(position))
        .map_or(positions.len(), |(index, _)| index)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::fingerprint::fingerprint_hex;
    use std::collections::HashMap;

    struct Ledger {
        ids: Vec<&'static str>,
        digests: Vec<[u8; 32]>,
    }

    impl Ledger {
        fn new(ids: &[&'static str]) -> Self {
            let digests = (0..ids.len())
                .map(|i| [u8::try_from(i).unwrap(); 32])
                .collect();
            Ledger {
                ids: ids.to_vec(),
                digests,
            }
        }

        fn check(&self, sources: &[&str], fingerprint: &str) -> CheckResult {
            let index: HashMap<&str, usize> = self
                .ids
                .iter()
                .enumerate()
                .map(|(p, id)| (*id, p))
                .collect();
            let summary = SummaryRef {
                conversation_id: "c",
                policy_version: "p",
                source_count: sources.len(),
                source_fingerprint: fingerprint,
            };
            check_summary(&summary, "c", "p", |i| {
                index.get(sources[i]).map(|&p| (p, &self.digests[p]))
            })
        }

        fn fingerprint_of(&self, positions: &[usize]) -> String {
            fingerprint_hex(positions.iter().map(|&p| &self.digests[p]))
        }
    }

    #[test]
    fn current_when_ids_and_digests_match() {
        let ledger = Ledger::new(&["a", "b", "c"]);
        let fp = ledger.fingerprint_of(&[0, 1]);
        assert!(ledger.check(&["a", "b"], &fp).is_current());
    }

    #[test]
    fn reports_missing_reordered_and_modified() {
        let ledger = Ledger::new(&["a", "b", "c"]);
        let fp = ledger.fingerprint_of(&[0, 1]);
        let missing = ledger.check(&["a", "x"], &fp);
        assert_eq!(missing.reason, Some(CheckReason::SourceMissing));
        assert_eq!(missing.source_index, Some(1));
        let swapped = ledger.check(&["b", "a"], &fp);
        assert_eq!(swapped.reason, Some(CheckReason::SourceReordered));
        assert_eq!(swapped.source_index, Some(0));
        let repeated = ledger.check(&["a", "b", "b"], &fp);
        assert_eq!(repeated.source_index, Some(2));
        let other = ledger.check(&["a", "c"], &fp);
        assert_eq!(other.reason, Some(CheckReason::SourceModified));
        let garbage = ledger.check(&["a", "b"], "not a fingerprint");
        assert_eq!(garbage.reason, Some(CheckReason::SourceModified));
    }

    fn sealed_check(
        ledger: &Ledger,
        sources: &[&str],
        sealed: &HashMap<&str, [u8; 32]>,
        fingerprint: &str,
    ) -> CheckResult {
        let summary = SummaryRef {
            conversation_id: "c",
            policy_version: "p",
            source_count: sources.len(),
            source_fingerprint: fingerprint,
        };
        let mut seen = std::collections::HashSet::new();
        check_sealed(&summary, "c", "p", |i| {
            if let Some(digest) = sealed.get(sources[i]) {
                return Some(if seen.insert(sources[i]) {
                    Source::Sealed(digest)
                } else {
                    Source::SealedAgain
                });
            }
            let p = ledger.ids.iter().position(|id| *id == sources[i])?;
            Some(Source::Live(p, &ledger.digests[p]))
        })
    }

    #[test]
    fn sealed_sources_are_checked_by_their_digests() {
        let ledger = Ledger::new(&["c", "d"]);
        let sealed: HashMap<&str, [u8; 32]> = [("a", [7; 32]), ("b", [8; 32])].into();
        let fp = fingerprint_hex([&[7; 32], &[8; 32], &ledger.digests[0]]);
        let current = sealed_check(&ledger, &["a", "b", "c"], &sealed, &fp);
        assert!(current.is_current());
        assert_eq!(current.positions, vec![0]);
        let other: HashMap<&str, [u8; 32]> = [("a", [7; 32]), ("b", [9; 32])].into();
        let modified = sealed_check(&ledger, &["a", "b", "c"], &other, &fp);
        assert_eq!(modified.reason, Some(CheckReason::SourceModified));
        let after_live = sealed_check(&ledger, &["c", "a"], &sealed, &fp);
        assert_eq!(after_live.reason, Some(CheckReason::SourceReordered));
        assert_eq!(after_live.source_index, Some(1));
        let repeated = sealed_check(&ledger, &["a", "a", "c"], &sealed, &fp);
        assert_eq!(repeated.source_index, Some(1));
        let missing = sealed_check(&ledger, &["a", "x"], &sealed, &fp);
        assert_eq!(missing.reason, Some(CheckReason::SourceMissing));
        let only_sealed = fingerprint_hex([&[7; 32], &[8; 32]]);
        let all = sealed_check(&ledger, &["a", "b"], &sealed, &only_sealed);
        assert!(all.is_current() && all.positions.is_empty());
    }
}
