//! Batch revalidation from packed columns: one `SQLite` aggregate query hands a batch over
//! as a few long byte strings (`ledgerfold_core::columns::format`), unpacked, hashed and
//! checked detached from the interpreter; the audit of the turns no summary verified reads
//! the same packing.

use ledgerfold_core::columns::format::TurnEntries;
use ledgerfold_core::columns::{self, Packed, SourceColumns, TurnColumns};
use ledgerfold_core::revalidate::{audit, revalidate_each_on, uncited_sequences, AuditRow};
use ledgerfold_core::Problem;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::invalid;
use crate::extract;
use crate::revalidate::{
    current_summaries, flat_summaries, on_threads, thread_count, tuple_of, verdicts, Report,
};

/// The bytes of one packed column: `bytes`, `str` (its UTF-8) or `None` (nothing: what
/// `SQLite`'s `group_concat` gives over no rows).
fn column_bytes<'a>(field: &'static str, value: &'a Bound<'_, PyAny>) -> PyResult<&'a [u8]> {
    if value.is_none() {
        Ok(&[])
    } else if let Ok(bytes) = value.cast::<PyBytes>() {
        Ok(bytes.as_bytes())
    } else {
        Ok(extract::string(field, value)?.to_str()?.as_bytes())
    }
}

fn column_items<'py>(
    field: &'static str,
    value: &Bound<'py, PyAny>,
    len: usize,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    Ok(tuple_of(field, value, len)?.iter().collect())
}

/// The packed turn columns (`turn_columns`: ten items) as the core reads them.
fn turn_columns_of<'a>(items: &'a [Bound<'_, PyAny>]) -> PyResult<TurnColumns<'a>> {
    let field = "turn_columns";
    Ok(TurnColumns {
        keys: column_bytes(field, &items[0])?,
        id: packed(items, 1, field)?,
        sequence: column_bytes(field, &items[3])?,
        body: packed(items, 4, field)?,
        group: packed(items, 6, field)?,
        meta: packed(items, 8, field)?,
    })
}

fn packed<'a>(
    items: &'a [Bound<'_, PyAny>],
    at: usize,
    field: &'static str,
) -> PyResult<Packed<'a>> {
    Ok(Packed {
        lengths: column_bytes(field, &items[at])?,
        values: column_bytes(field, &items[at + 1])?,
    })
}

/// Deep revalidation of a batch packed by column (what one `SQLite` aggregate query over the
/// batch gives; the format is `ledgerfold_core::columns::format`, its constants exported as
/// `PACKED_*`): `turn_columns` is the 10-tuple `(keys, id lengths, values, sequences, body
/// lengths, values, group lengths, values, meta lengths, values)`, where a row's key is its
/// `turn_key` with `index` the position in `summaries` of the summary the row was read for;
/// `source_columns` is the 2-tuple `(keys, turn_ids)`, where a source row's key is its
/// `source_key` (`index`, position, byte length of its turn ID) and the turn IDs come back
/// to back; `summaries` as for `revalidate_flat`. Unpacking, grouping, hashing and checking all run
/// detached from the interpreter. Returns what `revalidate_flat` returns, or None when the
/// packing does not line up (the caller then reads those rows one by one). With `uncited`,
/// each verdict also carries the sequences of the rows read for its summary that it does
/// not cite (None when one of them has no readable sequence): the rows an audit must hash.
#[pyfunction]
#[pyo3(signature = (turn_columns, source_columns, summaries, threads=None, *, uncited=false))]
pub fn revalidate_columns(
    py: Python<'_>,
    turn_columns: &Bound<'_, PyAny>,
    source_columns: &Bound<'_, PyAny>,
    summaries: &Bound<'_, PyAny>,
    threads: Option<&Bound<'_, PyAny>>,
    uncited: bool,
) -> PyResult<Option<Report>> {
    let threads = thread_count(py, threads)?;
    let turn_items = column_items("turn_columns", turn_columns, 10)?;
    let source_items = column_items("source_columns", source_columns, 2)?;
    let turn_columns = turn_columns_of(&turn_items)?;
    let field = "source_columns";
    let source_columns = SourceColumns {
        keys: column_bytes(field, &source_items[0])?,
        turn_ids: column_bytes(field, &source_items[1])?,
    };
    let owned_summaries = flat_summaries(summaries)?;
    let current = current_summaries(py, &owned_summaries)?;
    let checked = on_threads(py, threads, |exec| {
        let (runs, sources) = exec.join(
            || columns::turn_runs_on(&turn_columns, exec),
            || columns::sources(&source_columns, current.len()),
        );
        let (runs, sources) = (runs?, sources?);
        let conversations = columns::group_indexed(runs, sources, &current)?;
        let per_conversation = revalidate_each_on(&conversations, exec);
        let kept: Option<Vec<Option<Vec<i64>>>> =
            uncited.then(|| exec.map_indexed(&conversations, |_, rows| uncited_sequences(rows)));
        Some((conversations, per_conversation, kept))
    })?;
    match checked {
        Some((conversations, per_conversation, kept)) => verdicts(
            py,
            &owned_summaries,
            &conversations,
            per_conversation,
            false,
            kept.as_deref(),
        )
        .map(Some),
        None => Ok(None),
    }
}

/// Stored digests, packed: one byte length per row (`PACKED_NULL_LENGTH` for a digest not
/// stored as a blob), the blobs back to back. `None` when they do not line up.
fn digest_values<'a>(lengths: &[u8], values: &'a [u8]) -> Option<Vec<Option<&'a [u8]>>> {
    let mut at = 0usize;
    let mut out = Vec::new();
    for entry in packed_entries(lengths) {
        let length = std::str::from_utf8(entry).ok()?.parse::<i64>().ok()?;
        if length == columns::format::NULL_LENGTH {
            out.push(None);
            continue;
        }
        let end = at.checked_add(usize::try_from(length).ok()?)?;
        out.push(Some(values.get(at..end)?));
        at = end;
    }
    (at == values.len()).then_some(out)
}

fn packed_entries(list: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut parts = list.split(|&byte| byte == columns::format::SEPARATOR);
    if list.is_empty() {
        parts.next();
    }
    parts
}

/// The number of summary slots of an audit: at most `PACKED_MAX_SUMMARIES`, as a packed
/// key can name no more (the audit keeps a flag and two sets per slot, so a larger count
/// would only reserve memory, or abort the process when it cannot).
fn summary_count(value: &Bound<'_, PyAny>) -> PyResult<usize> {
    let count = extract::non_negative("summaries", value)?;
    match usize::try_from(count) {
        Ok(count) if count <= columns::format::MAX_SUMMARIES => Ok(count),
        _ => Err(invalid(
            value.py(),
            "summaries",
            Problem::OutOfRange,
            format!("must be at most {}", columns::format::MAX_SUMMARIES),
        )),
    }
}

/// `(recheck, may_split, rows, bytes)` of an audit.
type AuditReport = (Vec<(usize, i64)>, Vec<usize>, u64, u64);

/// Audits the live turns of a batch that no verified summary covers, packed as for
/// `revalidate_columns` (`turn_columns`, its key's index naming the summary slot a row was
/// read for, below `summaries`), with `audit_columns` the 3-tuple `(table keys, digest
/// lengths, digests)` in the same row order (a digest length of `PACKED_NULL_LENGTH` for one
/// not stored as a blob). Unpacking, hashing and matching run detached from the interpreter.
/// Returns `(recheck, may_split, rows, bytes)`: `(slot, table key)` of each row whose stored
/// digest is not certainly its bytes' (wrong, or the row is not a valid turn: the caller
/// tells which from the row itself), the slots whose raw rows hold a tool-call link that may
/// split a unit (or could not be read), and the rows and body bytes hashed; None when the
/// packing does not line up. No text is decoded into an error.
#[pyfunction]
#[pyo3(signature = (turn_columns, audit_columns, summaries, threads=None))]
pub fn audit_columns(
    py: Python<'_>,
    turn_columns: &Bound<'_, PyAny>,
    audit_columns: &Bound<'_, PyAny>,
    summaries: &Bound<'_, PyAny>,
    threads: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<AuditReport>> {
    let summaries = summary_count(summaries)?;
    let threads = thread_count(py, threads)?;
    let turn_items = column_items("turn_columns", turn_columns, 10)?;
    let audit_items = column_items("audit_columns", audit_columns, 3)?;
    let turn_columns = turn_columns_of(&turn_items)?;
    let field = "audit_columns";
    let (pks, digest_lengths, digests) = (
        column_bytes(field, &audit_items[0])?,
        column_bytes(field, &audit_items[1])?,
        column_bytes(field, &audit_items[2])?,
    );
    on_threads(py, threads, |exec| {
        let entries = TurnEntries::unpack(&turn_columns, exec)?;
        let pks: Vec<i64> = packed_entries(pks)
            .map(|entry| std::str::from_utf8(entry).ok()?.parse::<i64>().ok())
            .collect::<Option<_>>()?;
        let digests = digest_values(digest_lengths, digests)?;
        if pks.len() != entries.len() || digests.len() != entries.len() {
            return None;
        }
        let rows: Vec<AuditRow<'_>> = (0..entries.len())
            .map(|index| {
                let summary = entries.summary(index);
                (summary < summaries).then_some(())?;
                Some(AuditRow {
                    summary,
                    pk: pks[index],
                    row: entries.row(index)?,
                    digest: digests[index],
                })
            })
            .collect::<Option<_>>()?;
        let found = audit(&rows, summaries, exec);
        Some((
            found
                .recheck
                .iter()
                .map(|&index| (rows[index].summary, rows[index].pk))
                .collect(),
            found
                .may_split
                .iter()
                .enumerate()
                .filter_map(|(slot, &flag)| flag.then_some(slot))
                .collect(),
            rows.len() as u64,
            found.bytes_hashed,
        ))
    })
}
