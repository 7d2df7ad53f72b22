//! Batch revalidation from stored rows: extract while attached (bodies borrowed, not
//! copied), then hash and check detached from the interpreter on a rayon pool.

use std::collections::HashMap;
use std::sync::Arc;

use ledgerfold_core::columns::format::TurnEntries;
use ledgerfold_core::columns::{self, CurrentSummary, Packed, SourceColumns, TurnColumns};
use ledgerfold_core::revalidate::{
    audit, revalidate_each_on, uncited_sequences, AuditRow, ConversationRows, Totals, TurnRow,
    Verdict, UNREADABLE_ROLE,
};
use ledgerfold_core::{Exec, Problem};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyIterator, PyString, PyTuple};

use crate::errors::invalid;
use crate::extract;

enum Body {
    Bytes(Py<PyBytes>),
    Text(Py<PyString>),
    Unreadable,
}

/// A stored text field: `str`, or `bytes` holding its UTF-8 (what reading a column as a blob
/// gives, whatever its storage class; bytes that are not UTF-8 are not text).
enum Text {
    Str(Py<PyString>),
    Bytes(Py<PyBytes>),
}

impl Text {
    fn read<'a>(&'a self, py: Python<'_>) -> Option<&'a str> {
        match self {
            Text::Str(text) => text.to_str(py).ok(),
            Text::Bytes(bytes) => std::str::from_utf8(bytes.as_bytes(py)).ok(),
        }
    }
}

struct OwnedRow {
    /// False when a turn field was of the wrong type: the row is then an invalid turn.
    readable: bool,
    id: Text,
    sequence: i64,
    role: Option<Text>,
    body: Body,
    protected: bool,
    protection_reason: Option<Text>,
    group: Option<Text>,
    meta: Option<Text>,
}

fn items<'py>(field: &'static str, value: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let iterator = PyIterator::from_object(value)
        .map_err(|_| extract::wrong_type(field, "a sequence", value))?;
    iterator.collect()
}

fn text(field: &'static str, value: &Bound<'_, PyAny>) -> PyResult<Py<PyString>> {
    Ok(extract::string(field, value)?.clone().unbind())
}

/// A text field as `str` or as `bytes` (checked for UTF-8 when read).
fn text_or_bytes(field: &'static str, value: &Bound<'_, PyAny>) -> PyResult<Text> {
    if let Ok(bytes) = value.cast::<PyBytes>() {
        return Ok(Text::Bytes(bytes.clone().unbind()));
    }
    text(field, value).map(Text::Str)
}

/// A key (conversation or turn ID) as `str` or UTF-8 `bytes`: it must be readable.
fn key(field: &'static str, value: &Bound<'_, PyAny>) -> PyResult<Text> {
    let key = text_or_bytes(field, value)?;
    if key.read(value.py()).is_none() {
        return Err(invalid(
            value.py(),
            field,
            Problem::NotUtf8,
            "must be UTF-8 text",
        ));
    }
    Ok(key)
}

fn read_key<'a>(py: Python<'_>, field: &'static str, key: &'a Text) -> PyResult<&'a str> {
    key.read(py)
        .ok_or_else(|| invalid(py, field, Problem::NotUtf8, "must be UTF-8 text"))
}

fn optional_text(field: &'static str, value: &Bound<'_, PyAny>) -> PyResult<Option<Text>> {
    if value.is_none() {
        return Ok(None);
    }
    text_or_bytes(field, value).map(Some)
}

fn tuple_of<'py>(
    field: &'static str,
    value: &Bound<'py, PyAny>,
    len: usize,
) -> PyResult<Bound<'py, PyTuple>> {
    let tuple = value
        .cast::<PyTuple>()
        .map_err(|_| extract::wrong_type(field, "a tuple", value))?;
    if tuple.len() != len {
        return Err(invalid(
            value.py(),
            field,
            Problem::WrongType,
            format!("must have {len} items"),
        ));
    }
    Ok(tuple.clone())
}

/// A turn field read leniently: one of the wrong type (or text that is not UTF-8) makes its
/// row an invalid turn, as any stored row that no longer is one; damage in storage is a
/// verdict (`source-modified`), not an error. Only the keys (conversation and turn ID) must
/// be well-typed.
fn lenient<T>(readable: &mut bool, value: PyResult<T>) -> Option<T> {
    value.map_err(|_| *readable = false).ok()
}

/// The eight turn fields of a row tuple, starting at `at`.
fn owned_row_fields(row: &Bound<'_, PyTuple>, at: usize) -> PyResult<OwnedRow> {
    let mut readable = true;
    let body = row.get_item(at + 3)?;
    let body = if let Ok(bytes) = body.cast::<PyBytes>() {
        Body::Bytes(bytes.clone().unbind())
    } else {
        lenient(&mut readable, text("body", &body)).map_or(Body::Unreadable, Body::Text)
    };
    let sequence = lenient(
        &mut readable,
        extract::int64("sequence", &row.get_item(at + 1)?),
    );
    let role = lenient(&mut readable, text_or_bytes("role", &row.get_item(at + 2)?));
    let protected = row.get_item(at + 4)?;
    let protected = if protected.is_instance_of::<PyInt>() {
        protected.is_truthy()?
    } else {
        readable = false;
        false
    };
    let protection_reason = lenient(
        &mut readable,
        optional_text("protection_reason", &row.get_item(at + 5)?),
    );
    let group = lenient(
        &mut readable,
        optional_text("group", &row.get_item(at + 6)?),
    );
    let meta = lenient(&mut readable, optional_text("meta", &row.get_item(at + 7)?));
    Ok(OwnedRow {
        readable,
        id: key("id", &row.get_item(at)?)?,
        sequence: sequence.unwrap_or(-1),
        role,
        body,
        protected,
        protection_reason: protection_reason.flatten(),
        group: group.flatten(),
        meta: meta.flatten(),
    })
}

fn borrowed_row<'a>(py: Python<'_>, row: &'a OwnedRow) -> PyResult<TurnRow<'a>> {
    // `Some(None)` for NULL, `None` for bytes that are not UTF-8.
    let read = |value: &'a Option<Text>| match value {
        None => Some(None),
        Some(text) => text.read(py).map(Some),
    };
    let role = row.role.as_ref().and_then(|role| role.read(py));
    let (reason, group, meta) = (
        read(&row.protection_reason),
        read(&row.group),
        read(&row.meta),
    );
    let readable =
        row.readable && role.is_some() && reason.is_some() && group.is_some() && meta.is_some();
    Ok(TurnRow {
        id: read_key(py, "id", &row.id)?,
        sequence: row.sequence,
        role: match role {
            Some(role) if readable => role,
            _ => UNREADABLE_ROLE,
        },
        body: match &row.body {
            Body::Bytes(bytes) => bytes.as_bytes(py),
            Body::Text(text) => text.to_str(py)?.as_bytes(),
            Body::Unreadable => &[],
        },
        protected: row.protected,
        protection_reason: reason.flatten(),
        group: group.flatten(),
        meta_json: meta.flatten(),
    })
}

thread_local! {
    /// Each calling thread's pools by (process, size), so two interpreter threads checking
    /// at once each hash on their own threads (a shared one-thread pool would take their
    /// work in turn). A forked child must not use or drop its parent's pools, whose threads
    /// do not exist in the child: those are forgotten.
    static POOLS: std::cell::RefCell<Vec<(u32, usize, Arc<rayon::ThreadPool>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

fn pool(py: Python<'_>, threads: usize) -> PyResult<Arc<rayon::ThreadPool>> {
    let process = std::process::id();
    POOLS.with_borrow_mut(|pools| {
        if pools.iter().any(|(owner, _, _)| *owner != process) {
            let (mine, inherited) = std::mem::take(pools)
                .into_iter()
                .partition(|(owner, _, _)| *owner == process);
            std::mem::forget::<Vec<_>>(inherited);
            *pools = mine;
        }
        if let Some((_, _, pool)) = pools.iter().find(|(_, size, _)| *size == threads) {
            return Ok(pool.clone());
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|index| format!("ledgerfold-revalidate-{index}"))
            .build()
            .map_err(|err| {
                invalid(
                    py,
                    "threads",
                    Problem::OutOfRange,
                    format!("cannot start threads: {err}"),
                )
            })?;
        let pool = Arc::new(pool);
        pools.push((process, threads, pool.clone()));
        Ok(pool)
    })
}

/// Runs `work` detached from the interpreter: with one thread, inline on the calling thread
/// (no pool, so no thread hand-off a batch); with more, on this thread's pool of that size.
fn on_threads<R: Send>(
    py: Python<'_>,
    threads: usize,
    work: impl FnOnce(Exec) -> R + Send,
) -> PyResult<R> {
    if threads == 1 {
        return Ok(py.detach(|| work(Exec::Inline)));
    }
    let pool = pool(py, threads)?;
    Ok(py.detach(|| pool.install(|| work(Exec::Pool))))
}

fn thread_count(py: Python<'_>, threads: Option<&Bound<'_, PyAny>>) -> PyResult<usize> {
    Ok(match threads.filter(|value| !value.is_none()) {
        Some(value) => {
            let count = extract::int64("threads", value)?;
            if !(1..=1024).contains(&count) {
                return Err(invalid(
                    py,
                    "threads",
                    Problem::OutOfRange,
                    "must be between 1 and 1024",
                ));
            }
            usize::try_from(count).unwrap_or(1)
        }
        None => std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
    })
}

struct FlatSummary {
    conversation: Py<PyString>,
    pk: i64,
    id: Py<PyString>,
    fingerprint: Py<PyString>,
}

/// Deep revalidation over flat query results, so the caller never loops over rows:
/// `rows` are `(conversation_id, id, sequence, role, body, protected, protection_reason,
/// group, meta_json)` in any order; `sources` are `(summary_pk, turn_id)`, each
/// summary's in source order; `summaries` are
/// `(conversation_id, summary_pk, summary_id, source_fingerprint)`, at most one summary per
/// conversation (the current one). Text may come as `str` or UTF-8 `bytes`. Rows of
/// conversations without a summary here are ignored; a turn field of the wrong type makes
/// its row an invalid turn (only the keys must be well-typed), as a stored row that no
/// longer is a turn always is. Every cited body is re-hashed; stored digests are never
/// read. Returns one `(conversation_id, summary_id, reason | None, turn_id | None)` per
/// summary, in input order, plus `(turns_hashed, bytes_hashed)`; with `per_summary`, each
/// verdict also carries the turns and bytes hashed for that summary's conversation.
#[pyfunction]
#[pyo3(signature = (rows, sources, summaries, threads=None, *, per_summary=false))]
pub fn revalidate_flat(
    py: Python<'_>,
    rows: &Bound<'_, PyAny>,
    sources: &Bound<'_, PyAny>,
    summaries: &Bound<'_, PyAny>,
    threads: Option<&Bound<'_, PyAny>>,
    per_summary: bool,
) -> PyResult<Report> {
    let threads = thread_count(py, threads)?;
    let owned_rows: Vec<(Text, OwnedRow)> = items("rows", rows)?
        .iter()
        .map(|row| {
            let row = tuple_of("rows", row, 9)?;
            Ok((
                key("conversation_id", &row.get_item(0)?)?,
                owned_row_fields(&row, 1)?,
            ))
        })
        .collect::<PyResult<_>>()?;
    let owned_sources: Vec<(i64, Text)> = items("sources", sources)?
        .iter()
        .map(|source| {
            let source = tuple_of("sources", source, 2)?;
            Ok((
                extract::int64("summary_pk", &source.get_item(0)?)?,
                key("turn_id", &source.get_item(1)?)?,
            ))
        })
        .collect::<PyResult<_>>()?;
    let owned_summaries = flat_summaries(summaries)?;

    let rows = owned_rows
        .iter()
        .map(|(conversation, row)| {
            Ok((
                read_key(py, "conversation_id", conversation)?,
                borrowed_row(py, row)?,
            ))
        })
        .collect::<PyResult<Vec<_>>>()?;
    let mut sources: HashMap<i64, Vec<&str>> = HashMap::new();
    for (pk, turn_id) in &owned_sources {
        sources
            .entry(*pk)
            .or_default()
            .push(read_key(py, "turn_id", turn_id)?);
    }
    let current = current_summaries(py, &owned_summaries)?;
    let conversations = columns::group(rows, sources, &current);
    let per_conversation =
        on_threads(py, threads, |exec| revalidate_each_on(&conversations, exec))?;
    verdicts(
        py,
        &owned_summaries,
        &conversations,
        per_conversation,
        per_summary,
        None,
    )
}

fn current_summaries<'a>(
    py: Python<'_>,
    summaries: &'a [FlatSummary],
) -> PyResult<Vec<CurrentSummary<'a>>> {
    summaries
        .iter()
        .map(|summary| {
            Ok(CurrentSummary {
                conversation_id: summary.conversation.to_str(py)?,
                summary_pk: summary.pk,
                summary_id: summary.id.to_str(py)?,
                source_fingerprint: summary.fingerprint.to_str(py)?,
            })
        })
        .collect()
}

fn flat_summaries(summaries: &Bound<'_, PyAny>) -> PyResult<Vec<FlatSummary>> {
    items("summaries", summaries)?
        .iter()
        .map(|summary| {
            let summary = tuple_of("summaries", summary, 4)?;
            Ok(FlatSummary {
                conversation: text("conversation_id", &summary.get_item(0)?)?,
                pk: extract::int64("summary_pk", &summary.get_item(1)?)?,
                id: text("summary_id", &summary.get_item(2)?)?,
                fingerprint: text("source_fingerprint", &summary.get_item(3)?)?,
            })
        })
        .collect()
}

type Checked = Vec<(Vec<Verdict>, Totals)>;

/// `(verdicts, turns_hashed, bytes_hashed)`.
type Report = (Vec<Py<PyTuple>>, u64, u64);

/// `(verdicts, turns_hashed, bytes_hashed)`: one `(conversation_id, summary_id, reason |
/// None, turn_id | None)` per summary, in input order (with `per_summary`, plus the turns
/// and bytes hashed for that summary's conversation).
fn verdicts(
    py: Python<'_>,
    summaries: &[FlatSummary],
    conversations: &[ConversationRows<'_>],
    per_conversation: Checked,
    per_summary: bool,
    uncited: Option<&[Option<Vec<i64>>]>,
) -> PyResult<Report> {
    let (mut turns_hashed, mut bytes_hashed) = (0u64, 0u64);
    let mut out = Vec::with_capacity(summaries.len());
    for (found, totals) in per_conversation {
        turns_hashed += totals.turns_hashed;
        bytes_hashed += totals.bytes_hashed;
        for verdict in found {
            let summary = &summaries[verdict.conversation];
            let rows = &conversations[verdict.conversation].summaries[verdict.summary];
            let turn_id = verdict
                .source_index
                .map(|index| PyString::new(py, rows.source_ids[index]));
            let reason = verdict
                .reason
                .map(ledgerfold_core::check::CheckReason::as_str);
            let item = if let Some(uncited) = uncited {
                (
                    summary.conversation.bind(py),
                    summary.id.bind(py),
                    reason,
                    turn_id,
                    uncited[verdict.conversation].clone(),
                )
                    .into_pyobject(py)?
            } else if per_summary {
                (
                    summary.conversation.bind(py),
                    summary.id.bind(py),
                    reason,
                    turn_id,
                    totals.turns_hashed,
                    totals.bytes_hashed,
                )
                    .into_pyobject(py)?
            } else {
                (
                    summary.conversation.bind(py),
                    summary.id.bind(py),
                    reason,
                    turn_id,
                )
                    .into_pyobject(py)?
            };
            out.push(item.unbind());
        }
    }
    Ok((out, turns_hashed, bytes_hashed))
}

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
    summaries: usize,
    threads: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<AuditReport>> {
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
