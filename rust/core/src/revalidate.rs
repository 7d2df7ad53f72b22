//! Deep batch revalidation: re-hash every source body of every summary from raw stored rows
//! (never trusting stored digests) and check each summary, in parallel across conversations.

use std::collections::HashMap;

use crate::check::{check_summary, CheckReason, SummaryRef};
use crate::encoding::{turn_digest_of_body, TurnRef};
use crate::exec::Exec;
use crate::meta_json::parse_flat_object;
use crate::model::{
    normalise_meta, validate_group, validate_id, validate_protection, validate_sequence,
    ProtectionReason, Role,
};

/// One stored turn row, borrowed from wherever the rows were read.
#[derive(Clone, Copy, Debug)]
pub struct TurnRow<'a> {
    pub id: &'a str,
    pub sequence: i64,
    pub role: &'a str,
    /// UTF-8 bytes as stored; invalid UTF-8 makes the row an invalid turn.
    pub body: &'a [u8],
    pub protected: bool,
    pub protection_reason: Option<&'a str>,
    pub group: Option<&'a str>,
    /// A flat JSON object of strings, as stored.
    pub meta_json: Option<&'a str>,
}

/// One summary to check: its source IDs in source order and its recorded fingerprint.
#[derive(Clone, Debug)]
pub struct SummaryRow<'a> {
    pub summary_id: &'a str,
    pub source_ids: Vec<&'a str>,
    pub source_fingerprint: &'a str,
}

/// The live turns of one conversation and the summaries to check against them.
#[derive(Clone, Debug)]
pub struct ConversationRows<'a> {
    pub conversation_id: &'a str,
    pub turns: Vec<TurnRow<'a>>,
    pub summaries: Vec<SummaryRow<'a>>,
}

/// The verdict on `conversations[conversation].summaries[summary]`; `reason` is None when
/// current; `source_index` names the offending source where there is one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub conversation: usize,
    pub summary: usize,
    pub reason: Option<CheckReason>,
    pub source_index: Option<usize>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub turns_hashed: u64,
    pub bytes_hashed: u64,
}

/// The role given to a stored row whose fields could not be read (a wrong type, bytes that
/// are not UTF-8): no valid turn has it, so the row is an invalid turn.
pub const UNREADABLE_ROLE: &str = "";

/// Stands in for the digest of a row that is not a valid turn; no fingerprint can match it
/// unless BLAKE3 has a preimage.
const INVALID_ROW: [u8; 32] = [0; 32];

/// Conversations with more cited turns than this hash them in parallel too.
const PARALLEL_TURNS: usize = 2048;

/// The digest of a stored row, or `None` when the row is not a valid turn (SPEC §2).
pub fn row_digest(row: &TurnRow<'_>) -> Option<[u8; 32]> {
    std::str::from_utf8(row.body).ok()?;
    digest_unchecked_body(row)
}

/// [`row_digest`] without checking that the body is UTF-8. A body that is not cannot be a
/// faithful source either way: no valid turn encodes to the same bytes, so its digest
/// matches no fingerprint (barring a BLAKE3 collision), the same verdict the invalid-row
/// digest gives. The full check runs only to name the row of a failed summary.
fn digest_unchecked_body(row: &TurnRow<'_>) -> Option<[u8; 32]> {
    validate_id("id", row.id).ok()?;
    validate_sequence(row.sequence).ok()?;
    let role = Role::parse(row.role).ok()?;
    let protection_reason = row
        .protection_reason
        .map(ProtectionReason::parse)
        .transpose()
        .ok()?;
    validate_protection(row.protected, protection_reason).ok()?;
    validate_group(row.group).ok()?;
    let mut meta = match row.meta_json {
        Some(json) => parse_flat_object(json)?,
        None => Vec::new(),
    };
    normalise_meta(&mut meta).ok()?;
    Some(turn_digest_of_body(
        &TurnRef {
            id: row.id,
            sequence: row.sequence,
            role,
            protected: row.protected,
            protection_reason,
            group: row.group,
            meta: &meta,
            body: "",
        },
        row.body,
    ))
}

fn revalidate_one(index: usize, rows: &ConversationRows<'_>, exec: Exec) -> (Vec<Verdict>, Totals) {
    // Ledger order is sequence order, whatever order the rows came in.
    let mut order: Vec<usize> = (0..rows.turns.len()).collect();
    order.sort_by_key(|&turn| rows.turns[turn].sequence);
    let mut position_of: HashMap<&str, usize> = HashMap::with_capacity(order.len());
    for (position, &turn) in order.iter().enumerate() {
        position_of.entry(rows.turns[turn].id).or_insert(position);
    }
    // Hash each cited turn once, however many summaries cite it.
    let mut cited: Vec<usize> = rows
        .summaries
        .iter()
        .flat_map(|summary| summary.source_ids.iter())
        .filter_map(|id| position_of.get(id).copied())
        .collect();
    cited.sort_unstable();
    cited.dedup();
    let hash = |&position: &usize| {
        (
            position,
            digest_unchecked_body(&rows.turns[order[position]]),
        )
    };
    let hashed: Vec<(usize, Option<[u8; 32]>)> = if cited.len() > PARALLEL_TURNS {
        exec.map_indexed(&cited, |_, position| hash(position))
    } else {
        cited.iter().map(hash).collect()
    };
    let mut digests: Vec<Option<[u8; 32]>> = vec![None; order.len()];
    let mut totals = Totals::default();
    for &(position, digest) in &hashed {
        digests[position] = digest;
        totals.turns_hashed += 1;
        totals.bytes_hashed += rows.turns[order[position]].body.len() as u64;
    }
    let verdicts = rows
        .summaries
        .iter()
        .enumerate()
        .map(|(summary_index, summary)| {
            // A cited row that is no longer a valid turn cannot be a faithful source: it gets
            // a digest no turn has, so the checks still run in SPEC §6 order (missing and
            // reordered first) and it surfaces as `source-modified`, naming that row.
            let view = SummaryRef {
                conversation_id: rows.conversation_id,
                policy_version: "",
                source_count: summary.source_ids.len(),
                source_fingerprint: summary.source_fingerprint,
            };
            let mut result = check_summary(&view, rows.conversation_id, "", |source| {
                let position = *position_of.get(summary.source_ids[source])?;
                Some((position, digests[position].as_ref().unwrap_or(&INVALID_ROW)))
            });
            if result.reason == Some(CheckReason::SourceModified) {
                result.source_index = summary.source_ids.iter().position(|id| {
                    position_of.get(id).is_some_and(|&position| {
                        digests[position].is_none()
                            || std::str::from_utf8(rows.turns[order[position]].body).is_err()
                    })
                });
            }
            Verdict {
                conversation: index,
                summary: summary_index,
                reason: result.reason,
                source_index: result.source_index,
            }
        })
        .collect();
    (verdicts, totals)
}

/// Like [`revalidate_many`], with the hashing totals of each conversation kept apart.
pub fn revalidate_each(conversations: &[ConversationRows<'_>]) -> Vec<(Vec<Verdict>, Totals)> {
    revalidate_each_on(conversations, Exec::Pool)
}

/// [`revalidate_each`], run as `exec` says.
pub fn revalidate_each_on(
    conversations: &[ConversationRows<'_>],
    exec: Exec,
) -> Vec<(Vec<Verdict>, Totals)> {
    exec.map_indexed(conversations, |index, rows| {
        revalidate_one(index, rows, exec)
    })
}

/// Checks every summary of every conversation, conversations in parallel on the current
/// rayon pool. Verdicts come back in input order.
pub fn revalidate_many(conversations: &[ConversationRows<'_>]) -> (Vec<Verdict>, Totals) {
    let per_conversation = revalidate_each(conversations);
    let mut verdicts = Vec::new();
    let mut totals = Totals::default();
    for (conversation_verdicts, conversation_totals) in per_conversation {
        verdicts.extend(conversation_verdicts);
        totals.turns_hashed += conversation_totals.turns_hashed;
        totals.bytes_hashed += conversation_totals.bytes_hashed;
    }
    (verdicts, totals)
}

/// The sequences of the turns of `rows` that none of its summaries cites (the turns the
/// check read but did not verify), or `None` when one of them has no readable sequence (it
/// could not be found again by sequence).
pub fn uncited_sequences(rows: &ConversationRows<'_>) -> Option<Vec<i64>> {
    let ids: std::collections::HashSet<&str> = rows
        .summaries
        .iter()
        .flat_map(|summary| summary.source_ids.iter().copied())
        .collect();
    rows.turns
        .iter()
        .filter(|turn| !ids.contains(turn.id))
        .map(|turn| (turn.sequence >= 0).then_some(turn.sequence))
        .collect()
}

/// One live turn row an audit hashes: which summary of the batch it was read for, its
/// table key, its fields, and its stored digest (`None` unless stored as a blob).
#[derive(Clone, Copy, Debug)]
pub struct AuditRow<'a> {
    pub summary: usize,
    pub pk: i64,
    pub row: TurnRow<'a>,
    pub digest: Option<&'a [u8]>,
}

/// What an audit of a batch found: the rows whose stored digest is not (certainly) the
/// digest of their bytes, by index (a wrong digest, or a row that is not a valid turn: the
/// caller decides which, from the row itself), and for each summary whether its rows hold
/// a tool-call link that may split a compaction unit (SPEC §17.2) or could not be read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Audit {
    pub recheck: Vec<usize>,
    pub may_split: Vec<bool>,
    pub bytes_hashed: u64,
}

/// The last value of `key` in parsed meta entries (a JSON object with a repeated key means
/// its last value, as Python's `json.loads` reads it).
fn last_value<'m>(entries: &'m [(String, String)], key: &str) -> Option<&'m str> {
    entries
        .iter()
        .rev()
        .find(|(name, _)| name == key)
        .map(|(_, value)| value.as_str())
}

/// The tool-call links of one raw row: `Some((answered call, made calls))`, or `None` when
/// the row cannot be read (its fields or its meta), so only a full check can tell.
fn links(row: &TurnRow<'_>) -> Option<(Option<String>, Vec<String>)> {
    if row.role == UNREADABLE_ROLE {
        return None;
    }
    let Some(json) = row.meta_json else {
        return Some((None, Vec::new()));
    };
    let entries = parse_flat_object(json)?;
    match row.role {
        "tool" => Some((
            last_value(&entries, "tool_call_id").map(str::to_owned),
            Vec::new(),
        )),
        "assistant" => match last_value(&entries, "tool_calls") {
            Some(text) => Some((None, crate::units::tool_call_ids(text)?)),
            None => Some((None, Vec::new())),
        },
        _ => Some((None, Vec::new())),
    }
}

/// Audits `rows` (the live turns of a batch that no verified summary covers): each is
/// hashed and compared with its stored digest, and for each of `summaries` the tool-call
/// links of its raw rows are matched up. A summary's raw rows split no unit when every call
/// they answer is made among them and every call they make is answered among them; any
/// other summary is flagged for the full check (which also looks at its sources).
pub fn audit(rows: &[AuditRow<'_>], summaries: usize, exec: Exec) -> Audit {
    type Found = (bool, Option<(Option<String>, Vec<String>)>);
    let found: Vec<Found> = exec.map_indexed(rows, |_, audited| {
        let matches = matches!(
            (row_digest(&audited.row), audited.digest),
            (Some(digest), Some(stored)) if digest.as_slice() == stored
        );
        (matches, links(&audited.row))
    });
    let mut audit = Audit {
        may_split: vec![false; summaries],
        ..Audit::default()
    };
    let mut answered: Vec<std::collections::HashSet<String>> =
        vec![std::collections::HashSet::new(); summaries];
    let mut made: Vec<std::collections::HashSet<String>> =
        vec![std::collections::HashSet::new(); summaries];
    for (index, (audited, (matches, links))) in rows.iter().zip(found).enumerate() {
        audit.bytes_hashed += audited.row.body.len() as u64;
        if !matches {
            audit.recheck.push(index);
        }
        let Some(flag) = audit.may_split.get_mut(audited.summary) else {
            continue;
        };
        match links {
            None => *flag = true,
            Some((answer, calls)) => {
                if let Some(answer) = answer {
                    answered[audited.summary].insert(answer);
                }
                made[audited.summary].extend(calls);
            }
        }
    }
    for (flag, (answered, made)) in audit.may_split.iter_mut().zip(answered.iter().zip(&made)) {
        *flag = *flag || answered != made;
    }
    audit
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::fingerprint_hex;

    fn row<'a>(id: &'a str, sequence: i64, body: &'a str) -> TurnRow<'a> {
        TurnRow {
            id,
            sequence,
            role: "user",
            body: body.as_bytes(),
            protected: false,
            protection_reason: None,
            group: None,
            meta_json: None,
        }
    }

    fn fingerprint(rows: &[TurnRow<'_>]) -> String {
        let digests: Vec<[u8; 32]> = rows.iter().map(|r| row_digest(r).unwrap()).collect();
        fingerprint_hex(digests.iter())
    }

    #[test]
    fn current_then_tampered_then_invalid() {
        let turns = vec![row("a", 1, "one"), row("b", 2, "two"), row("c", 3, "three")];
        let fp = fingerprint(&turns[..2]);
        let summary = SummaryRow {
            summary_id: "s",
            source_ids: vec!["a", "b"],
            source_fingerprint: &fp,
        };
        let mut input = vec![ConversationRows {
            conversation_id: "c",
            turns: turns.clone(),
            summaries: vec![summary.clone()],
        }];
        let (verdicts, totals) = revalidate_many(&input);
        assert_eq!(verdicts[0].reason, None);
        assert_eq!(
            totals,
            Totals {
                turns_hashed: 2,
                bytes_hashed: 6
            }
        );

        input[0].turns[1] = row("b", 2, "TWO");
        let (verdicts, _) = revalidate_many(&input);
        assert_eq!(verdicts[0].reason, Some(CheckReason::SourceModified));

        input[0].turns[1] = TurnRow {
            body: b"\xff",
            ..row("b", 2, "")
        };
        let (verdicts, _) = revalidate_many(&input);
        assert_eq!(verdicts[0].reason, Some(CheckReason::SourceModified));
        assert_eq!(verdicts[0].source_index, Some(1));

        input[0].turns.remove(1);
        let (verdicts, _) = revalidate_many(&input);
        assert_eq!(verdicts[0].reason, Some(CheckReason::SourceMissing));
        assert_eq!(verdicts[0].source_index, Some(1));
    }

    #[test]
    fn row_order_does_not_matter_and_meta_is_canonicalised() {
        let mut with_meta = row("a", 1, "x");
        with_meta.meta_json = Some(r#"{"b": "2", "a": "1"}"#);
        let mut reordered_meta = with_meta;
        reordered_meta.meta_json = Some(r#"{"a":"1","b":"2"}"#);
        assert_eq!(row_digest(&with_meta), row_digest(&reordered_meta));
        let turns = vec![row("b", 2, "two"), with_meta];
        let fp = fingerprint(&[with_meta, row("b", 2, "two")]);
        let input = [ConversationRows {
            conversation_id: "c",
            turns,
            summaries: vec![SummaryRow {
                summary_id: "s",
                source_ids: vec!["a", "b"],
                source_fingerprint: &fp,
            }],
        }];
        assert_eq!(revalidate_many(&input).0[0].reason, None);
    }

    #[test]
    fn invalid_rows_have_no_digest() {
        let base = row("a", 1, "x");
        assert!(row_digest(&base).is_some());
        for bad in [
            TurnRow { id: "", ..base },
            TurnRow {
                sequence: -1,
                ..base
            },
            TurnRow {
                role: "admin",
                ..base
            },
            TurnRow {
                protection_reason: Some("audit-evidence"),
                ..base
            },
            TurnRow {
                group: Some(""),
                ..base
            },
            TurnRow {
                meta_json: Some("[1]"),
                ..base
            },
            TurnRow {
                meta_json: Some(r#"{"":"v"}"#),
                ..base
            },
        ] {
            assert!(row_digest(&bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn uncited_rows_are_named_by_sequence_unless_unreadable() {
        let turns = vec![row("a", 1, "one"), row("b", 2, "two"), row("c", 3, "three")];
        let fp = fingerprint(&turns[..1]);
        let mut rows = ConversationRows {
            conversation_id: "c",
            turns,
            summaries: vec![SummaryRow {
                summary_id: "s",
                source_ids: vec!["a", "c"],
                source_fingerprint: &fp,
            }],
        };
        assert_eq!(uncited_sequences(&rows), Some(vec![2]));
        rows.summaries[0].source_ids = vec!["a", "b", "c"];
        assert_eq!(uncited_sequences(&rows), Some(vec![]));
        rows.summaries[0].source_ids = vec!["a"];
        rows.turns[2].sequence = -1; // what an unreadable sequence reads as
        assert_eq!(uncited_sequences(&rows), None);
    }

    fn audited<'a>(summary: usize, row: TurnRow<'a>, digest: Option<&'a [u8]>) -> AuditRow<'a> {
        AuditRow {
            summary,
            pk: 0,
            row,
            digest,
        }
    }

    #[test]
    fn an_audit_rechecks_what_it_cannot_vouch_for() {
        let right = row_digest(&row("a", 1, "one")).unwrap();
        let rows = [
            audited(0, row("a", 1, "one"), Some(&right)),
            audited(0, row("a", 1, "changed"), Some(&right)),
            audited(0, row("a", 1, "one"), None),
            audited(
                0,
                TurnRow {
                    role: "admin",
                    ..row("a", 1, "one")
                },
                Some(&right),
            ),
        ];
        let found = audit(&rows, 1, Exec::Inline);
        assert_eq!(found.recheck, vec![1, 2, 3]);
        assert_eq!(found.bytes_hashed, 3 + 7 + 3 + 3);
        assert_eq!(audit(&rows, 1, Exec::Pool), found);
    }

    #[test]
    fn an_audit_flags_raw_rows_whose_calls_and_answers_do_not_pair_up() {
        let call = |calls: &'static str| TurnRow {
            role: "assistant",
            meta_json: Some(calls),
            ..row("x", 1, "")
        };
        let answer = |meta: &'static str| TurnRow {
            role: "tool",
            meta_json: Some(meta),
            ..row("y", 2, "")
        };
        let paired = [
            audited(0, call(r#"{"tool_calls": "[{\"id\": \"c1\"}]"}"#), None),
            audited(0, answer(r#"{"tool_call_id": "c1"}"#), None),
            audited(1, call(r#"{"tool_calls": "[{\"id\": \"c2\"}]"}"#), None),
            audited(2, answer(r#"{"tool_call_id": "c3"}"#), None),
            // Python reads the last of a repeated key.
            audited(
                3,
                answer(r#"{"tool_call_id": "zz", "tool_call_id": "c4"}"#),
                None,
            ),
            audited(3, call(r#"{"tool_calls": "[{\"id\": \"c4\"}]"}"#), None),
            // Not a flat object of strings, or calls that are not a list of IDs: unknown.
            audited(4, answer(r#"{"tool_call_id": 5}"#), None),
            audited(5, call(r#"{"tool_calls": "[{\"id\": 5}]"}"#), None),
            audited(
                6,
                TurnRow {
                    role: UNREADABLE_ROLE,
                    ..row("z", 3, "")
                },
                None,
            ),
            // A tool turn's calls and an assistant turn's answer link nothing.
            audited(7, answer(r#"{"tool_calls": "[{\"id\": \"c5\"}]"}"#), None),
            audited(7, call(r#"{"tool_call_id": "c6"}"#), None),
        ];
        let found = audit(&paired, 8, Exec::Inline);
        assert_eq!(
            found.may_split,
            vec![false, true, true, false, true, true, true, false]
        );
    }
}
