//! Grouping a batch's rows by summary: the packed turn rows as runs of one summary's rows,
//! the cited IDs by summary in position order, and either (or the flat rows of the row
//! read) as one [`ConversationRows`] per summary.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use super::format::{visit_sources, SourceColumns, TurnColumns, TurnEntries};
use crate::exec::Exec;
use crate::revalidate::{ConversationRows, SummaryRow, TurnRow};

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
    let entries = TurnEntries::unpack(columns, exec)?;
    let count = entries.len();
    // Where each summary's run starts.
    let starts: Vec<usize> = (0..count)
        .filter(|&index| index == 0 || entries.summary(index) != entries.summary(index - 1))
        .collect();
    exec.map_indexed(&starts, |run, &start| {
        let end = starts.get(run + 1).copied().unwrap_or(count);
        Some((
            entries.summary(start),
            (start..end)
                .map(|index| entries.row(index))
                .collect::<Option<Vec<_>>>()?,
        ))
    })
}

/// Each summary's cited turn IDs in position order, by summary index (`summaries` of them),
/// or `None` when the packing does not line up (see [`visit_sources`]) or names a summary
/// index out of range.
pub fn sources<'a>(columns: &SourceColumns<'a>, summaries: usize) -> Option<Vec<Vec<&'a str>>> {
    let mut cited: Vec<Vec<(i64, &'a str)>> = vec![Vec::new(); summaries];
    visit_sources(columns, |summary, position, id| {
        cited.get_mut(summary)?.push((position, id));
        Some(())
    })?;
    Some(
        cited
            .into_iter()
            .map(|mut sources| {
                // Usually in order already; a stable sort keeps it cheap then.
                sources.sort_by_key(|&(position, _)| position);
                sources.into_iter().map(|(_, id)| id).collect()
            })
            .collect(),
    )
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
    use super::super::format::{source_key, Packed};
    use super::*;

    fn packed<'a>(lengths: &'a str, values: &'a str) -> Packed<'a> {
        Packed {
            lengths: lengths.as_bytes(),
            values: values.as_bytes(),
        }
    }

    #[test]
    fn empty_columns_are_no_runs() {
        assert!(turn_runs(&TurnColumns::default()).unwrap().is_empty());
        assert!(sources(&SourceColumns::default(), 0).unwrap().is_empty());
        assert_eq!(
            sources(&SourceColumns::default(), 2).unwrap(),
            vec![Vec::<&str>::new(); 2]
        );
    }

    #[test]
    fn a_row_that_cannot_be_read_refuses_its_runs() {
        let columns = TurnColumns {
            keys: b"200,311",
            id: Packed {
                lengths: b"1,1",
                values: b"a\xff",
            },
            sequence: b"1,2",
            body: packed("0,0", ""),
            group: packed("-1,-1", ""),
            meta: packed("-1,-1", ""),
        };
        assert!(turn_runs(&columns).is_none());
        assert!(turn_runs_on(&columns, Exec::Inline).is_none());
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
}
