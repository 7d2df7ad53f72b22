//! Rows packed by column, the way one `SQLite` aggregate query hands a whole batch over:
//! per text column, the byte lengths as comma-separated decimals (`-1` for NULL) and the
//! values concatenated; per integer column, the values as comma-separated decimals; which
//! of the batch's summaries a turn row was read for, its role, protection flag and protection
//! reason as one integer key (the summary's index and SPEC §3 codes).
//!
//! One result row per batch instead of one per turn: the reader skips the per-row cost of
//! a database driver (a step, a lock and an object per column), and the rows here borrow
//! their bytes from the packed values. A packing that does not line up (counts or lengths
//! that disagree, an ID that is not UTF-8, a key that names no summary) is refused as a whole
//! with `None`, so the caller reads that batch row by row instead; a single field that cannot
//! be read (a role that is not UTF-8, a sequence that is not an integer) makes its row an
//! invalid turn, as a stored row that no longer is a valid turn always is.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use crate::exec::Exec;
use crate::model::{ProtectionReason, Role};
use crate::revalidate::{ConversationRows, SummaryRow, TurnRow, UNREADABLE_ROLE};

/// One text column: byte lengths (`-1` for NULL) and the values back to back.
#[derive(Clone, Copy, Debug, Default)]
pub struct Packed<'a> {
    pub lengths: &'a [u8],
    pub values: &'a [u8],
}

/// The columns of the `turns` rows of a batch, each in the same row order; the rows read for
/// one summary come together.
#[derive(Clone, Copy, Debug, Default)]
pub struct TurnColumns<'a> {
    /// `summary * 1000 + role * 100 + protected * 10 + reason` per row: the index of the
    /// summary (in the batch's list) whose conversation the row was read for, then SPEC §3
    /// codes (9 for a value no valid turn has).
    pub keys: &'a [u8],
    pub id: Packed<'a>,
    pub sequence: &'a [u8],
    pub body: Packed<'a>,
    pub group: Packed<'a>,
    pub meta: Packed<'a>,
}

/// `(summary index, flags)` of a key entry, or `None` when it is negative.
fn split_key(key: i64) -> Option<(usize, i64)> {
    let key = u64::try_from(key).ok()?;
    Some((
        usize::try_from(key / 1000).ok()?,
        i64::try_from(key % 1000).ok()?,
    ))
}

/// `(role code, protected code, reason code)` of the flags of a key. The codes are SPEC §3's
/// role and protection-reason codes (reason 0 for none) and protected 0 or 1; 9 in any place
/// stands for a value no valid turn has (an unknown role or reason, a protection flag that is
/// not an integer).
fn split_flags(flags: i64) -> (i64, i64, i64) {
    (flags / 100, flags / 10 % 10, flags % 10)
}

/// The columns of `summary_sources` rows, in any order: per row one key, which summary (its
/// index in the batch's list), at which position, and the byte length of the turn ID it
/// cites (see [`source_key`]); and the turn IDs back to back.
#[derive(Clone, Copy, Debug, Default)]
pub struct SourceColumns<'a> {
    pub keys: &'a [u8],
    pub turn_ids: &'a [u8],
}

/// Bits of a source key below the summary index, and below the position; the position's
/// width.
pub const SOURCE_SUMMARY_SHIFT: u32 = 54;
pub const SOURCE_POSITION_SHIFT: u32 = 26;
const SOURCE_POSITION_BITS: u32 = SOURCE_SUMMARY_SHIFT - SOURCE_POSITION_SHIFT;

/// The key of a source row: `summary << 54 | position << 26 | id_len`, for a summary index
/// below 256, a position below 2^28 and an ID below 64 MiB (the query writes something that
/// is not a key for anything else, and the packing is refused).
#[must_use]
pub fn source_key(summary: u8, position: u32, id_len: u32) -> Option<i64> {
    (position < 1 << SOURCE_POSITION_BITS && id_len < 1 << SOURCE_POSITION_SHIFT).then(|| {
        i64::from(summary) << SOURCE_SUMMARY_SHIFT
            | i64::from(position) << SOURCE_POSITION_SHIFT
            | i64::from(id_len)
    })
}

/// `(summary index, position, ID length)` of a source key, or `None` when it is negative.
fn split_source_key(key: i64) -> Option<(usize, i64, usize)> {
    let key = u64::try_from(key).ok()?;
    let low = |bits: u32, value: u64| value & ((1 << bits) - 1);
    Some((
        usize::try_from(key >> SOURCE_SUMMARY_SHIFT).ok()?,
        i64::try_from(low(SOURCE_POSITION_BITS, key >> SOURCE_POSITION_SHIFT)).ok()?,
        usize::try_from(low(SOURCE_POSITION_SHIFT, key)).ok()?,
    ))
}

/// The comma-separated entries of a list; an empty list has none.
fn entries(list: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut parts = list.split(|&byte| byte == b',');
    if list.is_empty() {
        parts.next();
    }
    parts
}

/// A decimal integer as `SQLite` writes one: an optional `-`, then digits.
fn integer(entry: &[u8]) -> Option<i64> {
    let (negative, digits) = match entry.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, entry),
    };
    if digits.is_empty() {
        return None;
    }
    let mut value: i64 = 0;
    for &digit in digits {
        if !digit.is_ascii_digit() {
            return None;
        }
        // Accumulate negatively so that i64::MIN parses too.
        value = value
            .checked_mul(10)?
            .checked_sub(i64::from(digit - b'0'))?;
    }
    if negative {
        Some(value)
    } else {
        value.checked_neg()
    }
}

/// The values of a text column, `None` for NULL, or `None` overall when it does not line up.
fn values(column: Packed<'_>) -> Option<Vec<Option<&[u8]>>> {
    let mut at = 0usize;
    let mut out = Vec::with_capacity(column.lengths.len() / 2 + 1);
    for entry in entries(column.lengths) {
        let length = integer(entry)?;
        if length == -1 {
            out.push(None);
            continue;
        }
        let end = at.checked_add(usize::try_from(length).ok()?)?;
        out.push(Some(column.values.get(at..end)?));
        at = end;
    }
    (at == column.values.len()).then_some(out)
}

fn integers(list: &[u8]) -> Vec<Option<i64>> {
    entries(list).map(integer).collect()
}

/// Required text: present and UTF-8, or the packing is refused.
fn required(value: Option<&[u8]>) -> Option<&str> {
    std::str::from_utf8(value?).ok()
}

fn role_of(code: i64) -> Option<&'static str> {
    Role::ALL
        .into_iter()
        .find(|role| i64::from(role.code()) == code)
        .map(Role::as_str)
}

fn reason_of(code: i64) -> Option<&'static str> {
    ProtectionReason::ALL
        .into_iter()
        .find(|reason| i64::from(reason.code()) == code)
        .map(ProtectionReason::as_str)
}

/// Role, protected and reason of the flags of a key (`0..1000`), or `None` when any is
/// unreadable.
fn decode_flags(flags: i64) -> Option<(&'static str, bool, Option<&'static str>)> {
    let (role, protected, reason) = split_flags(flags);
    let protected = match protected {
        0 => false,
        1 => true,
        _ => return None,
    };
    let reason = match reason {
        0 => None,
        code => Some(reason_of(code)?),
    };
    Some((role_of(role)?, protected, reason))
}

/// The keys of a packed turn column as `(summary index, flags)`, or `None` when one is not
/// a key.
fn keys(list: &[u8]) -> Option<Vec<(usize, i64)>> {
    entries(list)
        .map(|entry| split_key(integer(entry)?))
        .collect()
}

/// The packed turn rows as runs of one summary's rows each (they come a summary at a time),
/// in packed order, each with the index of its summary: the columns unpack, and then the
/// runs assemble, in parallel on the current rayon pool.
pub fn turn_runs<'a>(columns: &TurnColumns<'a>) -> Option<Vec<(usize, Vec<TurnRow<'a>>)>> {
    turn_runs_on(columns, Exec::Pool)
}

/// [`turn_runs`], run as `exec` says.
pub fn turn_runs_on<'a>(
    columns: &TurnColumns<'a>,
    exec: Exec,
) -> Option<Vec<(usize, Vec<TurnRow<'a>>)>> {
    let ((keys, ids), ((bodies, sequences), (groups, metas))) = exec.join(
        || exec.join(|| keys(columns.keys), || values(columns.id)),
        || {
            exec.join(
                || exec.join(|| values(columns.body), || integers(columns.sequence)),
                || exec.join(|| values(columns.group), || values(columns.meta)),
            )
        },
    );
    let (keys, ids, bodies) = (keys?, ids?, bodies?);
    let (groups, metas) = (groups?, metas?);
    let count = keys.len();
    let lengths = [
        ids.len(),
        sequences.len(),
        bodies.len(),
        groups.len(),
        metas.len(),
    ];
    if lengths.iter().any(|&length| length != count) {
        return None;
    }
    let row = |index: usize| -> Option<TurnRow<'a>> {
        let text = |value: Option<&'a [u8]>| value.map(std::str::from_utf8);
        let group = text(groups[index]);
        let meta = text(metas[index]);
        let decoded = decode_flags(keys[index].1);
        let readable = decoded.is_some()
            && !matches!(group, Some(Err(_)))
            && !matches!(meta, Some(Err(_)))
            && bodies[index].is_some()
            && sequences[index].is_some();
        let (role, protected, protection_reason) = match decoded {
            Some(decoded) if readable => decoded,
            _ => (UNREADABLE_ROLE, false, None),
        };
        Some(TurnRow {
            id: required(ids[index])?,
            sequence: sequences[index].unwrap_or(-1),
            role,
            body: bodies[index].unwrap_or_default(),
            protected,
            protection_reason,
            group: group.and_then(Result::ok),
            meta_json: meta.and_then(Result::ok),
        })
    };
    // Where each summary's run starts.
    let starts: Vec<usize> = (0..count)
        .filter(|&index| index == 0 || keys[index].0 != keys[index - 1].0)
        .collect();
    exec.map_indexed(&starts, |run, &start| {
        let end = starts.get(run + 1).copied().unwrap_or(count);
        Some((
            keys[start].0,
            (start..end).map(row).collect::<Option<Vec<_>>>()?,
        ))
    })
}

/// Each summary's cited turn IDs in position order, by summary index (`summaries` of them),
/// or `None` when the packing does not line up (an entry that is not a key, an index out of
/// range, ID lengths that do not add up to the IDs, an ID that is not UTF-8).
pub fn sources<'a>(columns: &SourceColumns<'a>, summaries: usize) -> Option<Vec<Vec<&'a str>>> {
    let mut cited: Vec<Vec<(i64, &'a str)>> = vec![Vec::new(); summaries];
    let mut at = 0usize;
    for entry in entries(columns.keys) {
        let (summary, position, length) = split_source_key(integer(entry)?)?;
        let end = at.checked_add(length)?;
        let id = required(Some(columns.turn_ids.get(at..end)?))?;
        cited.get_mut(summary)?.push((position, id));
        at = end;
    }
    (at == columns.turn_ids.len()).then(|| {
        cited
            .into_iter()
            .map(|mut sources| {
                // Usually in order already; a stable sort keeps it cheap then.
                sources.sort_by_key(|&(position, _)| position);
                sources.into_iter().map(|(_, id)| id).collect()
            })
            .collect()
    })
}

/// The one summary to check in a conversation: its key in `summary_sources`, its ID and
/// its recorded fingerprint.
#[derive(Clone, Copy, Debug)]
pub struct CurrentSummary<'a> {
    pub conversation_id: &'a str,
    pub summary_pk: i64,
    pub summary_id: &'a str,
    pub source_fingerprint: &'a str,
}

/// Groups flat rows and cited IDs into one [`ConversationRows`] per summary, in summary
/// order; rows of conversations without a summary here are dropped.
pub fn group<'a, S: std::hash::BuildHasher>(
    rows: Vec<(&'a str, TurnRow<'a>)>,
    sources: HashMap<i64, Vec<&'a str>, S>,
    summaries: &[CurrentSummary<'a>],
) -> Vec<ConversationRows<'a>> {
    let mut runs: Vec<(&str, Vec<TurnRow<'a>>)> = Vec::new();
    for (conversation, row) in rows {
        match runs.last_mut() {
            Some((current, turns)) if *current == conversation => turns.push(row),
            _ => runs.push((conversation, vec![row])),
        }
    }
    group_runs(runs, sources, summaries)
}

/// [`group`] for rows already in runs of one conversation each (a conversation may have
/// several runs).
pub fn group_runs<'a, S: std::hash::BuildHasher>(
    runs: Vec<(&'a str, Vec<TurnRow<'a>>)>,
    mut sources: HashMap<i64, Vec<&'a str>, S>,
    summaries: &[CurrentSummary<'a>],
) -> Vec<ConversationRows<'a>> {
    let mut turns_of: HashMap<&str, Vec<TurnRow<'a>>> = HashMap::with_capacity(runs.len());
    for (conversation, turns) in runs {
        match turns_of.entry(conversation) {
            Entry::Vacant(entry) => {
                entry.insert(turns);
            }
            Entry::Occupied(mut entry) => entry.get_mut().extend(turns),
        }
    }
    summaries
        .iter()
        .map(|summary| ConversationRows {
            conversation_id: summary.conversation_id,
            turns: turns_of.remove(summary.conversation_id).unwrap_or_default(),
            summaries: vec![SummaryRow {
                summary_id: summary.summary_id,
                source_ids: sources.remove(&summary.summary_pk).unwrap_or_default(),
                source_fingerprint: summary.source_fingerprint,
            }],
        })
        .collect()
}

/// One [`ConversationRows`] per summary, in summary order, from runs of packed rows by
/// summary index ([`turn_runs`]) and cited IDs by summary index ([`sources`]); `None` when
/// a run names no summary of `summaries`.
pub fn group_indexed<'a>(
    runs: Vec<(usize, Vec<TurnRow<'a>>)>,
    sources: Vec<Vec<&'a str>>,
    summaries: &[CurrentSummary<'a>],
) -> Option<Vec<ConversationRows<'a>>> {
    let mut turns_of: Vec<Vec<TurnRow<'a>>> = vec![Vec::new(); summaries.len()];
    for (summary, turns) in runs {
        let slot = turns_of.get_mut(summary)?;
        if slot.is_empty() {
            *slot = turns;
        } else {
            slot.extend(turns);
        }
    }
    let mut sources = sources.into_iter();
    Some(
        summaries
            .iter()
            .zip(turns_of)
            .map(|(summary, turns)| ConversationRows {
                conversation_id: summary.conversation_id,
                turns,
                summaries: vec![SummaryRow {
                    summary_id: summary.summary_id,
                    source_ids: sources.next().unwrap_or_default(),
                    source_fingerprint: summary.source_fingerprint,
                }],
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(summary index, row)` for every packed turn row, in packed order.
    fn turn_rows<'a>(columns: &TurnColumns<'a>) -> Option<Vec<(usize, TurnRow<'a>)>> {
        let runs = turn_runs(columns)?;
        Some(
            runs.into_iter()
                .flat_map(|(summary, rows)| rows.into_iter().map(move |row| (summary, row)))
                .collect(),
        )
    }

    fn packed<'a>(lengths: &'a str, values: &'a str) -> Packed<'a> {
        Packed {
            lengths: lengths.as_bytes(),
            values: values.as_bytes(),
        }
    }

    fn two_rows() -> TurnColumns<'static> {
        TurnColumns {
            keys: b"200,311",
            id: packed("1,2", "abb"),
            sequence: b"1,2",
            body: packed("0,3", ",x,"),
            group: packed("-1,-1", ""),
            meta: packed("-1,9", r#"{"k":"v"}"#),
        }
    }

    #[test]
    fn rows_unpack_in_order_with_nulls() {
        let rows = turn_rows(&two_rows()).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].0, rows[1].0), (0, 0));
        assert_eq!(rows[0].1.id, "a");
        assert_eq!(rows[0].1.body, b"");
        assert_eq!(rows[0].1.role, "user");
        assert!(!rows[0].1.protected);
        assert_eq!(rows[0].1.meta_json, None);
        assert_eq!(rows[1].1.id, "bb");
        assert_eq!(rows[1].1.sequence, 2);
        assert_eq!(rows[1].1.body, b",x,");
        assert_eq!(rows[1].1.role, "assistant");
        assert!(rows[1].1.protected);
        assert_eq!(rows[1].1.protection_reason, Some("pending-confirmation"));
        assert_eq!(rows[1].1.meta_json, Some(r#"{"k":"v"}"#));
    }

    #[test]
    fn integers_parse_as_sqlite_writes_them() {
        for (text, value) in [
            ("0", Some(0)),
            ("-1", Some(-1)),
            ("42", Some(42)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("", None),
            ("-", None),
            ("1.5", None),
            ("+1", None),
            (" 1", None),
            ("x", None),
        ] {
            assert_eq!(integer(text.as_bytes()), value, "{text}");
        }
    }

    #[test]
    fn empty_columns_are_no_rows() {
        assert_eq!(turn_rows(&TurnColumns::default()).unwrap().len(), 0);
        assert!(sources(&SourceColumns::default(), 0).unwrap().is_empty());
        assert_eq!(
            sources(&SourceColumns::default(), 2).unwrap(),
            vec![Vec::<&str>::new(); 2]
        );
    }

    #[test]
    fn packings_that_do_not_line_up_are_refused() {
        let base = two_rows();
        let cases = [
            TurnColumns {
                sequence: b"1",
                ..base
            },
            TurnColumns {
                body: packed("0,2", ",x,"),
                ..base
            },
            TurnColumns {
                body: packed("0,4", ",x,"),
                ..base
            },
            TurnColumns {
                id: packed("1,x", "abb"),
                ..base
            },
            TurnColumns {
                id: packed("-1,3", "abb"),
                ..base
            },
            TurnColumns {
                keys: b"200",
                ..base
            },
            TurnColumns {
                keys: b"200,x",
                ..base
            },
            TurnColumns {
                keys: b"200,-311",
                ..base
            },
            TurnColumns {
                keys: b"200,",
                ..base
            },
        ];
        for columns in cases {
            assert!(turn_rows(&columns).is_none(), "{columns:?}");
        }
    }

    #[test]
    fn unreadable_fields_make_invalid_rows() {
        let base = two_rows();
        let cases = [
            TurnColumns {
                sequence: b"1,2.5",
                ..base
            },
            TurnColumns {
                keys: b"200,911",
                ..base
            },
            TurnColumns {
                keys: b"200,391",
                ..base
            },
            TurnColumns {
                keys: b"200,319",
                ..base
            },
            TurnColumns {
                meta: Packed {
                    lengths: b"-1,1",
                    values: b"\xff",
                },
                ..base
            },
            TurnColumns {
                group: Packed {
                    lengths: b"-1,1",
                    values: b"\xff",
                },
                ..base
            },
            TurnColumns {
                body: packed("0,-1", ""),
                ..base
            },
        ];
        for columns in cases {
            let rows = turn_rows(&columns).unwrap();
            assert!(crate::revalidate::row_digest(&rows[0].1).is_some());
            assert!(
                crate::revalidate::row_digest(&rows[1].1).is_none(),
                "{columns:?}"
            );
        }
    }

    #[test]
    fn every_flag_code_round_trips() {
        for role in Role::ALL {
            for protected in [false, true] {
                for reason in [None].into_iter().chain(ProtectionReason::ALL.map(Some)) {
                    let code = i64::from(role.code()) * 100
                        + i64::from(protected) * 10
                        + reason.map_or(0, |reason| i64::from(reason.code()));
                    assert_eq!(
                        decode_flags(code),
                        Some((
                            role.as_str(),
                            protected,
                            reason.map(ProtectionReason::as_str)
                        ))
                    );
                }
            }
        }
    }

    #[test]
    fn rows_run_by_summary_and_group_by_index() {
        let columns = TurnColumns {
            keys: b"1200,311,1300,300",
            id: packed("1,1,1,1", "abcd"),
            sequence: b"1,2,3,4",
            body: packed("0,0,0,0", ""),
            group: packed("-1,-1,-1,-1", ""),
            meta: packed("-1,-1,-1,-1", ""),
        };
        let runs = turn_runs(&columns).unwrap();
        let shape: Vec<(usize, Vec<&str>)> = runs
            .iter()
            .map(|(summary, rows)| (*summary, rows.iter().map(|row| row.id).collect()))
            .collect();
        assert_eq!(
            shape,
            vec![
                (1, vec!["a"]),
                (0, vec!["b"]),
                (1, vec!["c"]),
                (0, vec!["d"])
            ]
        );
        let summary = |conversation_id, summary_pk| CurrentSummary {
            conversation_id,
            summary_pk,
            summary_id: "s",
            source_fingerprint: "f",
        };
        let summaries = [summary("x", 10), summary("y", 20)];
        let cited = vec![vec![], vec!["a"]];
        let grouped = group_indexed(runs.clone(), cited, &summaries).unwrap();
        let ids =
            |index: usize| -> Vec<&str> { grouped[index].turns.iter().map(|row| row.id).collect() };
        assert_eq!((grouped[0].conversation_id, ids(0)), ("x", vec!["b", "d"]));
        assert_eq!((grouped[1].conversation_id, ids(1)), ("y", vec!["a", "c"]));
        assert!(grouped[0].summaries[0].source_ids.is_empty());
        assert_eq!(grouped[1].summaries[0].source_ids, vec!["a"]);
        // A run for a summary the batch does not have refuses the packing.
        assert!(group_indexed(runs, vec![vec![]], &summaries[..1]).is_none());
    }

    /// `keys` as the query writes them, from `(summary, position, id_len)`.
    fn source_keys(rows: &[(u8, u32, u32)]) -> String {
        let keys: Vec<String> = rows
            .iter()
            .map(|&(summary, position, len)| {
                source_key(summary, position, len).unwrap().to_string()
            })
            .collect();
        keys.join(",")
    }

    #[test]
    fn sources_come_back_in_position_order() {
        let keys = source_keys(&[(1, 2, 1), (1, 0, 1), (0, 0, 1), (1, 1, 2)]);
        let columns = SourceColumns {
            keys: keys.as_bytes(),
            turn_ids: b"cadbb",
        };
        let cited = sources(&columns, 2).unwrap();
        assert_eq!(cited, vec![vec!["d"], vec!["a", "bb", "c"]]);
        // Refused whole: a key naming no summary of the batch, IDs that do not add up, an
        // entry that is not a key (what the query writes for a position or ID out of range),
        // an ID that is not UTF-8.
        assert!(sources(&columns, 1).is_none());
        for (keys, ids) in [
            (keys.clone(), &b"cadb"[..]),
            (keys.clone(), &b"cadbbx"[..]),
            (format!("{keys},x"), &b"cadbb"[..]),
            (format!("{keys},-1"), &b"cadbb"[..]),
            (keys.clone(), &b"\xffadbb"[..]),
        ] {
            let columns = SourceColumns {
                keys: keys.as_bytes(),
                turn_ids: ids,
            };
            assert!(sources(&columns, 2).is_none(), "{keys} {ids:?}");
        }
    }

    #[test]
    fn source_keys_round_trip_within_their_ranges() {
        for (summary, position, len) in [(0, 0, 0), (255, (1 << 28) - 1, (1 << 26) - 1), (7, 3, 40)]
        {
            let key = source_key(summary, position, len).unwrap();
            assert!(key >= 0);
            assert_eq!(
                split_source_key(key),
                Some((usize::from(summary), i64::from(position), len as usize))
            );
        }
        assert_eq!(source_key(0, 1 << 28, 0), None);
        assert_eq!(source_key(0, 0, 1 << 26), None);
    }
}
